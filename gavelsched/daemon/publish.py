"""When the executor republishes its picture of the daemon: ``snapshot`` (what ``Status``
and the dashboard read, never live state: the core's threading contract, ``executor``) and
the Prometheus metrics.

After a change (``changed``: an event ran, a job's state changed, a round was planned or
began), at most every ``SNAPSHOT_EVERY_S`` once more than ``LARGE_TABLE`` jobs exist, and at
least every ``SNAPSHOT_MAX_AGE_S`` while a job runs (its elapsed time moves). Runs on the
executor thread, on the clock it is handed. A large table's picture takes long to build
(2.2 s at 50,000 jobs on a 2-core machine, 0.7 s of it the view), so it waits
``BUILD_SHARE`` times as long as the last one took before the next, and beyond
``BACKGROUND_TABLE`` jobs the Status is built from the (frozen) view on a thread of its
own: the executor thread holds only the view, and pictures take about a fifth of the
process. Else they held the executor for seconds at a time, past its workers' heartbeat
timeout (BENCHMARKS.md, "The daemon at scale"). Nor does such a build start when the
executor's next plan or round start (``quiet_at``) would come before it ends, as the last
one took: its turns at the GIL slowed a plan of 50,000 jobs 2-3 fold. It starts after
that work instead (once: a build longer than the time between them is not put off again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .metrics import DaemonMetrics
from .snapshot import Snapshot, build_snapshot
from .view import DaemonView

SNAPSHOT_EVERY_S = 0.5
LARGE_TABLE = 500              # jobs: beyond this many, a picture at most every SNAPSHOT_EVERY_S
SNAPSHOT_MAX_AGE_S = 5.0       # while a job runs, a picture at least this often
BUILD_SHARE = 5.0              # a large table's next picture waits this many times its build
BACKGROUND_TABLE = 5_000       # jobs: beyond this many, the Status is built off the executor


class Publisher:
    """``snapshot``, republished from ``view()`` by the rule above."""

    def __init__(self, first: DaemonView, view: Callable[[], DaemonView],
                 metrics: DaemonMetrics | None, *, jobs: Callable[[], int],
                 clock: Callable[[], float]) -> None:
        self._view, self._metrics, self._jobs, self._clock = view, metrics, jobs, clock
        self.dirty = True
        self._next = 0.0
        self.snapshot: Snapshot = build_snapshot(first)
        self._at = clock()
        self._building: threading.Thread | None = None    # (``BACKGROUND_TABLE``)
        self._build_s = 0.0            # the last background build's seconds
        self._put_off = False          # the next picture was put off past a plan or start

    def changed(self) -> None:
        self.dirty = True

    def deadlines(self, running: bool) -> list[float]:
        """When the executor must wake for the next picture (``running``: a job runs): when
        ``due`` would build it, never before. An aged picture is not built before ``_next``
        either, so a deadline of its age alone lay in the past until then, and the executor
        loop, whose wait it bounds, spun (at 50,000 jobs a build takes seconds and waits five
        times as long: the loop spun for seconds of every such wait)."""
        if self.dirty:
            return [self._next]
        return [max(self._next, self._at + SNAPSHOT_MAX_AGE_S)] if running else []

    def due(self, mono: float, running: bool, quiet_at: float | None = None) -> None:
        """Republish if changed (or, while a job runs, aged) and not too soon; a background
        build not if it would run into ``quiet_at`` (the executor's next plan or round
        start, monotonic), but after it."""
        if running and mono >= self._at + SNAPSHOT_MAX_AGE_S:
            self.dirty = True
        if not self.dirty or mono < self._next:
            return
        if (quiet_at is not None and not self._put_off and self._jobs() > BACKGROUND_TABLE
                and mono <= quiet_at < mono + self._build_s):
            self._next, self._put_off = quiet_at, True
            return
        self._publish(mono)

    def now(self) -> None:
        """Republish now, unless the table is large and a picture is younger than
        SNAPSHOT_EVERY_S: a client that just submitted or cancelled then sees it in its
        next Status (read your writes)."""
        mono = self._clock()
        if mono >= self._next:
            self._publish(mono)

    def _publish(self, mono: float) -> None:
        jobs = self._jobs()
        if self._building is not None and self._building.is_alive():
            self._next = mono + SNAPSHOT_EVERY_S          # (the last one is not done)
            return
        began = time.perf_counter()
        view = self._view()
        self._at = mono
        self.dirty = self._put_off = False
        if jobs > BACKGROUND_TABLE:
            took = time.perf_counter() - began + self._build_s
            self._building = threading.Thread(target=self._build, args=(view,), daemon=True,
                                              name="gavelsched-snapshot")
            self._building.start()
        else:
            self._build(view)
            took = time.perf_counter() - began
        self._next = mono + (max(SNAPSHOT_EVERY_S, BUILD_SHARE * took) if jobs > LARGE_TABLE
                             else 0.0)

    def _build(self, view: DaemonView) -> None:
        """The Status of ``view`` (immutable), and the metrics that read it."""
        began = time.perf_counter()
        self.snapshot = build_snapshot(view)
        if self._metrics is not None:
            self._metrics.on_state(view)
        self._build_s = time.perf_counter() - began
