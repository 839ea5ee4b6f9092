"""``connect`` and ``Client``: a scheduler's client service (``ClientToScheduler`` in
``gavelsched.proto``) as Python calls that take and return typed records.

``connect(address, token=..., token_file=..., tls=CA)`` reaches a scheduler over gRPC,
with its auth token on every call and TLS verified with the CA that signed its
certificate (docs/runtime.md, "Auth and TLS"). A refused call, a refused token and an
unreachable scheduler each raise ``ClientError``, one line (``rpc_error_line``); a bad
token or CA file raises ``InputError``. ``Client`` itself takes the two ways a call is
made (``call`` for one answer, ``stream`` for many), so the same API runs over any
transport: ``GrpcTransport`` is the real one.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..daemon.jobs import DONE, FINAL
from ..jobenv import SCHEDULER_VAR
from .errors import ClientError, InputError, NoRates, one_line
from .records import Drained, HistoryEvent, LogChunk, Prediction, Submitted
from .request import JobRequest
from .status import ClusterStatus, JobStatus

__all__ = ["DEFAULT_SCHEDULER", "Client", "GrpcTransport", "check_server_id", "connect",
           "default_address", "rpc_error_line"]

DEFAULT_SCHEDULER = "127.0.0.1:50051"
TIMEOUT_S = 30.0          # one call's answer
LOGS_TIMEOUT_S = 300.0    # a whole log, without follow
DRAIN_POLL_S = 1.0        # wait_drained: how often it asks whether jobs still run there
# A wait over the user's budget of calls this long or longer is logged (a warning), at most
# once every NOTE_EVERY_S per connection: the caller learns why its calls slowed.
NOTE_WAIT_S = 1.0
NOTE_EVERY_S = 10.0

log = logging.getLogger(__name__)

Call = Callable[[str, Any], Any]
Stream = Callable[[str, Any, "float | None"], Iterable[Any]]


def default_address() -> str:
    """``$GAVEL_SCHEDULER``, else ``DEFAULT_SCHEDULER``."""
    return os.environ.get(SCHEDULER_VAR, DEFAULT_SCHEDULER)


def rpc_error_line(address: str, err) -> str:
    """One line for a failed call: refused token, unreachable scheduler, bad request."""
    import grpc

    from ..rpc.codes import BUSY, UNREACHED
    code, details = err.code(), (err.details() or "").splitlines()[0:1]
    details = details[0] if details else ""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return (f"the scheduler at {address} refused the call: UNAUTHENTICATED (missing or "
                f"wrong --token-file)")
    if details.startswith(BUSY):        # reached, but too busy to take the call now
        return f"{details} ({address}, {code.name})"
    if code in UNREACHED:
        return f"cannot reach the scheduler at {address} ({code.name})"
    return f"{code.name}: {details}"


def check_server_id(server_id: int) -> None:
    """A worker server's id is a non-negative 64-bit integer, else ``InputError``."""
    if not 0 <= server_id < 2**63:
        raise InputError(f"id: a worker server's id is a non-negative integer, got "
                         f"{server_id}")


def _error(address: str, err) -> ClientError:
    return ClientError(rpc_error_line(address, err), code=err.code().name,
                       details=err.details() or "")


class GrpcTransport:
    """The scheduler at ``address`` over a gRPC channel that sends ``token`` on every call
    and speaks TLS verified with ``ca`` when given; each failed call a ``ClientError``."""

    def __init__(self, address: str, *, token: str | None = None,
                 ca: str | Path | None = None, server_name: str | None = None,
                 timeout_s: float = TIMEOUT_S) -> None:
        from ..rpc import pb_grpc
        from ..rpc.security import SecurityError, channel
        try:
            self._channel = channel(address, token=token, ca=ca, server_name=server_name)
        except SecurityError as err:
            raise InputError(str(err)) from None
        self.address, self._timeout = address, timeout_s
        self._stub = pb_grpc.ClientToSchedulerStub(self._channel)
        self._noted_at = -NOTE_EVERY_S     # when a wait over the budget was last logged

    def call(self, method: str, request: Any) -> Any:
        """One call of ``method`` (``Submit``, ``Status``, ...) and its answer. A call
        refused over the user's budget of calls (``codes.retry_after``) is made again once
        the scheduler says it may be, within the call's timeout: a loop of calls slows to
        the budget's pace rather than fail (a wait of ``NOTE_WAIT_S`` or more is logged)."""
        import grpc

        from ..rpc.codes import retry_after
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return getattr(self._stub, method)(request, timeout=self._timeout)
            except grpc.RpcError as err:
                wait = retry_after(err)
                now = time.monotonic()
                if wait is None or now + wait > deadline:
                    raise _error(self.address, err) from None
                if wait >= NOTE_WAIT_S and now - self._noted_at >= NOTE_EVERY_S:
                    self._noted_at = now
                    log.warning("the scheduler at %s: %s (waiting, then asking again)",
                                self.address,
                                (err.details() or "over your budget of calls").splitlines()[0])
                time.sleep(wait)

    def stream(self, method: str, request: Any, timeout_s: float | None) -> Iterator[Any]:
        """The answers of a streaming ``method``, as they come (``timeout_s`` None: none)."""
        import grpc
        try:
            yield from getattr(self._stub, method)(request, timeout=timeout_s)
        except grpc.RpcError as err:
            raise _error(self.address, err) from None

    def close(self) -> None:
        self._channel.close()


def connect(address: str | None = None, *, token: str | None = None,
            token_file: str | Path | None = None, tls: str | Path | None = None,
            server_name: str | None = None, timeout_s: float = TIMEOUT_S) -> Client:
    """A ``Client`` of the scheduler at ``address`` (``host:port``; default
    ``$GAVEL_SCHEDULER`` or 127.0.0.1:50051). ``token`` (or the file ``token_file`` holds)
    goes with every call; ``tls``, a CA certificate (PEM) file, makes the channel TLS and
    verifies the scheduler with it (``server_name`` overrides the name checked)."""
    from ..rpc.security import SecurityError, read_token
    if token is None and token_file is not None:
        try:
            token = read_token(token_file)
        except SecurityError as err:
            raise InputError(str(err)) from None
    wire = GrpcTransport(address or default_address(), token=token, ca=tls,
                         server_name=server_name, timeout_s=timeout_s)
    return Client(wire.call, wire.stream, close=wire.close)


class Client:
    """The scheduler's client calls, over ``call`` (one request, one answer) and
    ``stream`` (one request, many answers). Use ``connect`` to make one; a ``Client`` is
    a context manager that closes its channel."""

    def __init__(self, call: Call, stream: Stream | None = None, *,
                 close: Callable[[], None] | None = None) -> None:
        self._call, self._stream, self._close = call, stream, close

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._close is not None:
            self._close()

    def call(self, method: str, request: Any) -> Any:
        """One call of the scheduler's client service by name (``Submit``, ``Status``, ...)
        with its ``pb`` request, and the ``pb`` answer: what every method here is made of."""
        return self._call(method, request)

    def submit(self, job: JobRequest) -> str:
        """Submit ``job``; its id."""
        return self.call("Submit", job.to_pb()).job_id

    def submit_array(self, job: JobRequest, count: int) -> Submitted:
        """Submit ``count`` copies of ``job`` as an array (each told its index in
        ``GAVEL_ARRAY_INDEX``); 1 <= count <= 10,000, else ``InputError``."""
        from traces.checks import MAX_ARRAY  # (here: ``traces`` imports numpy)
        if not 1 <= count <= MAX_ARRAY:
            raise InputError(f"count: must be between 1 and {MAX_ARRAY}, got {count}")
        request = job.to_pb()
        request.count = count
        reply = self.call("Submit", request)
        return Submitted(tuple(reply.job_ids) or (reply.job_id,), reply.array_id or None)

    def status(self, *, states: Sequence[str] = (), job_type: str = "", entity: str = "",
               active: bool = False, mine: bool = False, user: str = "") -> ClusterStatus:
        """The jobs (only those in ``states``, of ``job_type`` (ResNet-50: every batch
        size), of ``entity``; ``active``: only those not finished; ``mine``: only the
        caller's; ``user``: only that user's) and every worker."""
        return ClusterStatus.from_pb(self.status_reply(
            states=states, job_type=job_type, entity=entity, active=active, mine=mine,
            user=user))

    def status_reply(self, *, states: Sequence[str] = (), job_type: str = "",
                     entity: str = "", active: bool = False, mine: bool = False,
                     user: str = "", period: bool = False):
        """``status`` as the scheduler's ``pb.StatusResponse`` (what a replay reads);
        ``period``: with the allocation period in progress, as the scheduler's own
        forecast replays it."""
        from ..rpc import pb
        return self.call("Status", pb.StatusRequest(
            states=list(states), job_type=job_type, entity=entity, active=active,
            mine=mine, user=user, period=period))

    def hold(self, job_id: str, reason: str = "") -> str:
        """Keep a job (or every copy of an array) from being scheduled; a running one stops
        at its lease's end. The scheduler's one-line answer."""
        from ..rpc import pb
        return self.call("Hold", pb.JobControlRequest(job_id=job_id, reason=reason)).message

    def release(self, job_id: str) -> str:
        """Undo ``hold``."""
        from ..rpc import pb
        return self.call("Release", pb.JobControlRequest(job_id=job_id)).message

    def update(self, job_id: str, *, priority_weight: float | None = None,
               entity: str | None = None) -> str:
        """A new priority weight or entity for a job (or an array) not ended, from the
        next round."""
        from ..rpc import pb
        return self.call("Update", pb.UpdateRequest(
            job_id=job_id, priority_weight=priority_weight or 0.0,
            entity=entity or "")).message

    def reload(self) -> str:
        """Make the scheduler re-read its config's entities, policy options, prices and
        users (admins only); ``ClientError`` with the key when the new file does not load
        (the old settings stay)."""
        from ..rpc import pb
        return self.call("Reload", pb.ReloadRequest()).message

    def history(self, job_id: str) -> tuple[HistoryEvent, ...]:
        """Who changed the job (or an array's first copy), how and when, oldest first."""
        from ..rpc import pb
        reply = self.call("History", pb.HistoryRequest(job_id=job_id))
        return tuple(HistoryEvent(e.time_unix, e.user, e.action, e.detail)
                     for e in reply.events)

    def usage(self, by: str = "user", since_unix: float = 0.0):
        """GPU-hours and cost by ``user``, ``entity`` or ``type``, of the runs that ran
        after ``since_unix`` (0: all): a ``UsageReport`` (``daemon/accounting.py``)."""
        from ..daemon.accounting import UsageReport
        from ..rpc import pb
        return UsageReport.from_pb(self.call("Usage", pb.UsageRequest(
            by=by, since_unix=since_unix)), since_unix)

    def wait(self, job_id: str, *, timeout_s: float = 600.0, poll_s: float = 0.5) -> JobStatus:
        """Poll until job ``job_id`` has ended (done, failed or cancelled) and return its
        last status; ``TimeoutError`` after ``timeout_s`` seconds, ``ClientError`` for a
        job the scheduler does not know."""
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.status().job(job_id)
            if job is None:
                raise ClientError(f"no job {job_id!r} at the scheduler")
            if job.state in FINAL:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} has not ended after {timeout_s:g} s "
                                   f"({job.state})")
            time.sleep(poll_s)

    def cancel(self, job_id: str) -> None:
        """Cancel a queued or running job; ``ClientError`` when the scheduler says no."""
        from ..rpc import pb
        ack = self.call("Cancel", pb.CancelRequest(job_id=job_id))
        if not ack.ok:
            raise ClientError(ack.message)

    def drain(self, server_id: int, *, undo: bool = False) -> Drained:
        """Take worker server ``server_id`` out of service (docs/runtime.md, "Draining a
        worker"), or put it back with ``undo``."""
        from ..rpc import pb
        check_server_id(server_id)
        reply = self.call("Drain", pb.DrainRequest(server_id=server_id, undo=undo))
        return Drained(reply.drained, reply.runs, reply.message)

    def wait_drained(self, server_id: int, timeout_s: float,
                     poll_s: float = DRAIN_POLL_S) -> str:
        """Wait until no job runs on drained server ``server_id``: ``"drained"``;
        ``"undrained"`` if it is put back meanwhile (or is gone); ``"timeout"`` after
        ``timeout_s`` seconds."""
        if not timeout_s > 0:
            raise InputError(f"timeout_s: must be > 0 seconds, got {timeout_s}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            time.sleep(poll_s)
            # (the workers come with every answer; asking only for done jobs keeps it short)
            answer = self.status(states=(DONE,))
            server = next((w for w in answer.workers if w.id == str(server_id)), None)
            if server is None or not server.drained:
                return "undrained"
            if server.runs == 0:
                return "drained"
        return "timeout"

    def logs(self, job_id: str, *, follow: bool = False, ranks: Sequence[int] = (),
             stream: str | None = None) -> Iterator[LogChunk]:
        """A job's output from the workers that ran it, by round, rank, then stdout before
        stderr (``ranks``, ``stream`` "out"/"err": only those); ``follow``: on until the
        job has ended. A rank is an int in ``[0, 2^31)``, else ``InputError``; that and a
        client that cannot stream are raised here, not at the first chunk."""
        from traces.checks import INT32_MAX  # (here: ``traces`` imports numpy)

        from ..rpc import pb
        bad = [r for r in ranks if not 0 <= r <= INT32_MAX]
        if bad:
            raise InputError(f"rank: must be between 0 and {INT32_MAX}, got {bad[0]}")
        if self._stream is None:
            raise ClientError("this client cannot stream (no stream transport)")
        request = pb.LogsRequest(job_id=job_id, follow=follow, ranks=list(ranks),
                                 stream=stream or "")
        chunks = self._stream("Logs", request, None if follow else LOGS_TIMEOUT_S)
        return (LogChunk.from_pb(chunk) for chunk in chunks)

    def predict(self, job: JobRequest) -> Prediction:
        """If ``job`` were submitted now: when it would start and finish, and how much later
        every other job would finish. The scheduler's live state, with its allocation
        period, is replayed in the simulator under the daemon's rules, here, in this process
        (``simulator/twin.py``), as the scheduler's own forecast replays it; nothing is
        submitted. ``NoRates`` when the job's type has no throughput on the
        cluster's types; ``ClientError`` when the state cannot be replayed."""
        from simulator import SimulationError
        from simulator.live import NEW_ID, hypothetical, pairing, state_of
        from simulator.whatif import predict, why_sooner

        state = state_of(self.status_reply(active=True, period=True))
        if not state.workers:
            raise InputError("the scheduler has no alive workers: nothing to predict on")
        new = hypothetical(job, state)
        if not any(r > 0 for r in new.steps_per_s.values()):
            raise NoRates(f"job type {job.job_type!r} has no throughput in the catalog on "
                          f"the cluster's types {sorted(state.workers)}")
        try:
            before, after = predict(pairing(state, new), new)
        except (SimulationError, ValueError) as err:
            raise ClientError(f"cannot replay the scheduler's state: {one_line(err)}") \
                from None
        sooner = [j.id for j in state.jobs if None not in (before[j.id].finish_s,
                  after[j.id].finish_s) and after[j.id].finish_s < before[j.id].finish_s]
        return Prediction(state, after[NEW_ID], before, after,
                          {j: why_sooner(state, new, j) for j in sooner})
