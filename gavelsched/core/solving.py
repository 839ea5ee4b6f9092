"""A re-solve's solve (thesis §5.3: the policy's allocation for the jobs of the moment):
one bad job never stops the others, and a failed solve keeps the allocation in force.

``SchedulerCore`` decides when a re-solve is due (``resolving``), begins a ``Solve`` and
installs what ``settle`` makes of its result (``periods.install``). The simulator runs the
solve at once; the daemon on a thread of its own, serving calls meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from policies import Allocation, Policy, PolicyError, Problem
from policies.errors import named
from policies.moves import fewer_moves

log = logging.getLogger(__name__)


class Failed(NamedTuple):
    """A re-solve the policy refused: the seconds it took (``PolicyError.solve_s``; 0 when
    it failed before solving), which ``resolving`` counts as a solve's, so that a failure
    as expensive as an expensive solve is not retried at the very next round."""

    solve_s: float


class Solve:
    """One solve of a re-solve, begun on the core's thread (``SchedulerCore.open_round``):
    ``problem`` is a frozen value and ``runs`` the runs going on by column then, so ``run``
    may go on any thread while the core serves other events (thesis §5.7.2: allocations
    "can be computed asynchronously"). ``columns``: the
    rows' columns it was built over (an allocation over others cannot be installed);
    ``uncredited``: the steps the problem was built net of (to build it again)."""

    def __init__(self, policy: Policy, problem: Problem, now: float,
                 runs: Mapping[str, str] | None, columns: tuple[str, ...],
                 uncredited: Mapping[str, float] | None = None) -> None:
        self.policy, self.problem, self.now = policy, problem, now
        self.runs, self.columns, self.uncredited = runs, columns, uncredited

    def run(self) -> Allocation | PolicyError:
        """The policy's allocation (rearranged to move fewer runs where the policy allows:
        ``policies.moves.fewer_moves``, the restart rule), or the refusal it raised."""
        try:
            allocation = self.policy.solve(self.problem)
            if self.runs is not None and self.policy.traits.rearrangeable:
                allocation = fewer_moves(self.problem, allocation, self.runs)
            return allocation
        except PolicyError as err:
            return err


def settle(solve: Solve, result: Allocation | PolicyError, *,
           drop: Callable[[Sequence[str], str], Sequence[str]],
           raise_errors: bool) -> Allocation | Failed | None:
    """What ``solve``'s ``result`` means: the allocation; or, for a refusal, None when it
    named jobs (``PolicyError.refused``) that ``drop(jobs, why)`` removed (it returns those
    that were the core's: the problem is to be built again without them); else the
    refusal raised with ``raise_errors``, or logged and returned as ``Failed`` (the last
    allocation stays)."""
    if isinstance(result, PolicyError):
        if raise_errors:
            raise result
        dropped = drop(result.refused(), str(result))
        if dropped:
            log.warning("job%s %s refused by the policy, dropped: %s",
                        "s" * (len(dropped) > 1), named(dropped), result)
            return None
        log.warning("re-solve at %.0fs failed, keeping the last allocation: %s",
                    solve.now, result)
        return Failed(result.solve_s or 0.0)
    if log.isEnabledFor(logging.DEBUG):   # what a replay's differences are traced to
        log.debug("re-solved at %.1fs: %d jobs, %.3fs; allocation %s", solve.now,
                  len(solve.problem.jobs), result.solve_s,
                  {job: {t: round(x, 4) for t, x in row.items() if x > 0}
                   for job, row in result.allocation.items()})
    return result
