"""How many calls one caller may make: a budget per job for its iterator's RenewLease and
ReportSteps, and one per user for their client calls, so that one broken job or one user's
runaway script cannot take the scheduler's time from the others (docs/design.md, Safety
rules: one bad job never stops the others).

A job's rank 0 makes its calls once a lease (thesis §5.6: it asks for the next lease near
the current one's end, and reports its checkpoint), plus a few asks again while the
scheduler is busy. A job whose process loops on them, as a test worker once did
(ReportSteps and RenewLease back to back, for good), would otherwise have each call queued
on the executor thread, behind which every other job's calls wait. A user's `status` every
few seconds is a few calls a minute; a script that loops on Submit or Status makes hundreds
a second, and a Status of 50,000 jobs takes the scheduler most of a second. Slurm limits
each user's RPCs the same way (``SlurmctldParameters=rl_enable``: a token bucket per user).
A user's ``/api/status`` on the dashboard takes from the same budget (``dashboard``: 429).

Each caller may make ``burst`` calls at once, and ``burst`` more over each ``period_s``. A
call beyond that is refused with RESOURCE_EXHAUSTED before it reaches the executor, after a
pause (``refusal_pause``): a caller that loops on its calls one at a time then makes about
one a second, where a job made 1,500 a second that took a whole core of the scheduler
(BENCHMARKS.md, "One job that loops on its calls"). At most ``PAUSED_PER_CALLER`` of a
caller's refusals are paused at a time, so that a caller's many threads cannot hold many
handler threads and seats asleep. The iterator takes a refusal as it takes a busy scheduler: it asks again
after a pause of its own (``lease_calls``).

The budget is kept as the generic cell rate algorithm (GCRA; ITU-T I.371, the virtual
scheduling form): one float per caller, the time its next call is due at the budget's rate.
A call is allowed while that time is at most a burst's worth ahead of now. A caller whose
due time has passed has its whole budget again, as one never seen, so its entry is dropped
(``_prune``): the table holds only the callers of about the last period.

InitJob is not counted: every rank of a run makes it, and the number of ranks is not
known at the door.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from traces.checks import shown

log = logging.getLogger(__name__)

# The calls a job may make at once, and again over each round length (the cluster YAML's
# ``job_calls_per_round``). A run's rank 0 makes about three a lease, and up to ~25 when a
# busy scheduler refuses its renewal until the lease's end (``iterator.RENEW_PAUSES_S``:
# pauses of 0.25-1 s from 95% of a 360-s lease, then ``lease_calls.RENEW_BUSY_ASKS``).
CALLS_PER_ROUND = 32
# A user's client calls a second, on average (the cluster YAML's ``user_calls_per_second``),
# and how many seconds of them may come at once: 100 calls, then 5 a second. (Slurm's
# default bucket is 30 calls, refilled at 2 a second.)
USER_CALLS_PER_SECOND = 5.0
USER_BURST_S = 20.0
# The longest a refused call is held before its answer (and never past its deadline, less
# a margin): a refusal answered at once is cheaper than the call, so a loop on it only
# spins faster.
REFUSAL_PAUSE_S = 1.0
DEADLINE_MARGIN_S = 0.1
# The most refusals of one caller held at once: its others meanwhile are answered at once,
# so that a caller's many threads hold at most this many handler threads and seats asleep
# (of the 384 seats for the fleet's calls and 64 for the clients'); a loop on 4 threads is
# still slowed whole.
PAUSED_PER_CALLER = 4


def refusal_pause(wait_s: float, deadline_s: float | None) -> float:
    """How long a refused call is held before its answer: until its caller's next call is
    due (``wait_s``), at most ``REFUSAL_PAUSE_S``, and ending ``DEADLINE_MARGIN_S`` before
    the caller's deadline (``deadline_s`` left; None: none)."""
    pause = min(wait_s, REFUSAL_PAUSE_S)
    if deadline_s is not None:
        pause = min(pause, deadline_s - DEADLINE_MARGIN_S)
    return max(pause, 0.0)


class CallBudget:
    """Calls per key (a job id, a user's name) within ``burst`` at once and ``burst`` more
    over each ``period_s`` (module docstring; ``burst`` 0: no limit). Thread-safe: every
    handler thread takes from it. ``whose``, ``calls`` and ``period`` name the key, the
    calls and the period in the refusal's line and the log: ``job 'j7' made more than 32
    RenewLease and ReportSteps calls in 30 s (a round)``."""

    def __init__(self, burst: int, period_s: float, clock: Callable[[], float], *,
                 whose: str = "job", calls: str = "calls", period: str = "") -> None:
        self._clock = clock
        self._due: dict[str, float] = {}                # key -> when its next call is due
        self._paused: dict[str, int] = {}               # key -> its refusals asleep
        self._lock = threading.Lock()
        self._prune_at = 0.0
        self._whose, self._calls, self._period = whose, calls, period
        self.log = Overdrawn(f"{calls} over their {whose}'s budget", whose)
        self.set(burst, period_s)

    def set(self, burst: int, period_s: float) -> None:
        """Put ``burst`` calls at once and over each ``period_s`` in force (a reload), every
        caller with its whole budget again; ``burst`` 0: no limit."""
        if burst < 0 or not period_s > 0:
            raise ValueError(f"a budget needs burst >= 0 and period_s > 0, got {burst} and "
                             f"{period_s}")
        with self._lock:
            self.burst, self.period_s = burst, period_s
            self._interval = period_s / max(burst, 1)       # one call's worth of time
            self._ahead = period_s - self._interval         # how far ahead one may be due
            self._due = {}

    def take(self, key: str) -> float | None:
        """None when ``key`` may make this call (it is counted), else the seconds until it
        may make one."""
        now = self._clock()
        with self._lock:
            if not self.burst:
                return None
            due = max(self._due.get(key, now), now)
            if due - now > self._ahead:
                return due - now - self._ahead
            self._due[key] = due + self._interval
            if now >= self._prune_at:
                self._prune(now)
        return None

    def refuse(self, key: str, wait_s: float, deadline_s: float | None) -> tuple[str, float]:
        """A call ``take`` refused (``wait_s``: its answer): logged (``Overdrawn``), held
        for ``refusal_pause`` unless ``PAUSED_PER_CALLER`` refusals of ``key`` are held
        now; then its one line, and the seconds still to wait before ``key`` may call."""
        self.log.note(key)
        with self._lock:
            held = self._paused.get(key, 0)
            pause = 0.0 if held >= PAUSED_PER_CALLER else refusal_pause(wait_s, deadline_s)
            if pause:
                self._paused[key] = held + 1
        if pause:
            try:
                time.sleep(pause)
            finally:
                with self._lock:
                    if self._paused[key] > 1:
                        self._paused[key] -= 1
                    else:
                        del self._paused[key]
        left = max(wait_s - pause, 0.0)
        return self.line(key, left), left

    def line(self, key: str, left_s: float) -> str:
        """The one line of a refusal of ``key``, which may call again in ``left_s``."""
        return (f"{self._whose} {shown(key)} made more than {self.burst} {self._calls} in "
                f"{self.period_s:g} s{f' ({self._period})' if self._period else ''}; try "
                f"again in {left_s:.2f} s")

    def __len__(self) -> int:
        return len(self._due)

    def _prune(self, now: float) -> None:
        """Drop the keys whose due time has passed (they hold no budget: as if never seen),
        at most once a period: the table keeps the keys of the last period or so."""
        self._due = {k: due for k, due in self._due.items() if due > now}
        self._prune_at = now + self.period_s


@dataclass(frozen=True)
class Budgets:
    """The scheduler's budgets: each job's RenewLease and ReportSteps calls, each user's
    client calls (admins have none)."""

    jobs: CallBudget
    users: CallBudget

    @classmethod
    def made(cls, job_calls_per_round: int, user_calls_per_second: float, round_s: float,
             clock: Callable[[], float] = time.monotonic) -> Budgets:
        """The cluster YAML's ``job_calls_per_round`` and ``user_calls_per_second`` (0:
        no limit) for rounds of ``round_s`` (``set``)."""
        budgets = cls(CallBudget(0, round_s, clock, whose="job",
                                 calls="RenewLease and ReportSteps calls", period="a round"),
                      CallBudget(0, USER_BURST_S, clock, whose="user"))
        budgets.set(job_calls_per_round, user_calls_per_second, round_s)
        return budgets

    def set(self, job_calls_per_round: int, user_calls_per_second: float,
            round_s: float) -> None:
        """Those values in force (at the start, and at a reload): a user's burst is
        ``USER_BURST_S`` of calls, at least one."""
        self.jobs.set(job_calls_per_round, round_s)
        burst = max(1, round(user_calls_per_second * USER_BURST_S)) \
            if user_calls_per_second else 0
        self.users.set(burst, burst / user_calls_per_second if burst else USER_BURST_S)


class Tally:
    """Counts by key in each group, handed out at most once every ``every_s`` per group:
    what a log line of refusals reports, one line a while however many refusals come
    (``Overdrawn``; ``service.Refusals``). Thread-safe."""

    def __init__(self, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s, self._clock = every_s, clock
        self._lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}    # group -> key -> since its line
        self._line_at: dict[str, float] = {}            # group -> its last line

    def add(self, key: str, group: str = "") -> tuple[dict[str, int], float | None] | None:
        """``key`` counted in ``group``; when the group's line is due, its counts since the
        last line and how many seconds ago that was (None: there was none), and the group
        counts afresh; else None."""
        now = self._clock()
        with self._lock:
            counts = self._counts.setdefault(group, {})
            counts[key] = counts.get(key, 0) + 1
            last = self._line_at.get(group)
            if last is not None and now - last < self._every_s:
                return None
            self._counts[group], self._line_at[group] = {}, now
        return counts, None if last is None else now - last


class Overdrawn:
    """The log of calls refused over their budget (``what``): one line at most every
    ``every_s``, with the callers (``whose``) refused since the last (most first), however
    many loop."""

    SHOWN = 5       # callers named in a line; the rest are counted

    def __init__(self, what: str, whose: str, every_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._what, self._whose = what, whose
        self._tally = Tally(every_s, clock)

    def note(self, key: str) -> None:
        due = self._tally.add(key)
        if due is None:
            return
        refused, since = due
        worst = sorted(refused.items(), key=lambda kv: -kv[1])
        named = ", ".join(f"{shown(key)} {n}" for key, n in worst[:self.SHOWN])
        more = len(worst) - self.SHOWN
        log.warning("refused %d %s %s(%s%s)", sum(refused.values()), self._what,
                    "" if since is None else f"in the last {since:.1f} s ", named,
                    f" and {more} more {self._whose}s" if more > 0 else "")
