"""The scheduler's own ETAs (issue #29; docs/runtime.md, "ETA").

At each round's start, and when a job arrives or ends, the executor offers the
``Forecaster`` its latest ``Snapshot`` and the core's allocation period in progress
(``offer``: never blocks; the latest picture wins). The forecaster's own thread takes that
picture's unfinished jobs, adds the period (``with_period``: the replay goes on with the
scheduler's round-by-round priorities, thesis §5.5, instead of a period of its own) and
has the forecast process (``python -m simulator.forecast``, niced) replay them in the
simulator twin (thesis §5.7: the simulator is the cluster's model). The answer becomes ``latest`` (a ``Forecast``) and ``ready()`` tells the
executor to republish its snapshot. No replay runs on the executor thread or in its
process, so a round's plan never waits for a forecast (BENCHMARKS.md, "The scheduler's
ETA replay"). The process starts at the first offer and again after it dies; a replay
still running after ``timeout_s`` is stopped. Either becomes the forecast's error, and the
last ETAs stay.
"""

from __future__ import annotations

import json
import logging
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from policies import key_members

from ..core import PeriodState
from ..rpc import pb
from ..rpc.frames import FrameError, read_frame, write_frame

log = logging.getLogger(__name__)
COMMAND = (sys.executable, "-m", "simulator.forecast", "--nice", "10")
TIMEOUT_S = 3600.0     # a replay ends (its horizon); 10,000 jobs took 2 min on a free core


@dataclass(frozen=True)
class Forecast:
    """One replay's answer: each job's predicted start (a job that has not started) and
    finish on the scheduler's clock, the picture's time (``computed_s``), why there are
    none (``error``) and the wall seconds the replay took."""

    computed_s: float
    start_s: Mapping[str, float] = field(default_factory=dict)
    finish_s: Mapping[str, float] = field(default_factory=dict)
    error: str = ""
    replay_s: float = 0.0

    @classmethod
    def of_answer(cls, answer: pb.StatusResponse, replay_s: float) -> Forecast:
        return cls(answer.eta_computed_s,
                   {j.id: j.eta_start_s for j in answer.jobs if j.eta_start_s >= 0},
                   {j.id: j.eta_finish_s for j in answer.jobs if j.eta_finish_s >= 0},
                   answer.eta_error, replay_s)


def with_period(picture: pb.StatusResponse, period: PeriodState | None) -> pb.StatusResponse:
    """A copy of ``picture`` with the allocation period in progress (``period_*``, the
    co-located pairs' rows in ``period_pairs``, the policy's carried state): what a replay
    needs to go on with the round-by-round priorities (thesis §5.5) where the scheduler
    is, instead of starting a period of its own."""
    if period is None:
        return picture
    out = pb.StatusResponse()
    out.CopyFrom(picture)
    out.period_start_s, out.period_stale = period.start_s, period.stale
    if period.policy_state:
        out.period_policy_state = json.dumps(dict(period.policy_state))
    row = {key: i for i, key in enumerate(period.keys)}
    types = period.types
    for job in out.jobs:
        i = row.get(job.id)
        if i is None:
            continue
        job.period_x.update(zip(types, period.allocation[i].tolist()))
        job.period_received_s.update(zip(types, period.received[i].tolist()))
        job.period_deficit_s.update(zip(types, period.deficit[i].tolist()))
        if period.isolated is not None:     # (finish-time fairness: Themis t^isolated)
            job.period_isolated[:] = period.isolated[i].tolist()
    shown = {job.id for job in out.jobs}
    for i, key in enumerate(period.keys):      # co-located pairs (thesis §5.3.1)
        members = key_members(key)
        if len(members) == 2 and shown.issuperset(members):
            out.period_pairs.add(a=members[0], b=members[1],
                                 x=dict(zip(types, period.allocation[i].tolist())),
                                 received_s=dict(zip(types, period.received[i].tolist())),
                                 deficit_s=dict(zip(types, period.deficit[i].tolist())))
    return out


class ForecastFailed(RuntimeError):
    """The forecast process died, said nothing sensible, or took too long."""


class Forecaster:
    """``offer(snapshot)`` from the executor thread; ``latest`` (None before the first
    answer) from any thread; ``close()`` stops the thread and the process."""

    def __init__(self, ready: Callable[[], None], *, timeout_s: float = TIMEOUT_S,
                 command: Sequence[str] = COMMAND) -> None:
        self._ready, self._timeout_s, self._command = ready, timeout_s, tuple(command)
        self._cond = threading.Condition()
        self._offered = None
        self._closed = False
        self._process: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._last_error = ""
        self.latest: Forecast | None = None

    def offer(self, snapshot, period: PeriodState | None = None) -> None:
        """Replay this picture next, with the core's allocation period in progress
        (``SchedulerCore.period_state``: the replay goes on with it); a picture offered
        before and not taken yet is dropped. Starts the thread at the first offer."""
        with self._cond:
            if self._closed:
                return
            self._offered = (snapshot, period)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="forecast",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._stop_process()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._offered is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                (snapshot, period), self._offered = self._offered, None
            began = time.monotonic()
            try:
                picture = with_period(snapshot.status(pb.StatusRequest(active=True)), period)
                forecast = Forecast.of_answer(self._ask(picture), time.monotonic() - began)
            except Exception as err:      # the last ETAs stay, with the error; the thread
                # goes on to the next picture (a bug here must not end the ETAs for good)
                message = str(err)
                if not isinstance(err, ForecastFailed):
                    log.exception("forecast: the picture could not be replayed")
                    message = f"internal error: {type(err).__name__}: {err}"
                self._stop_process()
                forecast = replace(self.latest or Forecast(-1.0), error=message,
                                   replay_s=time.monotonic() - began)
            if self._closed:
                return
            if forecast.error and forecast.error != self._last_error:
                log.warning("no ETAs: %s", forecast.error)
            self._last_error = forecast.error
            self.latest = forecast
            self._ready()

    def _ask(self, picture: pb.StatusResponse) -> pb.StatusResponse:
        """The forecast process's answer to one picture."""
        try:
            process = self._process
            if process is None or process.poll() is not None:
                process = self._process = subprocess.Popen(
                    self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            write_frame(process.stdin, picture)
            ready, _, _ = select.select([process.stdout], [], [], self._timeout_s)
            if not ready:
                raise ForecastFailed(f"the replay took longer than {self._timeout_s:g} s")
            data = read_frame(process.stdout)
        except (OSError, ValueError, FrameError) as err:   # (ValueError: closed meanwhile)
            raise ForecastFailed(f"the forecast process failed: {err}") from None
        if data is None:
            raise ForecastFailed(f"the forecast process exited ({process.wait()})")
        answer = pb.StatusResponse()
        try:
            answer.ParseFromString(data)
        except Exception as err:   # noqa: BLE001 - protobuf's DecodeError, any garbage
            raise ForecastFailed(f"the forecast process's answer is not a Status: {err}") \
                from None
        return answer

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
