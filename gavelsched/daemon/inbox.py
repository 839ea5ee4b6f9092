"""The executor thread's inbox: how other threads reach the scheduler's state
(``executor``'s threading contract). gRPC handlers and the dispatcher's pool threads put a
closure here with ``post`` (``call`` waits for its result; ``tell`` logs what it raised);
the executor thread runs them in arrival order and hands each result, or exception, back
through a ``Future``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

# When the caller of the call this thread serves stops waiting (monotonic; ``caller_waits``)
_deadline: ContextVar[float | None] = ContextVar("deadline", default=None)


class Stopping(RuntimeError):
    """The executor thread has stopped: an event posted now is never run."""


class TooLate(TimeoutError):
    """The executor did not run the event before its caller's deadline (it still will)."""


@contextmanager
def caller_waits(seconds: float | None) -> Iterator[None]:
    """On a gRPC handler's thread: ``call`` waits at most ``seconds`` (the caller's time
    left; None: no deadline). A handler thread that waits past it serves no one, and at
    2,048 GPUs such waits held every one of them, heartbeats' included."""
    token = _deadline.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


class Inbox:
    def __init__(self) -> None:
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._idle_s = 0.0      # seconds the executor thread waited for events (``take_busy_s``)
        self._since = time.monotonic()

    def post(self, fn: Callable[[], Any], *, changes: bool = True) -> Future:
        """Run ``fn`` on the executor thread; its result (or exception) lands in the future.
        ``changes=False``: it changes nothing ``Status`` shows (no new snapshot needed)."""
        fut: Future = Future()
        if self._stop.is_set():        # (a handler racing the shutdown: answered at once,
            fut.set_exception(Stopping("the scheduler is stopping"))   # not after 30 s)
            return fut
        self._events.put((fn, fut, changes))
        return fut

    def tell(self, fn: Callable[[], Any], *, changes: bool = True) -> None:
        """``post`` with no one waiting for the result: what ``fn`` raises is logged."""
        self.post(fn, changes=changes).add_done_callback(_log_error)

    def call(self, fn: Callable[[], Any], timeout: float = 30.0, *,
             changes: bool = True) -> Any:
        """``post`` and wait for the result (raises what ``fn`` raised), at most ``timeout``
        seconds or to the caller's deadline (``caller_waits``): else ``TooLate``."""
        deadline = _deadline.get()
        if deadline is not None:
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        try:
            return self.post(fn, changes=changes).result(timeout)
        except FutureTimeout:
            raise TooLate(f"the scheduler did not get to it within {timeout:.1f} s") from None

    def stop(self) -> None:
        self._stop.set()
        self._events.put((lambda: None, Future(), False))

    def refuse_pending(self) -> None:
        """On the executor thread, as it ends: the events still queued fail with
        ``Stopping``."""
        while True:
            try:
                _, fut, _ = self._events.get_nowait()
            except queue.Empty:
                return
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
        try:
            try:
                event = self._events.get(timeout=wait)
            finally:
                self._idle_s += time.monotonic() - began
            while True:
                changed = self._run(*event) or changed
                if time.monotonic() >= until:
                    break
                event = self._events.get_nowait()
        except queue.Empty:
            pass
        return changed

    def take_busy_s(self) -> float:
        """On the executor thread: seconds it spent not waiting for events (working) since
        the last call."""
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
