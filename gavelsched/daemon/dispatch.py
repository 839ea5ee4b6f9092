"""Calls from the scheduler to worker daemons (``SchedulerToWorker``: run, kill, shutdown,
read logs).

The executor thread never waits on the network: it queues each call, one sender thread
makes it a gRPC future, in order, all of a round's in flight at once (a pool of 8 threads
sent them 8 at a time, and a worker that did not answer held a thread its whole timeout;
making the futures took a sixth of the executor thread at 2,048 GPUs: BENCHMARKS.md, "The
daemon at scale"), and its answer comes back as an event (``on_done``) on the executor's
queue. While the executor places a round's runs, its calls are ``held`` and queued at once
after, each worker's RunJobs as one ``RunJobs`` call (an older worker that has none gets
them one by one): sent as they were made, a round's thousands of calls woke the sender and
gRPC's threads, whose turns at the GIL slowed the placing itself tenfold (2,048 GPUs: 0.6 s
of the executor's work took 4-7 s), and the one sender thread, starved the same way, took
5-20 s to make 2,048 calls, 0.5 s of it its own work. ``read_logs`` alone waits for its
answer, on the thread of the ``Logs`` handler that asks. One channel per worker address,
carrying the cluster's token (thesis §5.6; ``gavelsched.rpc.security``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from ..rpc import pb, pb_grpc
from ..rpc.codes import UNREACHED
from ..rpc.security import channel

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0

# Why a RunJob is sent, as a round's dispatch line counts them (``RoundDispatch``): a
# placement of the round's plan (at the plan, or at the round's start); one that waited for
# its job's last run to save; freed GPUs given for the rest of a round (``refills.py``); a
# lease moved past the round's end for a long start-up (``Runs.started_up``).
PLANNED, AFTER_SAVE, REFILL, LEASE_MOVED = "planned", "after_save", "refill", "lease_moved"
RUN_JOBS = "RunJobs"      # a worker's RunJobs of a ``held`` batch, in one call
LATER = {AFTER_SAVE: "once their jobs' last runs had saved", REFILL: "to freed GPUs",
         LEASE_MOVED: "moving a lease past its round's end"}


@dataclass(frozen=True)
class Delivery:
    """How a call to a worker ended: ``ok``; else ``unreachable`` (the worker was not
    reached, or did not answer) or refused, with the worker's or gRPC's ``message``."""

    ok: bool
    unreachable: bool = False
    message: str = ""


def _batched(calls: list[tuple], single: set[str]) -> list[tuple]:
    """``calls`` in order, each worker's consecutive RunJobs (no other call to it between
    them) as one ``RunJobs`` call carrying them; one RunJob, or a worker in ``single``,
    stays as it is."""
    out: list = []
    open_: dict[str, list[tuple]] = {}      # worker -> the RunJobs its next ones join
    for call in calls:
        address, method = call[0], call[1]
        if method == "RunJob" and address not in single:
            if address not in open_:
                open_[address] = []
                out.append(open_[address])
            open_[address].append(call)
        else:
            open_.pop(address, None)
            out.append(call)
    return [item if isinstance(item, tuple) else item[0] if len(item) == 1
            else (item[0][0], RUN_JOBS, item, None, "") for item in out]


class Dispatcher:
    """Fire-and-report RPCs to workers. ``on_done(Delivery)`` is called from a gRPC
    thread; it must only hand the answer to the executor (``DaemonExecutor.post``)."""

    def __init__(self, token: str | None = None, ca: str | Path | None = None) -> None:
        self._token, self._ca = token, ca
        self._unanswered = 0            # calls whose answer has not been handed on yet
        self._stubs: dict[str, pb_grpc.SchedulerToWorkerStub] = {}
        self._channels: list[grpc.Channel] = []
        self._lock = threading.Lock()
        self._all_answered = threading.Condition(self._lock)
        # round -> kind -> (RunJobs answered, the last answer's time)
        self._answered: dict[int, dict[str, tuple[int, float]]] = {}
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()   # calls to make, in order
        self._holder: int | None = None     # the thread whose calls are ``held``
        self._held: list[tuple] = []
        self._single: set[str] = set()      # workers that take no ``RunJobs`` (older ones)
        self._sender = threading.Thread(target=self._send, name="gavelsched-dispatch",
                                        daemon=True)
        self._sender.start()

    def _stub(self, address: str) -> pb_grpc.SchedulerToWorkerStub:
        with self._lock:
            stub = self._stubs.get(address)
            if stub is None:
                chan = channel(address, token=self._token, ca=self._ca)
                self._channels.append(chan)
                stub = self._stubs[address] = pb_grpc.SchedulerToWorkerStub(chan)
            return stub

    def _call(self, address: str, method: str, request,
              on_done: Callable[[Delivery], None] | None, kind: str = "") -> None:
        call = (address, method, request, on_done, kind)
        if self._holder == threading.get_ident():
            self._held.append(call)
        else:
            self._outbox.put(call)

    @contextmanager
    def held(self) -> Iterator[None]:
        """The calls this thread makes inside are queued together as it leaves, a worker's
        RunJobs as one ``RunJobs`` call (see the module docstring)."""
        if self._holder is not None:            # (already held: the outer one queues)
            yield
            return
        self._holder = threading.get_ident()
        try:
            yield
        finally:
            self._holder = None
            held, self._held = self._held, []
            for call in _batched(held, self._single):
                self._outbox.put(call)

    def _send(self) -> None:
        """The sender thread: each queued call becomes a gRPC future (None: stop)."""
        while (call := self._outbox.get()) is not None:
            self._start_or_fail(call)

    def _start_or_fail(self, call: tuple) -> None:
        """``_start`` the call; one that cannot be made is answered as not delivered."""
        try:
            self._start(*call)
        except Exception as err:  # noqa: BLE001 - one bad call must not stop the others
            log.exception("%s to %s could not be sent", call[1], call[0])
            failed = Delivery(False, True, f"{call[0]}: {type(err).__name__}: {err}")
            for one in call[2] if call[1] == RUN_JOBS else [call]:
                self._hand_on(one, failed)

    def _start(self, address: str, method: str, request,
               on_done: Callable[[Delivery], None] | None, kind: str) -> None:
        """Make the call a future; its answer is handed on from a gRPC thread. A
        ``RunJobs`` call's ``request`` is the RunJob calls it carries."""
        calls = request if method == RUN_JOBS else [(address, method, request, on_done, kind)]

        def finished(future) -> None:       # a gRPC thread (or this one, if already done)
            try:
                try:
                    answer = future.result()
                    acks = answer.acks if method == RUN_JOBS else [answer]
                    done = [Delivery(a.ok, message=a.message) for a in acks]
                    done += [Delivery(False, True, f"{address}: {method} answered "
                                                   f"{len(acks)} of {len(calls)}")
                             ] * (len(calls) - len(acks))
                except grpc.RpcError as err:
                    if method == RUN_JOBS and err.code() == grpc.StatusCode.UNIMPLEMENTED:
                        self._single.add(address)       # an older worker: one call each
                        for one in calls:               # (in flight before this one ends,
                            self._start_or_fail(one)    # so ``close`` waits for them)
                        return
                    done = [Delivery(False, err.code() in UNREACHED,
                                     f"{address}: {err.code().name}: {err.details()}")
                            ] * len(calls)
                except Exception as err:  # noqa: BLE001 - cancelled at close: not delivered
                    done = [Delivery(False, True, f"{address}: {type(err).__name__}")
                            ] * len(calls)
                for one, delivery in zip(calls, done):
                    self._hand_on(one, delivery)
            finally:
                with self._lock:
                    self._unanswered -= 1
                    self._all_answered.notify_all()
        message = (pb.RunJobsRequest(runs=[one[2] for one in calls]) if method == RUN_JOBS
                   else request)
        future = getattr(self._stub(address), method).future(message, timeout=CALL_TIMEOUT_S)
        with self._lock:
            self._unanswered += 1
        future.add_done_callback(finished)

    def _hand_on(self, call: tuple, done: Delivery) -> None:
        """A call's answer (or its failure) counted, logged if not ok, handed on."""
        address, method, request, on_done, kind = call
        if method == "RunJob":
            self._note(int(request.round), kind)
        if not done.ok:
            log.warning("%s to %s: %s", method, address, done.message)
        if on_done is not None:
            on_done(done)

    def _note(self, round_: int, kind: str) -> None:
        with self._lock:
            kinds = self._answered.setdefault(round_, {})
            count, _ = kinds.get(kind, (0, 0.0))
            kinds[kind] = (count + 1, time.monotonic())

    def answered(self, round_: int) -> dict[str, tuple[int, float]]:
        """Per kind (``PLANNED`` ...), the RunJobs of round ``round_`` answered or given up
        on and the monotonic time of the last, forgetting that round and older ones."""
        with self._lock:
            got = self._answered.pop(round_, {})
            for old in [r for r in self._answered if r < round_]:
                del self._answered[old]
            return got

    def run_job(self, address: str, request: pb.RunJobRequest,
                on_done: Callable[[Delivery], None] | None = None, *,
                kind: str = PLANNED) -> None:
        """``kind``: why it is sent (``PLANNED`` ...), as ``answered`` counts it."""
        self._call(address, "RunJob", request, on_done, kind)

    def kill_job(self, address: str, job_id: str, reason: str, generation: int = 0) -> None:
        """Kill run ``generation`` of the job there (0: whichever runs)."""
        self._call(address, "KillJob", pb.KillJobRequest(job_id=job_id, reason=reason,
                                                         generation=generation), None)

    def read_logs(self, address: str, request: pb.ReadLogsRequest) -> pb.ReadLogsResponse:
        """ReadLogs on the caller's thread; raises ``grpc.RpcError``."""
        return self._stub(address).ReadLogs(request, timeout=CALL_TIMEOUT_S)

    def shutdown_worker(self, address: str, reason: str) -> None:
        self._call(address, "Shutdown", pb.ShutdownRequest(reason=reason), None)

    def close(self) -> None:
        """Send what is queued, wait until every call in flight has been answered and its
        answer handed on (each ends within its timeout), then close."""
        self._outbox.put(None)
        self._sender.join()
        with self._lock:
            self._all_answered.wait_for(lambda: self._unanswered == 0,
                                        timeout=2 * CALL_TIMEOUT_S)
        for chan in self._channels:
            chan.close()


@dataclass
class RoundDispatch:
    """How long a planned round took to plan, and its RunJobs to reach their workers: the
    last answer after the round's plan and after its start (a log line at the next plan,
    and ``gavelsched_dispatch_seconds``; BENCHMARKS.md, "The daemon at scale"). Monotonic
    times; ``solved``: the re-solve's seconds when the plan re-solved; ``worked``: the
    executor thread's CPU seconds of the plan (the rest of ``took``: its waits for the GIL).

    The plan's RunJobs (``PLANNED``) are timed; the others the round sent later are counted
    apart, each kind with its last answer after the round's start: launches that waited
    for their job's last run to save, refills and moved leases come when those happen, not
    when the plan is dispatched."""

    index: int
    planned: float
    took: float
    solved: float | None
    started: float | None = None
    worked: float | None = None
    # (tasks kept on their GPUs, tasks that had GPUs last round): the plan's lease extensions
    kept: tuple[int, int] | None = None

    def report(self, dispatcher: Dispatcher, on_dispatch: Callable[[float], None] | None
               ) -> None:
        head = f"round {self.index}: planned in {self.took:.2f} s"
        if self.worked is not None:
            head += f", {self.worked:.2f} s of it the executor's own work"
        if self.solved is not None:
            head += f" (the allocation re-solved in {self.solved:.2f} s)"
        got = dispatcher.answered(self.index)
        plan = got.pop(PLANNED, None)
        if plan is None:
            parts = [f"{head}, no RunJob at its plan"]
        else:
            count, last = plan
            parts = [f"{head}; {count} RunJobs answered, the last {last - self.planned:.2f} s "
                     f"after its plan{self._after_start(last)}"]
            if on_dispatch is not None:
                on_dispatch(last - self.planned)
        parts += [f"then {count} {LATER[kind]}, the last {self._since(last)}"
                  for kind, (count, last) in sorted(got.items())]
        if self.kept is not None:
            parts.append(f"{self.kept[0]} of last round's {self.kept[1]} tasks kept on their "
                         "GPUs")
        log.info("%s", "; ".join(parts))

    def _after_start(self, at: float) -> str:
        return "" if self.started is None else f", {at - self.started:.2f} s after its start"

    def _since(self, at: float) -> str:
        return (f"{at - self.planned:.2f} s after its plan" if self.started is None
                else f"{at - self.started:.2f} s after its start")
