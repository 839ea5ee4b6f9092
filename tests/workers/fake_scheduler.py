"""A small scheduler for the worker-side tests: real gRPC over real sockets, speaking the
protocol of docs/runtime.md (WorkerToScheduler and IteratorToScheduler), with leases and
renewals decided by the test. It keeps durable steps as the real one must:
``steps_done = max(steps_done, reported)`` over checkpointed reports only, with the
generation of the commit that holds them (``checkpoint_generation``, docs/runtime.md
"Fencing"); it takes every generation (the fencing itself is the real scheduler's)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import TlsFiles, channel, serve


# A lease's time bound counts from the job process's start (``jobenv.process_elapsed_s``);
# an iterator built in a test runs in the test runner's process, alive for many minutes by
# then: its leases must be longer than any run of the suite.
LEASE_S = 1e9

def job_environment(address: str, job_id: str, checkpoint_dir: object, **extra: str
                    ) -> dict[str, str]:
    """The variables a worker would give a single-process job of ``job_id``."""
    return {"GAVEL_SCHEDULER": address, "GAVEL_JOB_ID": job_id, "GAVEL_ROUND": "0",
            "GAVEL_CHECKPOINT_DIR": str(checkpoint_dir), "RANK": "0", "WORLD_SIZE": "1",
            **extra}


def steps_lease(sched: FakeScheduler, per_lease: int) -> Callable[[str, int], pb.Lease]:
    """InitJob leases of ``per_lease`` steps on top of the job's durable count."""
    return lambda job, rank: pb.Lease(max_steps=sched.jobs[job].steps_done + per_lease,
                                      max_seconds=LEASE_S)


@dataclass
class FakeJob:
    total_steps: int
    steps_done: int = 0
    checkpoint_generation: int = 0
    # (job id, rank) -> the lease InitJob hands out
    lease: Callable[[str, int], pb.Lease] | None = None
    # RenewLeaseRequest -> the lease RenewLease answers (extended or not)
    renew: Callable[[pb.RenewLeaseRequest], pb.Lease] | None = None


@dataclass
class Log:
    registrations: list = field(default_factory=list)
    heartbeats: list = field(default_factory=list)
    rounds: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    init_times: list = field(default_factory=list)   # monotonic receipt time of each InitJob
    renewals: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    step_times: list = field(default_factory=list)   # monotonic receipt time of each report


class FakeScheduler(pb_grpc.WorkerToSchedulerServicer, pb_grpc.IteratorToSchedulerServicer):
    def __init__(self, *, token: str | None = None, round_seconds: float = 2.0,
                 heartbeat_seconds: float = 0.2, tls: TlsFiles | None = None) -> None:
        self.token = token
        self.tls = tls
        self.round_seconds = round_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.jobs: dict[str, FakeJob] = {}
        self.log = Log()
        self.known = True
        self._lock = threading.Lock()
        self._next_server = 0
        self._server = None
        self.address = ""

    def start(self) -> str:
        self._server, port = serve("127.0.0.1:0", [
            lambda s: pb_grpc.add_WorkerToSchedulerServicer_to_server(self, s),
            lambda s: pb_grpc.add_IteratorToSchedulerServicer_to_server(self, s)],
            token=self.token, tls=self.tls)
        self.address = f"127.0.0.1:{port}"
        return self.address

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0)

    def worker_stub(self, address: str, token: str | None = "same", ca=None):
        tok = self.token if token == "same" else token
        return pb_grpc.SchedulerToWorkerStub(channel(address, token=tok, ca=ca))

    def wait_for(self, predicate: Callable[[], object], timeout: float = 60.0) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")

    # -- WorkerToScheduler ---------------------------------------------------------------
    def RegisterWorker(self, request, context):
        with self._lock:
            self.log.registrations.append(request)
            if request.previous_server_id >= 0:
                sid = request.previous_server_id
            else:
                sid, self._next_server = self._next_server, self._next_server + 1
            self.known = True
        return pb.RegisterWorkerResponse(server_id=sid, worker_ids=list(range(request.gpus)),
                                         round_seconds=self.round_seconds,
                                         heartbeat_seconds=self.heartbeat_seconds)

    def Heartbeat(self, request, context):
        self.log.heartbeats.append(request)
        return pb.HeartbeatResponse(known=self.known)

    def ReportRound(self, request, context):
        self.log.rounds.append(request)
        return pb.Ack(ok=True)

    # -- IteratorToScheduler -------------------------------------------------------------
    def InitJob(self, request, context):
        self.log.inits.append(request)
        self.log.init_times.append(time.monotonic())
        job = self.jobs[request.job_id]
        lease = job.lease(request.job_id, request.rank) if job.lease else \
            pb.Lease(max_steps=job.total_steps, max_seconds=LEASE_S,
                     round=request.round)
        return pb.InitJobResponse(lease=lease, steps_done=job.steps_done,
                                  total_steps=job.total_steps,
                                  checkpoint_generation=job.checkpoint_generation)

    def RenewLease(self, request, context):
        self.log.renewals.append(request)
        job = self.jobs[request.job_id]
        lease = job.renew(request) if job.renew else pb.Lease(round=request.round)
        return pb.RenewLeaseResponse(lease=lease)

    def ReportSteps(self, request, context):
        with self._lock:
            self.log.steps.append(request)
            self.log.step_times.append(time.monotonic())
            if request.checkpointed:
                job = self.jobs[request.job_id]
                if request.steps > job.steps_done:
                    job.steps_done = request.steps
                    job.checkpoint_generation = request.generation
        return pb.Ack(ok=True)
