"""Water filling over live columns (policies/water_filling_live.py) gives every job the
level of the method that keeps every column in every LP (``prune=False``), thesis §5.4.3.

The comparison is on each job's normalised effective throughput (its level), before the
final polish (``WaterFilling._levels``) and after it (the allocation returned), to 1e-6 of
the largest plus what tolerance-sized moves can shift at the problem's exchange rate
(``assert_close``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Entity, Job, Problem, get_policy
from policies.columns import build_columns
from tests.policies.conftest import (
    BACKED_OFF,
    MOVED,
    assert_valid,
    count_backoffs,
    exchange_rate,
    level_model,
    levels_close,
    problems,
)

NAME = "max_min_fairness_water_filling_perf"
SETTINGS = {"max_examples": 40, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@st.composite
def hierarchical(draw) -> Problem:
    """A random problem (conftest.problems) whose jobs are spread over one to three
    entities, mostly FIFO inside, with the cluster often too small for everyone."""
    problem = draw(problems(max_jobs=9))
    count = draw(st.integers(1, 3))
    entities = {f"e{k}": Entity(f"e{k}", weight=draw(st.sampled_from([1.0, 2.0, 3.0])),
                                policy=draw(st.sampled_from(["fifo", "fifo", "fairness"])))
                for k in range(count)}
    jobs = [Job(j.id, j.throughputs, scale_factor=j.scale_factor, weight=j.weight,
                remaining_steps=j.remaining_steps, elapsed_s=j.elapsed_s,
                entity=f"e{draw(st.integers(0, count - 1))}") for j in problem.jobs]
    cluster = {t: draw(st.integers(1, 3)) for t in problem.cluster}
    return Problem(cluster=cluster, jobs=jobs, entities=entities)


@pytest.mark.parametrize("entities", [True, False])
@settings(**SETTINGS)
@given(data=st.data())
def test_live_columns_give_the_levels_of_every_column(entities, data):
    problem = data.draw(hierarchical()) if entities else data.draw(problems(max_jobs=9))
    pruned, full = get_policy(NAME), get_policy(NAME, prune=False)
    if not build_columns(problem).runnable.any():
        return
    with count_backoffs() as backoffs:
        levels = pruned._levels(problem), full._levels(problem)
        ours, theirs = pruned.solve(problem), full.solve(problem)
    moved = (BACKED_OFF if backoffs.count else MOVED) * exchange_rate(problem)
    levels_close(*levels, moved=moved)
    assert_valid(problem, ours)
    cols, U = level_model(problem)
    levels_close(U @ cols.z_from(ours), U @ cols.z_from(theirs), moved=moved)


def fifo_phases(n: int) -> Problem:
    """Two FIFO entities on three types where every job is fastest on v100: the first jobs
    take the v100s, later ones stop at full time on p100, then on k80, the rest get
    nothing; the ``entities`` problem of benchmarks/policy_solve.py in small."""
    rng = np.random.default_rng(n)
    v100 = rng.uniform(1, 200, n)
    speeds = np.column_stack([v100, v100 / rng.uniform(1.1, 3, n), v100 / rng.uniform(3.3, 10, n)])
    jobs = [Job(str(i), dict(zip(("v100", "p100", "k80"), speeds[i].tolist())),
                entity=f"e{i % 2}") for i in range(n)]
    entities = {f"e{k}": Entity(f"e{k}", weight=float(k + 1), policy="fifo") for k in range(2)}
    return Problem(cluster={"v100": n / 8, "p100": n / 8, "k80": n / 8}, jobs=jobs,
                   entities=entities)


def test_fifo_entities_need_far_fewer_lps(monkeypatch):
    """On the phases of FIFO entities the live columns turn most jobs' stops into caps the
    jump passes over: about half the LPs of the full method at 96 jobs (the gap widens
    with n: ~70 LPs instead of ~1,500 at 2,048, BENCHMARKS.md), and the same levels."""
    import policies.water_filling as full
    import policies.water_filling_live as live

    problem = fifo_phases(96)
    solves = {"pruned": 0, "full": 0}

    def counting(module, key):
        real = module.maximise_level

        def solve(*args, **kwargs):
            solves[key] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, "maximise_level", solve)

    counting(live, "pruned")
    counting(full, "full")
    levels = get_policy(NAME)._levels(problem)
    reference = get_policy(NAME, prune=False)._levels(problem)
    assert solves["full"] > 0 and solves["pruned"] < 0.6 * solves["full"], solves
    levels_close(levels, reference, moved=MOVED * exchange_rate(problem))
    assert (reference < 1e-9).sum() >= 10  # the cluster is too small: some jobs get nothing


def test_prune_option_is_checked():
    with pytest.raises(Exception, match="prune must be true or false, not 'yes'"):
        get_policy(NAME, prune="yes")
