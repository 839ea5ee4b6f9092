"""How many RenewLease and ReportSteps calls one job may make: a budget per job, so that one
broken job cannot take the scheduler's time from the others (docs/design.md, Safety rules:
one bad job never stops the others).

A job's rank 0 makes these calls once a lease (thesis §5.6: it asks for the next lease
near the current one's end, and reports its checkpoint), plus a few asks again while the
scheduler is busy. A job whose process loops on them, as a test worker once did
(ReportSteps and RenewLease back to back, for good), would otherwise have each call queued
on the executor thread, behind which every other job's calls wait. Each job may make
``per_round`` such calls in a burst, and ``per_round`` more over each round length. A call
beyond that is refused with RESOURCE_EXHAUSTED before it reaches the executor, after a
pause (``refusal_pause``): a job that loops on its calls one at a time then makes about
one a second, where it made 1,500 a second that took a whole core of the scheduler
(BENCHMARKS.md, "One job that loops on its calls"). The iterator takes such a refusal as
it takes a busy scheduler: it asks again after a pause of its own (``lease_calls``).

The budget is kept as the generic cell rate algorithm (GCRA; ITU-T I.371, the virtual
scheduling form): one float per job, the time its next call is due at the budget's rate.
A call is allowed while that time is at most a burst's worth ahead of now. A job whose due
time has passed has its whole budget again, as a job never seen, so its entry is dropped
(``_prune``): the table holds only the jobs that called within about the last round.

InitJob is not counted: every rank of a run makes it, and the number of ranks is not
known at the door.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from traces.checks import shown

log = logging.getLogger(__name__)

# The calls a job may make in a burst, and again over each round length (the cluster YAML's
# ``job_calls_per_round``). A run's rank 0 makes about three a lease, and up to ~25 when a
# busy scheduler refuses its renewal until the lease's end (``iterator.RENEW_PAUSES_S``:
# pauses of 0.25-1 s from 95% of a 360-s lease, then ``lease_calls.RENEW_BUSY_ASKS``).
CALLS_PER_ROUND = 32
# The longest a refused call is held before its answer (and never past its deadline, less
# a margin): a refusal answered at once is cheaper than the call, so a loop on it only
# spins faster.
REFUSAL_PAUSE_S = 1.0
DEADLINE_MARGIN_S = 0.1


def refusal_pause(wait_s: float, deadline_s: float | None) -> float:
    """How long a refused call is held before its answer: until its job's next call is due
    (``wait_s``), at most ``REFUSAL_PAUSE_S``, and ending ``DEADLINE_MARGIN_S`` before the
    caller's deadline (``deadline_s`` left; None: none)."""
    pause = min(wait_s, REFUSAL_PAUSE_S)
    if deadline_s is not None:
        pause = min(pause, deadline_s - DEADLINE_MARGIN_S)
    return max(pause, 0.0)


class CallBudget:
    """Calls per key (a job id) within ``per_round`` in a burst and over each ``round_s``
    (module docstring). Thread-safe: every handler thread takes from it."""

    def __init__(self, per_round: int, round_s: float,
                 clock: Callable[[], float]) -> None:
        if per_round < 1 or not round_s > 0:
            raise ValueError(f"a budget needs per_round >= 1 and round_s > 0, got "
                             f"{per_round} and {round_s}")
        self.per_round, self.round_s = per_round, round_s
        self._interval = round_s / per_round            # one call's worth of time
        self._burst = round_s - self._interval          # how far ahead a call may be due
        self._clock = clock
        self._due: dict[str, float] = {}                # key -> when its next call is due
        self._lock = threading.Lock()
        self._prune_at = 0.0

    def take(self, key: str) -> float | None:
        """None when ``key`` may make this call (it is counted), else the seconds until it
        may make one."""
        now = self._clock()
        with self._lock:
            due = max(self._due.get(key, now), now)
            if due - now > self._burst:
                return due - now - self._burst
            self._due[key] = due + self._interval
            if now >= self._prune_at:
                self._prune(now)
        return None

    def __len__(self) -> int:
        return len(self._due)

    def _prune(self, now: float) -> None:
        """Drop the keys whose due time has passed (they hold no budget: as if never seen),
        at most once a round: the table keeps the keys of the last round or so."""
        self._due = {k: due for k, due in self._due.items() if due > now}
        self._prune_at = now + self.round_s


class Overdrawn:
    """The log of calls refused over their job's budget: one line at most every ``every_s``,
    with the jobs that were refused since the last (most first), however many jobs loop."""

    SHOWN = 5       # jobs named in a line; the rest are counted

    def __init__(self, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s, self._clock = every_s, clock
        self._lock = threading.Lock()
        self._refused: dict[str, int] = {}      # job -> calls refused since the last line
        self._line_at: float | None = None

    def note(self, job_id: str) -> None:
        now = self._clock()
        with self._lock:
            self._refused[job_id] = self._refused.get(job_id, 0) + 1
            last = self._line_at
            if last is not None and now - last < self._every_s:
                return
            refused, self._refused, self._line_at = self._refused, {}, now
        worst = sorted(refused.items(), key=lambda kv: -kv[1])
        named = ", ".join(f"{shown(job)} {n}" for job, n in worst[:self.SHOWN])
        more = len(worst) - self.SHOWN
        log.warning("refused %d RenewLease and ReportSteps calls over their job's budget %s"
                    "(%s%s)", sum(refused.values()),
                    "" if last is None else f"in the last {now - last:.1f} s ", named,
                    f" and {more} more jobs" if more > 0 else "")
