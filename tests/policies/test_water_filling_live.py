"""Water filling over live columns (policies/water_filling_live.py) gives every job the
level of the method that keeps every column in every LP (``prune=False``), thesis §5.4.3.

The comparison is on each job's normalised effective throughput (its level), before the
final polish (``WaterFilling._levels``) and after it (the allocation returned), to 1e-6 of
the largest plus what tolerance-sized moves can shift at the problem's exchange rate
(``assert_close``)."""

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


def model(problem: Problem):
    """The column model and U (``U @ z``: normalised effective throughput) water filling uses."""
    cols = build_columns(problem, merge=not problem.entities)
    return cols, fairness_utility(cols, weighted=False)[1]


def exchange_rate(problem: Problem) -> float:
    """The most level one job can gain per level another gives up: the ratio of the best to
    the worst level per worker of any column (a worker one column frees, another may use)."""
    cols, U = model(problem)
    per_worker = np.asarray(U.sum(axis=0)).ravel() / np.asarray(cols.usage.sum(axis=0)).ravel()
    per_worker = per_worker[per_worker > 0]
    return float(per_worker.max() / per_worker.min())


def assert_close(ours: np.ndarray, theirs: np.ndarray, *, moved: float) -> None:
    """Equal to 1e-6 of the largest level, plus what moving every level by the relative
    amount ``moved`` can shift at the problem's exchange rate (``moved`` times the rate
    times the sum of the levels, given to one job).

    Both methods move levels on purpose by tolerance-sized amounts (1e-8 below a cap before
    a jump, 1e-9 solver tolerance, the polish's 1e-8 slack, a fixed job's exact share):
    ``MOVED``. When an LP sat on the edge of feasibility, ``WaterFilling._raise`` lowered
    every floor by up to 1e-4: ``BACKED_OFF``. On the random problems here the rate is up to
    ~1e3 (0.5 steps/s on four workers next to 100 on one)."""
    scale = max(1.0, float(np.max(np.abs(theirs)))) if theirs.size else 1.0
    atol = TOL * scale + moved * float(np.sum(np.abs(theirs)))
    assert np.allclose(ours, theirs, rtol=0, atol=atol), (ours, theirs, atol)


MOVED = 1e-7
BACKED_OFF = 1e-4


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
        levels = pruned._levels(problem), full._levels(problem)
        ours, theirs = pruned.solve(problem), full.solve(problem)
    finally:
        logger.removeHandler(backoffs)
        logger.level = level
    moved = (BACKED_OFF if backoffs.count else MOVED) * exchange_rate(problem)
    assert_close(*levels, moved=moved)
    assert_valid(problem, ours)
    cols, U = model(problem)
    assert_close(U @ cols.z_from(ours), U @ cols.z_from(theirs), moved=moved)


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
    assert_close(levels, reference, moved=MOVED * exchange_rate(problem))
    assert (reference < 1e-9).sum() >= 10  # the cluster is too small: some jobs get nothing


def test_prune_option_is_checked():
    with pytest.raises(Exception, match="prune must be true or false, not 'yes'"):
        get_policy(NAME, prune="yes")
