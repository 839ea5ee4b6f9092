"""Max-min fairness (LAS), heterogeneity-aware and agnostic, with and without space sharing.

Thesis §5.4.1: maximise min_m  scale_factor_m / w_m * throughput(m, X) / throughput(m, X^equal).
The agnostic twin (Gavel's ``max_min_fairness``, LAS of Tiresias) sees every type as equally
fast; ``_packed`` adds co-located pairs (§5.3.1, Space Sharing).
"""

from __future__ import annotations

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
    """``max_min_fairness[_perf|_packed]``: one LP."""

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=True)
        if cols.num_columns == 0:
            return no_columns(cols)
        _, U = fairness_utility(cols)
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
