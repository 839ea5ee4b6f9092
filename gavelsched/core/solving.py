"""A re-solve's solve (thesis §5.3: the policy's allocation for the jobs of the moment):
one bad job never stops the others, and a failed solve keeps the allocation in force.

Functions of their inputs; ``SchedulerCore`` decides when a re-solve is due
(``resolving``) and installs what this returns (``periods.install``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from policies import Allocation, Policy, PolicyError, Problem
from policies.moves import fewer_moves

log = logging.getLogger(__name__)


class Failed(NamedTuple):
    """A re-solve the policy refused: the seconds it took (``PolicyError.solve_s``; 0 when
    it failed before solving), which ``resolving`` counts as a solve's, so that a failure
    as expensive as an expensive solve is not retried at the very next round."""

    solve_s: float


def solve(policy: Policy, problem_of: Callable[[], Problem], now: float, *,
          drop: Callable[[str, str], bool], raise_errors: bool,
          runs: Callable[[], dict] | None = None) -> Allocation | Failed:
    """``policy``'s allocation for ``problem_of()``. A job the policy refuses
    (``PolicyError.job_id``) is dropped by ``drop(job, why)`` (True when it was one of the
    core's) and the problem built again without it. Any other refusal is raised with
    ``raise_errors``, else logged and returned as ``Failed`` (the last allocation stays).
    ``runs()``: the runs going on by column, when the policy's allocation may be
    rearranged to move fewer of them (``policies.moves.fewer_moves``, the restart rule)."""
    while True:
        problem = problem_of()
        try:
            allocation = policy.solve(problem)
            if runs is not None and policy.traits.rearrangeable:
                allocation = fewer_moves(problem, allocation, runs())
            break
        except PolicyError as err:
            if raise_errors:
                raise
            culprit = getattr(err, "job_id", None)
            if culprit is not None and drop(culprit, str(err)):
                log.warning("job %s refused by the policy, dropped: %s", culprit, err)
                continue
            log.warning("re-solve at %.0fs failed, keeping the last allocation: %s", now, err)
            return Failed(err.solve_s or 0.0)
    if log.isEnabledFor(logging.DEBUG):   # what a replay's differences are traced to
        log.debug("re-solved at %.1fs: %d jobs, %.3fs; allocation %s", now,
                  len(problem.jobs), allocation.solve_s,
                  {job: {t: round(x, 4) for t, x in row.items() if x > 0}
                   for job, row in allocation.allocation.items()})
    return allocation
