"""*When* the daemon's round boundaries come: the one thing, with how tasks run, that it
does not share with the simulator (``gavelsched/core/driver.py``).

On a monotonic clock: each round lasts ``round_seconds``; the next one is planned the
round driver's ``plan_lead_s`` before the current one ends (``RoundDriver.plan_at``;
thesis §5.6: leases can be extended before they run out); it starts at its boundary.
Rounds keep their cadence: a boundary the executor's loop wakes for a little late still
ends a round after it was due, unless the scheduler was idle or far behind.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .meta import CLOCK_SEEN, EPOCH_UNIX
from .store import Store

log = logging.getLogger(__name__)

# A wall clock behind the time last seen by less than this is not worth a warning (the
# plan's write and the restart's reading are apart).
CLOCK_STEP_S = 1.0


class RoundClock:
    def __init__(self, round_seconds: float, plan_lead: float) -> None:
        self.round_seconds, self.plan_lead = round_seconds, plan_lead
        self.next_start: float | None = None   # monotonic boundary of the planned round
        self.plan_at: float | None = None      # when the next round is planned
        self.started_at: float | None = None   # when the round running now started

    @property
    def idle(self) -> bool:
        """No round is running and none is planned."""
        return self.next_start is None

    def deadlines(self) -> list[float]:
        return [d for d in (self.plan_at, self.next_start) if d is not None]

    def plan_due(self, mono: float) -> bool:
        return self.plan_at is not None and mono >= self.plan_at

    def start_due(self, mono: float) -> bool:
        return self.next_start is not None and mono >= self.next_start

    def planned(self) -> None:
        """The next round is planned: no plan deadline until it starts (the executor's loop
        sleeps until the boundary instead of waking for a deadline already passed)."""
        self.plan_at = None

    def start(self, mono: float) -> float | None:
        """A round starts at ``mono``: schedule its end and the next plan. Returns the
        time since the last round started (None for the first)."""
        R = self.round_seconds
        since = None if self.started_at is None else mono - self.started_at
        self.started_at = mono
        due = self.next_start
        start = due if due is not None and 0.0 <= mono - due < R / 2 else mono
        self.next_start = start + R
        self.plan_at = self.next_start - self.plan_lead
        return since

    @property
    def round_start(self) -> float | None:
        """When the round running now started, on its cadence (None: idle)."""
        return None if self.next_start is None else self.next_start - self.round_seconds

    def stop(self) -> None:
        """Go idle: the next round starts when there is work again."""
        self.next_start = self.plan_at = None


class Origin:
    """The daemon's time: ``now`` is seconds since its state first started, on a monotonic
    clock. The wall time of that start (``epoch_unix``) is kept in the store, so a
    restarted daemon counts on from it (thesis §5.6). It never goes back across a restart:
    a wall clock set back since (a host that boots before NTP has set its clock, a virtual
    machine restored) would put every stored time (submissions, runs, the allocation
    period's start) in the future; the time of the last plan is kept (``mark``), and a
    restart counts on from it when the wall clock is
    behind, saying so."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._store, self._clock, self._mono0, unix0 = store, clock, clock(), time.time()
        epoch = store.get_meta(EPOCH_UNIX.key())
        if epoch is None:       # a new state starts at 0 exactly (not after its own write)
            epoch = unix0
            store.set_meta({EPOCH_UNIX.key(): epoch})
        self.epoch_unix = float(epoch)
        seen, base = float(store.get_meta(CLOCK_SEEN.key(), "0")), unix0 - self.epoch_unix
        if base < seen - CLOCK_STEP_S:
            log.warning("the wall clock is %.0f s behind the time this scheduler's state last "
                        "saw (its last plan, at %s UTC): its clock counts on from that time "
                        "instead; check this host's clock (NTP)", seen - base,
                        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.epoch_unix + seen)))
        self._base = max(0.0, base, seen)

    def now(self) -> float:
        return self._base + self._clock() - self._mono0

    def mark(self) -> None:
        """Keep the time now as the latest this state saw (at each plan)."""
        self._store.set_meta({CLOCK_SEEN.key(): self.now()})

    def monotonic(self, t: float) -> float:
        """The monotonic clock's reading at the daemon's time ``t``."""
        return t - self._base + self._mono0
