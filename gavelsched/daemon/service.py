"""The scheduler's gRPC servicers (thesis §5.6): workers, iterators and clients, plus the
standard health service. Handlers only hand events to the executor (``call``) or read its
snapshot; they never touch the core (``executor``'s threading contract). ``Logs`` reads the
job's servers from the snapshot and streams what they hold (``logs.stream_logs``), at most
``MAX_LOG_STREAMS`` at once, so that followers never take the handler threads leases need.

Every handler knows its caller (``rpc.identity``; the token was checked before it ran):
the worker daemons' calls take the daemon token (or an admin's), a job's iterator calls
its own job's token (or the daemon's), clients a user's. What a user may do to which job
is decided on the executor's thread (``calls``); drain and reload are for admins. A call
its caller may not make gets PERMISSION_DENIED with one line, and changes nothing. A job's
RenewLease and ReportSteps, and a user's calls, are counted against their budgets before
they reach the executor (``budgets``; RESOURCE_EXHAUSTED past them).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from traces.checks import shown

from ..rpc import pb, pb_grpc
from ..rpc.codes import BUSY, RETRY_AFTER
from ..rpc.identity import USER, Caller, Identities, caller_of
from .budgets import Budgets, CallBudget, Tally
from .calls import Denied, OverQuota
from .room import NoRoom, disk_full
from .doors import bad_report, listed_runs, registration, short_of_room
from .executor import DaemonExecutor
from .fences import StaleRun
from .processes import AskAgain
from .inbox import CLIENTS, FLEET, Stopping, TooLate, caller_waits
from .forecast import with_period
from .health import stamped
from .leases import stop_lease
from .servers import running_of
from .logs import LogSources, Reader, stream_logs
from .jobs import STATES

log = logging.getLogger(__name__)

# How long a RenewLease waits for the next round's plan, at most, and less by a margin than
# its caller waits (the iterator: 10 s): a plan later than that is answered BUSY, so that
# the iterator asks again after a pause rather than ending a run the plan may keep.
RENEW_WAIT_S = 8.0
RENEW_MARGIN_S = 1.0
# ... what such an answer says after ``BUSY`` (the iterator logs it; daemon_scale.py counts it)
NOT_PLANNED = "the next round is not planned yet"

# Logs streams served at once (of the server's handler threads); more wait their turn.
MAX_LOG_STREAMS = 16
LOG_STREAM_WAIT_S = 10.0
NO_SOURCES = LogSources((), ended=True)

SERVICES = ("gavelsched.v1.WorkerToScheduler", "gavelsched.v1.IteratorToScheduler",
            "gavelsched.v1.ClientToScheduler")


def _abort_on(context, err: Exception, code=grpc.StatusCode.INVALID_ARGUMENT):
    context.abort(code, str(err).splitlines()[0] if str(err) else type(err).__name__)


def _answer(context, fn):
    """``fn()``, with a refusal as its status: PERMISSION_DENIED (``Denied``), NOT_FOUND
    (an unknown job), INVALID_ARGUMENT (a bad request), RESOURCE_EXHAUSTED (a user's
    ``max_jobs``: ``OverQuota``; the state_dir's disk below its reserve, ``NoRoom``, or
    full: ``room.disk_full``)."""
    try:
        return fn()
    except Denied as err:
        _abort_on(context, err, grpc.StatusCode.PERMISSION_DENIED)
    except (OverQuota, NoRoom) as err:
        _abort_on(context, err, grpc.StatusCode.RESOURCE_EXHAUSTED)
    except LookupError as err:
        _abort_on(context, err, grpc.StatusCode.NOT_FOUND)
    except ValueError as err:          # SubmissionError, ControlError, BadValue
        _abort_on(context, err)
    except (sqlite3.Error, OSError) as err:     # (the store rolled the call's writes back)
        if not disk_full(err):
            raise
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"the scheduler's disk is full "
                      f"({err}): its operator must free space on it")


class ExecutorWaits(grpc.ServerInterceptor):
    """A handler waits on the executor no longer than its caller waits (``caller_waits``).
    A call that races the scheduler's shutdown (``inbox.Stopping``) gets UNAVAILABLE, and
    one the executor did not get to in time (``inbox.TooLate``) DEADLINE_EXCEEDED, in one
    line, without grpc's traceback of an application error.

    ``seats``: how many calls of each kind (``FLEET_METHODS``: the workers' and jobs'; the
    rest: clients') may hold a handler thread at once, ``ANSWERED_AT_ONCE`` apart (they
    never wait on the executor); one more gets UNAVAILABLE at once (``BUSY``), which every
    caller of the scheduler retries or reads as "not reached" (``rpc/codes.py``). At 2,048
    GPUs x 100,000 jobs, fleet calls waiting out multi-second plans held all 512 threads,
    heartbeats queued past their deadline and live servers were failed in waves (issue
    #30). Seats per kind keep threads for heartbeats, and a fleet's burst from refusing a
    user's Submit, as Kubernetes' API priority and fairness keeps seats per priority level.
    None: no limit. A call's events take its kind's lane of the executor's inbox
    (``caller_waits``). ``unseated``: per method, whether a request will be answered
    without the executor (a renewal ``Renewals`` has booked): it takes no seat, so that a
    burst of calls waiting on the executor does not refuse it. ``on_refused(kind, method,
    held)``: a call refused, with the calls of each method that held its kind's seats."""

    def __init__(self, seats: Mapping[str, int] | None = None,
                 unseated: Mapping[str, Callable[[object], bool]] | None = None,
                 on_refused: Callable[[str, str, dict[str, int]], None] | None = None) -> None:
        self._seats = {kind: (threading.BoundedSemaphore(n), n)
                       for kind, n in (seats or {}).items()}
        self._unseated = dict(unseated or {})
        self._held: dict[str, dict[str, int]] = {kind: {} for kind in self._seats}
        self._lock = threading.Lock()        # ``_held``, from every handler thread
        self._on_refused = on_refused

    def _take(self, kind: str, method: str, seats) -> bool:
        """A seat of ``kind`` for ``method``, or False (told to ``on_refused``)."""
        if not seats.acquire(blocking=False):
            if self._on_refused is not None:
                with self._lock:
                    held = {m: n for m, n in self._held[kind].items() if n}
                self._on_refused(kind, method, held)
            return False
        with self._lock:
            held = self._held[kind]
            held[method] = held.get(method, 0) + 1
        return True

    def _give_back(self, kind: str, method: str, seats) -> None:
        with self._lock:
            self._held[kind][method] -= 1
        seats.release()

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = details.method.rsplit("/", 1)[-1]
        kind, lane = ("fleet", FLEET) if method in FLEET_METHODS else ("client", CLIENTS)
        seats, count = (None, 0) if method in ANSWERED_AT_ONCE else \
            self._seats.get(kind, (None, 0))
        unseated = self._unseated.get(method, lambda request: False)

        def behavior(request, context):
            seated = seats is not None and not unseated(request)
            if seated and not self._take(kind, method, seats):
                context.abort(grpc.StatusCode.UNAVAILABLE,
                              f"{BUSY}: {count} {kind} calls already wait on it; try again")
            try:
                with caller_waits(context.time_remaining(), lane):
                    return inner(request, context)
            except Stopping as err:
                context.abort(grpc.StatusCode.UNAVAILABLE, str(err))
            except TooLate as err:
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(err))
            finally:
                if seated:
                    self._give_back(kind, method, seats)
        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


# The workers' and jobs' calls (their events take the inbox's FLEET lane, and they have
# seats of their own), and the calls answered without waiting on the executor (``health``;
# gRPC's health check: no seat): ``ExecutorWaits``.
FLEET_METHODS = frozenset({"RegisterWorker", "Heartbeat", "ReportRound", "InitJob",
                           "RenewLease", "ReportSteps"})
ANSWERED_AT_ONCE = frozenset({"Heartbeat", "Check"})


class CountedCalls(grpc.ServerInterceptor):
    """Tells ``on_call(method)`` of each call as it arrives (``gavelsched_rpcs_total``)."""

    def __init__(self, on_call: Callable[[str], None]) -> None:
        self._on_call = on_call

    def intercept_service(self, continuation, details):
        self._on_call(details.method.rsplit("/", 1)[-1])
        return continuation(details)


class Refusals:
    """``ExecutorWaits``' ``on_refused``: each call refused as busy is counted by method
    (``on_refused(method)``: ``gavelsched_calls_refused_total``) and logged, at most once
    per ``every_s`` for each kind of call, with the methods whose calls held the seats
    then: an overloaded scheduler says which calls filled it (issue #30: at 2,048 GPUs x
    50,000 jobs, most renewals refused as busy found every fleet seat taken)."""

    def __init__(self, on_refused: Callable[[str], None] | None = None,
                 every_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._count = on_refused
        self._tally = Tally(every_s, clock)      # kind -> method -> since its line

    def __call__(self, kind: str, method: str, held: dict[str, int]) -> None:
        if self._count is not None:
            self._count(method)
        due = self._tally.add(method, kind)
        if due is None:
            return
        refused, since = due
        log.warning("refused %d %s calls as busy %s(%s); the %d %s seats were held by %s",
                    sum(refused.values()), kind,
                    "" if since is None else f"in the last {since:.1f} s ",
                    _by_method(refused), sum(held.values()), kind, _by_method(held) or "none")


def _by_method(counts: Mapping[str, int]) -> str:
    """``{"InitJob": 3, "RenewLease": 7}`` as ``RenewLease 7, InitJob 3``."""
    return ", ".join(f"{m} {n}" for m, n in sorted(counts.items(), key=lambda mn: -mn[1]))


class _Callers:
    """Who called (``rpc.identity.caller_of``) under the identities in force."""

    def __init__(self, identities: Callable[[], Identities]) -> None:
        self._identities = identities

    def of(self, context) -> Caller:
        caller = caller_of(context, self._identities())
        if caller is None:      # (the token gate let it in, then a reload removed it)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong auth token")
        return caller

    def daemon(self, context) -> Caller:
        """The caller, who must be a worker daemon (or an admin)."""
        caller = self.of(context)
        if not caller.may_act_as_daemon():
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"{caller.name} may not make worker calls (the daemon token does)")
        return caller

    def job(self, context, job_id: str) -> Caller:
        """The caller, who must be job ``job_id``'s process (or the daemon)."""
        caller = self.of(context)
        if not (caller.may_act_as_daemon() or caller.job == job_id):
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"{caller.name} may not act on job {shown(job_id)}")
        return caller

    def admin(self, context, what: str) -> Caller:
        caller = self.of(context)
        if not caller.is_admin:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"{caller.name} may not {what}: admins only")
        return caller


def _within(budget: CallBudget | None, key: str, method: str, context, metrics) -> None:
    """The call counted against ``key``'s ``budget`` (None: no limit), or refused with
    RESOURCE_EXHAUSTED in one line after a pause (``CallBudget.refuse``), with the seconds
    the caller is to wait (``codes.RETRY_AFTER``), counted by ``method``
    (``gavelsched_calls_limited_total``)."""
    wait = None if budget is None else budget.take(key)
    if wait is None:
        return
    if metrics is not None:
        metrics.on_limited(method)
    line, left = budget.refuse(key, wait, context.time_remaining())
    context.set_trailing_metadata(((RETRY_AFTER, f"{left:.3f}"),))
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, line)


def _ignored(method: str, request, why: str) -> str:
    line = f"{method} for job {shown(request.job_id)} ignored: {why}"
    log.warning("%s", line)
    return line


class WorkerService(pb_grpc.WorkerToSchedulerServicer):
    def __init__(self, executor: DaemonExecutor, callers: _Callers) -> None:
        self.x, self.callers = executor, callers

    def RegisterWorker(self, request, context):
        self.callers.daemon(context)
        try:
            profile = registration(request)
            # The server's silence counts from when its registration takes effect, not from
            # the call's arrival: its worker sends no heartbeat before the answer. A
            # registration that waited seconds behind a restarted scheduler's burst of
            # fleet calls was failed as silent at once (2,048 GPUs x 50,000 jobs, issue #30).
            return self.x.call(lambda: self.x.roster.register(request, time.monotonic(),
                                                              profile))
        except ValueError as err:   # BadValue, TraceError, or the executor's own refusal
            _abort_on(context, err)

    def Heartbeat(self, request, context):
        self.callers.daemon(context)
        mono = time.monotonic()
        # Answered here, never behind the executor's work (``health``); what the heartbeat
        # lists is reconciled on the executor thread, unwaited for.
        server = self.x.health.seen(request.server_id, mono, request.sent_s)
        if server is None:
            return pb.HeartbeatResponse(known=False)
        if self.x.metrics is not None and stamped(request.sent_s):
            self.x.metrics.on_heartbeat(server.delay)
        running, gpus = running_of(listed_runs(request))
        short = short_of_room(request)
        self.x.tell(lambda: self.x.roster.heartbeat(request.server_id, mono, running,
                                                    request.leaving, int(request.registration),
                                                    gpus, short), changes=False)
        return pb.HeartbeatResponse(known=True)

    def ReportRound(self, request, context):
        self.callers.daemon(context)
        why = bad_report(request, unknown_steps=True)
        if why is not None:   # acknowledged, so that the worker does not send it again
            return pb.Ack(ok=False, message=_ignored("ReportRound", request, why))
        self.x.call(lambda: self.x.processes.round_report(request))
        return pb.Ack(ok=True)


def _after_plan(answer: Future, context, on_timeout: Callable[[], None] = lambda: None):
    """``answer``'s result once the next round is planned, waited for ``RENEW_WAIT_S`` at
    most and ``RENEW_MARGIN_S`` less than the caller waits; a later plan is answered BUSY
    (``NOT_PLANNED``: the caller asks again after a pause)."""
    left = context.time_remaining()
    try:
        return answer.result(timeout=RENEW_WAIT_S if left is None else
                             max(0.0, min(RENEW_WAIT_S, left - RENEW_MARGIN_S)))
    except FutureTimeout:
        on_timeout()
        context.abort(grpc.StatusCode.UNAVAILABLE, f"{BUSY}: {NOT_PLANNED}; ask again")


class IteratorService(pb_grpc.IteratorToSchedulerServicer):
    """``budget``: how many RenewLease and ReportSteps calls each job may make (``budgets``);
    None: no limit."""

    def __init__(self, executor: DaemonExecutor, callers: _Callers,
                 budget: CallBudget | None = None) -> None:
        self.x, self.callers, self.budget = executor, callers, budget

    def InitJob(self, request, context):
        self.callers.job(context, request.job_id)
        booked = self.x.runs.launches.answer(request)   # (a fresh run's: not queued)
        if booked is not None:
            answer, startup = booked
            if startup is not None:     # recorded on the executor, before what the run does
                self.x.tell(lambda: self.x.processes.booked_init(startup), lane=FLEET)
            self._count("book", "InitJob")
            return answer
        why = self.x.runs.launches.why_not(request)     # (counted with the executor's answer)
        try:
            answer = self.x.call(lambda: self.x.processes.init_job(request))
        except LookupError as err:
            self._count("unknown", "InitJob", why)
            _abort_on(context, err, grpc.StatusCode.NOT_FOUND)
        except StaleRun as err:
            self._count("stale", "InitJob", why)
            _abort_on(context, err, grpc.StatusCode.FAILED_PRECONDITION)
        except AskAgain as err:     # (the iterator asks again after a pause)
            self._count("ask_again", "InitJob", why)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{BUSY}: {err}; ask again")
        if isinstance(answer, Future):  # a run found going on waits for the next plan
            answer = _after_plan(answer, context)
        self._count("executor", "InitJob", why)
        return answer

    def RenewLease(self, request, context):
        self.callers.job(context, request.job_id)
        _within(self.budget, request.job_id, "RenewLease", context, self.x.metrics)
        why = bad_report(request)
        if why is not None:   # the iterator takes a failed renewal as "not renewed"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, _ignored("RenewLease", request, why))
        lease = self.x.runs.renewals.answer(request)   # (known since the plan: not queued)
        answer = "book"
        if lease is None:
            answer = "executor"
            lease = self.x.call(lambda: self.x.processes.renew_lease(request))
        if isinstance(lease, Future):   # wait for the next round's plan
            lease = _after_plan(lease, context, lambda: self._count("ask_again"))
            if lease is None:           # the job has no run any more
                lease = stop_lease(int(request.steps), request.seconds)
        self._count(answer)
        return pb.RenewLeaseResponse(lease=lease)

    def _count(self, answer: str, method: str = "RenewLease", why: str = "") -> None:
        """Who answered (``book``, ``executor``), ``ask_again``, or an InitJob's refusal
        (``stale``, ``unknown``), and why the book did not: ``metrics.on_answer``."""
        if self.x.metrics is not None:
            self.x.metrics.on_answer(method, answer, why)

    def ReportSteps(self, request, context):
        self.callers.job(context, request.job_id)
        _within(self.budget, request.job_id, "ReportSteps", context, self.x.metrics)
        why = bad_report(request)
        if why is not None:
            return pb.Ack(ok=False, message=_ignored("ReportSteps", request, why))
        if request.checkpointed and not self.x.call(lambda: self.x.processes.durable_steps(
                request.job_id, int(request.steps), int(request.generation),
                float(request.seconds), float(request.lease_start_s))):
            return pb.Ack(ok=False, message=f"run generation {request.generation} of job "
                                            f"{shown(request.job_id)} is stale")
        return pb.Ack(ok=True)


class ClientService(pb_grpc.ClientToSchedulerServicer):
    """``budget``: how many calls each user (not an admin) may make (``budgets``); None:
    no limit."""

    def __init__(self, executor: DaemonExecutor, read_logs: Reader, callers: _Callers,
                 reload: Callable[[str], str], budget: CallBudget | None = None) -> None:
        self.x, self._read_logs, self.callers = executor, read_logs, callers
        self._reload, self.budget = reload, budget
        self._streams = threading.BoundedSemaphore(MAX_LOG_STREAMS)

    def _caller(self, context, method: str) -> Caller:
        """The caller, whose call is counted against their budget when they are a user."""
        caller = self.callers.of(context)
        if caller.role == USER:
            _within(self.budget, caller.name, method, context, self.x.metrics)
        return caller

    def _change(self, context, fn):
        """A call that changes jobs, on the executor's thread; answered once the picture
        shows it (read your writes)."""
        reply = _answer(context, lambda: self.x.call(fn))
        self.x.call(self.x.publish, changes=False)
        return reply

    def Submit(self, request, context):
        caller = self._caller(context, "Submit")
        return self._change(context, lambda: self.x.calls.submit(caller, request,
                                                                 self.x.door()))

    def Cancel(self, request, context):
        caller = self._caller(context, "Cancel")
        return self._change(context, lambda: self.x.calls.cancel(caller, request.job_id))

    def Hold(self, request, context):
        caller = self._caller(context, "Hold")
        return self._change(context, lambda: self.x.calls.hold(caller, request.job_id,
                                                               request.reason))

    def Release(self, request, context):
        caller = self._caller(context, "Release")
        return self._change(context, lambda: self.x.calls.release(caller, request.job_id))

    def Update(self, request, context):
        caller = self._caller(context, "Update")
        return self._change(context, lambda: self.x.calls.update(
            caller, request, self.x.tenancy.settings.entity_names))

    def History(self, request, context):
        caller = self._caller(context, "History")
        return _answer(context, lambda: self.x.call(
            lambda: self.x.calls.history(caller, request.job_id), changes=False))

    def Usage(self, request, context):
        self._caller(context, "Usage")
        return _answer(context, lambda: self.x.call(lambda: self.x.calls.usage(request),
                                                    changes=False))

    def Reload(self, request, context):
        caller = self.callers.admin(context, "reload the configuration")
        try:
            message = self._reload(caller.name)
        except ValueError as err:        # the new config does not load: the old one stays
            _abort_on(context, err, grpc.StatusCode.INVALID_ARGUMENT)
        return pb.Ack(ok=True, message=message)

    def Drain(self, request, context):
        caller = self.callers.admin(context, "drain servers")
        try:
            reply = self.x.call(lambda: self.x.roster.drain(int(request.server_id),
                                                            request.undo, caller.name))
        except LookupError as err:
            _abort_on(context, err, grpc.StatusCode.NOT_FOUND)
        self.x.call(self.x.publish, changes=False)
        return reply

    def Status(self, request, context):
        caller = self._caller(context, "Status")
        unknown = [s for s in request.states if s not in STATES]
        if unknown:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"states: unknown state {shown(unknown[0])} (known: "
                          f"{', '.join(STATES)})")
        reply = self.x.snapshot.status(request, caller.name)
        if request.period:      # (read on the executor's thread: the core is its alone)
            reply = with_period(reply, self.x.call(self.x.core.period_state, changes=False))
        return reply

    def Logs(self, request, context):
        caller, job_id = self._caller(context, "Logs"), request.job_id
        retired = _answer(context, lambda: self.x.call(     # (ended long ago: its servers)
            lambda: self.x.calls.may_read_logs(caller, job_id), changes=False))
        if retired is None and self.x.snapshot.log_sources(job_id) is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown job {shown(job_id)}")
        if request.stream not in ("", "out", "err"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"stream: must be out or err, got {shown(request.stream)}")
        if not self._streams.acquire(timeout=LOG_STREAM_WAIT_S):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{MAX_LOG_STREAMS} log streams are open; try again")
        try:
            yield from stream_logs(
                request, lambda: self.x.snapshot.log_sources(job_id, retired) or NO_SOURCES,
                self._read_logs, active=context.is_active)
        finally:
            self._streams.release()


def registrations(executor: DaemonExecutor, health_servicer: health.HealthServicer,
                  read_logs: Reader, identities: Callable[[], Identities],
                  reload: Callable[[str], str], budgets: Budgets | None = None):
    """The ``register`` callables ``gavelsched.rpc.security.serve`` takes; ``read_logs``
    calls a worker's ``ReadLogs`` (``Dispatcher.read_logs``); ``identities()`` are those
    in force; ``reload(user)`` re-reads the configuration (its one-line message, or
    ``ValueError``); ``budgets``: each job's RenewLease and ReportSteps calls and each
    user's calls (``budgets``; None: no limits)."""
    callers = _Callers(identities)
    jobs, users = (budgets.jobs, budgets.users) if budgets is not None else (None, None)
    return [
        lambda s: pb_grpc.add_WorkerToSchedulerServicer_to_server(
            WorkerService(executor, callers), s),
        lambda s: pb_grpc.add_IteratorToSchedulerServicer_to_server(
            IteratorService(executor, callers, jobs), s),
        lambda s: pb_grpc.add_ClientToSchedulerServicer_to_server(
            ClientService(executor, read_logs, callers, reload, users), s),
        lambda s: health_pb2_grpc.add_HealthServicer_to_server(health_servicer, s),
    ]


def health_servicer() -> health.HealthServicer:
    servicer = health.HealthServicer()
    for name in ("", *SERVICES):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return servicer
