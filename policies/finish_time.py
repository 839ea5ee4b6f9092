"""Finish-time fairness (Themis ρ), thesis §5.4.2.

ρ_m(X) = (t_m + s_m / throughput(m, X)) / (t^isolated_m + s_m / throughput(m, X^isolated)),
minimised in the worst case over jobs (scaled by job weight). The program is convex:
s_m * inv_pos(throughput) is second-order-cone representable, so Clarabel solves it exactly
in one pass, with no bisection.
"""

from __future__ import annotations

import numpy as np

from ._lazy import cp
from .base import ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .errors import ProblemError
from .fairness import base_constraints
from .problem import Allocation, Problem


def _terms(cols: Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of runnable jobs, and (a, b) with ρ_m = a_m / throughput_m + b_m."""
    rows = np.nonzero(cols.runnable)[0]
    with np.errstate(over="ignore"):   # a subnormal isolated rate: an endless isolated
        # time, whose limit ρ = 0 the scale below gives (the fuzz of test_problem_door)
        isolated_time = (cols.isolated_elapsed[rows]
                         + cols.remaining[rows] / cols.isolated_throughput[rows])
    # A job with no steps left and no time yet (isolated time 0) has nothing to be fair
    # about: ρ = 0 rather than 0/0.
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.divide(cols.weight[rows], isolated_time, out=np.zeros(len(rows)),
                          where=isolated_time > 0)
        a, b = cols.remaining[rows] * scale, cols.elapsed[rows] * scale
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        _finite_terms(cols, rows, isolated_time, a, b)
    return rows, a, b


def _finite_terms(cols: Columns, rows: np.ndarray, isolated_time: np.ndarray,
                  a: np.ndarray, b: np.ndarray) -> None:
    """Sets ``a`` and ``b`` where ``weight / isolated_time`` overflowed (an isolated time of a
    few yoctoseconds: a job with next to nothing left, or a rate near the largest float),
    as ``weight * (steps or time / isolated_time)`` (a job done and its time as short: ρ =
    weight); ``ProblemError`` naming the first job whose ρ is still beyond any float, so
    the core plans the others without it."""
    for at in np.nonzero(~(np.isfinite(a) & np.isfinite(b)))[0].tolist():
        i, t = rows[at], isolated_time[at]
        with np.errstate(over="ignore"):
            a[at] = cols.weight[i] * (cols.remaining[i] / t)
            b[at] = cols.weight[i] * (cols.elapsed[i] / t)
        if not (np.isfinite(a[at]) and np.isfinite(b[at])):
            job_id = cols.job_ids[i]
            raise ProblemError(f"job {job_id}: an isolated time of {t:.3g} s is too short "
                               "for finish-time fairness to weigh (its ratio overflows)",
                               job_id=job_id)


class FinishTimeFairness(ColumnPolicy):
    """``finish_time_fairness[_perf|_packed]``."""

    TRAITS = ColumnPolicy.TRAITS.but(
        isolated_time=True, rearrangeable=True,
        reads={"weight", "remaining_steps", "elapsed_s", "isolated_elapsed_s"})

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return no_columns(cols)
        rows, a, b = _terms(cols)
        busy = a > 0  # jobs with steps left; the others' ρ is the constant b
        z = cp.Variable(cols.num_columns, nonneg=True)
        rho = cp.Variable()
        throughput = cols.throughput[rows[busy]] @ z
        constraints = [cp.multiply(a[busy], cp.inv_pos(throughput)) + b[busy] <= rho,
                       *base_constraints(cols, z)]
        if not busy.all():
            constraints.append(rho >= b[~busy].max())
        program = cp.Problem(cp.Minimize(rho), constraints)
        value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return None
        rows, a, b = _terms(cols)
        throughput = cols.effective_throughput(cols.z_from(allocation))[rows]
        with np.errstate(divide="ignore"):
            rho = np.where(a > 0, a / throughput, 0.0) + b
        return float(np.max(rho))
