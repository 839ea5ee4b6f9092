"""*When* the daemon's round boundaries come: the one thing, with how tasks run, that it
does not share with the simulator (``gavelsched/core/driver.py``).

On a monotonic clock: each round lasts ``round_seconds``; the next one is planned the
round driver's ``plan_lead_s`` before the current one ends (``RoundDriver.plan_at``;
thesis §5.6: leases can be extended before they run out); it starts at its boundary.
Rounds keep their cadence: a boundary the executor's loop wakes for a little late still
ends a round after it was due, unless the scheduler was idle or far behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .meta import EPOCH_UNIX
from .store import Store


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
    restarted daemon counts on from it (thesis §5.6)."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._clock, self._mono0, unix0 = clock, clock(), time.time()
        epoch = store.get_meta(EPOCH_UNIX.key())
        if epoch is None:       # a new state starts at 0 exactly (not after its own write)
            epoch = unix0
            store.set_meta({EPOCH_UNIX.key(): epoch})
        self.epoch_unix = float(epoch)
        self._base = max(0.0, unix0 - self.epoch_unix)

    def now(self) -> float:
        return self._base + self._clock() - self._mono0

    def monotonic(self, t: float) -> float:
        """The monotonic clock's reading at the daemon's time ``t``."""
        return t - self._base + self._mono0
