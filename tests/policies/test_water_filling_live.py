"""Water filling over live columns (policies/water_filling_live.py) gives every job the
level of the method that keeps every column in every LP (``prune=False``), thesis §5.4.3.

The comparison is on each job's effective throughput, before the final polish (the levels
water filling sets, ``WaterFilling._levels``) and after it (the allocation returned), to
1e-6 of the largest, plus what lowering levels on purpose may free (``assert_close``): the
polish's slack after it, the reference's backed-off floors when it needed them."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Entity, Job, Problem, get_policy
from policies.columns import build_columns
from policies.fairness import fairness_utility
from tests.policies.conftest import assert_valid, problems

NAME = "max_min_fairness_water_filling_perf"
SETTINGS = {"max_examples": 40, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
TOL = 1e-6


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


def effective_throughput(problem: Problem, allocation) -> np.ndarray:
    """throughput(m, X) of every job, steps/s (§5.3.1)."""
    cols = build_columns(problem)
    return cols.effective_throughput(cols.z_from(allocation))


def normaliser(problem: Problem) -> np.ndarray:
    """Steps/s per unit of water-filling level for each runnable job (fairness_utility)."""
    cols = build_columns(problem, merge=not problem.entities)
    rows, _ = fairness_utility(cols, weighted=False)
    return cols.equal_throughput[rows] / cols.scale_factor[rows]


def assert_close(ours: np.ndarray, theirs: np.ndarray, *, slack: float = 0.0) -> None:
    """Equal to 1e-6 of the largest, give or take ``slack`` times their sum.

    The slack is what the reference (or either method's polish) may free by lowering
    levels on purpose, which an LP then hands to any one job: ``WaterFilling._raise``
    lowers every floor by up to 1e-4 when an LP sits on the edge of feasibility, and the
    polish keeps levels only to 1e-8, at exchange rates between jobs of up to ~1e3 here."""
    scale = max(1.0, float(np.max(np.abs(theirs)))) if theirs.size else 1.0
    atol = TOL * scale + slack * float(np.sum(np.abs(theirs)))
    assert np.allclose(ours, theirs, rtol=0, atol=atol), (ours, theirs, atol)


BACKOFF_SLACK = 1e-3  # floors lowered by up to 1e-4 (water_filling.BACKOFFS)
POLISH_SLACK = 1e-5   # levels kept to 1e-8 (water_filling.POLISH_SLACK), rates up to 1e3


class Backoffs(logging.Handler):
    """Counts water filling's retries with lowered floors."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "lowering the floors" in record.getMessage()


@pytest.mark.parametrize("entities", [True, False])
@settings(**SETTINGS)
@given(data=st.data())
def test_live_columns_give_the_levels_of_every_column(entities, data):
    problem = data.draw(hierarchical()) if entities else data.draw(problems(max_jobs=9))
    pruned, full = get_policy(NAME), get_policy(NAME, prune=False)
    if not build_columns(problem).runnable.any():
        return
    logger, backoffs = logging.getLogger("policies.water_filling"), Backoffs()
    level, logger.level = logger.level, logging.DEBUG
    logger.addHandler(backoffs)
    try:
        per_level = normaliser(problem)
        levels = pruned._levels(problem) * per_level, full._levels(problem) * per_level
        ours, theirs = pruned.solve(problem), full.solve(problem)
    finally:
        logger.removeHandler(backoffs)
        logger.level = level
    backed_off = BACKOFF_SLACK if backoffs.count else 0.0
    assert_close(*levels, slack=backed_off)
    assert_valid(problem, ours)
    assert_close(effective_throughput(problem, ours), effective_throughput(problem, theirs),
                 slack=backed_off + POLISH_SLACK)


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
    assert_close(levels, reference)
    assert (reference < 1e-9).sum() >= 10  # the cluster is too small: some jobs get nothing


def test_prune_option_is_checked():
    with pytest.raises(Exception, match="prune must be true or false, not 'yes'"):
        get_policy(NAME, prune="yes")
