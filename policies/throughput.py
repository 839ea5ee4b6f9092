"""Throughput and cost policies: thesis chapter 6, §6.4.1-§6.4.3 (and Table 5.1's cost rows).

- ``max_sum_throughput_perf``: maximise Σ_m throughput(m, X), in steps/s (§6.4.1, Gavel's
  ``ThroughputSumWithPerf``).
- ``max_sum_throughput_normalized_by_cost_perf``: maximise Σ_m Σ_j T_mj X_mj / c_j, each
  column's throughput per dollar-hour (§6.4.2 as Gavel's ``ThroughputNormalizedByCostSum``
  computes it). The thesis writes Σ_m throughput(m, X) / cost(m, X); for a job on one type
  the two agree, but the literal sum of ratios does not change when a job's X is scaled
  (1% of a V100 scores as much as all of it) and is not a linear program, so gavelsched,
  like Gavel, uses the column form.
- ``..._SLOs``: the same, subject to throughput(m, X) >= s_m / (SLO_m - t_m) (§6.4.3) with
  s_m the steps left and t_m the time since arrival, i.e. num_iterations_m / SLO_m at
  arrival and the same deadline at every later re-solve.

``normalize="fastest"`` (a departure, off by default) divides each job's throughput by its
throughput alone on its fastest type before summing, so that every job counts in the same
unit (its fraction of its best rate). Steps/s of different models are steps of different
sizes: with ``"none"`` a job whose steps are small (many steps/s) outweighs one whose steps
are large, and the sum favours it. A user who mixes job types of very different step sizes
and wants each job to count alike picks ``"fastest"``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import admission
from ._lazy import cp, sp
from .base import BACKEND_OPTION, BACKENDS, SOLVER_OPTION, Policy, Solution, no_columns, run
from .columns import Columns, build_columns
from .errors import Infeasible, PolicyError, ProblemError, named
from .fairness import base_constraints
from .lp import clarabel_lists, maximised
from .problem import Allocation, Problem
from .sparse import Compressed, coo_arrays, from_blocks, row_entries
from .traits import Traits

log = logging.getLogger(__name__)


def normalized_throughput(cols: Columns):
    """Sparse (jobs x columns): throughput over the job's fastest throughput."""
    return sp.diags(cols.fastest_scale) @ cols.throughput


@dataclass(frozen=True)
class SloNeeds:
    """What the SLOs ask: rows of jobs with an SLO some allocation meets and the steps/s
    each needs; ``lost``: the jobs whose SLO is past; ``beyond``: those whose SLO needs more
    than they make alone on their fastest type (throughput(m, X^fastest)), or that cannot
    run, which no allocation meets either."""

    rows: np.ndarray
    need: np.ndarray
    lost: tuple[str, ...]
    beyond: tuple[str, ...]


def slo_needs(problem: Problem, cols: Columns) -> SloNeeds:
    """throughput(m, X) >= s_m / (SLO_m - t_m) for every job with an SLO (§6.4.3), sorted
    into what ``SloNeeds`` holds (a need beyond any float is lost). An SLO beyond reach is
    kept apart: planned for, its need (up to 10^8 times what a job made, in random
    problems) had the elastic LP fail, and with it every job's allocation."""
    slo = np.array([np.nan if job.slo_s is None else job.slo_s for job in problem.jobs])
    rows = np.nonzero(~np.isnan(slo) & (cols.remaining > 0))[0]
    time_left = slo[rows] - cols.elapsed[rows]
    with np.errstate(over="ignore", divide="ignore"):  # (a few yoctoseconds left: lost)
        need = cols.remaining[rows] / time_left
    live = (time_left > 0) & np.isfinite(need)
    beyond = live & ((need > cols.fastest_throughput[rows]) | ~cols.runnable[rows])
    kept = live & ~beyond
    return SloNeeds(rows[kept], need[kept], tuple(cols.job_ids[i] for i in rows[~live]),
                    tuple(cols.job_ids[i] for i in rows[beyond]))


def sum_data(cols: Columns, weights: np.ndarray, slo_rows: np.ndarray | None = None,
             need: np.ndarray | None = None) -> tuple[np.ndarray, Compressed, np.ndarray]:
    """``maximise weights @ z`` s.t. (5.1)-(5.3) and, for the jobs of ``slo_rows``,
    throughput >= ``need``, as cvxpy hands it to Clarabel: minimise ``c @ z`` s.t.
    ``A @ z <= b`` (rows: -z <= 0, (5.2), (5.3), -throughput <= -need). The same data to the
    entry (tests/policies/test_max_sum.py), so the same answer to the bit."""
    c, m, n = cols.num_columns, cols.num_jobs, len(cols.types)
    m_row, m_col, member = coo_arrays(cols.member_arrays)
    u_row, u_col, usage = coo_arrays(cols.usage_arrays)
    blocks = [(np.arange(c), np.arange(c), -np.ones(c)), (c + m_row, m_col, member),
              (c + m + u_row, u_col, usage)]
    b = [np.zeros(c), np.ones(m), cols.workers.astype(float)]
    at = c + m + n
    if slo_rows is not None:
        job, col, t = row_entries(cols.throughput_arrays, slo_rows)
        blocks.append((at + job, col, -t))
        b.append(-need)
        at += slo_rows.size
    return maximised(weights), from_blocks(blocks, (at, c)), np.concatenate(b)


def solve_sum(cols: Columns, weights: np.ndarray, what: str,
              slo_rows: np.ndarray | None = None, need: np.ndarray | None = None) -> Solution:
    """``sum_data``'s LP solved by Clarabel; its objective as cvxpy reports it, at z >= 0
    (cvxpy projects a nonnegative variable's values)."""
    c, A, b = sum_data(cols, weights, slo_rows, need)
    z = clarabel_lists(c.tolist(), A.lists(), b.tolist(), 0, what).x
    return Solution(cols.to_rows(z), float(weights @ np.maximum(z, 0.0)), "CLARABEL")


def shortfall_data(cols: Columns, needs: SloNeeds, weights: np.ndarray | None = None,
                   total: float = 0.0) -> tuple[np.ndarray, Compressed, np.ndarray]:
    """Best effort's two LPs (§6.4.3's SLOs when they cannot all be met), as cvxpy hands
    them to Clarabel: variables z (the columns) and ``short >= 0``, each SLO's shortfall
    in steps/s; rows ``-x <= 0`` for every variable, the SLOs' ``-T z - short <= -need``,
    then (5.2) and (5.3).

    - ``weights`` None, the elastic LP: minimise the total relative shortfall
      ``Σ short / need``; cvxpy orders the variables ``[short; z]`` (the objective's first);
    - else: maximise ``weights @ z`` with that total at most ``total``, a last row; the
      variables ``[z; short]``.

    The same data to the entry as ``MaxSumThroughput._shortfall_lp``'s cvxpy programs
    (tests/policies/test_max_sum.py), so the same answer to the bit."""
    c, m, n, k = cols.num_columns, cols.num_jobs, len(cols.types), needs.rows.size
    at_z, at_s = (k, 0) if weights is None else (0, c)
    v = c + k
    m_row, m_col, member = coo_arrays(cols.member_arrays)
    u_row, u_col, usage = coo_arrays(cols.usage_arrays)
    job, col, t = row_entries(cols.throughput_arrays, needs.rows)
    short = np.arange(k)
    blocks = [(np.arange(v), np.arange(v), -np.ones(v)),
              (v + job, at_z + col, -t), (v + short, at_s + short, -np.ones(k)),
              (v + k + m_row, at_z + m_col, member), (v + k + m + u_row, at_z + u_col, usage)]
    b = [np.zeros(v), -needs.need, np.ones(m), cols.workers.astype(float)]
    rows = v + k + m + n
    relative = 1.0 / needs.need
    if weights is None:
        costs = np.concatenate([relative, np.zeros(c)])
    else:
        costs = np.concatenate([maximised(weights), np.zeros(k)])
        blocks.append((np.full(k, rows), at_s + short, relative))
        b.append([total])
        rows += 1
    return costs, from_blocks(blocks, (rows, v)), np.concatenate(b)


# What Gavel's mode logs as it solves without SLOs that cannot all be met (its LP infeasible).
GAVEL_DROPS_SLOS = "%s: SLOs cannot all be met; solving without them (Gavel)"


def within_least(least: float) -> float:
    """The total relative shortfall best effort's second LP allows: the elastic LP's least,
    with room for the solvers' tolerances (it has an interior)."""
    return least * (1 + 1e-6) + 1e-9


class MaxSumThroughput(Policy):
    """``max_sum_throughput_perf`` and the cost policies (``cost=True``, ``slos=True``).

    ``normalize``: ``"none"`` (thesis §6.4.1 and Gavel: steps/s) or ``"fastest"`` (each job
    over its fastest throughput; see the module docstring). ``cost_unit``: a column of a
    job of scale factor k on type j costs k c_j per hour (``"job"``, what the job pays) or
    c_j (``"worker"``, Gavel's objective, which is the same for single-GPU jobs).
    ``slo_mode="strict"`` (the default) admits as a deadline scheduler does: when the SLOs
    cannot all be met it raises ``Infeasible`` refusing the new jobs whose SLO does not fit
    (``_reachable``, ``admission``);
    ``"best_effort"`` (what a running scheduler wants) drops the SLOs that are already
    lost, meets the others as closely as possible (least total relative shortfall) and only
    then minimises cost; ``"gavel"`` drops every SLO when they cannot all be met, as
    Gavel's policy does.
    """

    NORMALIZE = ("none", "fastest")
    COST_UNITS = ("job", "worker")
    SLO_MODES = ("strict", "best_effort", "gavel")
    TRAITS = Traits(options={
        "solver": SOLVER_OPTION,
        "backend": BACKEND_OPTION,
        "normalize": "'none' (steps/s, thesis §6.4.1) or 'fastest' (each job over its "
                     "fastest throughput)",
        "slo_mode": "SLO policies, when SLOs cannot all be met: 'strict' (refuse the "
                    "new jobs that do not fit, as admission control), 'best_effort' (least "
                    "shortfall) or 'gavel' (drop them all)",
        "cost_unit": "cost policies: 'job' (a column costs its type's price x the workers "
                     "it holds) or 'worker' (one worker's price, as Gavel)"})

    @property
    def traits(self) -> Traits:
        """Cost policies never backfill: an idle V100 given to a job the policy put on a K80
        would undo the saving they exist for (chapter 6). A simulation keeps going when an
        SLO is lost (``slo_mode="best_effort"``)."""
        reads = ({"prices"} if self.cost else set()) | (
            {"slo_s", "remaining_steps", "elapsed_s"} if self.slos else set()) | (
            {"previous"} if self.slos and self.slo_mode == "strict" else set())
        return self.TRAITS.but(backfill=not self.cost, rearrangeable=not self.cost,
                               refuses_slos_beyond_reach=self.slos and self.slo_mode == "strict",
                               reads=reads, simulation_defaults=(
            {"slo_mode": "best_effort"} if self.slos else {}))

    def __init__(self, name=None, *, cost: bool = False, slos: bool = False,
                 slo_mode: str = "strict", normalize: str = "none", cost_unit: str = "job",
                 backend: str = "direct", **kwargs) -> None:
        super().__init__(name, **kwargs)
        if backend not in BACKENDS:
            raise ProblemError(f"{self.name}: backend must be one of {', '.join(BACKENDS)}, "
                               f"not {backend!r}")
        if slo_mode not in self.SLO_MODES:
            raise ProblemError(f"{self.name}: slo_mode must be one of "
                               f"{', '.join(self.SLO_MODES)}, got {slo_mode!r}")
        if normalize not in self.NORMALIZE:
            raise ProblemError(f"{self.name}: normalize must be one of "
                               f"{', '.join(self.NORMALIZE)}, got {normalize!r}")
        if cost_unit not in self.COST_UNITS:
            raise ProblemError(f"{self.name}: cost_unit must be one of "
                               f"{', '.join(self.COST_UNITS)}, got {cost_unit!r}")
        self.cost, self.slos, self.slo_mode = cost, slos, slo_mode
        self.normalize, self.cost_unit, self.backend = normalize, cost_unit, backend
        self._warned: dict[str, frozenset[str]] = {}   # (``_news``)

    def _weights(self, problem: Problem, cols: Columns) -> np.ndarray:
        """Objective coefficient of every column."""
        per_job = normalized_throughput(cols) if self.normalize == "fastest" else cols.throughput
        gain = np.asarray(per_job.sum(axis=0)).ravel()
        if not self.cost:
            return gain
        unpriced = [t for t in cols.types if problem.prices.get(t, 0.0) <= 0]
        if unpriced:
            raise ProblemError(f"prices.{unpriced[0]}: {self.name} needs a price > 0 for every "
                               "worker type")
        if self.cost_unit == "worker":
            return gain / cols.prices[cols.col_type]
        return gain / cols.price

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        needs = self._reachable(slo_needs(problem, cols), problem, cols) if self.slos else None
        if cols.num_columns == 0:
            return no_columns(cols)
        weights = self._weights(problem, cols)
        slo = needs if needs is not None and needs.rows.size else None
        try:
            if slo is None:
                return self._weighted_sum(cols, weights)
            return self._weighted_sum(cols, weights, slo.rows, slo.need)
        except Infeasible:
            if slo is None:
                raise
        if self.slo_mode == "gavel":
            log.warning(GAVEL_DROPS_SLOS, self.name)
            return self._weighted_sum(cols, weights)
        if self.slo_mode == "strict" and (new := admission.new_rows(cols, slo.rows, problem)).size:
            refused = self._refused(problem, cols, slo, new)
            raise Infeasible(f"{self.name}: SLOs cannot all be met together; refusing the "
                             f"new jobs whose SLO does not fit, in order of arrival: "
                             f"{named(refused)}", refused, refuse=refused)
        least, conflicting, closest = self._least_shortfall(cols, slo)
        self._news("conflicting", "%s: SLOs cannot all be met; best effort for %s",
                   conflicting, problem)
        try:
            z = self._shortfall_lp(cols, slo, weights, within_least(least))[1]
        except PolicyError as err:
            # A least shortfall of about 0 leaves the LP next to no interior, where the
            # solver can stall or, by its tolerance, find none: the elastic LP's point
            # itself meets the SLOs as closely, at no minimal cost.
            log.warning("%s; taking the allocation closest to the SLOs, whatever it costs",
                        err)
            z = closest
        return Solution(cols.to_rows(z), float(weights @ np.maximum(z, 0.0)), self.solver)

    def _refused(self, problem: Problem, cols: Columns, slo: SloNeeds,
                 new: np.ndarray) -> tuple[str, ...]:
        """Of the ``new`` SLO rows (oldest first), those whose SLO cannot be met with the
        ones planned before and the new ones admitted before it (``admission.refused``):
        the jobs strict mode refuses. A probe asks only whether the SLO floors hold, so its
        LP holds the SLO jobs alone (the others may get nothing): at 20,000 jobs a probe
        over every job's columns took seconds."""
        by_id = {job.id: job for job in problem.jobs}
        fresh = [cols.job_ids[i] for i in new.tolist()]
        planned = set(slo.rows.tolist()) - set(new.tolist())
        old = [cols.job_ids[i] for i in sorted(planned)]

        def feasible(some: Sequence[int]) -> bool:
            sub = problem.with_jobs([by_id[job_id] for job_id in old] +
                                    [by_id[fresh[k]] for k in some])
            sub_cols = build_columns(sub)
            needs = slo_needs(sub, sub_cols)
            try:
                self._weighted_sum(sub_cols, np.zeros(sub_cols.num_columns), needs.rows,
                                   needs.need)
            except Infeasible:
                return False
            return True
        return tuple(fresh[k] for k in admission.refused(len(fresh), feasible))

    def _reachable(self, needs: SloNeeds, problem: Problem, cols: Columns) -> SloNeeds | None:
        """The SLOs to plan for. Strict mode admits as a deadline scheduler does
        (``admission``): it refuses the new jobs (those the last allocation did not plan)
        whose SLO is beyond reach; a job planned before whose SLO has passed or fallen out
        of reach runs on without it, as in best effort, which drops both with a warning (a
        scheduler that keeps its last allocation on a refusal gave every job after it no
        time). Gavel's mode solves without SLOs when one is beyond reach (Gavel's LP is then
        infeasible, and it drops them all) and ignores late ones (Gavel's rows for them ask
        a negative rate)."""
        lost = needs.lost + needs.beyond
        if not lost:
            return needs
        if self.slo_mode == "strict" and needs.beyond:
            beyond = admission.new_rows(
                cols, np.flatnonzero(np.isin(cols.job_ids, needs.beyond)), problem)
            if beyond.size:
                ids = tuple(cols.job_ids[i] for i in sorted(beyond.tolist()))
                raise Infeasible(f"{self.name}: SLOs beyond reach (each asks more than its "
                                 f"job makes alone on its fastest type, or the job cannot "
                                 f"run): {named(ids)}", ids, refuse=ids)
        if self.slo_mode == "gavel" and needs.beyond:
            log.warning(GAVEL_DROPS_SLOS, self.name)
            return None
        self._news("lost", "%s: dropping SLOs already lost: %s", lost, problem)
        return needs

    def _weighted_sum(self, cols: Columns, weights: np.ndarray,
                      slo_rows: np.ndarray | None = None,
                      need: np.ndarray | None = None) -> Solution:
        """maximise ``weights @ z`` s.t. (5.1)-(5.3) and, for the jobs of ``slo_rows``,
        throughput >= ``need``: straight to Clarabel (``solve_sum``), or the cvxpy program
        (``backend="cvxpy"``, another solver)."""
        if self.backend == "direct" and self.solver == "CLARABEL":
            return solve_sum(cols, weights, self.name, slo_rows, need)
        z = cp.Variable(cols.num_columns, nonneg=True)
        constraints = base_constraints(cols, z)
        if slo_rows is not None:
            constraints.append(cols.throughput[slo_rows] @ z >= need)
        value = run(cp.Problem(cp.Maximize(weights @ z), constraints), self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def _news(self, kind: str, message: str, job_ids: tuple[str, ...],
              problem: Problem) -> None:
        """Log ``message`` (the policy's name, then job ids) at warning level for the jobs
        of ``job_ids`` it has not named yet, and for all of them at debug level: a
        simulation re-solves hundreds of times, each naming most jobs again. (It remembers
        the jobs of ``problem`` only.)"""
        before = self._warned.get(kind, frozenset())
        self._warned[kind] = (before | set(job_ids)) & {job.id for job in problem.jobs}
        log.debug(message, self.name, ", ".join(job_ids))
        new = [job_id for job_id in job_ids if job_id not in before]
        if new:
            others = len(job_ids) - len(new)
            log.warning(message, self.name, named(new)
                        + (f" (and {others:,} named before)" if others else ""))

    def _least_shortfall(self, cols: Columns,
                         needs: SloNeeds) -> tuple[float, tuple, np.ndarray]:
        """The elastic LP: the least total relative shortfall of the SLO throughputs, the
        conflicting jobs (SLO constraints with a positive dual compete for the
        bottleneck), and its allocation (z)."""
        short, z, dual = self._shortfall_lp(cols, needs)
        least = float(np.sum(short / needs.need))
        conflicting = tuple(cols.job_ids[i] for i, d in zip(needs.rows, dual * needs.need)
                            if d > 1e-6)
        return least, conflicting, z

    def _shortfall_lp(self, cols: Columns, needs: SloNeeds, weights: np.ndarray | None = None,
                      total: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``shortfall_data``'s LP (the least shortfall; with ``weights``, the best sum within
        ``total`` of it): each SLO's shortfall and the allocation z, both >= 0 (as cvxpy
        projects them), and the SLO rows' duals. Lexicographic, so best effort is cheap:
        pinning each SLO at the elastic point's own shortfall left the second LP next to
        no interior (10 s at 20,000 jobs on 2,048 GPUs against 4.5 s; BENCHMARKS.md).
        Straight to Clarabel, or the cvxpy program (``backend="cvxpy"``, another solver)."""
        what = f"{self.name} ({'least SLO shortfall' if weights is None else 'best effort'})"
        k = needs.rows.size
        if self.backend == "direct" and self.solver == "CLARABEL":
            costs, A, b = shortfall_data(cols, needs, weights, total)
            out = clarabel_lists(costs.tolist(), A.lists(), b.tolist(), A.shape[1] + k, what)
            x = np.maximum(out.x, 0.0)
            short, z = (x[:k], x[k:]) if weights is None else (x[-k:], x[:-k])
            return short, z, out.dual[A.shape[1]:]
        z = cp.Variable(cols.num_columns, nonneg=True)
        short = cp.Variable(k, nonneg=True)
        meet = cols.throughput[needs.rows] @ z + short >= needs.need
        relative = cp.sum(cp.multiply(short, 1.0 / needs.need))
        if weights is None:
            program = cp.Problem(cp.Minimize(relative), [meet, *base_constraints(cols, z)])
        else:
            program = cp.Problem(cp.Maximize(weights @ z),
                                 [meet, *base_constraints(cols, z), relative <= total])
        run(program, self.solver, what)
        return short.value, z.value, meet.dual_value

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = build_columns(problem)
        if cols.num_columns == 0:
            return None
        return float(self._weights(problem, cols) @ cols.z_from(allocation))
