"""A small in-test worker that speaks the real protocol over real sockets (docs/runtime.md):
it serves ``SchedulerToWorker`` through ``gavelsched.rpc.security.serve``, registers and
heartbeats, and runs each job as a thread that does what GavelIterator does over the
iterator RPCs: InitJob, steps at ``expected_steps_per_s``, RenewLease at 75% of its lease,
a checkpoint (a commit, ``gavelsched.checkpoints``) + ``ReportSteps(checkpointed)`` at each
lease end, and a ``ReportRound`` when it stops, each with its run's generation. A KillJob
stops that run before its next step, without a checkpoint, and its ``ReportRound`` gives
its last commit's steps, exit code -15 and the kill's reason, as a SIGTERM'd hollow rank's
does (``workers/hollow.py``). ``silence()`` makes it hang: no heartbeats, no progress."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import grpc

from gavelsched import checkpoints
from gavelsched.jobenv import JobFailed
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel, serve

log = logging.getLogger(__name__)

STOP_WAIT_S = 12.0     # the longest call a job's thread makes (10 s), and some


class FakeWorker(pb_grpc.SchedulerToWorkerServicer):
    def __init__(self, scheduler: str, worker_type: str, *, token: str | None = None,
                 speed: float = 1.0, gpus: int = 1, ca=None) -> None:
        self.scheduler, self.worker_type, self.speed = scheduler, worker_type, speed
        self.token = token
        self.server, port = serve("127.0.0.1:0", [
            lambda s: pb_grpc.add_SchedulerToWorkerServicer_to_server(self, s)], token=token)
        self.address = f"127.0.0.1:{port}"
        self.chan = channel(scheduler, token=token, ca=ca)
        self.workers = pb_grpc.WorkerToSchedulerStub(self.chan)
        self.iterator = pb_grpc.IteratorToSchedulerStub(self.chan)
        self.gpus = gpus
        self._register()
        self.run_jobs: list[pb.RunJobRequest] = []
        self.silent = threading.Event()
        self.stopped = threading.Event()
        self._jobs: dict[str, tuple[threading.Thread, int]] = {}   # job -> (thread, generation)
        self._extend: dict[str, pb.Lease] = {}
        self._killed: dict[tuple[str, int], str] = {}     # (job, generation) -> reason
        self.kills: list[pb.KillJobRequest] = []
        self._lock = threading.Lock()
        self._beating = threading.Thread(target=self._beat, daemon=True)
        self._beating.start()

    def silence(self) -> None:
        self.silent.set()

    def stop(self) -> None:
        """Stop serving, then close the channel once the threads calling on it have
        stopped: a call begun on a channel being closed crashed gRPC's C core (a segfault
        at a test's teardown)."""
        with self._lock:    # (no job's thread starts after this: ``RunJob``)
            self.stopped.set()
        self.silent.set()
        self.server.stop(0)
        with self._lock:
            threads = [thread for thread, _ in self._jobs.values()]
        for thread in [self._beating, *threads]:
            thread.join(timeout=STOP_WAIT_S)
        self.chan.close()

    def _beat(self) -> None:
        while not self.silent.wait(self.heartbeat_s):
            try:
                with self._lock:
                    running = [pb.RunningJob(job_id=job, generation=gen)
                               for job, (thread, gen) in self._jobs.items() if thread.is_alive()]
                reply = self.workers.Heartbeat(pb.HeartbeatRequest(
                    server_id=self.server_id, running=running), timeout=5)
                if not reply.known:   # failed (a late heartbeat on a loaded machine): back
                    self._register(previous=self.server_id)
            except grpc.RpcError:
                pass

    def _register(self, previous: int = -1) -> None:
        """Register (again, as ``previous``), as the real worker daemon does."""
        reply = self.workers.RegisterWorker(pb.RegisterWorkerRequest(
            worker_type=self.worker_type, gpus=self.gpus, address=self.address,
            hostname="fake", previous_server_id=previous), timeout=10)
        self.server_id = reply.server_id
        self.heartbeat_s = reply.heartbeat_seconds

    # ---- SchedulerToWorker ----------------------------------------------------------------
    def RunJob(self, request, context):
        with self._lock:
            self.run_jobs.append(request)
            thread, gen = self._jobs.get(request.job_id, (None, 0))
            if thread is not None and thread.is_alive() and gen == request.generation:
                if request.lease.extended:
                    self._extend[request.job_id] = request.lease   # lease extended
                return pb.Ack(ok=True, message="extended")
            if self.stopped.is_set():
                return pb.Ack(ok=False, message="stopping")
            thread = threading.Thread(target=self._run, args=(request,), daemon=True)
            self._jobs[request.job_id] = (thread, request.generation)
            thread.start()      # (under the lock: ``stop`` joins only started threads)
        return pb.Ack(ok=True)

    def RunJobs(self, request, context):
        return pb.RunJobsResponse(acks=[self.RunJob(run, context) for run in request.runs])

    def KillJob(self, request, context):
        """Stop the job's run (with a generation: only that run), as the real worker does."""
        with self._lock:
            self.kills.append(request)
            thread, gen = self._jobs.get(request.job_id, (None, 0))
            found = thread is not None and thread.is_alive() and (
                not request.generation or request.generation == gen)
            if found:
                self._killed[(request.job_id, gen)] = request.reason or "killed by the scheduler"
        return pb.Ack(ok=found, message="" if found else f"job {request.job_id} not here")

    def Shutdown(self, request, context):
        return pb.Ack(ok=True)

    # ---- a job ----------------------------------------------------------------------------
    def _run(self, run: pb.RunJobRequest) -> None:
        try:
            self._job(run)
        except JobFailed as err:    # the job's own failure (a checkpoint it cannot find):
            log.warning("fake worker: job %s failed: %s", run.job_id, err)  # its process ends
        except (grpc.RpcError, ValueError):  # (ValueError: a call on the closed channel)
            if not self.stopped.is_set():   # a closed channel at teardown is expected
                raise

    def _job(self, run: pb.RunJobRequest) -> None:
        job, ckpt, gen = run.job_id, Path(run.checkpoint_dir), run.generation
        init = self.iterator.InitJob(pb.InitJobRequest(job_id=job, round=run.round,
                                                       server_id=self.server_id,
                                                       generation=gen), timeout=10)
        checkpoints.resolve(ckpt, init.steps_done, init.checkpoint_generation)
        steps = init.steps_done
        lease, started = init.lease, time.monotonic()
        rate = max(run.expected_steps_per_s, 1.0) * self.speed
        asked = False
        while not self.silent.is_set():
            if (job, gen) in self._killed:
                self._report_killed(run, ckpt, started, lease.round)
                return
            elapsed = time.monotonic() - started
            end = steps >= min(lease.max_steps, init.total_steps) or elapsed >= lease.max_seconds
            if not asked and (end or elapsed >= 0.75 * lease.max_seconds):
                asked = True
                got = self.iterator.RenewLease(pb.RenewLeaseRequest(
                    job_id=job, round=lease.round, steps=steps, seconds=elapsed,
                    generation=gen), timeout=10)
                if got.lease.extended:
                    self._extend[job] = got.lease
            if end:
                checkpoints.begin(ckpt, steps, gen)
                checkpoints.commit(ckpt, steps, gen)
                self.iterator.ReportSteps(pb.ReportStepsRequest(
                    job_id=job, round=lease.round, steps=steps, seconds=elapsed,
                    checkpointed=True, generation=gen), timeout=10)
                new = self._extend.pop(job, None)
                # (as GavelIterator: a lease of this round or older, re-sent, extends nothing)
                if new is None or new.round <= lease.round or steps >= init.total_steps:
                    break
                lease, asked = new, False
                continue
            time.sleep(1.0 / rate)
            steps += 1
        if self.silent.is_set():
            return
        with self._lock:
            if self._jobs.get(job, (None, -1))[1] == gen:    # not a newer run's entry
                del self._jobs[job]
        self.workers.ReportRound(pb.RoundReportRequest(
            server_id=self.server_id, job_id=job, round=lease.round, steps=steps,
            seconds=time.monotonic() - started, generation=gen), timeout=10)

    def _report_killed(self, run: pb.RunJobRequest, ckpt: Path, started: float,
                       round_: int) -> None:
        job, gen = run.job_id, run.generation
        with self._lock:
            reason = self._killed.pop((job, gen))
            if self._jobs.get(job, (None, -1))[1] == gen:
                del self._jobs[job]
        commit = checkpoints.latest(ckpt, gen)
        self.workers.ReportRound(pb.RoundReportRequest(
            server_id=self.server_id, job_id=job, round=round_,
            steps=-1 if commit is None else commit.steps,
            seconds=time.monotonic() - started, exit_code=-15, reason=reason,
            generation=gen), timeout=10)
