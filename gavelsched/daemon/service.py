"""The scheduler's gRPC servicers (thesis §5.6): workers, iterators and clients, plus the
standard health service. Handlers only hand events to the executor (``call``) or read its
snapshot; they never touch the core (``executor``'s threading contract).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..rpc import pb, pb_grpc
from .executor import DaemonExecutor
from .leases import stop_lease
from .submissions import SubmissionError

log = logging.getLogger(__name__)

# How long a RenewLease waits for the next round's plan: under the iterator's own RPC
# timeout (10 s), so that it gets an answer (its current lease) rather than an error.
RENEW_WAIT_S = 8.0

SERVICES = ("gavelsched.v1.WorkerToScheduler", "gavelsched.v1.IteratorToScheduler",
            "gavelsched.v1.ClientToScheduler")


def _abort_on(context, err: Exception, code=grpc.StatusCode.INVALID_ARGUMENT):
    context.abort(code, str(err).splitlines()[0] if str(err) else type(err).__name__)


class WorkerService(pb_grpc.WorkerToSchedulerServicer):
    def __init__(self, executor: DaemonExecutor) -> None:
        self.x = executor

    def RegisterWorker(self, request, context):
        mono = time.monotonic()
        try:
            return self.x.call(lambda: self.x.register(request, mono))
        except ValueError as err:
            _abort_on(context, err)

    def Heartbeat(self, request, context):
        mono = time.monotonic()
        return pb.HeartbeatResponse(known=self.x.call(
            lambda: self.x.heartbeat(request.server_id, mono, tuple(request.running_job_ids)),
            changes=False))

    def ReportRound(self, request, context):
        self.x.call(lambda: self.x.round_report(request))
        return pb.Ack(ok=True)


class IteratorService(pb_grpc.IteratorToSchedulerServicer):
    def __init__(self, executor: DaemonExecutor) -> None:
        self.x = executor

    def InitJob(self, request, context):
        try:
            return self.x.call(lambda: self.x.init_job(request))
        except KeyError as err:
            _abort_on(context, err, grpc.StatusCode.NOT_FOUND)

    def RenewLease(self, request, context):
        lease = self.x.call(lambda: self.x.renew_lease(request))
        if isinstance(lease, Future):   # wait for the next round's plan
            try:
                lease = lease.result(timeout=RENEW_WAIT_S)
            except FutureTimeout:
                lease = None
            if lease is None:
                lease = stop_lease(int(request.steps), request.seconds)
        return pb.RenewLeaseResponse(lease=lease)

    def ReportSteps(self, request, context):
        if request.checkpointed:
            self.x.call(lambda: self.x.durable_steps(request.job_id, int(request.steps),
                                                     float(request.seconds)))
        return pb.Ack(ok=True)


class ClientService(pb_grpc.ClientToSchedulerServicer):
    def __init__(self, executor: DaemonExecutor) -> None:
        self.x = executor

    def Submit(self, request, context):
        try:
            job_id = self.x.call(lambda: self.x.submit(request))
        except SubmissionError as err:
            _abort_on(context, err)
        return pb.SubmitResponse(job_id=job_id)

    def Cancel(self, request, context):
        return self.x.call(lambda: self.x.cancel(request.job_id))

    def Status(self, request, context):
        return self.x.snapshot.status()


def registrations(executor: DaemonExecutor, health_servicer: health.HealthServicer):
    """The ``register`` callables ``gavelsched.rpc.security.serve`` takes."""
    return [
        lambda s: pb_grpc.add_WorkerToSchedulerServicer_to_server(WorkerService(executor), s),
        lambda s: pb_grpc.add_IteratorToSchedulerServicer_to_server(
            IteratorService(executor), s),
        lambda s: pb_grpc.add_ClientToSchedulerServicer_to_server(ClientService(executor), s),
        lambda s: health_pb2_grpc.add_HealthServicer_to_server(health_servicer, s),
    ]


def health_servicer() -> health.HealthServicer:
    servicer = health.HealthServicer()
    for name in ("", *SERVICES):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return servicer
