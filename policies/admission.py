"""Which jobs a policy refuses when the jobs' own demands cannot all be met together (SLOs,
thesis §6.4.3; a budget, §6.4.2), as a deadline scheduler's admission control does: the
jobs the last allocation planned keep theirs, and of the jobs new since, the most that can
be met together, taken in order of arrival, are admitted; the rest are refused
(``Infeasible.refuse``). A scheduler core that keeps going drops them and solves again, so
no job's demand leaves every other job without an allocation, and a burst of new jobs
costs a bisection's few solves, not one a job."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .columns import Columns
from .problem import Problem


def new_rows(cols: Columns, rows: np.ndarray, problem: Problem) -> np.ndarray:
    """Those of ``rows`` whose jobs the last allocation did not plan
    (``Problem.previous``), oldest first: the most ``elapsed_s`` (of equals, the first
    row: a problem lists its jobs in arrival order)."""
    previous = problem.previous
    new = np.array([i for i in rows.tolist() if cols.job_ids[i] not in previous], dtype=int)
    return new[np.argsort(-cols.elapsed[new], kind="stable")]


def admitted(count: int, feasible: Callable[[int], bool]) -> int:
    """The most of ``count`` candidates, taken in order, that can be admitted: the largest
    ``k < count`` with ``feasible(k)``, by bisection (adding a candidate only adds demands,
    so feasibility only falls), ``count`` itself known infeasible; 0 when none can
    (``feasible(0)``, the jobs planned before alone, is not asked: they stay either way)."""
    lo, hi = 0, count
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible(mid):
            lo = mid
        else:
            hi = mid
    return lo
