"""The executor thread's inbox: how other threads reach the scheduler's state
(``executor``'s threading contract). gRPC handlers and the dispatcher's pool threads put a
closure here with ``post`` (``call`` waits for its result; ``tell`` logs what it raised);
the executor thread runs them and hands each result, or exception, back through a
``Future``.

Two lanes, served in turn while both hold events, each in arrival order: ``FLEET`` for the
calls of workers and jobs (registrations, round reports, InitJob, RenewLease, ReportSteps,
the answers to RunJob) and ``CLIENTS`` for everything else (users, operators, the
scheduler's own events). A gRPC handler's events take its method's lane
(``service.ExecutorWaits`` sets it with ``caller_waits``). A round of 4,096 GPUs starts
4,096 processes whose InitJobs arrive at once; in one queue a Submit behind them waited
past its 30 s deadline (issue #30). With lanes it waits for one fleet event at most, as Kubernetes' API priority and
fairness keeps one flow's burst from starving the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

CLIENTS, FLEET = 0, 1      # the lanes (module docstring)
LATE_WAKE_NOTE_S = 5.0     # a wait overrun by more is logged (``run_pending``)

# When the caller of the call this thread serves stops waiting (monotonic), and the lane
# its events take (``caller_waits``)
_deadline: ContextVar[float | None] = ContextVar("deadline", default=None)
_lane: ContextVar[int] = ContextVar("lane", default=CLIENTS)


class Stopping(RuntimeError):
    """The executor thread has stopped: an event posted now is never run."""


class TooLate(TimeoutError):
    """The executor did not run the event before its caller's deadline (it still will)."""


@contextmanager
def caller_waits(seconds: float | None, lane: int = CLIENTS) -> Iterator[None]:
    """On a gRPC handler's thread: ``call`` waits at most ``seconds`` (the caller's time
    left; None: no deadline), and the events it posts take ``lane`` unless they name one.
    A handler thread that waits past its caller serves no one, and at 2,048 GPUs such waits
    held every one of them, heartbeats' included."""
    deadline = _deadline.set(None if seconds is None else time.monotonic() + seconds)
    lane_token = _lane.set(lane)
    try:
        yield
    finally:
        _lane.reset(lane_token)
        _deadline.reset(deadline)


class Inbox:
    def __init__(self) -> None:
        self._lanes: tuple[deque, deque] = (deque(), deque())
        self._ready = threading.Condition()
        self._turn = CLIENTS    # the lane served first when both hold events
        self._stop = threading.Event()
        self._idle_s = 0.0      # seconds the executor thread waited for events (``take_busy_s``)
        self._since = time.monotonic()

    def post(self, fn: Callable[[], Any], *, changes: bool = True,
             lane: int | None = None) -> Future:
        """Run ``fn`` on the executor thread; its result (or exception) lands in the future.
        ``changes=False``: it changes nothing ``Status`` shows (no new snapshot needed).
        ``lane``: ``CLIENTS`` or ``FLEET`` (module docstring); None: the calling handler's
        (``caller_waits``), else ``CLIENTS``."""
        fut: Future = Future()
        if self._stop.is_set():        # (a handler racing the shutdown: answered at once,
            fut.set_exception(Stopping("the scheduler is stopping"))   # not after 30 s)
            return fut
        with self._ready:
            self._lanes[_lane.get() if lane is None else lane].append((fn, fut, changes))
            self._ready.notify()
        return fut

    def tell(self, fn: Callable[[], Any], *, changes: bool = True,
             lane: int | None = None) -> None:
        """``post`` with no one waiting for the result: what ``fn`` raises is logged."""
        self.post(fn, changes=changes, lane=lane).add_done_callback(_log_error)

    def call(self, fn: Callable[[], Any], timeout: float = 30.0, *,
             changes: bool = True, lane: int | None = None) -> Any:
        """``post`` and wait for the result (raises what ``fn`` raised), at most ``timeout``
        seconds or to the caller's deadline (``caller_waits``): else ``TooLate``."""
        deadline = _deadline.get()
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        try:
            return self.post(fn, changes=changes, lane=lane).result(timeout)
        except FutureTimeout:
            raise TooLate(f"the scheduler did not get to it within {timeout:.1f} s") from None

    def stop(self) -> None:
        self._stop.set()
        with self._ready:
            self._lanes[CLIENTS].append((lambda: None, Future(), False))
            self._ready.notify()

    def refuse_pending(self) -> None:
        """On the executor thread, as it ends: the events still queued fail with
        ``Stopping``."""
        with self._ready:
            pending = [event for lane in self._lanes for event in lane]
            for lane in self._lanes:
                lane.clear()
        for _, fut, _ in pending:
            if not fut.done():
                fut.set_exception(Stopping("the scheduler is stopping"))

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run_pending(self, wait: float) -> bool:
        """On the executor thread: wait up to ``wait`` seconds for an event, then run it and
        the events queued behind it until ``wait`` has passed (at least the one): a steady
        stream of events must not hold off the loop's deadlines (at 2,048 GPUs rounds
        started seconds late behind InitJobs and reports). Returns whether any of them
        changed state."""
        changed = False
        began = time.monotonic()
        until = began + wait
        event = self._next(until)
        # (a wait that overran its timeout is not idle: the process was stopped, by SIGSTOP,
        # a frozen VM or the host's swap, and heard no server meanwhile: ``take_busy_s``)
        waited = time.monotonic() - began
        if waited - wait > LATE_WAKE_NOTE_S:
            log.warning("the scheduler's executor woke %.1f s late: its process was stopped or "
                        "starved of CPU (a frozen VM, swap); no server's silence counts that "
                        "long", waited - wait)
        self._idle_s += min(waited, wait)
        while event is not None:
            changed = self._run(*event) or changed
            if time.monotonic() >= until:
                break
            event = self._next(None)
        return changed

    def _next(self, until: float | None):
        """The next event, the lanes taken in turn; waits for one until ``until``
        (monotonic; None: does not wait). None when there is none."""
        with self._ready:
            while not (self._lanes[CLIENTS] or self._lanes[FLEET]):
                left = None if until is None else until - time.monotonic()
                if left is None or left <= 0:
                    return None
                self._ready.wait(left)
            lane = self._turn if self._lanes[self._turn] else 1 - self._turn
            self._turn = 1 - lane
            return self._lanes[lane].popleft()

    def take_busy_s(self) -> float:
        """On the executor thread: seconds it spent not waiting for events (working, or
        stopped past a wait's timeout) since the last call: what ``Health.excuse`` grants
        every server, whose heartbeats could not be heard meanwhile."""
        now = time.monotonic()
        busy = now - self._since - self._idle_s
        self._since, self._idle_s = now, 0.0
        return busy

    @staticmethod
    def _run(fn, fut: Future, changes: bool) -> bool:
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - handed back to the caller
            fut.set_exception(err)
        else:
            fut.set_result(result)
        return changes


def _log_error(fut: Future) -> None:
    err = fut.exception()
    if err is not None and not isinstance(err, Stopping):
        log.error("an event on the executor thread failed: %s", err,
                  exc_info=(type(err), err, err.__traceback__))
