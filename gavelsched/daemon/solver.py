"""The policy's re-solves, solved off the executor thread (docs/runtime.md, "Solves off
the executor").

At production size a policy's solve takes seconds, and some take minutes
(BENCHMARKS.md, "Every policy at production size"). On the executor thread it held every
call but heartbeats that long: a Submit past its deadline, checkpoints' ReportSteps,
registrations. The thesis computes allocations asynchronously, so that checkpoints are the
only synchronous overhead of a round (§5.7.2), and so does this scheduler:

- at the plan, the executor opens the round (``RoundDriver.open``): the round in flight
  ends, arrivals are admitted, and a due re-solve's ``Solve`` (a frozen problem) goes to
  ``Solver.open``, which runs it on its thread, ``gavelsched-solve``;
- the executor serves its events meanwhile. The result comes back through the inbox and is
  settled on the executor thread (``SchedulerCore.settle``: a job the policy refused is
  dropped and the rest solved again); the round is planned at once (``planned``), on the
  new allocation, as the simulator plans it;
- a solve still running at the boundary: the round is planned on the allocation in force
  (``finish``, logged and counted) and starts on time; the solve's allocation is installed
  when it comes, for the plans after;
- the re-solve at a round's start (a job planned for it ended in the lead:
  ``RoundDriver.start``) runs here too (``begin``): the round's launches go at once, and
  the freed GPUs wait for the solve (``refills_held_until``, read by ``refills``), to be
  refilled on its allocation, as the simulator refills them; for at most
  ``HOLD_REFILLS_S``, past which idle GPUs would cost more than a refill on the allocation
  in force.

Clarabel releases the GIL while it solves, so the executor goes on at nearly full speed
during a solve. One solve runs at a time: a plan that comes while one is out begins none
(``SchedulerCore.open_round``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from policies import Allocation, PolicyError

from ..core import SchedulerCore, Solve
from .metrics import DaemonMetrics
from .view import Shares

log = logging.getLogger(__name__)

# The most freed GPUs wait for a round start's re-solve (seconds).
HOLD_REFILLS_S = 1.0


class Running(NamedTuple):
    """The solve out: when it began (the executor's monotonic clock) and its jobs."""

    since: float
    jobs: int


class Solver:
    """One solve at a time on a thread of its own (the module docstring). ``post``: how the
    thread hands its result to the executor thread (``Inbox.tell``: what it raises there is
    logged); ``planned(now, uncredited)``: plan the round opened with these; ``refill``:
    refill the freed GPUs that waited for a solve (``begin``). Each allocation installed
    closes its periods in ``shares``, is timed in ``metrics`` and ``changed`` the picture,
    as does each solve begun (``running``: ``Status`` shows it)."""

    def __init__(self, core: SchedulerCore, post: Callable[[Callable[[], None]], object],
                 shares: Shares, metrics: DaemonMetrics | None, *,
                 planned: Callable[[float, Mapping[str, float] | None], None],
                 refill: Callable[[], None], changed: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._core, self._post, self._clock = core, post, clock
        self._shares, self._metrics, self._planned = shares, metrics, planned
        self._refill, self._changed = refill, changed
        self._opened: tuple | None = None   # the waiting round's (now, uncredited)
        # Freed GPUs wait for the solve out until then (monotonic; 0: they do not), and at
        # most ``hold_refills_s`` after it began (``begin``).
        self.refills_held_until = 0.0
        self.hold_refills_s = HOLD_REFILLS_S
        self._slow_said = False             # (``_say_if_slow``: once)
        self.running: Running | None = None   # the solve out (None: none)
        # Each solve on the calling thread instead, settled at once: for an executor driven
        # by hand (tests on a clock of their own, which plan and start rounds in one call).
        self.inline = False

    @property
    def waiting(self) -> bool:
        """A round was opened and waits for its solve to be planned."""
        return self._opened is not None

    def open(self, solve: Solve | None, now: float,
             uncredited: Mapping[str, float] | None) -> None:
        """A round was opened at ``now`` with ``solve`` (None: none was due): plan it at
        once, or when the solve settles (or at the boundary: ``finish``)."""
        if solve is None:
            self._planned(now, uncredited)
            return
        self._opened = (now, uncredited)
        self._start(solve)

    def begin(self, solve: Solve | None) -> None:
        """A re-solve begun at a round's start (``RoundDriver.start``: a job planned for the
        round ended in the lead; None: none was due). Until it settles, freed GPUs wait for
        it (``refills_held_until``, read by ``refills``), as the simulator refills them
        after its re-solve; then they are refilled on the new allocation. They wait
        ``hold_refills_s`` at most: past that, they are refilled on the allocation in force."""
        if solve is not None:
            self.refills_held_until = self._clock() + self.hold_refills_s
            self._start(solve)

    def finish(self) -> None:
        """The boundary: a round still waiting for its solve is planned on the allocation in
        force; the solve goes on, and its allocation is installed when it comes."""
        if self._opened is None:
            return
        log.warning("re-solve still running after %.1fs: the round is planned on the "
                    "allocation in force, and the new one is installed when it comes",
                    self._clock() - self.running.since)
        if self._metrics is not None:
            self._metrics.on_plan_waited()
        self._plan()

    def _plan(self) -> None:
        (now, uncredited), self._opened = self._opened, None
        self._planned(now, uncredited)

    def _start(self, solve: Solve) -> None:
        self.running = Running(self._clock(), len(solve.problem.jobs))
        self._changed()
        if self.inline:
            self._settle(solve, _run(solve))
            return
        threading.Thread(target=self._run, args=(solve,), name="gavelsched-solve",
                         daemon=True).start()

    def _run(self, solve: Solve) -> None:
        """The solve thread: the solve's result, handed to the executor thread (once it has
        stopped, to no one)."""
        result = _run(solve)
        self._post(lambda: self._settle(solve, result))

    def _settle(self, solve: Solve, result: Allocation | PolicyError) -> None:
        """On the executor thread: install the result (solve again if the policy refused a
        job), then plan the round waiting for it, if one is, or refill the GPUs that
        waited for it."""
        self.running = None
        self._changed()
        outcome = self._core.settle(solve, result)
        if isinstance(outcome, Solve):
            self._start(outcome)
            return
        if outcome is not None:
            self._shares.closed(self._core.take_closed_periods())
            if self._metrics is not None:
                self._metrics.on_solve(outcome.solve_s)
            self._say_if_slow(outcome.solve_s, len(solve.problem.jobs))
        if self._opened is not None:
            self._plan()
        if self.refills_held_until:
            self.refills_held_until = 0.0
            self._refill()

    def _say_if_slow(self, solve_s: float, jobs: int) -> None:
        """Say once, at warning level, when a solve outlasted a round: the rounds go on, on
        an allocation that lags arrivals and completions by as much, and POP (the policy
        option ``partitions``) is the remedy, when the policy is not split already."""
        round_s = self._core.config.round_seconds
        if self._slow_said or solve_s <= round_s or "partitions" in self._core.policy.made_with:
            return
        self._slow_said = True
        log.warning("the policy's re-solve took %.0f s for %s job%s, longer than a round (%g "
                    "s): rounds go on with the allocation in force, which lags arrivals and "
                    "completions by as much; the policy option partitions=K (POP) splits the "
                    "problem into K smaller ones, at some loss of optimality", solve_s,
                    f"{jobs:,}", "" if jobs == 1 else "s", round_s)


def _run(solve: Solve) -> Allocation | PolicyError:
    """``solve.run()``. A solve that raises other than a policy's refusal is logged and
    settled as a failed solve (the allocation in force stays) instead of stopping the
    scheduler's rounds."""
    try:
        return solve.run()
    except Exception as err:                # (a bug must not stop the rounds)
        log.exception("the policy's solve raised")
        return PolicyError(f"the solve raised {type(err).__name__}: {err}")
