"""Makespan policies: thesis §5.4.2 (Minimize Makespan) and §6.4.3 (makespan under a budget).

min_X max_m s_m / throughput(m, X) is an LP after substituting λ = 1 / makespan:
maximise λ subject to throughput(m, X) >= λ s_m. The cost budget of §6.4.3,
makespan * cost rate <= B, becomes cost rate <= B λ, also linear, so the binary search the
thesis suggests is not needed.

``search="bisection"`` reproduces Gavel's ``MinTotalDurationPolicyWithPerf`` instead, for
replication studies (the simulator's default): Gavel bisects the makespan T over
[100 s, 10^6 s] (widening tenfold while nothing is feasible) until the bounds are within 5%,
and takes the allocation ECOS returns for "throughput(m, X) >= s_m / T" at the last
feasible T. That is an interior point of the feasible set, which spreads the slack over all
jobs: the makespan is up to 5% above the optimum and the average JCT a few percent higher
than the exact LP's. Here the bisection's end point is computed from the exact optimum
(T is feasible exactly when T >= T*), so only two programs are solved.

The exact search solves twice too. The optimum is a face, not a point: any allocation that
finishes the longest job by T* is optimal, whatever it gives the shorter ones, and where the
solver lands on that face moves with every step a job makes. The second program keeps T*
and finishes the short jobs soonest (``short_jobs_first``), so the same state always gives
them the same share, and they are not held back for nothing.

Each program goes straight to its solver (Clarabel's LPs: ``rate_data``; ECOS's program:
``gavel_data``) as the very data cvxpy's canonicalisation makes of the cvxpy programs here,
entry for entry, so with the same answers to the bit (tests/policies/test_makespan_direct.py)
and without cvxpy's cost, which was most of a solve's. ``backend="cvxpy"``, and solvers other
than Clarabel for the exact LPs, solve the cvxpy programs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from . import admission
from ._lazy import cp, sp
from .base import BACKEND_OPTION, ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .errors import Infeasible, PolicyError, ProblemError, named
from .fairness import base_constraints
from .lp import LPResult, clarabel_lists, ecos_lp, maximised
from .problem import Allocation, Problem
from .sparse import Compressed, as_scipy, compressed_arrays, coo_arrays, from_blocks, row_entries

log = logging.getLogger(__name__)

SECONDS_PER_HOUR = 3600.0
SEARCHES = ("exact", "bisection")
# The second program may lose this fraction of the optimal rate to the solver's tolerance.
OPTIMUM_SLACK = 1e-6
# Under a budget, a rate (the longest job's best-case time over the makespan) this small is
# the solver's tolerance, not a plan: the budget's row scales with the allocation, so it
# admits every rate up to the cluster's or none but 0. A budget a hair short of the work's
# cost gave 2.5e-9: a makespan of 6,000 years and an allocation of zeros, which every job
# waited on.
BUDGET_RATE_FLOOR = 1e-7
BISECTION_SOLVER = "ECOS"  # Gavel's; another solver returns another feasible point


def gavel_bisection_end(optimum_s: float) -> float:
    """The makespan Gavel's bisection settles on when the optimum is ``optimum_s``: its
    loop over [100, 10^6] s (then [10^6, 10^7], ...) until max <= 1.05 min, keeping the last
    feasible midpoint."""
    low, high, widen_from, found = 100.0, 1e6, 1e6, None
    while found is None:
        while 1.05 * low < high:
            mid = (low + high) / 2.0
            if mid >= optimum_s:
                found = high = mid
            else:
                low = mid
        low, high, widen_from = widen_from, widen_from * 10.0, widen_from * 10.0
    return found


def _pending(cols: Columns) -> np.ndarray:
    """Rows of the jobs that still have steps to run and can run somewhere."""
    return np.nonzero(cols.runnable & (cols.remaining > 0))[0]


class MinTotalDuration(ColumnPolicy):
    """``min_total_duration[_perf|_packed]`` and, with ``budget``, ``min_makespan_with_budget``.

    The objective reported is the makespan in seconds.
    """

    TRAITS = ColumnPolicy.TRAITS.but(reads={"remaining_steps"}, rearrangeable=True, options={
        "backend": BACKEND_OPTION,
        "budget": "dollars the whole collection may cost (min_makespan_with_budget)",
        "search": "'exact' (the LP optimum) or 'bisection' (Gavel's search and ECOS point)"})

    @property
    def traits(self):
        """A simulation replays Gavel's bisection (``search="bisection"``) unless there is a
        budget; a budget reads the prices, and the last allocation (which jobs are new:
        those the budget cannot finish with the others are refused, ``admission``)."""
        base, budgeted = super().traits, self.budget is not None
        return base.but(reads=base.reads | ({"prices", "previous"} if budgeted else set()),
                        rearrangeable=base.rearrangeable and not budgeted,
                        simulation_defaults={} if budgeted else {"search": "bisection"})

    def __init__(self, name=None, *, budget: float | None = None, require_budget: bool = False,
                 search: str = "exact", **kwargs) -> None:
        super().__init__(name, **kwargs)
        if require_budget and budget is None:
            raise ProblemError(f"{self.name}: needs the option budget=DOLLARS")
        if budget is not None and budget <= 0:
            raise ProblemError(f"{self.name}: budget must be > 0 dollars, got {budget!r}")
        if search not in SEARCHES:
            raise ProblemError(f"{self.name}: search must be one of {', '.join(SEARCHES)}, "
                               f"not {search!r}")
        if search == "bisection" and budget is not None:
            raise ProblemError(f"{self.name}: search=bisection (Gavel's) has no budget")
        self.budget, self.search = budget, search

    def _over_budget(self, problem: Problem, cols: Columns, rows: np.ndarray) -> Infeasible:
        """No allocation finishes the jobs within the budget: the new jobs (those the last
        allocation did not plan) the budget cannot finish with the others are refused, in
        order of arrival (``admission.refused``), so that a live scheduler plans the
        others; with none new, the refusal names no job (the allocation in force stays)."""
        new = admission.new_rows(cols, rows, problem)
        if not new.size:
            return Infeasible(f"{self.name}: no allocation finishes the jobs within budget")
        fresh = set(new.tolist())
        old = [i for i in rows.tolist() if i not in fresh]

        def feasible(some) -> bool:
            jobs = np.array(sorted(old + [int(new[k]) for k in some]), dtype=int)
            return self._rates(cols, jobs).optimum()[1] > BUDGET_RATE_FLOOR
        out = tuple(cols.job_ids[new[k]] for k in admission.refused(new.size, feasible))
        return Infeasible(f"{self.name}: no allocation finishes the jobs within budget; "
                          f"refusing the new jobs that do not fit, in order of arrival: "
                          f"{named(out)}", out, refuse=out)

    def _rates(self, cols: Columns, rows: np.ndarray):
        """The rate LPs over the jobs of ``rows`` (module docstring)."""
        # rate = σ/makespan with σ the longest job's best-case time: a number near 1, so
        # the solver's tolerances are relative to the answer, whatever the jobs' lengths.
        sigma = float(np.max(cols.remaining[rows] / cols.fastest_throughput[rows]))
        backend = _DirectRate if self.direct_solver() == "CLARABEL" else _CvxpyRate
        return backend(cols, rows, sigma, self.budget, self.solver, self.name)

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        rows = _pending(cols)
        if cols.num_columns == 0 or rows.size == 0:
            return no_columns(cols)
        lps = self._rates(cols, rows)
        sigma = lps.sigma
        z, value = lps.optimum()
        if value <= (0.0 if self.budget is None else BUDGET_RATE_FLOOR):
            raise self._over_budget(problem, cols, rows)
        if self.search == "bisection":
            try:
                return self._gavel_point(problem, cols, rows,
                                         gavel_bisection_end(sigma / value))
            except PolicyError as err:  # T a hair above the optimum: numerically infeasible
                log.debug("%s: bisection end point failed (%s); using the optimum", self.name,
                          err)
        # Among the allocations that keep the optimal makespan, the one that maximises
        # sum_m throughput(m, X) / steps_m: the sum of the rates at which the jobs finish
        # (module docstring), so a short job gets all the time the makespan leaves it. The
        # first solve's point when the solver cannot keep the optimum.
        try:
            z = lps.short_jobs_first(value * (1.0 - OPTIMUM_SLACK))
        except PolicyError as err:
            log.debug("%s: the short-jobs-first solve failed (%s); keeping the first point",
                      self.name, err)
        return Solution(cols.to_rows(z), sigma / value, self.solver)

    def _gavel_point(self, problem: Problem, cols: Columns, rows: np.ndarray,
                     makespan_s: float) -> Solution:
        """ECOS's answer to Gavel's feasibility program at ``makespan_s`` (module docstring).

        Gavel's program has a variable for every (job, type), also where the job cannot run
        (no throughput there, or a type smaller than the job). ECOS's interior point gives
        those some time too, which the other jobs then lack, so they get *phantom* columns
        here (with whatever throughput the job lists there) that take part in the program
        and are dropped from the allocation: the mechanism could not use them anyway.
        Straight to ECOS as cvxpy would hand it (``gavel_data``) unless ``backend="cvxpy"``."""
        phantom = _phantom_columns(problem, cols)
        if self.backend == "cvxpy":
            z = cp.Variable(cols.num_columns, nonneg=True)
            w = cp.Variable(phantom.count, nonneg=True)
            member, usage, throughput = map(as_scipy, (phantom.member, phantom.usage,
                                                       phantom.throughput))
            feasible = cp.Problem(cp.Maximize(0), [
                cols.throughput[rows] @ z + throughput[rows] @ w
                >= cols.remaining[rows] / makespan_s,
                cols.member @ z + member @ w <= 1,
                cols.usage @ z + usage @ w <= cols.workers])
            run(feasible, BISECTION_SOLVER, self.name)
            point = z.value
        else:
            point = ecos_lp(*gavel_data(cols, rows, phantom, makespan_s), self.name).x
        z = cols.repaired(point[:cols.num_columns])
        with np.errstate(divide="ignore"):
            achieved = np.max(cols.remaining[rows] / cols.effective_throughput(z)[rows])
        return Solution(cols.to_rows(z), float(achieved), BISECTION_SOLVER)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        rows = _pending(cols)
        if rows.size == 0:
            return None
        throughput = cols.effective_throughput(cols.z_from(allocation))[rows]
        with np.errstate(divide="ignore"):
            return float(np.max(cols.remaining[rows] / throughput))


class _CvxpyRate:
    """The rate LP of ``MinTotalDuration._solve`` and its short-jobs-first LP as cvxpy
    programs (the readable reference: ``backend="cvxpy"``, and solvers other than
    Clarabel)."""

    def __init__(self, cols: Columns, rows: np.ndarray, sigma: float, budget: float | None,
                 solver: str, what: str) -> None:
        self.cols, self.rows, self.sigma, self.solver, self.what = cols, rows, sigma, solver, what
        self.z = cp.Variable(cols.num_columns, nonneg=True)
        self.rate = cp.Variable(nonneg=True)
        self.constraints = [
            cols.throughput[rows] @ self.z >= cp.multiply(cols.remaining[rows] / sigma,
                                                          self.rate),
            *base_constraints(cols, self.z)]
        if budget is not None:
            self.constraints.append(
                cols.price @ self.z / SECONDS_PER_HOUR <= budget / sigma * self.rate)

    def optimum(self) -> tuple[np.ndarray, float]:
        """(z, the optimal rate): maximise the rate."""
        value = run(cp.Problem(cp.Maximize(self.rate), self.constraints), self.solver,
                    self.what)
        return self.z.value, value

    def short_jobs_first(self, kept_rate: float) -> np.ndarray:
        """z maximising the jobs' finishing rates with the rate at least ``kept_rate``."""
        cols, rows = self.cols, self.rows
        # each finishing rate times sigma: about 1 for the longest job on its fastest type
        finish_rates = sp.diags(self.sigma / cols.remaining[rows]) @ cols.throughput[rows]
        run(cp.Problem(cp.Maximize(cp.sum(finish_rates @ self.z)),
                       [*self.constraints, self.rate >= kept_rate]), self.solver, self.what)
        return self.z.value


class _DirectRate:
    """``_CvxpyRate``'s two LPs straight to Clarabel, as cvxpy would hand them
    (``rate_data``): the same answers to the bit, without cvxpy's cost."""

    def __init__(self, cols: Columns, rows: np.ndarray, sigma: float, budget: float | None,
                 solver: str, what: str) -> None:
        self.cols, self.rows, self.sigma, self.budget, self.what = cols, rows, sigma, budget, what

    def optimum(self) -> tuple[np.ndarray, float]:
        result = self._solve(None)
        return result.x[1:], -result.value

    def short_jobs_first(self, kept_rate: float) -> np.ndarray:
        return self._solve(kept_rate).x[:-1]

    def _solve(self, kept_rate: float | None) -> LPResult:
        c, A, b = rate_data(self.cols, self.rows, self.sigma, self.budget, kept_rate)
        return clarabel_lists(c.tolist(), A.lists(), b.tolist(), 0, self.what)


def rate_data(cols: Columns, rows: np.ndarray, sigma: float, budget: float | None,
              kept_rate: float | None = None) -> tuple[np.ndarray, Compressed, np.ndarray]:
    """The rate LP of ``MinTotalDuration._solve`` as cvxpy hands it to Clarabel: minimise
    ``c @ x`` over x = (rate, z) subject to ``A @ x <= b`` (rows: -x <= 0; each pending
    job's ``steps / sigma * rate - throughput <= 0``; (5.2); (5.3); the budget's
    ``price @ z / 3600 - budget / sigma * rate <= 0``). With ``kept_rate``, the
    short-jobs-first LP instead (``short_jobs_first``): x = (z, rate), its objective the
    jobs' finishing rates, and the row ``rate >= kept_rate`` last."""
    c, m, n, p = cols.num_columns, cols.num_jobs, len(cols.types), rows.size
    first = kept_rate is not None            # (z before rate: cvxpy's order of appearance)
    rate, z = (c, np.arange(c)) if first else (0, 1 + np.arange(c))
    job, col, t = row_entries(cols.throughput_arrays, rows)    # the pending jobs' rows
    m_row, m_col, member = coo_arrays(cols.member_arrays)
    u_row, u_col, usage = coo_arrays(cols.usage_arrays)
    blocks = [(np.arange(c + 1), np.arange(c + 1), -np.ones(c + 1)),
              (c + 1 + np.arange(p), np.full(p, rate), cols.remaining[rows] / sigma),
              (c + 1 + job, z[col], -t),
              (c + 1 + p + m_row, z[m_col], member),
              (c + 1 + p + m + u_row, z[u_col], usage)]
    b = [np.zeros(c + 1 + p), np.ones(m), cols.workers.astype(float)]
    at = c + 1 + p + m + n
    if budget is not None:
        priced = np.nonzero(cols.price)[0]
        blocks += [(np.full(priced.size, at), z[priced], cols.price[priced] / SECONDS_PER_HOUR),
                   (np.array([at]), np.array([rate]), np.array([-(budget / sigma)]))]
        b.append(np.zeros(1))
        at += 1
    objective = np.zeros(c + 1)
    if first:
        finishing = sigma / cols.remaining[rows][job] * t
        objective[:c] = np.bincount(col, weights=finishing, minlength=c)
        blocks.append((np.array([at]), np.array([rate]), np.array([-1.0])))
        b.append(np.array([-kept_rate]))
        at += 1
    else:
        objective[rate] = 1.0
    A = from_blocks(blocks, (at, c + 1))
    return maximised(objective), A, np.concatenate(b)


def gavel_data(cols: Columns, rows: np.ndarray, phantom: _Phantoms,
               makespan_s: float) -> tuple[np.ndarray, Compressed, np.ndarray]:
    """``_gavel_point``'s feasibility program as cvxpy hands it to ECOS: ``G @ x <= h`` over
    x = (z, w), w the phantom columns' time (rows: -x <= 0; each pending job's
    ``-throughput <= -steps / makespan``; (5.2); (5.3), phantoms included), objective 0."""
    c, m, p = cols.num_columns, cols.num_jobs, rows.size
    n, k = len(cols.types), phantom.count
    blocks = [(np.arange(c + k), np.arange(c + k), -np.ones(c + k))]
    for matrix, offset in ((cols.throughput_arrays, 0), (phantom.throughput, c)):
        job, col, t = row_entries(matrix, rows)               # the pending jobs' rows
        blocks.append((c + k + job, offset + col, -t))
    for matrix, offset in ((cols.member_arrays, 0), (phantom.member, c)):
        m_row, m_col, member = coo_arrays(matrix)
        blocks.append((c + k + p + m_row, offset + m_col, member))
    for matrix, offset in ((cols.usage_arrays, 0), (phantom.usage, c)):
        u_row, u_col, usage = coo_arrays(matrix)
        blocks.append((c + k + p + m + u_row, offset + u_col, usage))
    h = np.concatenate([np.zeros(c + k), -(cols.remaining[rows] / makespan_s), np.ones(m),
                        cols.workers.astype(float)])
    return np.zeros(c + k), from_blocks(blocks, (c + k + p + m + n, c + k)), h


@dataclass(frozen=True)
class _Phantoms:
    """Columns for the (job, type) entries the column model leaves out (``_gavel_point``),
    as CSR arrays (``policies.sparse.as_scipy`` makes the matrices)."""

    count: int
    member: Compressed      # (jobs, count)
    usage: Compressed       # (types, count)
    throughput: Compressed  # (jobs, count)


def _phantom_columns(problem: Problem, cols: Columns) -> _Phantoms:
    present = set(zip(coo_arrays(cols.member_arrays)[0].tolist(), cols.col_type.tolist()))
    entries = [(i, j) for i in range(cols.num_jobs) for j in range(len(cols.types))
               if (i, j) not in present]
    count = len(entries)
    job_rows = np.array([i for i, _ in entries], dtype=np.intp)
    type_rows = np.array([j for _, j in entries], dtype=np.intp)
    listed = [problem.jobs[i].throughputs.get(cols.types[j], 0.0) for i, j in entries]
    each = np.arange(count)
    return _Phantoms(
        count=count,
        member=compressed_arrays(job_rows, each, np.ones(count), (cols.num_jobs, count)),
        usage=compressed_arrays(type_rows, each, cols.scale_factor[job_rows],
                                (len(cols.types), count)),
        throughput=compressed_arrays(job_rows, each, np.array(listed, dtype=float),
                                     (cols.num_jobs, count)))
