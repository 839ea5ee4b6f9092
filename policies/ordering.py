"""Order-based policies: FIFO and shortest job first (thesis §5.4.2).

- ``fifo`` / ``fifo_perf`` keep Gavel's semantics: jobs, in arrival order, get a whole type
  each (random among those with room, or the fastest one with room) until the head of the
  queue no longer fits; no job jumps the queue. ``fifo`` keeps running jobs where they are
  (read from ``Problem.previous``) and hands a finished job's type to the next in line;
  ``fifo_perf`` re-places every job on the fastest type with room, as Gavel's does.
- ``shortest_job_first_perf`` is the same greedy in order of remaining time on the fastest
  type, each job on the fastest type with room: the shortest job runs alone on its fastest
  type, which minimises its duration (§5.4.2), then the next shortest, and so on.
- ``fifo_packed`` is the LP of §5.4.2 over singles and pairs:
  maximise Σ_m throughput(m, X) / throughput(m, X^fastest) * (M - rank_m).
"""

from __future__ import annotations

import random

import cvxpy as cp
import numpy as np

from .base import ColumnPolicy, Policy, Solution, no_columns, run
from .columns import Columns, build_columns
from .fairness import base_constraints
from .problem import PAIR_SEPARATOR, Allocation, Problem
from .throughput import normalized_throughput


def arrival_rank(cols: Columns) -> np.ndarray:
    return np.arange(cols.num_jobs)


def shortest_rank(cols: Columns) -> np.ndarray:
    """Rank of each job by remaining time on its fastest type (ties: arrival order)."""
    with np.errstate(divide="ignore"):
        duration = np.where(cols.runnable, cols.remaining / cols.fastest_throughput, np.inf)
    order = np.lexsort((np.arange(cols.num_jobs), duration))
    rank = np.empty(cols.num_jobs, dtype=int)
    rank[order] = np.arange(cols.num_jobs)
    return rank


def order_objective(cols: Columns, rank: np.ndarray):
    """(jobs x columns) matrix whose column sums weight each column by (M - rank)."""
    return (normalized_throughput(cols).T @ (cols.num_jobs - rank)).T


class OrderedThroughput(ColumnPolicy):
    """``fifo_packed``: the FIFO LP of §5.4.2, with space sharing."""

    rank = staticmethod(arrival_rank)

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem)
        if cols.num_columns == 0:
            return no_columns(cols)
        z = cp.Variable(cols.num_columns, nonneg=True)
        weights = order_objective(cols, self.rank(cols))
        program = cp.Problem(cp.Maximize(weights @ z), base_constraints(cols, z))
        value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = self.columns(problem)
        return float(order_objective(cols, self.rank(cols)) @ cols.z_from(allocation))


class GreedyOrdered(Policy):
    """``fifo`` (random type, sticky), ``fifo_perf`` (``fastest=True``) and
    ``shortest_job_first_perf`` (``fastest=True, rank=shortest_rank``)."""

    def __init__(self, name=None, *, fastest: bool = False, rank=arrival_rank, seed: int = 0,
                 **kwargs) -> None:
        super().__init__(name, **kwargs)
        self.fastest, self.rank, self.seed = fastest, rank, seed

    def _solve(self, problem: Problem) -> Solution:
        cols = build_columns(problem)
        available = dict(zip(range(len(cols.types)), cols.workers))
        placed: dict[int, int] = {}

        def place(i: int, j: int) -> None:
            placed[i] = j
            available[j] -= cols.scale_factor[i]

        def fits(i: int, j: int) -> bool:
            return cols.T[i, j] > 0 and available[j] >= cols.scale_factor[i]

        if not self.fastest:
            for i, j in self._still_running(problem, cols):
                if fits(i, j):
                    place(i, j)
        order = np.argsort(self.rank(cols), kind="stable")
        queue = [int(i) for i in order if i not in placed and cols.runnable[i]]
        if not self.fastest:  # a finished job's workers go to the head of the queue
            for j in self._freed_types(problem, cols):
                if queue and fits(queue[0], j):
                    place(queue.pop(0), j)
        for i in queue:
            options = [j for j in sorted(available, key=lambda j: cols.types[j]) if fits(i, j)]
            if not options:
                break  # FIFO: nobody overtakes the head of the queue
            if self.fastest:
                place(i, max(options, key=lambda j: cols.T[i, j]))
            else:
                rng = random.Random(f"{self.seed}/{cols.job_ids[i]}")
                place(i, options[rng.randrange(len(options))])
        z = np.zeros(cols.num_columns)
        column_of = {(cols.keys[c], cols.col_type[c]): c for c in range(cols.num_columns)}
        for i, j in placed.items():
            z[column_of[(cols.job_ids[i], j)]] = 1.0
        return Solution(cols.to_rows(z), self._score(cols, z), None)

    @staticmethod
    def _still_running(problem: Problem, cols: Columns):
        """(job row, type index) of jobs that held a whole type in the last allocation."""
        for i, job_id in enumerate(cols.job_ids):
            row = problem.previous.get(job_id, {})
            for j, t in enumerate(cols.types):
                if row.get(t, 0.0) >= 1.0 - 1e-9:
                    yield i, j
                    break

    @staticmethod
    def _freed_types(problem: Problem, cols: Columns):
        """Type indices held by jobs of the last allocation that are gone now."""
        present = set(cols.job_ids)
        for key, row in problem.previous.items():
            if PAIR_SEPARATOR in key or key in present:
                continue
            for j, t in enumerate(cols.types):
                if row.get(t, 0.0) >= 1.0 - 1e-9:
                    yield j

    def _score(self, cols: Columns, z: np.ndarray) -> float:
        return float(order_objective(cols, self.rank(cols)) @ z)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        cols = build_columns(problem)
        return self._score(cols, cols.z_from(allocation))
