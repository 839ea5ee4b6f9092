"""The scaling model of elastic counts (issue #32; ``traces/scaling.py``, Pollux
§3.2): the table's rates where it has them, an Amdahl curve fitted to them elsewhere, never
more than linear speed-up, nothing past twice the largest count measured; refit from what
runs measure (``Configurations.measure``, ``OnlineThroughputs.observe_count``); and, through
the real simulator, elastic jobs on counts that are not powers of two."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.core import CoreConfig, SchedulerCore
from gavelsched.core.configurations import Configurations
from gavelsched.core.online import OnlineThroughputs
from traces.scaling import EXTRAPOLATION, ScalingModel
from gavelsched.mechanism import ClusterView
from policies import get_policy
from policies.mixed import MaxMinFairnessMixed
from simulator.engine import simulate
from traces import ThroughputTable, TraceJob

TABLE = ThroughputTable(solo={
    "v100": {("net", 1): 8.0, ("net", 2): 14.4, ("net", 4): 25.0, ("net", 8): 44.0},
    "k80": {("net", 1): 2.0, ("net", 2): 3.9, ("net", 4): 7.6},
    "t4": {("net", 4): 10.0},
})


def _names(options) -> dict[str, float]:
    return {o.configuration.name: o.configuration.throughput for o in options}


@pytest.mark.parametrize("points, n, expected", [
    ({4: 10.0}, 4, 10.0),                      # measured: exact
    ({4: 10.0}, 2, 5.0),                       # one point: pure compute split below it
    ({4: 10.0}, 1, 2.5),
    ({4: 10.0}, 5, 0.0),                       # one point: nothing above it
    ({1: 8.0, 2: 14.4, 4: 25.0}, 3, 1 / (1 / 14.4 + (1 / 25 - 1 / 14.4) * (2 / 3))),
    ({1: 8.0, 2: 16.0}, 3, 24.0),              # linear table: linear model (q = 0)
    ({1: 8.0, 2: 8.0}, 4, 8.0),                # no gain measured: none predicted (p = 0)
    ({1: 8.0, 2: 14.4}, 5, 0.0),               # past 2 x the largest count
    ({4: 9.0, 1: 10.0}, 2, 10.0),              # rate falls from 1 to 4: p clipped, flat
    ({1: 2.0, 4: 9.0}, 2, 4.0),                # super-linear: q clipped, linear from below
    ({}, 1, 0.0),                              # nothing measured: nothing covered
])
def test_rates(points, n, expected):
    assert ScalingModel.fit(points).rate(n) == pytest.approx(expected)


def test_fit_ignores_counts_and_rates_that_carry_nothing():
    model = ScalingModel.fit([(0, 5.0), (2, 0.0), (4, 10.0), (8, -1.0)])
    assert model.points == ((4, 10.0),)


@st.composite
def _tables(draw):
    """A well-formed measured row: counts in 1..32, steps/s non-decreasing in the count
    and never more than linear speed-up between neighbouring counts."""
    counts = sorted(draw(st.sets(st.integers(1, 32), min_size=1, max_size=5)))
    rate = draw(st.floats(0.1, 100.0))
    points = {counts[0]: rate}
    for low, high in zip(counts, counts[1:]):
        gain = draw(st.floats(0.0, 1.0))
        rate = rate * (1 + gain * (high / low - 1))
        points[high] = rate
    return points


@settings(max_examples=200, deadline=None)
@given(_tables())
def test_model_properties(points):
    model = ScalingModel.fit(points)
    top, r_top = max(points), points[max(points)]
    covered = int(EXTRAPOLATION * top) if len(points) >= 2 else top
    assert model.largest == covered
    rates = {n: model.rate(n) for n in range(1, covered + 3)}
    for n, r in points.items():                      # the table, exactly
        assert rates[n] == pytest.approx(r, rel=1e-9)
    for n in range(1, covered):
        assert rates[n] > 0
        assert rates[n + 1] >= rates[n] * (1 - 1e-9)                 # more GPUs, no slower
        assert rates[n + 1] / (n + 1) <= rates[n] / n * (1 + 1e-9)   # sub-linear
    for n in range(top + 1, covered + 1):            # never past linear from the top
        assert rates[n] <= r_top * n / top * (1 + 1e-9)
    assert rates[covered + 1] == rates[covered + 2] == 0.0            # not covered
    assert model.parallel >= 0 and model.serial >= 0


def test_refit_changes_nearby_counts_only_where_the_points_move():
    model = ScalingModel.fit({1: 8.0, 2: 14.4, 4: 25.0, 8: 44.0})
    refit = model.refit({6: 30.0})
    assert refit.rate(6) == 30.0                                      # the run's rate
    for n in (5, 7, 12):                                              # next to it, and past
        assert refit.rate(n) != pytest.approx(model.rate(n))
    assert refit.rate(3) == pytest.approx(model.rate(3))              # segment 2-4: same
    assert model.refit({4: 20.0}).rate(4) == 20.0                     # a run replaces it


def test_configurations_offer_only_what_the_model_covers():
    """k80 has 1, 2 and 4: counts up to 8 (2 x 4), none above; t4 has only 4: a pure
    compute split below it and nothing above it."""
    options = _names(Configurations(TABLE).elastic("net", 16, 1, {"k80": 16, "t4": 16}))
    assert sorted(n for n in options if n.startswith("k80")) == \
        sorted(f"k80:{n}" for n in range(1, 9))
    assert {n: r for n, r in options.items() if n.startswith("t4")} == \
        pytest.approx({"t4:1": 2.5, "t4:2": 5.0, "t4:3": 7.5, "t4:4": 10.0})


def _core() -> SchedulerCore:
    policy = get_policy("max_min_fairness_mixed")
    return SchedulerCore(policy, ClusterView.build({"v100": 8}), TABLE,
                         CoreConfig.for_policy(policy, round_seconds=100.0))


def test_a_run_on_an_elastic_count_refits_the_options_built_after_it():
    """A run on ``"v100:6"`` is averaged per (job type, type, count) and refits the model
    of the ``Configurations`` it is given: configurations built afterwards price 6 at the
    measurement and 5 and 7 from the refit; the job's per-type row is untouched."""
    mixer = Configurations(TABLE)
    before = _names(mixer.elastic("net", 8, 1, {"v100": 8}))
    online = OnlineThroughputs(TABLE, scaling=mixer)
    core = _core()
    assert online.learn(core, "j", "v100:6", 3000.0, 100.0, "net", 8,
                        core.worker_types, 0.0) == 30.0
    assert online.counts == {("net", "v100", 6): 30.0}
    assert online.measured == {}
    after = _names(mixer.elastic("net", 8, 1, {"v100": 8}))
    assert after["v100:6"] == 30.0 != before["v100:6"]
    assert after["v100:5"] != pytest.approx(before["v100:5"])
    assert after["v100:7"] != pytest.approx(before["v100:7"])
    assert after["v100:3"] == pytest.approx(before["v100:3"])
    assert online.learn(core, "j", "v100:6", 0.0, 100.0, "net", 8,
                        core.worker_types, 0.0) is None          # no steps: no sample
    # a run on a plain type is the job's throughput there, as before
    assert online.learn(core, "j", "v100", 4400.0, 100.0, "net", 8,
                        core.worker_types, 0.0) == 44.0
    assert online.measured == {"j": {"v100": 44.0}}
    # a restarted daemon gives its store's samples back (``restore_counts``): same model
    again = Configurations(TABLE)
    OnlineThroughputs(TABLE, scaling=again).restore_counts(online.counts)
    assert _names(again.elastic("net", 8, 1, {"v100": 8})) == after
    # a run on a mix of several types is no type's throughput: nothing is recorded
    assert online.learn(core, "j", "v100:2+k80:2", 3000.0, 100.0, "net", 8,
                        ("v100", "k80"), 0.0) is None
    assert online.measured == {"j": {"v100": 44.0}}


class _Recording(MaxMinFairnessMixed):
    """``max_min_fairness_mixed`` that keeps every allocation it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.allocations = []

    def solve(self, problem):
        allocation = super().solve(problem)
        self.allocations.append(allocation.allocation)
        return allocation


def test_elastic_jobs_simulate_on_three_gpus_each():
    """Two elastic 4-GPU jobs (minimum 1) on six V100s: each runs on ``"v100:3"`` all the
    time (the fair split; with only powers of two, 4 + 2 and 2 + 4 alternate, 19.7
    steps/s each), and finishes at the model's pace on three GPUs."""
    policy = _Recording()
    jobs = [TraceJob("net", 4, 20_000, 0.0, min_scale_factor=1) for _ in range(2)]
    result = simulate(jobs, TABLE, {"v100": 6}, policy)
    assert result.completed == 2
    first = {key: {c: v for c, v in row.items() if v > 1e-6}
             for key, row in policy.allocations[0].items()}
    assert first == {"0": {"v100:3": pytest.approx(1.0)}, "1": {"v100:3": pytest.approx(1.0)}}
    three = ScalingModel.fit({1: 8.0, 2: 14.4, 4: 25.0, 8: 44.0}).rate(3)
    assert three > 19.7
    assert [job.jct_s for job in result.jobs] == pytest.approx([20_000 / three] * 2)
