"""Water filling's LPs over the columns that can still matter (thesis §5.4.3).

Two facts keep every LP of water filling (policies/water_filling.py) exact while it drops
columns, and make the hierarchical policy with FIFO entities cheap:

- **Only active jobs need columns.** A job that is not rising and sits at level 0 (queued
  behind its FIFO entity's current job, or frozen with nothing) has the constraint
  ``u_m(z) >= 0``, which z_m = 0 satisfies; its columns only take workers from others. So
  an iteration's LP without them has the same optimum, and a constraint is tight in every
  optimum of one exactly when it is in the other (the bottleneck test is unchanged).
- **A dead column stays dead.** A column that is zero in every allocation meeting the
  current levels is zero in every later one too: the levels only rise, so the set of
  allocations only shrinks. Once the faster types are held by jobs that cannot give them
  up, a queued job's columns there are dead, and its own cap (the highest level it can
  reach at all) is full time on its best *live* column. With FIFO entities most jobs then
  stop at such a cap, which ``WaterFilling._jump`` passes over in O(log) LPs instead of one
  LP per job.

Fixing jobs and dropping dead columns moves each LP by the solver's tolerance (a fixed job
uses exactly its cap's column; the last LP may have left 1e-9 on a dead column). Floors
are the last LP's own optimum, on the very edge of feasibility, so when the pruned LP finds
them infeasible, ``WaterFilling._raise`` solves it again with every column of the active
jobs and nothing fixed (``LiveSteps.exact``, the plain method's LP) before it lowers them
(first to the levels the last allocation meets within capacity, ``fitted_floors``).

``dead_columns`` finds dead columns with one LP, maximise s subject to z_c >= s for every
candidate column c: when s = 0 a strictly complementary dual (Clarabel's interior point) is
positive exactly on the columns that are zero in every allocation (Goldman-Tucker, as in the
bottleneck test); a vertex dual (HiGHS) marks a subset, which is still sound.
"""

from __future__ import annotations

import logging

import numpy as np

from ._lazy import sp
from .errors import Infeasible, SolverFailed
from .lp import maximise_level
from .water_filling_jump import Refutation

log = logging.getLogger(__name__)

# The dead-column LP's optimum s at most this (a time fraction) counts as zero.
DEAD_LEVEL = 1e-9
# A dual at most this fraction of the largest one is zero (as water_filling.DUAL_ZERO).
DEAD_DUAL = 1e-5
# A job within this relative distance of its cap is at it (an LP stops a job within
# water_filling.CAP_TOL, 1e-8, of its cap; the jump sets it exactly at its cap) ...
FIXED_TOL = 1e-7
# ... and its allocation is fixed when its best live column beats the next by this much.
UNIQUE_GAP = 1e-6


def column_jobs(U: sp.spmatrix) -> np.ndarray:
    """The row of ``U`` (job) each column belongs to; every column has exactly one job
    (no co-located pairs, where pruning is not used)."""
    coo = sp.coo_matrix(U)
    owner = np.full(U.shape[1], -1)
    owner[coo.col] = coo.row
    return owner


class LiveSteps:
    """Water filling's iteration LP (``max_min_rows``: maximise t s.t. u(z) >= floor + w t,
    (5.2), (5.3)) over the live columns of the active jobs only, solved by
    ``maximise_level``. A job frozen at its own cap whose best live column is unique has
    only one allocation left, full time there, so it leaves the LP as a constant (its
    workers are taken off (5.3)). ``live`` is shared with the caller, who marks dead columns
    in it and then calls ``refresh``."""

    def __init__(self, A: sp.spmatrix, b: np.ndarray, e: np.ndarray, U: sp.spmatrix,
                 live: np.ndarray, solver: str, what: str) -> None:
        self.A, self.b, self.e = sp.csc_matrix(A), b.copy(), e.copy()
        self.U = sp.csr_matrix(U)
        self.owner, self.live, self.solver, self.what = column_jobs(U), live, solver, what
        self.k = U.shape[0]
        self.dual = None    # the last LP's duals, every row (``refutation``)
        # what each column makes for its job (its one entry of U)
        self.rate = np.asarray(self.U.sum(axis=0)).ravel()
        self.own_cap = np.asarray(self.U.max(axis=1).todense()).ravel()
        self.capacity = self.A[2 * self.k:]    # the capacity rows (types, entity caps)
        self.refresh()

    def refresh(self) -> None:
        """Recompute each job's cap over its live columns (``caps``), and which jobs at
        their cap have a unique best live column (``best``, -1 where not)."""
        masked = (self.U @ sp.diags(self.live.astype(float))).tocsr()
        self.caps = np.asarray(masked.max(axis=1).todense()).ravel()
        self.best = np.full(self.k, -1)
        for j in range(self.k):
            lo, hi = masked.indptr[j], masked.indptr[j + 1]
            values = masked.data[lo:hi]
            if values.size == 0 or values.max() <= 0:
                continue
            top = np.argmax(values)
            rest = np.delete(values, top)
            if rest.size == 0 or rest.max() < values[top] * (1 - UNIQUE_GAP):
                self.best[j] = masked.indices[lo + top]

    def _reduced(self, floor: np.ndarray, w: np.ndarray, *, exact: bool = False):
        """(columns kept, b with the fixed jobs' workers taken off, fixed part of z).
        ``exact``: no job fixed and dead columns kept, the LP of every column less only
        the inactive jobs' (for floors on the very edge of feasibility: module docstring)."""
        fixed = (self.best >= 0) & (w == 0) & (floor >= self.caps * (1 - FIXED_TOL))
        if exact:
            fixed[:] = False
        z0 = np.zeros(self.A.shape[1])
        jobs = np.nonzero(fixed)[0]
        z0[self.best[jobs]] = np.minimum(floor[jobs] / self.caps[jobs], 1.0)
        active = ((floor > 0) | (w > 0)) & ~fixed
        keep = np.nonzero((exact | self.live) & active[self.owner])[0]
        b = self.b.copy()
        b[:self.k] = -floor
        b -= self.A @ z0
        b[jobs] = 0.0  # the fixed job's own level row: met exactly, no column left
        return keep, b, z0

    def __call__(self, floor: np.ndarray, w: np.ndarray):
        return self._solve(floor, w, ((False, self.solver), (False, "HIGHS")))

    def exact(self, floor: np.ndarray, w: np.ndarray):
        """The same LP with every column of the active jobs and nothing fixed, for floors
        the pruned LP finds infeasible (module docstring)."""
        return self._solve(floor, w, ((True, self.solver), (True, "HIGHS")))

    def _solve(self, floor, w, attempts):
        """The first of ``attempts`` ((exact, solver) pairs) that solves; the last error
        otherwise. A second attempt follows only a failed solve (inaccurate), never an
        infeasible LP."""
        e = self.e.copy()
        e[:self.k] = w
        self.dual = None
        for n, (exact, solver) in enumerate(attempts):
            keep, b, z = self._reduced(floor, w, exact=exact)
            try:
                level = maximise_level(self.A[:, keep], b, e, solver, self.what, precise=True)
                break
            except Infeasible as err:
                self.dual = err.certificate     # a proof of it, where the solver gave one
                raise
            except SolverFailed as err:
                if n == len(attempts) - 1 or solver == attempts[n + 1][1]:
                    raise
                log.debug("%s; solving again with %s", err, attempts[n + 1][1])
        z[keep] = level.z
        self.dual = level.dual
        return level.t, z, level.dual[:self.k]

    def refutation(self) -> Refutation | None:
        """A test, from the last LP's prices (or its proof of infeasibility), that floors
        are infeasible (policies/water_filling_jump.py); None when it priced no capacity
        (an LP bound by some job's own cap: its prices refute nothing)."""
        if self.dual is None or not np.any(self.dual[2 * self.k:] > 0):
            return None
        return Refutation(self.dual, self.capacity, self.b[2 * self.k:], self.rate,
                          self.owner, self.own_cap)

    def dead_columns(self, floor: np.ndarray, frozen: np.ndarray) -> np.ndarray:
        """The live columns of jobs not yet frozen that are zero in every allocation
        meeting ``floor`` (module docstring); empty when the LP cannot tell."""
        candidates = np.nonzero(self.live & ~frozen[self.owner])[0]
        if candidates.size == 0:
            return candidates
        keep, b, _ = self._reduced(floor, np.zeros_like(floor))
        keep = np.union1d(keep, candidates)
        position = np.searchsorted(keep, candidates)
        lower = sp.csr_matrix((-np.ones(candidates.size), (np.arange(candidates.size),
                                                          position)),
                              shape=(candidates.size, keep.size))
        A = sp.vstack([self.A[:, keep], lower], format="csc")
        b = np.concatenate([b, np.zeros(candidates.size)])
        e = np.concatenate([np.zeros(self.b.size), np.ones(candidates.size)])
        what = f"{self.what} (dead columns)"
        try:
            level = maximise_level(A, b, e, self.solver, what, precise=True)
        except (Infeasible, SolverFailed) as err:
            log.debug("%s: %s; no columns dropped", what, err)
            return candidates[:0]
        if level.t > DEAD_LEVEL:
            return candidates[:0]
        dual = np.maximum(level.dual[self.b.size:], 0.0)
        top = dual.max() if dual.size else 0.0
        if top <= 0:
            return candidates[:0]
        return candidates[dual > DEAD_DUAL * top]
