"""Water filling: Pareto-efficient max-min fairness, and hierarchical (entity) policies.

Thesis §5.4.3. Every job's normalised effective throughput rises at a rate given by its
weight until it is *bottlenecked*, i.e. it cannot rise further without another job falling;
then it is frozen and its weight is redistributed inside its entity (fairness: among the
entity's other jobs in proportion to their weights; FIFO: to the next job in arrival
order). Entities share the cluster in proportion to their weights.

Each iteration solves one LP,  max t  s.t.  u(z) >= level + w * t,  with ``level`` and ``w``
cvxpy parameters so the program is compiled once. Bottlenecks come from that LP's duals
instead of Gavel's MILP: an interior-point solver returns a strictly complementary dual
(Goldman-Tucker), whose positive entries are exactly the constraints that are tight in
*every* optimal allocation, i.e. the jobs that cannot rise. A job improvable in some optimal
allocation always has a zero dual there, so a job is never frozen too early, and each
iteration freezes at least one job (the duals of the rising jobs sum to 1/Σw > 0).
"""

from __future__ import annotations

import logging

import cvxpy as cp
import numpy as np

from .base import ColumnPolicy, Solution, no_columns, run_precise
from .columns import Columns
from .errors import Infeasible, SolverFailed
from .fairness import base_constraints, fairness_utility
from .problem import Allocation, Problem

log = logging.getLogger(__name__)

# A dual at most this fraction of the largest dual is treated as zero (solver noise).
DUAL_ZERO = 1e-5
# When an LP fails for numerical reasons (floors right at the edge of feasibility), it is
# retried with every floor lowered by these relative amounts in turn.
BACKOFFS = (1e-6, 1e-5, 1e-4)
# The final polish may lower a level by at most this relative amount (solver tolerance).
POLISH_SLACK = 1e-8


def entity_groups(problem: Problem, row_ids) -> list[tuple[float, str, np.ndarray]]:
    """(entity weight, inner policy, row indices in arrival order) for every entity, where
    ``row_ids`` names the job of each row.

    Without entities the whole problem is one fairness entity. Jobs that name no entity form
    a default fairness entity of weight 1.
    """
    row_ids = list(row_ids)
    if not problem.entities:
        return [(1.0, "fairness", np.arange(len(row_ids)))]
    entity_of = {job.id: job.entity for job in problem.jobs}
    groups = []
    members: dict[str | None, list[int]] = {}
    for i, job_id in enumerate(row_ids):
        entity = entity_of[job_id]
        members.setdefault(entity if entity in problem.entities else None, []).append(i)
    for name, rows in members.items():
        entity = problem.entities.get(name) if name is not None else None
        weight, policy = (entity.weight, entity.policy) if entity else (1.0, "fairness")
        groups.append((weight, policy, np.array(rows)))
    return groups


def rising_weights(groups, job_weight: np.ndarray, frozen: np.ndarray) -> np.ndarray:
    """Rate at which each job's normalised throughput rises in the next iteration (§5.4.3)."""
    w = np.zeros(len(job_weight))
    for entity_weight, policy, rows in groups:
        live = rows[~frozen[rows]]
        if live.size == 0:
            continue
        if policy == "fifo":
            w[live[0]] = entity_weight
        else:
            w[live] = entity_weight * job_weight[live] / job_weight[live].sum()
    return w


class WaterFilling(ColumnPolicy):
    """``max_min_fairness_water_filling[_perf|_packed]``, hierarchical when the problem has
    entities. The objective reported is the lowest weighted normalised throughput."""

    TRAITS = ColumnPolicy.TRAITS.but(reads={"weight", "entities", "entity"}, options={
        "max_iterations": "stop after this many water-filling LPs (default: until all frozen)"})

    def __init__(self, name=None, *, max_iterations: int | None = None, **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.max_iterations = max_iterations

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=not problem.entities)
        if cols.num_columns == 0:
            return no_columns(cols)
        rows, U = fairness_utility(cols, weighted=False)  # weights set the rising rates
        groups = entity_groups(problem, [cols.job_ids[i] for i in rows])
        job_weight = cols.weight[rows]
        k = rows.size
        level = cp.Parameter(k)
        rate = cp.Parameter(k, nonneg=True)
        z = cp.Variable(cols.num_columns, nonneg=True)
        t = cp.Variable()
        rise = U @ z >= level + cp.multiply(rate, t)
        program = cp.Problem(cp.Maximize(t), [rise, *base_constraints(cols, z)])
        frozen = np.zeros(k, dtype=bool)
        floor = np.zeros(k)
        iterations = 0
        limit = self.max_iterations or 4 * k + 10
        while not frozen.all() and iterations < limit:
            w = rising_weights(groups, job_weight, frozen)
            if not (w > 0).any():
                break
            rate.value = w
            step = self._raise(program, level, floor)
            iterations += 1
            floor = np.minimum(floor + w * step, U @ z.value)
            stuck = self._bottlenecked(rise.dual_value, w)
            frozen |= stuck
            log.debug("%s: iteration %d raised by %.4g, froze %d jobs (%d left)", self.name,
                      iterations, step, stuck.sum(), (~frozen).sum())
        if not frozen.all():
            log.warning("%s: stopped after %d iterations with %d jobs not bottlenecked",
                        self.name, iterations, (~frozen).sum())
        final = self._polish(cols, U, z.value)
        return Solution(cols.to_rows(final), self._objective(U, final, job_weight), self.solver)

    def _polish(self, cols: Columns, U, z: np.ndarray) -> np.ndarray:
        """Hand out what the last LP left unused without lowering anyone: maximise the total
        normalised throughput subject to every job keeping its level. This only removes
        solver slack (the levels are already max-min), and makes Pareto efficiency hold to
        the solver's tolerance rather than to the accuracy of the bottleneck test."""
        keep = (U @ z) * (1 - POLISH_SLACK)
        polished = cp.Variable(cols.num_columns, nonneg=True)
        program = cp.Problem(cp.Maximize(cp.sum(U @ polished)),
                             [U @ polished >= keep, *base_constraints(cols, polished)])
        try:
            run_precise(program, self.solver, f"{self.name} (polish)")
        except (Infeasible, SolverFailed) as err:
            log.debug("%s: polish skipped (%s)", self.name, err)
            return z
        return polished.value

    def _raise(self, program: cp.Problem, level: cp.Parameter, floor: np.ndarray) -> float:
        """Solve one iteration's LP precisely (its duals decide who is frozen), backing the
        floors off a little if they sit exactly on the edge of feasibility."""
        for backoff in (0.0, *BACKOFFS):
            level.value = floor * (1 - backoff)
            try:
                return max(run_precise(program, self.solver, self.name), 0.0)
            except (Infeasible, SolverFailed) as err:
                if backoff == BACKOFFS[-1]:
                    raise
                log.debug("%s: %s; lowering the floors", self.name, err)
        raise AssertionError("unreachable")

    @staticmethod
    def _bottlenecked(dual: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Rising jobs whose constraint carries a positive dual: they cannot rise further."""
        dual = np.where(w > 0, np.maximum(dual, 0.0), 0.0)
        top = dual.max()
        stuck = dual > DUAL_ZERO * top
        if not stuck.any():  # cannot happen in exact arithmetic; keep progress guaranteed
            stuck[np.argmax(dual)] = True
        return stuck

    @staticmethod
    def _objective(U, z: np.ndarray, weight: np.ndarray) -> float:
        return float(np.min((U @ z) / weight))

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return None
        rows, U = fairness_utility(cols, weighted=False)
        return self._objective(U, cols.z_from(allocation), cols.weight[rows])
