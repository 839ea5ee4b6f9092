"""Finish-time fairness (Themis ρ), thesis §5.4.2.

ρ_m(X) = (t_m + s_m / throughput(m, X)) / (t^isolated_m + s_m / throughput(m, X^isolated)),
minimised in the worst case over jobs (scaled by job weight). The program is convex:
s_m * inv_pos(throughput) is second-order-cone representable, so Clarabel solves it exactly
in one pass, with no bisection.

With Clarabel (the default solver) the program goes to it directly (``cone_program``): the
very data cvxpy's canonicalisation makes of the cvxpy program (``finish_time_program``),
entry for entry, so the same answer to the bit (tests/policies/test_finish_time_direct.py),
without cvxpy's cost, which was most of a solve's (BENCHMARKS.md, Policy solves). Other
solvers, and ``backend="cvxpy"``, go through cvxpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._lazy import cp
from .base import BACKEND_OPTION, ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .errors import ProblemError
from .fairness import base_constraints
from .lp import clarabel_lists
from .problem import Allocation, Problem
from .sparse import Compressed, coo_arrays, from_blocks, row_entries


def _terms(cols: Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of runnable jobs, and (a, b) with ρ_m = a_m / throughput_m + b_m."""
    rows = np.nonzero(cols.runnable)[0]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # a subnormal
        # isolated rate, or one that underflowed to 0: an endless isolated time, whose limit
        # ρ = 0 the scale below gives; with no steps left either, 0/0, which it takes as 0
        # too (the fuzz of test_problem_door)
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


def finish_time_program(cols: Columns) -> tuple[cp.Problem, cp.Variable]:
    """The program (and its variable ``z``, one entry per column): minimise ρ, every job's
    ``a / throughput + b <= ρ`` (``_terms``), and (5.2) and (5.3). With pairs, each job's
    throughput is a variable of its own (``own_rates``)."""
    rows, a, b = _terms(cols)
    busy = a > 0  # jobs with steps left; the others' ρ is the constant b
    z = cp.Variable(cols.num_columns, nonneg=True)
    rho = cp.Variable()
    throughput = cols.throughput[rows[busy]] @ z
    constraints = []
    if own_rates(cols) and busy.any():
        rate = cp.Variable(int(busy.sum()))
        constraints.append(rate == throughput)
        throughput = rate
    constraints += [cp.multiply(a[busy], cp.inv_pos(throughput)) + b[busy] <= rho,
                    *base_constraints(cols, z)]
    if not busy.all():
        constraints.append(rho >= b[~busy].max())
    return cp.Problem(cp.Minimize(rho), constraints), z


def own_rates(cols: Columns) -> bool:
    """Whether each job's throughput gets a variable of its own, equal to its sum over the
    columns: with pairs, where a job's sum spans its partners' columns. Written into both
    rows of its cone, those sums tie the cones of partners together, and the solver's
    factorisation fills in: 2,000 jobs with 16 partners each took 42 s and ended in a
    numerical error; with the variables, 2 s (BENCHMARKS.md, "Every policy at production
    size")."""
    return not cols.single.all()


class ConeProgram(NamedTuple):
    """min ``c @ x`` with ``b - A @ x`` in the zero cone (its first ``zero`` rows), the
    nonnegative cone, then second-order cones of sizes ``soc``."""

    c: np.ndarray
    A: Compressed
    b: np.ndarray
    zero: int
    soc: tuple[int, ...]


def cone_program(cols: Columns) -> ConeProgram:
    """``finish_time_program`` as cvxpy hands it to Clarabel, entry for entry: minimise ρ
    over x = (ρ, z, r, u), where r_j = throughput_j (with ``own_rates``, else no r) and
    u_j >= 1 / throughput_j for each job j with steps left. Rows: r_j - throughput_j = 0;
    -z <= 0; a_j u_j - ρ <= -b_j; (5.2); (5.3); ρ >= the others' b; then one second-order
    cone of size 3 per such job: ``(t_j + u_j, t_j - u_j, 2)``, i.e. t_j * u_j >= 1, with
    t_j its r_j or its throughput's terms."""
    rows, a, b = _terms(cols)
    busy = a > 0
    c, m, n = cols.num_columns, cols.num_jobs, len(cols.types)
    k = int(busy.sum())
    zero = k if own_rates(cols) else 0            # r's rows and columns
    rate_col = 1 + c + np.arange(zero)
    u = 1 + c + zero + np.arange(k)               # u's columns; z's are 1 .. c
    job, col, rate = row_entries(cols.throughput_arrays, rows[busy])
    coords, rhs = [], []
    if zero:
        coords += [(job, 1 + col, -rate), (np.arange(k), rate_col, np.ones(k))]
        rhs.append(np.zeros(k))
    epigraph = zero + c + np.arange(k)
    member_row, member_col, member = coo_arrays(cols.member_arrays)
    usage_row, usage_col, usage = coo_arrays(cols.usage_arrays)
    at = zero + c + k + m + n                     # the next row
    coords += [(zero + np.arange(c), 1 + np.arange(c), -np.ones(c)),
               (epigraph, np.zeros(k, dtype=np.intp), -np.ones(k)), (epigraph, u, a[busy]),
               (zero + c + k + member_row, 1 + member_col, member),
               (zero + c + k + m + usage_row, 1 + usage_col, usage)]
    rhs += [np.zeros(c), -b[busy], np.ones(m), cols.workers.astype(float)]
    if not busy.all():
        coords.append((np.array([at]), np.array([0]), np.array([-1.0])))
        rhs.append(np.array([-b[~busy].max()]))
        at += 1
    cone = at + 3 * np.arange(k)
    if zero:
        coords += [(cone, rate_col, -np.ones(k)), (cone + 1, rate_col, -np.ones(k))]
    else:
        first = at + 3 * job                      # each job's cone: its first row
        coords += [(first, 1 + col, -rate), (first + 1, 1 + col, -rate)]
    coords += [(cone, u, -np.ones(k)), (cone + 1, u, np.ones(k))]
    rhs.append(np.tile([0.0, 0.0, 2.0], k))
    shape = (at + 3 * k, 1 + c + zero + k)
    objective = np.zeros(shape[1])
    objective[0] = 1.0
    return ConeProgram(objective, from_blocks(coords, shape), np.concatenate(rhs), zero,
                       (3,) * k)


class FinishTimeFairness(ColumnPolicy):
    """``finish_time_fairness[_perf|_packed]``."""

    TRAITS = ColumnPolicy.TRAITS.but(
        isolated_time=True, rearrangeable=True, options={"backend": BACKEND_OPTION},
        reads={"weight", "remaining_steps", "elapsed_s", "isolated_elapsed_s"})

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return no_columns(cols)
        if self.direct_solver() == "CLARABEL":   # (of the direct solvers, the one for cones)
            cone = cone_program(cols)
            result = clarabel_lists(cone.c.tolist(), cone.A.lists(), cone.b.tolist(), 0,
                                    self.name, soc=cone.soc, zero=cone.zero)
            z = result.x[1:1 + cols.num_columns]
            return Solution(cols.to_rows(z), result.value, self.solver)
        program, z = finish_time_program(cols)
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
