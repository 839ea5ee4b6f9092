"""Which jobs a policy refuses when the jobs' own demands cannot all be met together (SLOs,
thesis §6.4.3; a budget, §6.4.2), as a deadline scheduler's admission control does: the
jobs the last allocation planned keep theirs, and the jobs new since are taken in order of
arrival, each admitted when it can be met with those admitted before it (``refused``).
The refused ones are named (``Infeasible.refuse``); a scheduler core that keeps going drops
them and solves again, so no job's demand leaves every other job without an allocation."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .columns import Columns
from .problem import Problem

# Refusals found one by one before the rest of a burst is refused with them: each costs a
# bisection's few solves, and 20,000 jobs arriving at once on 2,048 GPUs had 18,000 to
# refuse (a solve each would hold the cluster's allocation up for hours).
TRIES = 8


def new_rows(cols: Columns, rows: np.ndarray, problem: Problem) -> np.ndarray:
    """Those of ``rows`` whose jobs the last allocation did not plan
    (``Problem.previous``), oldest first: the most ``elapsed_s`` (of equals, the first
    row: a problem lists its jobs in arrival order)."""
    previous = problem.previous
    new = np.array([i for i in rows.tolist() if cols.job_ids[i] not in previous], dtype=int)
    return new[np.argsort(-cols.elapsed[new], kind="stable")]


def refused(count: int, feasible: Callable[[Sequence[int]], bool],
            tries: int = TRIES) -> list[int]:
    """Of ``count`` candidates in order of arrival, those refused: each is admitted when
    ``feasible`` (the candidates admitted before it, and it) holds. A run of admissions is
    found at once, by bisection (a subset of a feasible set is feasible), so each refusal
    costs a few calls; after ``tries`` refusals the candidates left are refused too,
    unless they all fit together. All ``count`` together are known infeasible; none at all
    (the jobs planned before alone) is not asked: they stay either way."""
    admitted: list[int] = []
    out: list[int] = []
    rest = list(range(count))
    known_infeasible = True
    while rest:
        if not known_infeasible and feasible(admitted + rest):
            break
        if len(out) >= tries:
            return out + rest
        lo, hi = 0, len(rest)           # feasible with rest[:lo]; not with rest[:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if feasible(admitted + rest[:mid]):
                lo = mid
            else:
                hi = mid
        admitted += rest[:lo]
        out.append(rest[lo])
        rest = rest[lo + 1:]
        known_infeasible = False
    return out
