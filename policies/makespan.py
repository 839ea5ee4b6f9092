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
and finishes the short jobs soonest (``_short_jobs_first``), so the same state always gives
them the same share, and they are not held back for nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ._lazy import cp, sp
from .base import ColumnPolicy, Solution, no_columns, run
from .columns import Columns
from .errors import Infeasible, PolicyError, ProblemError
from .fairness import base_constraints
from .problem import Allocation, Problem

log = logging.getLogger(__name__)

SECONDS_PER_HOUR = 3600.0
SEARCHES = ("exact", "bisection")
# The second program may lose this fraction of the optimal rate to the solver's tolerance.
OPTIMUM_SLACK = 1e-6
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
        "budget": "dollars the whole collection may cost (min_makespan_with_budget)",
        "search": "'exact' (the LP optimum) or 'bisection' (Gavel's search and ECOS point)"})

    @property
    def traits(self):
        """A simulation replays Gavel's bisection (``search="bisection"``) unless there is a
        budget; a budget reads the prices."""
        base, budgeted = super().traits, self.budget is not None
        return base.but(reads=base.reads | ({"prices"} if budgeted else set()),
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
        if self.search == "bisection":
            try:
                return self._gavel_point(problem, cols, rows,
                                         gavel_bisection_end(sigma / value))
            except PolicyError as err:  # T a hair above the optimum: numerically infeasible
                log.debug("%s: bisection end point failed (%s); using the optimum", self.name,
                          err)
        z_value = self._short_jobs_first(cols, rows, sigma, z, rate, constraints, value)
        return Solution(cols.to_rows(z_value), sigma / value, self.solver)

    def _short_jobs_first(self, cols: Columns, rows: np.ndarray, sigma: float,
                          z: cp.Variable, rate: cp.Variable, constraints: list,
                          optimum: float) -> np.ndarray:
        """Among the allocations that keep the optimal makespan, the one that maximises
        sum_m throughput(m, X) / steps_m: the sum of the rates at which the jobs finish
        (module docstring), so a short job gets all the time the makespan leaves it. The
        program of ``_solve`` again, its rate held at the optimum. The first solve's point
        when the solver cannot keep the optimum."""
        first = z.value
        # each finishing rate times sigma: about 1 for the longest job on its fastest type
        finish_rates = sp.diags(sigma / cols.remaining[rows]) @ cols.throughput[rows]
        kept = rate >= optimum * (1.0 - OPTIMUM_SLACK)
        try:
            run(cp.Problem(cp.Maximize(cp.sum(finish_rates @ z)), [*constraints, kept]),
                self.solver, self.name)
        except PolicyError as err:
            log.debug("%s: the short-jobs-first solve failed (%s); keeping the first point",
                      self.name, err)
            return first
        return z.value

    def _gavel_point(self, problem: Problem, cols: Columns, rows: np.ndarray,
                     makespan_s: float) -> Solution:
        """ECOS's answer to Gavel's feasibility program at ``makespan_s`` (module docstring).

        Gavel's program has a variable for every (job, type), also where the job cannot run
        (no throughput there, or a type smaller than the job). ECOS's interior point gives
        those some time too, which the other jobs then lack, so they get *phantom* columns
        here (with whatever throughput the job lists there) that take part in the program
        and are dropped from the allocation: the mechanism could not use them anyway."""
        phantom = _phantom_columns(problem, cols)
        z = cp.Variable(cols.num_columns, nonneg=True)
        w = cp.Variable(phantom.count, nonneg=True)
        feasible = cp.Problem(cp.Maximize(0), [
            cols.throughput[rows] @ z + phantom.throughput[rows] @ w
            >= cols.remaining[rows] / makespan_s,
            cols.member @ z + phantom.member @ w <= 1,
            cols.usage @ z + phantom.usage @ w <= cols.workers])
        run(feasible, BISECTION_SOLVER, self.name)
        z = cols.repaired(z.value)
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


@dataclass(frozen=True)
class _Phantoms:
    """Columns for the (job, type) entries the column model leaves out (``_gavel_point``)."""

    count: int
    member: sp.csr_matrix      # (jobs, count)
    usage: sp.csr_matrix       # (types, count)
    throughput: sp.csr_matrix  # (jobs, count)


def _phantom_columns(problem: Problem, cols: Columns) -> _Phantoms:
    present = set(zip(cols.member.tocoo().row.tolist(), cols.col_type.tolist()))
    entries = [(i, j) for i in range(cols.num_jobs) for j in range(len(cols.types))
               if (i, j) not in present]
    count = len(entries)
    job_rows = [i for i, _ in entries]
    type_rows = [j for _, j in entries]
    listed = [problem.jobs[i].throughputs.get(cols.types[j], 0.0) for i, j in entries]
    ones = np.ones(count)
    return _Phantoms(
        count=count,
        member=sp.csr_matrix((ones, (job_rows, range(count))), shape=(cols.num_jobs, count)),
        usage=sp.csr_matrix((cols.scale_factor[job_rows], (type_rows, range(count))),
                            shape=(len(cols.types), count)),
        throughput=sp.csr_matrix((listed, (job_rows, range(count))),
                                 shape=(cols.num_jobs, count)))
