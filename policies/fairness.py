"""Max-min fairness (LAS), heterogeneity-aware and agnostic, with and without space sharing.

Thesis §5.4.1: maximise min_m  scale_factor_m / w_m * throughput(m, X) / throughput(m, X^equal).
The agnostic twin (Gavel's ``max_min_fairness``, LAS of Tiresias) sees every type as equally
fast; ``_packed`` adds co-located pairs (§5.3.1, Space Sharing).
"""

from __future__ import annotations

import threading

import numpy as np

from ._lazy import cp, sp
from .base import BACKEND_OPTION, DEFAULT_LP_SOLVER, ColumnPolicy, Solution, no_columns, run
from .cache import ByteBudgetCache
from .columns import Columns
from .compiled import compiled
from .lp import Level, clarabel_lists, level_of, maximise_level
from .sparse import Compressed, Coo, as_scipy, stacked
from .problem import Allocation, Problem


def fairness_utility(cols: Columns, *, weighted: bool = True) -> tuple[np.ndarray, sp.csr_matrix]:
    """Rows of the jobs that can run, and U with ``U @ z`` their normalised effective
    throughputs scale_factor * throughput(m, X) / throughput(m, X^equal), divided by the job
    weight when ``weighted``: the quantity max-min fairness equalises (§5.4.1)."""
    rows, U = utility_arrays(cols, weighted=weighted)
    return rows, as_scipy(U)


def utility_arrays(cols: Columns, *, weighted: bool = True) -> tuple[np.ndarray, Compressed]:
    """``fairness_utility`` with U as CSR arrays (the direct path's: no scipy object)."""
    rows, coef = _utility_coefficients(cols, weighted)
    T = cols.throughput_arrays
    counts = np.diff(T.indptr)
    data, indices, indptr = T.data, T.indices, T.indptr
    if rows.size < cols.num_jobs:   # the runnable rows only
        keep = np.repeat(cols.runnable, counts)
        counts = counts[rows]
        data, indices = data[keep], indices[keep]
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(T.indptr.dtype)
    return rows, Compressed(data * np.repeat(coef, counts), indices, indptr,
                            (rows.size, T.shape[1]), "csr")


def _utility_coefficients(cols: Columns, weighted: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The runnable job rows and what each one's steps/s is multiplied by in U: its scale
    factor over its equal-share throughput (over its weight, ``weighted``)."""
    rows = np.nonzero(cols.runnable)[0]
    with np.errstate(over="ignore", divide="ignore"):   # (a rate of 0 or subnormal: the
        # solve refuses the inf in one line; the fuzz of tests/policies/test_problem_door)
        coef = cols.scale_factor[rows] / cols.equal_throughput[rows]
        if weighted:
            coef = coef / cols.weight[rows]
    return rows, coef


def base_constraints(cols: Columns, z: cp.Variable) -> list:
    """Constraints (5.2) and (5.3): no job over 1, no type oversubscribed (z >= 0 is the
    variable's own attribute, (5.1))."""
    return [cols.member @ z <= 1, cols.usage @ z <= cols.workers]


# With many pairs per job (e.g. every pair listed), the direct path solves by column
# generation, a growing master LP, each master by HiGHS's interior point (measured faster
# than re-solving from the last simplex basis, solver="HIGHS"); with few pairs
# (``select_pairs``'s 8 partners) the whole LP at once by Clarabel is faster
# (BENCHMARKS.md, solver comparison).
PACKED_SOLVER = "HIGHS_IPM"
PAIRS_PER_JOB = 24  # pair columns per job above which column generation is used


def max_min_rows(cols: Columns, U: sp.spmatrix) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """(A, b, e) with the max-min LP as  maximise t s.t. A @ z + e * t <= b, z >= 0
    (``policies.lp.maximise_level``): the rows ``t - U @ z <= 0``, then (5.2) and (5.3) of
    ``base_constraints``. The same LP as the cvxpy program of ``MaxMinFairness``."""
    A, b, e = max_min_coo(cols, U)
    return A.tocsr(), b, e


def max_min_coo(cols: Columns, U: sp.spmatrix) -> tuple[Coo, np.ndarray, np.ndarray]:
    """``max_min_rows`` with A as coordinate arrays (no scipy object: the direct path
    hands them to the solver as they are)."""
    k = U.shape[0]
    A = stacked([U, cols.member_arrays, cols.usage_arrays])
    A.data[:U.nnz] *= -1.0                     # -U: the rows t - U @ z <= 0
    b = np.concatenate([np.zeros(k), np.ones(cols.num_jobs), cols.workers])
    e = np.concatenate([np.ones(k), np.zeros(cols.num_jobs + len(cols.types))])
    return A, b, e


def max_min_csc(cols: Columns) -> tuple[Compressed, np.ndarray, np.ndarray] | None:
    """``max_min_coo`` with A as canonical CSC arrays, written in place rather than sorted,
    when every column is one job on one type (no pairs, no configurations): column (i, j)
    then holds -U, member and usage entries at rows u(i), k + i and k + m + j, in that
    order. The same numbers as ``max_min_coo`` to the bit (tests/policies/test_fairness_lp.py);
    None for other models."""
    blocks = _max_min_blocks(cols)
    if blocks is None:
        return None
    data, indices, b, e, _ = blocks
    c = len(data)
    index = np.int32 if indices.size + b.size < 2 ** 31 - 1 else np.int64
    return (Compressed(data.ravel(), indices.ravel().astype(index),
                       np.arange(0, 3 * c + 1, 3, dtype=index), (b.size, c), "csc"), b, e)


def max_min_by_clarabel(cols: Columns, what: str) -> Level | None:
    """The max-min LP of ``max_min_csc`` solved by Clarabel, its matrix written as Clarabel
    reads it: each column's entries, then its bound row -z <= 0, then the level's column
    (``lp._level_once`` and ``lp._clarabel`` append them; the same lists to the bit,
    tests/policies/test_fairness_lp.py). A re-solve's set-up is most of its cost beside
    the solve (issue #30). None for the models ``max_min_csc`` does not write."""
    lists = _max_min_lists(cols)
    if lists is None:
        return None
    data, indices, k = lists
    c, m, n = cols.num_columns, cols.num_jobs, len(cols.types)
    rows = k + m + n
    matrix = Compressed(data, indices, list(range(0, 4 * c + 1, 4)) + [4 * c + k],
                        (rows + c, c + 1), "csc")
    b = [0.0] * k + [1.0] * m + cols.workers.tolist() + [0.0] * c
    return level_of(clarabel_lists([0.0] * c + [-1.0], matrix, b, rows, what))


def _max_min_lists(cols: Columns) -> tuple[list, list, int] | None:
    """``max_min_by_clarabel``'s matrix entries and their rows, column by column, and the
    number of -U rows: by the compiled loop (``policies/_lists.pyx``), or from
    ``_max_min_blocks``."""
    member = cols.member_arrays
    if cols.config_names or member.nnz != cols.num_columns:
        return None
    if compiled is not None:
        usage = cols.usage_arrays
        return compiled.max_min_lists(
            member.indices.astype(np.int64, copy=False),
            member.indptr.astype(np.int64, copy=False), cols.throughput_arrays.data,
            usage.indices.astype(np.int64, copy=False), usage.data,
            cols.col_type.astype(np.int64, copy=False), cols.runnable.view(np.uint8),
            _utility_coefficients(cols)[1], len(cols.types))
    data, indices, b, _, k = _max_min_blocks(cols)
    c = len(data)
    A = np.empty((c, 4))
    A[:, :3] = data
    A[:, 3] = -1.0
    at = np.empty((c, 4), dtype=np.int64)
    at[:, :3] = indices
    at[:, 3] = np.arange(b.size, b.size + c)
    return A.ravel().tolist() + [1.0] * k, at.ravel().tolist() + list(range(k)), k


def _max_min_blocks(cols: Columns):
    """``max_min_csc``'s columns as (c, 3) blocks of their entries and of their rows, with
    b, e and the number of -U rows; None unless every column is one job on one type."""
    member = cols.member_arrays
    c = cols.num_columns
    if cols.config_names or member.nnz != c:
        return None
    m, n = cols.num_jobs, len(cols.types)
    runnable = cols.runnable
    rows, coef = _utility_coefficients(cols)
    k = rows.size
    col_row = np.empty(c, dtype=np.intp)     # each column's job row; its steps/s there
    col_row[member.indices] = np.repeat(np.arange(m), np.diff(member.indptr))
    rate = np.empty(c)
    rate[member.indices] = cols.throughput_arrays.data   # (``member``'s sparsity)
    u_row = (np.cumsum(runnable) - 1)[col_row]
    usage = cols.usage_arrays
    data = np.empty((c, 3))
    data[:, 0] = rate * coef[u_row]
    data[:, 0] *= -1.0                                   # -U: the rows t - U @ z <= 0
    data[:, 1] = 1.0
    data[usage.indices, 2] = usage.data
    indices = np.empty((c, 3), dtype=np.int64)
    indices[:, 0], indices[:, 1], indices[:, 2] = u_row, k + col_row, k + m + cols.col_type
    b = np.concatenate([np.zeros(k), np.ones(m), cols.workers])
    e = np.concatenate([np.ones(k), np.zeros(m + n)])
    return data, indices, b, e, k


class MaxMinFairness(ColumnPolicy):
    """``max_min_fairness[_perf|_packed]``: one LP, maximise t subject to U z >= t and
    (5.1)-(5.3). By default (``backend="direct"``) the LP goes to the solver as sparse
    matrices (``max_min_rows``): to Clarabel, or, with many pairs per job, by column
    generation over the pair columns with HiGHS's warm-started simplex
    (``policies.lp.maximise_level``).
    ``backend="cvxpy"`` solves the cvxpy program below instead; without pairs it is
    compiled once per shape and re-solved with new numbers (``_CompiledMaxMin``)."""

    TRAITS = ColumnPolicy.TRAITS.but(reads={"weight"}, rearrangeable=True,
                                     options={"backend": BACKEND_OPTION})

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=True)
        if cols.num_columns == 0:
            return no_columns(cols)
        pairs = cols.member_arrays.nnz - cols.num_columns    # (each pair column: 2 entries)
        singles = np.nonzero(cols.single)[0] if pairs else None
        generate = pairs > 0 and cols.num_columns - singles.size > PAIRS_PER_JOB * cols.num_jobs
        solver = self.direct_solver(PACKED_SOLVER if generate else DEFAULT_LP_SOLVER)
        if solver is not None:
            level = (max_min_by_clarabel(cols, self.name)
                     if solver == "CLARABEL" and not generate else None)
            if level is None:
                lp = None if generate else max_min_csc(cols)
                A, b, e = lp or max_min_coo(cols, utility_arrays(cols)[1])
                level = maximise_level(A, b, e, solver, self.name,
                                       start=singles if generate else None)
            return Solution(cols.to_rows(level.z), level.t, level.solver)
        _, U = utility_arrays(cols)
        U = as_scipy(U)
        if not self.packed:
            z, value = _compiled_max_min(cols).solve(cols, U, self.solver, self.name)
            return Solution(cols.to_rows(z), value, self.solver)
        z = cp.Variable(cols.num_columns, nonneg=True)
        t = cp.Variable()
        program = cp.Problem(cp.Maximize(t), [U @ z >= t, *base_constraints(cols, z)])
        value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return None
        _, U = fairness_utility(cols)
        return float(np.min(U @ cols.z_from(allocation)))


class _CompiledMaxMin:
    """The max-min LP of one column *shape* (which row and type each column has), with
    the numbers as cvxpy parameters (DPP), so cvxpy compiles it once and a re-solve only
    refills the matrices. Without pairs every column is one job row on one type, so
    ``U @ z = rows @ (u * z)`` and ``usage @ z = by_type @ (use * z)`` with 0/1 constants.
    A scheduler re-solves the same shape many times (merged rows are job classes, whose
    number changes slowly), and a re-solve skips most of cvxpy's work: the 1,500-job
    simulation spends about 40% less time in the policy (BENCHMARKS.md)."""

    def __init__(self, col_row: np.ndarray, col_type: np.ndarray, num_rows: int,
                 num_types: int) -> None:
        c = len(col_row)
        rows = sp.csr_matrix((np.ones(c), (col_row, np.arange(c))), shape=(num_rows, c))
        runnable = np.unique(col_row)  # rows without columns have nothing to equalise
        by_type = sp.csr_matrix((np.ones(c), (col_type, np.arange(c))), shape=(num_types, c))
        self.u = cp.Parameter(c, nonneg=True)
        self.use = cp.Parameter(c, nonneg=True)
        self.workers = cp.Parameter(num_types, nonneg=True)
        self.z = cp.Variable(c, nonneg=True)
        t = cp.Variable()
        self.program = cp.Problem(cp.Maximize(t), [
            rows[runnable] @ cp.multiply(self.u, self.z) >= t,
            rows @ self.z <= 1,
            by_type @ cp.multiply(self.use, self.z) <= self.workers,
        ])
        self.lock = threading.Lock()

    def solve(self, cols: Columns, U: sp.csr_matrix, solver: str, what: str):
        """(z, optimal value) for ``cols`` (which must have this shape)."""
        with self.lock:
            self.u.value = np.asarray(U.sum(axis=0)).ravel()
            self.use.value = np.asarray(cols.usage.sum(axis=0)).ravel()
            self.workers.value = cols.workers
            value = run(self.program, solver, what)
            return self.z.value.copy(), value


# Compiled programs kept between solves, bounded by their estimated memory.
COMPILED = ByteBudgetCache()
# Resident memory one compiled max-min program keeps per column, measured as RSS growth at
# 1,024 and 4,096 distinct jobs (~1.7 KB per column), rounded up, plus a fixed part.
BYTES_PER_COLUMN = 2048
BYTES_PER_PROGRAM = 64 * 1024


def _compiled_max_min(cols: Columns) -> _CompiledMaxMin:
    col_row = cols.member.tocoo()
    order = np.argsort(col_row.col)
    rows, types = col_row.row[order].astype(np.int64), cols.col_type.astype(np.int64)
    key = (rows.tobytes(), types.tobytes(), cols.num_jobs, len(cols.types))
    return COMPILED.get(key, lambda: _CompiledMaxMin(rows, types, cols.num_jobs, len(cols.types)),
                        compiled_bytes)


def compiled_bytes(program: _CompiledMaxMin) -> int:
    """Estimated memory a compiled program holds (``BYTES_PER_COLUMN`` per column)."""
    return BYTES_PER_PROGRAM + BYTES_PER_COLUMN * program.z.size
