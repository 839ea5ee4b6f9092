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

import logging
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from .base import Policy, Solution, no_columns, run
from .columns import Columns, build_columns
from .errors import Infeasible, ProblemError
from .fairness import base_constraints
from .problem import Allocation, Problem

log = logging.getLogger(__name__)


def normalized_throughput(cols: Columns):
    """Sparse (jobs x columns): throughput over the job's fastest throughput."""
    scale = np.where(cols.runnable, 1.0 / np.maximum(cols.fastest_throughput, 1e-300), 0.0)
    return sp.diags(scale) @ cols.throughput


@dataclass(frozen=True)
class SloNeeds:
    """What the SLOs ask: rows of jobs with a reachable SLO and the steps/s each needs,
    and the jobs whose SLO can no longer be met (already late, or unable to run)."""

    rows: np.ndarray
    need: np.ndarray
    lost: tuple[str, ...]


def slo_needs(problem: Problem, cols: Columns) -> SloNeeds:
    """throughput(m, X) >= s_m / (SLO_m - t_m) for every job with an SLO (§6.4.3)."""
    slo = np.array([np.nan if job.slo_s is None else job.slo_s for job in problem.jobs])
    rows = np.nonzero(~np.isnan(slo) & (cols.remaining > 0))[0]
    time_left = slo[rows] - cols.elapsed[rows]
    reachable = (time_left > 0) & cols.runnable[rows]
    lost = tuple(cols.job_ids[i] for i in rows[~reachable])
    rows, time_left = rows[reachable], time_left[reachable]
    return SloNeeds(rows, cols.remaining[rows] / time_left, lost)


class MaxSumThroughput(Policy):
    """``max_sum_throughput_perf`` and the cost policies (``cost=True``, ``slos=True``).

    ``slo_mode="strict"`` (the default) raises ``Infeasible`` naming the jobs when the SLOs
    cannot all be met; ``"best_effort"`` (what a running scheduler wants) drops the SLOs
    that are already lost, meets the others as closely as possible (least total relative
    shortfall) and only then minimises cost.
    """

    def __init__(self, name=None, *, cost: bool = False, slos: bool = False,
                 slo_mode: str = "strict", **kwargs) -> None:
        super().__init__(name, **kwargs)
        if slo_mode not in ("strict", "best_effort"):
            raise ProblemError(f"{self.name}: slo_mode must be 'strict' or 'best_effort', "
                               f"got {slo_mode!r}")
        self.cost, self.slos, self.slo_mode = cost, slos, slo_mode

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
        needs = slo_needs(problem, cols) if self.slos else None
        if needs is not None and needs.lost:
            if self.slo_mode == "strict":
                raise Infeasible(f"{self.name}: SLOs that can no longer be met (late, or the "
                                 f"job cannot run): {', '.join(needs.lost)}", needs.lost)
            log.warning("%s: dropping SLOs already lost: %s", self.name, ", ".join(needs.lost))
        if cols.num_columns == 0:
            return no_columns(cols)
        z = cp.Variable(cols.num_columns, nonneg=True)
        constraints = base_constraints(cols, z)
        if needs is not None and needs.rows.size:
            constraints.append(cols.throughput[needs.rows] @ z >= needs.need)
        program = cp.Problem(cp.Maximize(self._weights(problem, cols) @ z), constraints)
        try:
            value = run(program, self.solver, self.name)
        except Infeasible:
            shortfall, conflicting = self._least_shortfall(cols, needs)
            if self.slo_mode == "strict":
                raise Infeasible(f"{self.name}: SLOs cannot all be met; conflicting jobs: "
                                 f"{', '.join(conflicting)}", conflicting) from None
            log.warning("%s: SLOs cannot all be met; best effort for %s", self.name,
                        ", ".join(conflicting))
            constraints[-1] = (cols.throughput[needs.rows] @ z
                               >= needs.need - shortfall * (1 + 1e-6) - 1e-9)
            program = cp.Problem(cp.Maximize(self._weights(problem, cols) @ z), constraints)
            value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def _least_shortfall(self, cols: Columns, needs: SloNeeds) -> tuple[np.ndarray, tuple]:
        """The elastic LP: the least total relative shortfall of the SLO throughputs, and
        the conflicting jobs (SLO constraints with a positive dual compete for the
        bottleneck)."""
        z = cp.Variable(cols.num_columns, nonneg=True)
        short = cp.Variable(needs.rows.size, nonneg=True)
        meet = cols.throughput[needs.rows] @ z + short >= needs.need
        program = cp.Problem(cp.Minimize(cp.sum(cp.multiply(short, 1.0 / needs.need))),
                             [meet, *base_constraints(cols, z)])
        run(program, self.solver, f"{self.name} (least SLO shortfall)")
        dual = meet.dual_value * needs.need
        conflicting = tuple(cols.job_ids[i] for i, d in zip(needs.rows, dual) if d > 1e-6)
        return short.value, conflicting

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = build_columns(problem)
        if cols.num_columns == 0:
            return None
        return float(self._weights(problem, cols) @ cols.z_from(allocation))
