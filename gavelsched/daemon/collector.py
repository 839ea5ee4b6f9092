"""Python's full garbage collection, at a time the scheduler chooses (issue #30).

CPython collects its oldest generation whenever the objects that survived into it have
grown by a quarter, scanning every one of them with every thread stopped. A scheduler of
100,000 jobs holds over a million objects that live as long as their jobs: a run at 2,048
GPUs made 39 such collections in five minutes, 0.2-0.7 s each and 11 s in all, wherever
they fell (a plan, a dispatch, the heartbeats), and all but the last at exit found nothing
to free (BENCHMARKS.md, "The daemon at scale").

While a ``Collector`` has taken over, the young generations are collected as before and the
oldest only by ``collect``: the executor calls it once a round, when the round has started
(its RunJobs sent, the next plan far off), and ``due`` every ``IDLE_EVERY_S`` while no round
runs. What each collection took is logged (DEBUG; WARNING past ``SLOW_S``) and reported.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

IDLE_EVERY_S = 300.0    # a full collection at least this often while no round runs
SLOW_S = 1.0            # a collection longer than this is logged as a warning
NEVER = 2**31 - 1       # the oldest generation's threshold while taken over

_lock = threading.Lock()
_holders = 0            # collectors that have taken over (several daemons in one process)
_thresholds: tuple[int, ...] = ()


class Collector:
    """``take_over()`` then ``collect()`` at the moments chosen, ``give_back()`` at the end.
    ``report(seconds)``: each collection's time (a metric); ``clock``: monotonic seconds."""

    def __init__(self, report: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._report, self._clock = report, clock
        self._taken = False
        self._last = clock()

    def take_over(self) -> None:
        """Stop CPython's own collections of the oldest generation (young ones go on)."""
        global _holders, _thresholds
        with _lock:
            if self._taken:
                return
            if _holders == 0:
                _thresholds = gc.get_threshold()
                gc.set_threshold(_thresholds[0], _thresholds[1], NEVER)
            _holders += 1
            self._taken = True
        self._last = self._clock()

    def give_back(self) -> None:
        """CPython's thresholds as they were, once the last collector gives back."""
        global _holders
        with _lock:
            if not self._taken:
                return
            self._taken = False
            _holders -= 1
            if _holders == 0:
                gc.set_threshold(*_thresholds)

    def collect(self) -> float:
        """A full collection now; its seconds. Nothing while not taken over (CPython's own
        rule is in force)."""
        if not self._taken:
            return 0.0
        began = time.perf_counter()
        freed = gc.collect()
        took = time.perf_counter() - began
        self._last = self._clock()
        log.log(logging.WARNING if took > SLOW_S else logging.DEBUG,
                "full garbage collection: %.3f s, %d objects freed", took, freed)
        if self._report is not None:
            self._report(took)
        return took

    def due(self) -> None:
        """``collect`` if none ran for ``IDLE_EVERY_S`` (no round has started)."""
        if self._taken and self._clock() - self._last >= IDLE_EVERY_S:
            self.collect()
