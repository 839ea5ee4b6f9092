"""Throughput and cost policies: thesis chapter 6, §6.4.1-§6.4.3 (and Table 5.1's cost rows).

Throughputs of different models are in different units (steps of different sizes), so each
job's throughput is normalised by its throughput alone on its fastest type before summing.
- ``max_sum_throughput_perf``: maximise Σ_m throughput(m, X) / throughput(m, X^fastest).
- ``max_sum_throughput_normalized_by_cost_perf``: maximise the same quantity per dollar,
  column by column: Σ_c normalised throughput_c / price_c (§6.4.2), so every job runs where
  it is most cost-effective.
- ``..._SLOs``: the same, subject to throughput(m, X) >= s_m / (SLO_m - t_m) (§6.4.3).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .base import Policy, Solution, no_columns, run
from .columns import Columns, build_columns
from .errors import Infeasible, ProblemError
from .fairness import base_constraints
from .problem import Allocation, Problem


def normalized_throughput(cols: Columns):
    """Sparse (jobs x columns): throughput over the job's fastest throughput."""
    scale = np.where(cols.runnable, 1.0 / np.maximum(cols.fastest_throughput, 1e-300), 0.0)
    return sp.diags(scale) @ cols.throughput


def slo_requirements(problem: Problem, cols: Columns) -> tuple[np.ndarray, np.ndarray]:
    """Rows of jobs with an SLO and the steps/s each needs to meet it."""
    slo = np.array([np.nan if job.slo_s is None else job.slo_s for job in problem.jobs])
    rows = np.nonzero(~np.isnan(slo) & (cols.remaining > 0))[0]
    time_left = slo[rows] - cols.elapsed[rows]
    late = rows[time_left <= 0]
    if late.size:
        names = tuple(cols.job_ids[i] for i in late)
        raise Infeasible(f"SLOs already missed by jobs {', '.join(names)}", names)
    stuck = rows[~cols.runnable[rows]]
    if stuck.size:
        names = tuple(cols.job_ids[i] for i in stuck)
        raise Infeasible(f"jobs with SLOs that cannot run on any worker type: {', '.join(names)}",
                         names)
    return rows, cols.remaining[rows] / time_left


class MaxSumThroughput(Policy):
    """``max_sum_throughput_perf`` and the cost policies (``cost=True``, ``slos=True``)."""

    def __init__(self, name=None, *, cost: bool = False, slos: bool = False, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.cost, self.slos = cost, slos

    def _weights(self, problem: Problem, cols: Columns) -> np.ndarray:
        """Objective coefficient of every column."""
        gain = np.asarray(normalized_throughput(cols).sum(axis=0)).ravel()
        if not self.cost:
            return gain
        unpriced = [t for t in cols.types if problem.prices.get(t, 0.0) <= 0]
        if unpriced:
            raise ProblemError(f"prices.{unpriced[0]}: {self.name} needs a price > 0 for every "
                               "worker type")
        return gain / cols.price

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        rows, need = slo_requirements(problem, cols) if self.slos else ((), ())
        if cols.num_columns == 0:
            return no_columns(cols)
        z = cp.Variable(cols.num_columns, nonneg=True)
        constraints = base_constraints(cols, z)
        if len(rows):
            constraints.append(cols.throughput[rows] @ z >= need)
        program = cp.Problem(cp.Maximize(self._weights(problem, cols) @ z), constraints)
        try:
            value = run(program, self.solver, self.name)
        except Infeasible:
            raise self._explain_infeasible(problem, cols) from None
        return Solution(cols.to_rows(z.value), value, self.solver)

    def _explain_infeasible(self, problem: Problem, cols: Columns) -> Infeasible:
        """Name the jobs whose SLOs conflict. An elastic LP minimises the relative shortfall;
        the SLO constraints with a positive dual are the ones competing for the bottleneck."""
        rows, need = slo_requirements(problem, cols)
        z = cp.Variable(cols.num_columns, nonneg=True)
        short = cp.Variable(rows.size, nonneg=True)
        meet = cols.throughput[rows] @ z + short >= need
        program = cp.Problem(cp.Minimize(cp.sum(cp.multiply(short, 1.0 / need))),
                             [meet, *base_constraints(cols, z)])
        run(program, self.solver, f"{self.name} (diagnosis)")
        dual = meet.dual_value * need
        conflicting = tuple(cols.job_ids[i] for i, d in zip(rows, dual) if d > 1e-6)
        return Infeasible(f"{self.name}: SLOs cannot all be met; conflicting jobs: "
                          f"{', '.join(conflicting)}", conflicting)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = build_columns(problem)
        if cols.num_columns == 0:
            return None
        return float(self._weights(problem, cols) @ cols.z_from(allocation))
