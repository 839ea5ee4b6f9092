"""The direct LP door: a policy's LP as scipy.sparse matrices, handed to the solver as is.

cvxpy's canonicalisation costs more than the solve for the policies' LPs, and a program
compiled with parameters (DPP) pays its compilation on the first solve of every new shape
(a fresh ``gavelsched solve`` always does; BENCHMARKS.md, Policy solves). The fast path of
a policy builds the *same* LP as its cvxpy program, vectorised, in the standard form

    minimise  c @ x   subject to   A @ x <= b,   x[:num_nonneg] >= 0   (the rest free),

and ``solve_lp`` hands it to Clarabel's or HiGHS's own API. Programs built as the very data
cvxpy's canonicalisation makes of a policy's cvxpy program (so with the same answer to the
bit: finish-time fairness's cone program, makespan's and the weighted sums' LPs) go to
Clarabel by ``clarabel_lists`` (with second-order cones) or to ECOS by ``ecos_lp``. Each
solver's status goes through the same door as ``policies.base.run``'s
(``policies.errors.check_outcome``), so the errors are the same typed errors: a failed
solve never becomes an empty allocation.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from ._lazy import sp
from .errors import Infeasible, Outcome, SolverFailed, check_outcome
from .frozen import record
from .sparse import Compressed, Coo, as_scipy, compressed_arrays, coo_arrays

log = logging.getLogger(__name__)

# Solvers the direct path speaks to; any other name goes through cvxpy.
DIRECT_SOLVERS = ("CLARABEL", "HIGHS", "HIGHS_IPM")
# Tight tolerances for solves whose duals or exact optimum matter (water filling).
PRECISE_TOL = 1e-9


@record
class LinearProgram:
    """min c @ x  s.t.  A @ x <= b,  x[:num_nonneg] >= 0 (``A``: a scipy sparse matrix, a
    ``policies.sparse.Coo``, or a canonical ``Compressed`` CSC, which reaches Clarabel
    without a sort)."""

    c: np.ndarray
    A: sp.spmatrix | Coo | Compressed
    b: np.ndarray
    num_nonneg: int

    def __post_init__(self) -> None:
        rows, cols = self.A.shape
        if self.c.shape != (cols,) or self.b.shape != (rows,) or not 0 <= self.num_nonneg <= cols:
            raise ValueError(f"LinearProgram: c {self.c.shape}, A {self.A.shape}, "
                             f"b {self.b.shape}, num_nonneg {self.num_nonneg} do not fit")


@record
class LPResult:
    """The optimum: primal ``x``, objective ``value`` (of the minimisation), and ``dual``,
    one multiplier >= 0 per row of ``A`` (c + A.T @ dual = 0 on the free variables)."""

    x: np.ndarray
    value: float
    dual: np.ndarray
    solver: str


def solve_lp(lp: LinearProgram, solver: str, what: str, *, precise: bool = False) -> LPResult:
    """Solve ``lp`` with ``solver`` (one of ``DIRECT_SOLVERS``) or raise ``Infeasible`` /
    ``SolverFailed`` naming ``what``. ``precise`` tightens the tolerances and treats an
    inaccurate optimum as a failure."""
    if solver == "CLARABEL":
        return _clarabel(lp, what, precise)
    if solver in ("HIGHS", "HIGHS_IPM"):
        return _highs(lp, what, solver, precise)
    raise SolverFailed(f"{what}: the direct LP path has no solver {solver!r}; "
                       f"known: {', '.join(DIRECT_SOLVERS)}")


def _clarabel(lp: LinearProgram, what: str, precise: bool) -> LPResult:
    n, k, rows = lp.c.size, lp.num_nonneg, lp.b.size
    if _is_csc(lp.A):   # x >= 0 as the rows -x <= 0: each one last in its column
        A = _with_bound_rows(lp.A, k)
    else:
        row, col, data = coo_arrays(lp.A)  # the CSC arrays, no scipy object: scipy's
        coords = (np.concatenate([row, rows + np.arange(k)]),   # overhead dominates small LPs
                  np.concatenate([col, np.arange(k)]), np.concatenate([data, -np.ones(k)]),
                  (rows + k, n), "csc")
        A = compressed_arrays(*coords)
    b = np.concatenate([lp.b, np.zeros(k)])
    return clarabel_lists(lp.c.tolist(), A.lists(), b.tolist(), rows, what, precise)


def clarabel_lists(c: list, A: Compressed, b: list, rows: int, what: str,
                   precise: bool = False, soc: Sequence[int] = (), zero: int = 0) -> LPResult:
    """Clarabel on  min c @ x  s.t.  A @ x <= b  (every row in the nonnegative cone, the
    bounds x >= 0 among them), with ``A``'s arrays, ``c`` and ``b`` as lists; the duals
    of the first ``rows`` rows (the LP's own, before its bound rows). ``soc``: the last
    rows instead hold second-order cones of these sizes, one after another (``b - A @ x``
    in each: a second-order cone program, as cvxpy hands Clarabel one); ``zero``: the
    first ``zero`` rows are equalities instead (``b - A @ x = 0``)."""
    import clarabel

    settings, outcomes = _clarabel_setup(precise)
    n = len(c)
    P = Compressed([], [], [0] * (n + 1), (n, n), "csc")  # no quadratic term (an LP)
    cones = [clarabel.ZeroConeT(zero)] if zero else []
    cones.append(clarabel.NonnegativeConeT(len(b) - zero - sum(soc)))
    cones += [clarabel.SecondOrderConeT(size) for size in soc]
    solver = clarabel.DefaultSolver(P, c, A, b, cones, settings)
    sol = solver.solve()
    outcome = outcomes.get(sol.status, Outcome.FAILED)
    try:
        inaccurate = check_outcome(outcome, what, "CLARABEL", precise=precise,
                                   status=str(sol.status))
    except Infeasible as err:   # Clarabel's z is then a Farkas certificate
        err.certificate = np.asarray(sol.z)[:rows]
        raise
    if inaccurate:
        log.debug("%s: solver CLARABEL reports an inaccurate optimum (used as is)", what)
    dual = np.asarray(sol.z)[:rows]
    return LPResult(np.asarray(sol.x), float(sol.obj_val), dual, "CLARABEL")


def maximised(objective: np.ndarray) -> np.ndarray:
    """The costs of maximising ``objective`` as cvxpy writes them for a solver that
    minimises: its entries negated, its zeros +0.0 (the data a direct path hands the solver
    is cvxpy's, entry for entry: policies/finish_time.py, makespan.py, throughput.py)."""
    costs = -objective
    costs[objective == 0] = 0.0
    return costs


# ECOS's exit flags (ecos.h) as outcomes; any other flag is a failure.
_ECOS_OUTCOMES = {0: Outcome.OPTIMAL, 10: Outcome.INACCURATE, 1: Outcome.INFEASIBLE,
                  11: Outcome.INFEASIBLE, 2: Outcome.UNBOUNDED, 12: Outcome.UNBOUNDED}


def ecos_lp(c: np.ndarray, G: Compressed, h: np.ndarray, what: str) -> LPResult:
    """ECOS on  min c @ x  s.t.  G @ x <= h  (every row in the nonnegative cone), called as
    cvxpy calls it (the duals: one per row of ``G``)."""
    import ecos

    solution = ecos.solve(c, as_scipy(G), h, {"l": h.size, "q": [], "e": 0}, verbose=False)
    info = solution["info"]
    flag = info["exitFlag"]
    if check_outcome(_ECOS_OUTCOMES.get(flag, Outcome.FAILED), what, "ECOS",
                     status=f"{flag} ({info.get('infostring', 'no message')})"):
        log.debug("%s: solver ECOS reports an inaccurate optimum (used as is)", what)
    return LPResult(np.asarray(solution["x"]), float(info["pcost"]), np.asarray(solution["z"]),
                    "ECOS")


# Clarabel's settings (plain, and precise) and its statuses as outcomes, made on the first
# solve: a simulation re-solves tens of thousands of times, and they are the same each time
# (issue #30). The solver copies its settings; nothing changes these after they are made,
# so threads may share them.
_CLARABEL: dict[bool, tuple] = {}


def _clarabel_setup(precise: bool) -> tuple:
    """(settings, {status: Outcome}) for ``clarabel_lists``, made once per ``precise``."""
    setup = _CLARABEL.get(precise)
    if setup is None:
        import clarabel

        settings = clarabel.DefaultSettings()
        settings.verbose = False
        if precise:
            settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = PRECISE_TOL
        S = clarabel.SolverStatus
        outcomes = {S.Solved: Outcome.OPTIMAL, S.AlmostSolved: Outcome.INACCURATE,
                    S.PrimalInfeasible: Outcome.INFEASIBLE,
                    S.AlmostPrimalInfeasible: Outcome.INFEASIBLE,
                    S.DualInfeasible: Outcome.UNBOUNDED,
                    S.AlmostDualInfeasible: Outcome.UNBOUNDED}
        setup = _CLARABEL[precise] = (settings, outcomes)
    return setup


def _is_csc(A) -> bool:
    return isinstance(A, Compressed) and A.format == "csc"


def _with_bound_rows(A: Compressed, k: int) -> Compressed:
    """The canonical CSC ``A`` with the rows ``-x[j] <= 0`` of its first ``k`` columns
    below it: the matrix ``_clarabel`` gives Clarabel, built without a sort."""
    rows, n = A.shape
    counts = np.diff(A.indptr)
    counts[:k] += 1
    indptr = np.zeros(n + 1, dtype=A.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    bound = indptr[1:k + 1] - 1           # the last entry of each of the first k columns
    old = np.ones(indptr[-1], dtype=bool)
    old[bound] = False
    data = np.empty(indptr[-1])
    data[old], data[bound] = A.data, -1.0
    indices = np.empty(indptr[-1], dtype=A.indices.dtype)
    indices[old], indices[bound] = A.indices, np.arange(rows, rows + k)
    return Compressed(data, indices, indptr, (rows + k, n), "csc")


def _highs(lp: LinearProgram, what: str, solver: str, precise: bool) -> LPResult:
    from scipy.optimize import linprog

    bounds = np.array([(0.0, None)] * lp.num_nonneg + [(None, None)] * (lp.c.size - lp.num_nonneg))
    options = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10} \
        if precise else {}
    method = "highs-ipm" if solver == "HIGHS_IPM" else "highs"
    A = lp.A.tocsr() if isinstance(lp.A, (Coo, Compressed)) else lp.A
    result = linprog(lp.c, A_ub=A, b_ub=lp.b, bounds=bounds, method=method, options=options)
    # linprog's status: 0 optimal, 1 iteration limit, 2 infeasible, 3 unbounded, 4 numerical
    outcome = {0: Outcome.OPTIMAL, 2: Outcome.INFEASIBLE,
               3: Outcome.UNBOUNDED}.get(result.status, Outcome.FAILED)
    check_outcome(outcome, what, solver, precise=precise, message=result.message)
    return LPResult(np.asarray(result.x), float(result.fun),
                    -np.asarray(result.ineqlin.marginals), solver)


@record
class Level:
    """The optimum of ``maximise t s.t. A @ z + e * t <= b, z >= 0`` (``maximise_level``):
    ``z``, ``t``, the row duals (>= 0), the solver, and how many LPs it took."""

    z: np.ndarray
    t: float
    dual: np.ndarray
    solver: str
    solves: int = 1


def maximise_level(A: sp.spmatrix, b: np.ndarray, e: np.ndarray, solver: str, what: str, *,
                   start: np.ndarray | None = None, precise: bool = False) -> Level:
    """Maximise a level ``t`` over ``A @ z + e * t <= b``, ``z >= 0``: the shape of every
    max-min program here (thesis §5.4.1, §5.4.3).

    With ``start`` (indices of columns of ``A``) the LP is solved by column generation: a
    master LP over those columns only, then every other column is priced with the master's
    duals and the ones that would raise ``t`` join, until none would. LP duality makes the
    result the optimum of the whole LP, and the master stays small when, as with co-located
    pairs (§5.3.1), few of many columns are worth using. HiGHS keeps its simplex basis
    between master solves (warm start); other solvers re-solve the master from scratch."""
    if start is None:
        return _level_once(A, b, e, solver, what, precise)
    A = A.tocsc() if isinstance(A, (Coo, Compressed)) else sp.csc_matrix(A)
    if solver == "HIGHS":
        return _level_by_columns_highs(A, b, e, np.asarray(start), what)
    active = np.asarray(start)
    solves = 0
    while True:
        level = _level_once(A[:, active], b, e, solver, what, precise)
        solves += 1
        new = _columns_to_add(A, level.dual, level.t, active, A.shape[0])
        if new.size == 0:
            z = np.zeros(A.shape[1])
            z[active] = level.z
            return Level(z, level.t, level.dual, level.solver, solves)
        active = np.sort(np.concatenate([active, new]))


def _level_once(A: sp.spmatrix, b, e, solver: str, what: str, precise: bool) -> Level:
    c = np.zeros(A.shape[1] + 1)
    c[-1] = -1.0
    e = np.asarray(e, dtype=float)
    nz = np.nonzero(e)[0]
    if _is_csc(A):   # t's column last: appended as it is
        full = Compressed(np.concatenate([A.data, e[nz]]),
                          np.concatenate([A.indices, nz.astype(A.indices.dtype)]),
                          np.append(A.indptr, A.indptr[-1] + nz.size),
                          (A.shape[0], A.shape[1] + 1), "csc")
    else:
        row, col, data = coo_arrays(A)
        full = Coo(np.concatenate([row, nz]),
                   np.concatenate([col, np.full(nz.size, A.shape[1])]),
                   np.concatenate([data, e[nz]]), (A.shape[0], A.shape[1] + 1))
    result = solve_lp(LinearProgram(c, full, np.asarray(b, dtype=float), A.shape[1]), solver,
                      what, precise=precise)
    return level_of(result)


def level_of(result: LPResult) -> Level:
    """The ``Level`` of the LP whose last variable is the level, minimised negated."""
    return Level(result.x[:-1], -result.value, result.dual, result.solver)


# Column generation: a column joins when its price beats this fraction of the level (the
# masters' duals are accurate to the solver's tolerance, ~1e-9), at most ADD_PER_ROW columns
# per row of the LP in one round.
PRICE_TOL = 1e-9
ADD_PER_ROW = 1


def _columns_to_add(A: sp.csc_matrix, dual: np.ndarray, t: float, active: np.ndarray,
                    rows: int) -> np.ndarray:
    """Columns outside ``active`` whose reduced profit ``-A_j @ dual`` is positive, best
    first, at most ``ADD_PER_ROW * rows`` of them."""
    profit = -(A.T @ dual)
    profit[active] = -np.inf
    candidates = np.nonzero(profit > PRICE_TOL * max(abs(t), 1.0))[0]
    limit = max(ADD_PER_ROW * rows, 1000)
    if candidates.size > limit:
        candidates = candidates[np.argpartition(-profit[candidates], limit)[:limit]]
    return candidates


def _level_by_columns_highs(A: sp.csc_matrix, b, e, start: np.ndarray, what: str) -> Level:
    """``maximise_level`` by column generation on one HiGHS model whose simplex basis is
    kept from one master to the next."""
    model = WarmLevel(A, b, e, columns=start)
    solves = 0
    while True:
        level = model.solve(what)
        solves += 1
        new = _columns_to_add(A, level.dual, level.t, model.columns, A.shape[0])
        if new.size == 0:
            return Level(level.z, level.t, level.dual, level.solver, solves)
        model.add(new)


class WarmLevel:
    """``maximise t s.t. A @ z + e * t <= b, z >= 0`` as one HiGHS model that keeps its
    simplex basis from one solve to the next (warm start), while columns are added
    (column generation) or ``b`` and ``e`` change (water filling's iterations, §5.4.3).
    Only the columns in ``columns`` (default: all) are in the model; ``z`` is zero on
    the others."""

    def __init__(self, A: sp.spmatrix, b: np.ndarray, e: np.ndarray, *,
                 columns: np.ndarray | None = None, precise: bool = False) -> None:
        import highspy

        self._highspy = highspy
        self.A = sp.csc_matrix(A)
        self.b = np.asarray(b, dtype=float).copy()
        self.e = np.asarray(e, dtype=float).copy()
        rows = self.A.shape[0]
        inf = highspy.kHighsInf
        self.highs = highspy._Highs()  # the public ``Highs`` prints a banner on stdout
        self.highs.setOptionValue("output_flag", False)
        if precise:
            for option in ("primal_feasibility_tolerance", "dual_feasibility_tolerance"):
                self.highs.setOptionValue(option, PRECISE_TOL)
        self.highs.addRows(rows, np.full(rows, -inf), self.b, 0, np.zeros(0, np.int32),
                           np.zeros(0, np.int32), np.zeros(0))
        nz = np.nonzero(self.e)[0]
        self.highs.addCol(-1.0, -inf, inf, nz.size, nz.astype(np.int32), self.e[nz])  # t
        self.columns = np.zeros(0, dtype=int)
        self.add(np.arange(self.A.shape[1]) if columns is None else np.asarray(columns))

    def add(self, columns: np.ndarray) -> None:
        """Add columns of ``A`` to the model (the basis is kept)."""
        sub = self.A[:, columns]
        self.highs.addCols(columns.size, np.zeros(columns.size), np.zeros(columns.size),
                           np.full(columns.size, self._highspy.kHighsInf), sub.nnz,
                           sub.indptr[:-1].astype(np.int32), sub.indices.astype(np.int32),
                           sub.data.astype(float))
        self.columns = np.concatenate([self.columns, columns])

    def update(self, b: np.ndarray, e: np.ndarray) -> None:
        """New right-hand side and level coefficients; only the entries that changed are
        sent to HiGHS."""
        b, e = np.asarray(b, dtype=float), np.asarray(e, dtype=float)
        changed = np.nonzero(b != self.b)[0]
        if changed.size:
            self.highs.changeRowsBounds(changed.size, changed.astype(np.int32),
                                        np.full(changed.size, -self._highspy.kHighsInf),
                                        b[changed])
        for row in np.nonzero(e != self.e)[0].tolist():
            self.highs.changeCoeff(row, 0, float(e[row]))
        self.b, self.e = b.copy(), e.copy()

    def solve(self, what: str) -> Level:
        highspy = self._highspy
        self.highs.run()
        status = self.highs.getModelStatus()
        M = highspy.HighsModelStatus
        outcome = {M.kOptimal: Outcome.OPTIMAL, M.kInfeasible: Outcome.INFEASIBLE,
                   M.kUnbounded: Outcome.UNBOUNDED}.get(status, Outcome.FAILED)
        check_outcome(outcome, what, "HIGHS", status=self.highs.modelStatusToString(status))
        solution = self.highs.getSolution()
        values = np.asarray(solution.col_value)
        z = np.zeros(self.A.shape[1])
        z[self.columns] = values[1:]
        dual = np.maximum(-np.asarray(solution.row_dual), 0.0)
        return Level(z, float(values[0]), dual, "HIGHS")
