"""What a round's boundaries took on the executor thread (issue #30): its plan (wall time,
the thread's own CPU, the re-solve) and its start (how late against its boundary, how long
its launches took and how much of that was the thread's own work; the rest was its waits
for the GIL). Both go to the round's two log lines: the start's at once, the plan's with its
RunJobs' answers at the next plan (``dispatch.RoundDispatch``). At 2,048 GPUs these showed
launches of 0.1-0.7 s of work taking 0.5-10.6 s (BENCHMARKS.md, "The daemon at scale",
point 10). Runs on the executor thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..core import Round
from .dispatch import Dispatcher, RoundDispatch
from .metrics import DaemonMetrics


class RoundTimes:
    def __init__(self, dispatcher: Dispatcher, metrics: DaemonMetrics | None,
                 clock: Callable[[], float]) -> None:
        self._dispatcher, self._metrics, self._clock = dispatcher, metrics, clock
        self._dispatch: RoundDispatch | None = None      # the last plan's, until reported
        self._began = (0.0, 0.0)                         # (monotonic, thread CPU) now timed
        self._opened_cpu = 0.0      # the plan's own CPU before its solve went off the thread

    def plan_begins(self) -> None:
        """A plan begins: the last one's line is written."""
        if self._dispatch is not None:
            self._dispatch.report(self._dispatcher, None if self._metrics is None
                                  else self._metrics.on_dispatch)
            self._dispatch = None
        self._begin()

    def opened(self) -> None:
        """The plan's round is opened (``solver``): its CPU so far is the plan's own; the
        events served while its solve runs are not."""
        self._opened_cpu = time.thread_time() - self._began[1]

    def planning(self) -> None:
        """The opened round is planned now: its CPU counts again."""
        self._began = (self._began[0], time.thread_time() - self._opened_cpu)

    def planned(self, index: int, rnd: Round) -> None:
        """Round ``index`` is planned as ``rnd`` (its re-solve's seconds, if it re-solved;
        how many of last round's tasks it keeps on their GPUs): since the plan began (its
        solve's wait included), and the executor's own work on it."""
        at, worked = self._began
        self._dispatch = RoundDispatch(
            index, at, self._clock() - at, None if rnd.resolved is None else rnd.resolved.solve_s,
            worked=time.thread_time() - worked,
            kept=(rnd.lease_extensions, rnd.lease_opportunities))

    def start_begins(self) -> None:
        self._begin()

    def started(self, index: int, due: float | None, mono: float) -> str:
        """Round ``index`` began at ``mono`` (``due``: its boundary; None, the first after
        idle) and its launches are sent: what the round's line says of it."""
        if self._dispatch is not None and self._dispatch.index == index:
            self._dispatch.started = mono
        worked = time.thread_time() - self._began[1]
        return (f"began {0.0 if due is None else mono - due:.2f} s after its boundary, "
                f"launched in {self._clock() - mono:.2f} s ({worked:.2f} s of it the "
                f"executor's own work)")

    def _begin(self) -> None:
        self._began = (self._clock(), time.thread_time())
