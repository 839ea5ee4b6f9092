"""Makespan policies: thesis §5.4.2 (Minimize Makespan) and §6.4.3 (makespan under a budget).

min_X max_m s_m / throughput(m, X) is an LP after substituting λ = 1 / makespan:
maximise λ subject to throughput(m, X) >= λ s_m. The cost budget of §6.4.3,
makespan * cost rate <= B, becomes cost rate <= B λ, also linear, so the binary search the
thesis suggests is not needed.
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np

from .base import ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .errors import Infeasible, ProblemError
from .fairness import base_constraints
from .problem import Allocation, Problem

SECONDS_PER_HOUR = 3600.0


def _pending(cols: Columns) -> np.ndarray:
    """Rows of the jobs that still have steps to run and can run somewhere."""
    return np.nonzero(cols.runnable & (cols.remaining > 0))[0]


class MinTotalDuration(ColumnPolicy):
    """``min_total_duration[_perf|_packed]`` and, with ``budget``, ``min_makespan_with_budget``.

    The objective reported is the makespan in seconds.
    """

    def __init__(self, name=None, *, budget: float | None = None, require_budget: bool = False,
                 **kwargs) -> None:
        super().__init__(name, **kwargs)
        if require_budget and budget is None:
            raise ProblemError(f"{self.name}: needs the option budget=DOLLARS")
        if budget is not None and budget <= 0:
            raise ProblemError(f"{self.name}: budget must be > 0 dollars, got {budget!r}")
        self.budget = budget

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        rows = _pending(cols)
        if cols.num_columns == 0 or rows.size == 0:
            return no_columns(cols)
        # rate = σ/makespan with σ the longest job's best-case time: a number near 1, so the
        # solver's tolerances are relative to the answer, whatever the jobs' lengths.
        sigma = float(np.max(cols.remaining[rows] / cols.fastest_throughput[rows]))
        z = cp.Variable(cols.num_columns, nonneg=True)
        rate = cp.Variable(nonneg=True)
        constraints = [
            cols.throughput[rows] @ z >= cp.multiply(cols.remaining[rows] / sigma, rate),
            *base_constraints(cols, z)]
        if self.budget is not None:
            constraints.append(cols.price @ z / SECONDS_PER_HOUR <= self.budget / sigma * rate)
        value = run(cp.Problem(cp.Maximize(rate), constraints), self.solver, self.name)
        if value <= 0:
            raise Infeasible(f"{self.name}: no allocation finishes the jobs within budget")
        return Solution(cols.to_rows(z.value), sigma / value, self.solver)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        rows = _pending(cols)
        if rows.size == 0:
            return None
        throughput = cols.effective_throughput(cols.z_from(allocation))[rows]
        with np.errstate(divide="ignore"):
            return float(np.max(cols.remaining[rows] / throughput))
