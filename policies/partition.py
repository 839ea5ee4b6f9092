"""POP (Narayanan et al., SOSP'21, cited in thesis §5.7.4): partition, solve, merge.

Jobs are split uniformly at random into k groups and every type's workers evenly into k
shares (fractional shares are fine: allocations are time fractions). Each sub-problem is
solved on its own, and the allocations are merged. The merged allocation is feasible for
the whole problem by construction, and its objective is scored on the whole problem, so
callers can compare it with the exact solve.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import numpy as np

from .base import Policy, Solution
from .problem import Allocation, Problem


def split(problem: Problem, partitions: int, seed: int) -> list[Problem]:
    """The k sub-problems of ``problem``; jobs keep their arrival order inside each."""
    k = max(1, min(partitions, len(problem.jobs)))
    order = np.random.default_rng(seed).permutation(len(problem.jobs))
    share = {t: n / k for t, n in problem.cluster.items()}
    return [problem.with_jobs([problem.jobs[i] for i in np.sort(group)], cluster=share)
            for group in np.array_split(order, k)]


def _solve_one(args: tuple[Policy, Problem]) -> Allocation:
    policy, sub = args
    return policy.solve(sub)


class Partitioned(Policy):
    """Wraps any policy; ``get_policy(name, partitions=k)`` makes one."""

    def __init__(self, inner: Policy, *, partitions: int, seed: int = 0,
                 processes: int = 1) -> None:
        super().__init__(inner.name, solver=inner.solver)
        self.inner, self.partitions, self.seed, self.processes = inner, partitions, seed, processes

    @property
    def traits(self):
        """The wrapped policy's: partitioning changes how it solves, not what it is."""
        return self.inner.traits

    def _solve(self, problem: Problem) -> Solution:
        subs = split(problem, self.partitions, self.seed)
        work = [(self.inner, sub) for sub in subs]
        if self.processes > 1:
            with ProcessPoolExecutor(self.processes) as pool:
                parts = list(pool.map(_solve_one, work))
        else:
            parts = [_solve_one(w) for w in work]
        rows: dict = {}
        for part in parts:
            rows.update(part.allocation)
        objective = self.inner.evaluate(problem, Allocation(self.name, rows))
        return Solution(rows, objective, parts[0].solver if parts else None)

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        return self.inner.evaluate(problem, allocation)
