"""Shared builders for policy tests: hypothesis strategies and an allocation checker."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from policies import Allocation, Entity, Job, Pair, Problem

TYPES = ("v100", "p100", "k80")

# Table 6.1 of the thesis: throughput speedups over a K80 (P100, V100).
TABLE_6_1 = {
    "Transformer": (3.3, 3.3), "A3C": (1.2, 2.2), "CycleGAN": (4.5, 9.3),
    "ResNet-18": (4.0, 6.8), "ResNet-50": (3.7, 9.6),
}


def table_6_1_throughputs(model: str) -> dict[str, float]:
    p100, v100 = TABLE_6_1[model]
    return {"v100": v100, "p100": p100, "k80": 1.0}


@st.composite
def problems(draw, *, types=TYPES, max_jobs=8, multi_gpu=True, weights=True, pairs=False,
             allow_zero=True, remaining=True):
    """Random small problems: throughputs, scale factors, weights, optional pairs.

    Throughputs lie on a grid of 0.25 steps/s: two types within 1e-5 of each other make an
    allocation ill-conditioned (a job gives up time on one type for a 1e-5 loss), which
    turns solver tolerances into visible differences without testing anything real."""
    n_types = len(types)
    cluster = {t: draw(st.integers(1, 6)) for t in types}
    m = draw(st.integers(1, max_jobs))
    jobs = []
    for i in range(m):
        thr = {}
        for t in types:
            zero = allow_zero and draw(st.integers(0, 9)) == 0
            thr[t] = 0.0 if zero else draw(st.integers(2, 400)) / 4
        if all(v == 0 for v in thr.values()):
            thr[types[0]] = 1.0
        sf = draw(st.sampled_from([1, 1, 1, 2, 4])) if multi_gpu else 1
        jobs.append(Job(
            id=str(i), throughputs=thr, scale_factor=sf,
            weight=draw(st.sampled_from([1.0, 1.0, 2.0, 5.0])) if weights else 1.0,
            remaining_steps=draw(st.floats(10.0, 1e5)) if remaining else 1000.0,
            elapsed_s=draw(st.floats(0.0, 1e4)),
        ))
    pair_list = []
    if pairs and m >= 2:
        for a in range(m):
            for b in range(a + 1, m):
                if jobs[a].scale_factor != jobs[b].scale_factor or draw(st.booleans()):
                    continue
                pt = {}
                for t in types:
                    fa, fb = draw(st.floats(0.2, 0.95)), draw(st.floats(0.2, 0.95))
                    pt[t] = (jobs[a].throughputs[t] * fa, jobs[b].throughputs[t] * fb)
                pair_list.append(Pair((str(a), str(b)), pt))
    del n_types
    prices = {"v100": 2.48, "p100": 1.46, "k80": 0.45} if set(types) == set(TYPES) else {}
    return Problem(cluster=cluster, jobs=tuple(jobs), pairs=tuple(pair_list), prices=prices)


def assert_valid(problem: Problem, allocation: Allocation, tol: float = 1e-6) -> None:
    """Constraints (5.1)-(5.3): entries in [0, 1], no job over 1, no type oversubscribed,
    nothing on a type a job cannot run on."""
    sf = {job.id: job.scale_factor for job in problem.jobs}
    used = dict.fromkeys(problem.cluster, 0.0)
    for key, row in allocation.allocation.items():
        members = key.split("+")
        for t, x in row.items():
            assert -tol <= x <= 1 + tol, (key, t, x)
            used[t] += x * sf[members[0]]
            if x > tol and len(members) == 1:
                assert problem.job(key).runs_on(t), f"job {key} got time on {t}"
    for t, u in used.items():
        assert u <= problem.cluster[t] * (1 + tol) + tol, f"type {t} oversubscribed: {u}"
    for job in problem.jobs:
        assert allocation.job_time(job.id) <= 1 + tol, (job.id, allocation.job_time(job.id))


def effective_throughput(problem: Problem, allocation: Allocation) -> dict[str, float]:
    """throughput(m, X) of §5.3.1, from singles and pairs."""
    out = dict.fromkeys(problem.job_ids, 0.0)
    pairs = {p.key: p for p in problem.pairs}
    for key, row in allocation.allocation.items():
        if key in pairs:
            a, b = pairs[key].jobs
            for t, x in row.items():
                ta, tb = pairs[key].throughputs.get(t, (0.0, 0.0))
                out[a] += x * ta
                out[b] += x * tb
        else:
            job = problem.job(key)
            out[key] += sum(x * job.throughputs.get(t, 0.0) for t, x in row.items())
    return out


def as_matrix(problem: Problem, allocation: Allocation) -> np.ndarray:
    return np.array([[allocation.share(j.id, t) for t in problem.worker_types]
                     for j in problem.jobs])


# ---- comparing water-filling levels (thesis §5.4.3) between two methods -----------------
# Both methods move levels on purpose by tolerance-sized amounts (1e-8 below a cap before a
# jump, 1e-9 solver tolerance, the polish's 1e-8 slack, a fixed job's exact share): MOVED.
# When an LP sat on the edge of feasibility, ``WaterFilling._raise`` lowered every floor by
# up to 1e-4 (it logs "lowering the floors"): BACKED_OFF.
MOVED = 1e-7
BACKED_OFF = 1e-4
LEVEL_TOL = 1e-6


def level_model(problem: Problem):
    """The column model and U (``U @ z``: each job's normalised effective throughput, the
    level water filling raises)."""
    from policies.columns import build_columns
    from policies.fairness import fairness_utility

    cols = build_columns(problem, merge=not problem.entities)
    return cols, fairness_utility(cols, weighted=False)[1]


def exchange_rate(problem: Problem) -> float:
    """The most level one job can gain per level another gives up: the ratio of the best to
    the worst level per worker of any column (a worker one column frees, another may use).
    On the random problems here it is up to ~1e3 (0.5 steps/s on four workers next to 100
    on one)."""
    cols, U = level_model(problem)
    per_worker = np.asarray(U.sum(axis=0)).ravel() / np.asarray(cols.usage.sum(axis=0)).ravel()
    per_worker = per_worker[per_worker > 0]
    return float(per_worker.max() / per_worker.min()) if per_worker.size else 1.0


def chained_gain(problem: Problem, levels: np.ndarray, moved: float) -> float:
    """The most level one job can gain when every other job's level is lowered by the
    relative amount ``moved``: one LP per job over the level model. A worker one job frees
    may go to a second job that frees a worker of another type for a third, so the gain
    can be the product of several jobs' exchange rates, which ``exchange_rate``'s one hop
    does not bound (a FIFO job last in line, one type left to it: 1e-8 on the others'
    levels handed it 1e-3)."""
    from scipy.optimize import linprog

    cols, U = level_model(problem)
    U = sp.csr_matrix(U)
    A = sp.vstack([-U, cols.member, cols.usage]).tocsr()
    b = np.concatenate([-levels * (1 - moved), np.ones(cols.member.shape[0]),
                        cols.workers.astype(float)])
    gain = 0.0
    for job in range(levels.size):
        b_job = b.copy()
        b_job[job] = 0.0                    # (its own floor off: how high can it go)
        result = linprog(-U[job].toarray().ravel(), A_ub=A, b_ub=b_job, bounds=(0, None),
                         method="highs")
        if result.status == 0:
            gain = max(gain, -result.fun - levels[job])
    return gain


def levels_close(ours: np.ndarray, theirs: np.ndarray, *, moved: float,
                 handed: float = 0.0) -> None:
    """Equal to 1e-6 of the largest level, plus what moving every level by the relative
    amount ``moved`` can shift at the problem's exchange rate (``moved`` times the rate
    times the sum of the levels, given to one job), plus ``handed``: what a polish gave
    out above the levels, which one optimum may give to one job and another to another."""
    scale = max(1.0, float(np.max(np.abs(theirs)))) if theirs.size else 1.0
    atol = LEVEL_TOL * scale + moved * float(np.sum(np.abs(theirs))) + handed
    assert np.allclose(ours, theirs, rtol=0, atol=atol), (ours, theirs, atol)


class _Backoffs(logging.Handler):
    """Counts water filling's retries with lowered floors."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "lowering the floors" in record.getMessage()


@contextmanager
def count_backoffs() -> Iterator[_Backoffs]:
    """Within the block, ``.count`` counts water filling's retries with lowered floors.

    The level is set with ``setLevel``, which clears the loggers' cached ``isEnabledFor``
    answers: assigning ``logger.level`` does not, so once any test in the process had water
    filling log a debug line while the logger was at its default level (WARNING), its cache
    said DEBUG is off, ``log.debug("... lowering the floors")`` made no record, and every
    back-off in the block went uncounted (seen with the whole suite in one process)."""
    logger, backoffs = logging.getLogger("policies.water_filling"), _Backoffs()
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(backoffs)
    try:
        yield backoffs
    finally:
        logger.removeHandler(backoffs)
        logger.setLevel(level)


def found(cluster: dict[str, int], jobs: list[tuple], entities: dict | None = None) -> Problem:
    """A problem hypothesis found: ``jobs`` as (throughputs, scale factor, weight, entity),
    ``entities`` as name -> (weight, policy)."""
    return Problem(
        cluster=cluster,
        jobs=[Job(str(i), throughputs, scale_factor=sf, weight=weight, entity=entity)
              for i, (throughputs, sf, weight, entity) in enumerate(jobs)],
        entities={name: Entity(name, weight, policy)
                  for name, (weight, policy) in (entities or {}).items()})
