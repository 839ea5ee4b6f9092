"""GPUs freed in the running round go to waiting jobs for the rest of it (thesis §5.5;
``CoreConfig.refill_freed``), on real time: which GPUs, and when the executor asks.

GPUs idle in the running round (a job finished, failed or was cancelled, a run died) are
handed to ``RoundDriver.refill``, whose core priorities and policy traits decide; not once
the next round is planned, whose plan has taken them. A refill plans over every job
(``SchedulerCore.place_freed``), and thousands of runs end at a round boundary: at 2,048
GPUs and 50,000 jobs a refill at each exit, then at each short batch of events, took more
than half the executor thread (BENCHMARKS.md, "The daemon at scale"). So inside the
executor loop's batch of events a refill is due once after it (``soon``), and at most
every ``REFILL_SPACING`` times the last one's cost (``after_batch``).

Runs on the executor thread, as the run table it places through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core import SchedulerCore
from ..core.driver import RoundDriver
from .clock import RoundClock
from .config import DaemonConfig
from .runs import RunTable

log = logging.getLogger(__name__)

# A refill after a batch of events waits this many times the last one's cost since it ended.
REFILL_SPACING = 5.0


class Refills:
    """When and where freed GPUs are refilled. ``round_base``: the store's count of rounds
    before this process; ``started``: the index (store's numbering) of the round started
    last; ``placed``: told after tasks were placed on freed GPUs; ``held()``: until when
    (monotonic; 0: not) freed GPUs wait for a re-solve running (``solver.Solver.begin``),
    which refills them when it settles; they are refilled then if it has not."""

    def __init__(self, config: DaemonConfig, core: SchedulerCore, driver: RoundDriver,
                 clock: RoundClock, runs: RunTable, *, round_base: int,
                 started: Callable[[], int], now: Callable[[], float],
                 monotonic: Callable[[], float], placed: Callable[[], None],
                 held: Callable[[], float]) -> None:
        self.config, self.core, self.driver, self.clock, self.runs = (
            config, core, driver, clock, runs)
        self._round_base, self._started = round_base, started
        self._now, self._monotonic, self._placed, self._held = now, monotonic, placed, held
        self.in_batch = False       # the executor loop is running a batch of events
        self._due = False           # a refill waits for the batch's end
        self._at = 0.0              # no batch's refill before (monotonic)

    def soon(self) -> None:
        """``refill`` now, or inside a batch of events once after it (see the module docstring)."""
        if self.in_batch:
            self._due = True
        else:
            self.refill()

    def released(self) -> None:
        """The re-solve freed GPUs waited for settled (``held``): refill them ``soon``, not
        at the bound of their wait."""
        self._at = self._monotonic()
        self.soon()

    def after_batch(self) -> None:
        """The batch's refill, if one is due and the spacing since the last has passed."""
        if not self._due or self._monotonic() < self._at:
            return
        self._due = False
        began = self._monotonic()
        self.refill()
        ended = self._monotonic()
        # (a refill held for a re-solve keeps its bound: ``refill``)
        self._at = max(self._at, ended + REFILL_SPACING * (ended - began))

    def deadlines(self) -> list[float]:
        """When the executor loop must wake for a refill (monotonic)."""
        return [self._at] if self._due else []

    def refill(self) -> None:
        """Refill the running round's idle GPUs now (see the module docstring)."""
        flight = self.driver.in_flight
        if (not self.config.refill_freed or self.driver.planned is not None
                or self.clock.idle or flight is None
                or self._round_base + flight.index != self._started()):
            return
        held = self._held()
        if held > self._monotonic():        # (they wait for a re-solve, or until then)
            self._due, self._at = True, max(self._at, held)
            return
        now = self._now()
        if flight.end_s <= now:
            return
        view = self.core.view
        free = self.runs.idle_workers(set(view.worker_type_of) - view.down)
        if free:
            self.place(self.driver.refill(sorted(free), now, flight.end_s))

    def place(self, more) -> None:
        """Launch ``more`` (tasks on freed GPUs) for the rest of the round."""
        if not len(more):
            return
        self._placed()
        index = self._started()
        self.runs.place(tuple(more.task(i) for i in range(len(more))), index, refill=True)
        log.info("round %d: %d freed GPU%s to job%s %s for the last %.1fs", index,
                 int(more.size.sum()), "s" if more.size.sum() != 1 else "",
                 "s" if len(more) != 1 else "", ", ".join(more.keys),
                 self.driver.in_flight.end_s - self._now())
