"""Max-min fairness (LAS), heterogeneity-aware and agnostic, with and without space sharing.

Thesis §5.4.1: maximise min_m  scale_factor_m / w_m * throughput(m, X) / throughput(m, X^equal).
The agnostic twin (Gavel's ``max_min_fairness``, LAS of Tiresias) sees every type as equally
fast; ``_packed`` adds co-located pairs (§5.3.1, Space Sharing).
"""

from __future__ import annotations

import threading
from functools import lru_cache

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .base import ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .problem import Allocation, Problem


def fairness_utility(cols: Columns, *, weighted: bool = True) -> tuple[np.ndarray, sp.csr_matrix]:
    """Rows of the jobs that can run, and U with ``U @ z`` their normalised effective
    throughputs scale_factor * throughput(m, X) / throughput(m, X^equal), divided by the job
    weight when ``weighted``: the quantity max-min fairness equalises (§5.4.1)."""
    rows = np.nonzero(cols.runnable)[0]
    coef = cols.scale_factor[rows] / cols.equal_throughput[rows]
    if weighted:
        coef = coef / cols.weight[rows]
    return rows, sp.diags(coef) @ cols.throughput[rows]


def base_constraints(cols: Columns, z: cp.Variable) -> list:
    """Constraints (5.2) and (5.3): no job over 1, no type oversubscribed (z >= 0 is the
    variable's own attribute, (5.1))."""
    return [cols.member @ z <= 1, cols.usage @ z <= cols.workers]


class MaxMinFairness(ColumnPolicy):
    """``max_min_fairness[_perf|_packed]``: one LP. Without pairs the LP is compiled once
    per shape and re-solved with new numbers (``_CompiledMaxMin``)."""

    TRAITS = ColumnPolicy.TRAITS.but(reads={"weight"})

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=True)
        if cols.num_columns == 0:
            return no_columns(cols)
        _, U = fairness_utility(cols)
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


def _compiled_max_min(cols: Columns) -> _CompiledMaxMin:
    col_row = cols.member.tocoo()
    order = np.argsort(col_row.col)
    return _compiled_for_shape(col_row.row[order].astype(np.int64).tobytes(),
                               cols.col_type.astype(np.int64).tobytes(), cols.num_jobs,
                               len(cols.types))


@lru_cache(maxsize=64)
def _compiled_for_shape(col_row: bytes, col_type: bytes, num_rows: int,
                        num_types: int) -> _CompiledMaxMin:
    return _CompiledMaxMin(np.frombuffer(col_row, dtype=np.int64),
                           np.frombuffer(col_type, dtype=np.int64), num_rows, num_types)
