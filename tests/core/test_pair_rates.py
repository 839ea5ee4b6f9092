"""What the core plans a co-located pair on (thesis §5.3.1), as its members and the pair
itself are measured (§5.3.3; ``core.jobs.pair_rates``, ``OnlineThroughputs.observe_pair``):
before, a daemon planned every pair on the table's rates whatever its runs made."""

from __future__ import annotations

import numpy as np
import pytest

from gavelsched.core import CoreConfig, SchedulerCore
from gavelsched.core.jobs import JobState, by_type, forget_pairs, pair_rates
from gavelsched.core.lookups import Lookups
from gavelsched.core.online import OnlineThroughputs
from gavelsched.mechanism import ClusterView
from policies import get_policy

from .test_core import RATES, R, Table, finish, job

TYPES = ("v100", "k80")


def state(i: int, kind: str, lookups: Lookups) -> JobState:
    T = lookups.solo((kind, 1)).copy()
    return JobState(job(i, kind), 0.0, i, T, by_type(TYPES, T))


def test_an_unmeasured_pair_plans_on_the_sources_rates_themselves():
    lookups = Lookups(Table(RATES, pairs=True), None, TYPES)
    a, b = state(0, "fast", lookups), state(1, "slow", lookups)
    assert pair_rates(a, b, lookups) is lookups.pair(("fast", 1), ("slow", 1))


def test_each_member_is_scaled_by_what_it_was_measured_at_and_the_pairs_own_rates_win():
    lookups = Lookups(Table(RATES, pairs=True), None, TYPES)
    a, b = state(0, "fast", lookups), state(1, "slow", lookups)
    a.measured, a.T = {"v100": 5.0, "k80": 1.0}, np.array([5.0, 1.0])   # half its priors
    # the table's pairs run at 60% of each member's alone: (6.0, 2.4) on the v100
    np.testing.assert_allclose(pair_rates(a, b, lookups), [[3.0, 2.4], [0.6, 1.8]])
    a.paired = {"1": {"k80": (0.5, 0.25)}}      # the pair's own run on the k80
    np.testing.assert_allclose(pair_rates(a, b, lookups), [[3.0, 2.4], [0.5, 0.25]])


def test_a_pairs_measurements_go_when_a_member_leaves():
    lookups = Lookups(Table(RATES, pairs=True), None, TYPES)
    a = state(0, "fast", lookups)
    a.paired = {"1": {"k80": (0.5, 0.25)}, "2": {"v100": (1.0, 1.0)}}
    forget_pairs({"0": a}, ["0+1", "3"])        # job 1 left (and job 3, alone)
    assert a.paired == {"2": {"v100": (1.0, 1.0)}}


def packed_core(table=None, kinds=("fast", "slow")) -> tuple[SchedulerCore, list]:
    """Two jobs of ``kinds`` on one v100 under max_min_fairness_packed after a round (with
    ``table``: they share it), and the problems its policy saw."""
    policy = get_policy("max_min_fairness_packed")
    seen = []
    solve = policy.solve
    policy.solve = lambda problem: (seen.append(problem), solve(problem))[1]
    core = SchedulerCore(policy, ClusterView.build({"v100": 1}),
                         table or Table(RATES, pairs=True),
                         CoreConfig.for_policy(policy, min_resolve_interval_s=0))
    for i, kind in enumerate(kinds):
        core.submit(job(i, kind=kind, steps=10**6), 0.0)
    finish(core, core.start_round(0.0), R)
    return core, seen


def test_a_member_measured_alone_moves_the_pairs_plan_its_lease_and_re_solves():
    core, seen = packed_core()
    assert core.pair_throughputs("0+1") == {"v100": pytest.approx((6.0, 2.4))}
    core.set_job_throughputs("0", {"v100": 5.0}, R)
    assert core.pair_throughputs("0+1") == {"v100": pytest.approx((3.0, 2.4))}
    rnd = core.start_round(R)
    assert rnd.resolved is not None
    assert dict(seen[-1].pairs[0].throughputs) == {"v100": pytest.approx((3.0, 2.4))}
    assert rnd.tasks[0].key == "0+1" and rnd.tasks[0].throughputs == pytest.approx((3.0, 2.4))


def test_the_pairs_own_rates_replace_what_it_was_planned_on():
    core, seen = packed_core()
    core.set_pair_throughputs("0+1", {"v100": (4.0, 1.0)}, R)
    core.set_job_throughputs("0", {"v100": 5.0}, R)    # the pair's own measurement stays
    assert core.pair_throughputs("0+1") == {"v100": (4.0, 1.0)}
    rnd = core.start_round(R)
    assert dict(seen[-1].pairs[0].throughputs) == {"v100": (4.0, 1.0)}
    assert rnd.tasks[0].throughputs == (4.0, 1.0)


def test_only_a_pair_of_two_admitted_jobs_is_measured():
    core, _ = packed_core()
    core.set_pair_throughputs("0+7", {"v100": (4.0, 1.0)}, R)
    core.set_pair_throughputs("0", {"v100": (4.0, 1.0)}, R)     # a job's key, not a pair's
    assert core.pair_throughputs("0+7") == core.pair_throughputs("0") == {}
    rnd = core.start_round(R)            # nothing was kept: the allocation stands
    assert rnd.resolved is None and core.pair_throughputs("0+1") == {"v100": (6.0, 2.4)}
    finish(core, rnd, 2 * R)
    core.cancel("1", 2 * R)
    core.start_round(2 * R)
    assert core.pair_throughputs("0+1") == {}


class Pairs:
    def get(self, worker_type, job_type, scale_factor=1):
        return 10.0

    def pair(self, worker_type, a, b):
        return (6.0, 6.0)


def test_online_pair_samples_go_to_the_core_once_both_members_moved_past_noise():
    core, _ = packed_core()
    online = OnlineThroughputs(Pairs())
    online.learn(core, "0", "v100", 30, 10.0, "fast", 1, ("v100",), R, pair="0+1")
    assert core.pair_throughputs("0+1") == {"v100": pytest.approx((6.0, 2.4))}  # b not yet
    online.learn(core, "1", "v100", 25, 10.0, "slow", 1, ("v100",), R, pair="0+1")
    assert core.pair_throughputs("0+1") == {"v100": (3.0, 2.5)}
    assert online.measured == {}              # neither job's own throughput
    online.learn(core, "1", "v100", 26, 10.0, "slow", 1, ("v100",), R, pair="0+1")
    assert core.pair_throughputs("0+1") == {"v100": (3.0, 2.5)}    # 2.55: within noise
    online.forget("1")
    assert online.pairs == {}


def test_a_members_pair_samples_average_and_one_without_steps_or_time_is_none():
    online = OnlineThroughputs(Pairs())
    assert online.observe_pair("0+1", "0", "v100", 0, 10.0) is None
    assert online.observe_pair("0+1", "0", "v100", 5, 0.0) is None
    assert online.observe_pair("0+1", "0", "v100", 50, 10.0) == 5.0
    assert online.observe_pair("0+1", "0", "v100", 70, 10.0) == pytest.approx(6.0)
    assert online.changed_pair("0+1", "v100", (6.0, 6.0)) is None     # one member only


class Slowed(Table):
    """``Table``'s rates, its pairs at 40% of each member's rate: apart (half the time each)
    they make more than together."""

    def pair(self, worker_type, a, b):
        ra, rb = self.get(worker_type, *a), self.get(worker_type, *b)
        return (0.4 * ra, 0.4 * rb) if ra and rb else None


def test_a_cluster_slower_than_its_table_does_not_pair_jobs_better_apart():
    """Both jobs measured at half their priors: before, the pair kept the table's rates
    (40% of a prior, 80% of what the job was measured at) and was given the GPU; scaled as
    its members, sharing is worse than taking turns, as the table says."""
    core, _ = packed_core(Slowed(RATES), ("fast", "fast"))
    assert core.allocation.share("0+1", "v100") == pytest.approx(0.0, abs=1e-6)
    for job_id in ("0", "1"):
        core.set_job_throughputs(job_id, {"v100": 5.0}, R)
    finish(core, core.start_round(R), 2 * R)
    assert core.allocation.share("0+1", "v100") == pytest.approx(0.0, abs=1e-6)
    assert core.allocation.share("0", "v100") == pytest.approx(0.5, abs=1e-4)


def test_a_pair_measured_before_it_has_a_row_gets_it_with_its_row():
    """A restarted daemon hands the core what its pairs were measured at before the
    allocation gives them time again (``Progress.admitted``)."""
    core, _ = packed_core(Slowed(RATES), ("fast", "fast"))
    assert core.allocation.share("0+1", "v100") == pytest.approx(0.0, abs=1e-6)
    assert core.pair_throughputs("0+1") == {"v100": pytest.approx((4.0, 4.0))}   # no row
    core.set_pair_throughputs("0+1", {"v100": (9.0, 9.0)}, R)   # together nearly as fast
    assert core.pair_throughputs("0+1") == {"v100": (9.0, 9.0)}
    rnd = core.start_round(R)
    assert [(t.key, t.throughputs) for t in rnd.tasks] == [("0+1", (9.0, 9.0))]


def test_a_re_solve_makes_records_only_for_new_pairs_and_pairs_whose_rates_moved():
    """Each re-solve listed every pair anew (n^2/2 records); now a pair whose rates are
    the same array as at the last problem keeps its record (``lookups.PairRecords``)."""
    core, seen = packed_core(kinds=("fast", "slow", "fast"))
    first = {pair.key: pair for pair in seen[-1].pairs}
    assert set(first) == {"0+1", "0+2", "1+2"}
    core.submit(job(3, kind="slow", steps=10**6), R)
    finish(core, core.start_round(R), 2 * R)                  # job 3 joins: a re-solve
    second = {pair.key: pair for pair in seen[-1].pairs}
    assert all(second[key] is first[key] for key in first)
    assert {"0+3", "1+3", "2+3"} <= set(second)
    core.set_job_throughputs("0", {"v100": 5.0}, 2 * R)        # job 0 measured: its pairs move
    assert core.start_round(2 * R).resolved is not None
    third = {pair.key: pair for pair in seen[-1].pairs}
    assert third["0+1"] is not second["0+1"]
    assert third["0+1"].throughputs["v100"] == pytest.approx((3.0, 2.4))
    assert third["1+2"] is second["1+2"] and third["2+3"] is second["2+3"]
