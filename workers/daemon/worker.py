"""The worker daemon (thesis §5.6): registers its GPUs with the scheduler, heartbeats, serves
``SchedulerToWorker`` (RunJob, a round's RunJobs in one call, KillJob, Shutdown, ReadLogs)
through the same token/TLS helpers as the scheduler, launches jobs (``launcher``), reports
each job's exit (``ReportRound``) and hands the scheduler its jobs' output (``logfiles``).

Threads: gRPC handlers (launch, extend, kill), one heartbeat thread (registers, re-registers
with ``previous_server_id`` when the scheduler answers ``known=false``), one monitor thread
(``Launcher.poll``: leases, exits, queued launches) and one reporter thread (sends the
round reports, in order, and retries the unsent: no other thread waits on a busy
scheduler's answers to them; at 2,048 GPUs heartbeats that did missed their deadline).

Fencing (docs/runtime.md): every RunJob, heartbeat and report names its run's generation;
a RunJob of a new generation replaces a run of an older one still here. A worker that
cannot reach its scheduler for longer than a lease stops its jobs (the scheduler has
placed them elsewhere by then). A worker daemon keeps its identity across restarts: its
server id is saved in its work directory and sent again at registration, and the jobs a
killed predecessor left running are killed first (``leftovers``). A worker may carry a
profile of its type (``gavelsched worker --profile``, ``traces.profiles``): every
registration sends it, so a restarted scheduler gets it too. A worker that is stopping
(SIGTERM) drains itself and waits for its runs to end with their leases (``leave``), so no
step since their last checkpoint is lost. A RunJob whose GPUs are still held waits in a
``LaunchQueue``. A thread's loop that fails is logged and started again: a monitor thread
gone would leave the worker reporting no exits and starting nothing.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from gavelsched.jobenv import worker_env
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import (SecurityError, TlsFiles, channel, exposure, host_of,
                                     is_loopback, is_this_machine, serve)
from gavelsched.virtual.envspec import LayoutEnvError
from traces.profiles import Profile
from traces.workloads import UnknownWorkload

from . import leftovers, logfiles
from .emulation import Emulation
from .launch_queue import LaunchQueue, Refused
from .launcher import JobExit, Launcher
from .logfiles import LOG_RETENTION_S
from .room import MIN_FREE_MB, short_of_room
from .specs import BadRunJob, check_run_job, launch_spec

log = logging.getLogger(__name__)

LOG_SWEEP_S = 600.0             # how often the logs past --log-retention-s are looked for
ROOM_EVERY_S = 5.0              # how often the work_dir's free space is read

RPC_TIMEOUT_S = 10.0
POLL_S = 0.1


class WorkerError(RuntimeError):
    """The worker cannot start or go on (e.g. the scheduler refused its token)."""


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker daemon runs (the ``gavelsched worker`` flags)."""

    scheduler: str
    worker_type: str
    gpus: int
    work_dir: Path
    listen: str = "127.0.0.1:0"
    token: str | None = None
    token_file: str | None = None
    tls_ca: str | None = None
    tls: TlsFiles | None = None
    emulation: Emulation | None = None
    grace_s: float = 30.0
    hostname: str = field(default_factory=socket.gethostname)
    insecure: bool = False    # serve without a token beyond loopback (--insecure)
    profile: Profile | None = None   # this machine's measured throughputs, sent at registration
    min_free_mb: int = MIN_FREE_MB   # below this free on work_dir's disk, no new run (0: none)
    log_retention_s: float = LOG_RETENTION_S   # a job's logs not written to for this long go
    log_sweep_s: float = LOG_SWEEP_S


class Worker:
    """One worker daemon: ``start()``, then ``wait()`` until Shutdown or ``stop()``."""

    def __init__(self, config: WorkerConfig, launcher: Launcher | None = None) -> None:
        """``launcher``: how jobs run (default: subprocesses, ``Launcher``; a hollow worker
        passes one whose ranks are threads, ``workers.hollow.hollow_launcher``)."""
        self.config = config
        self.launcher = launcher or Launcher(config.work_dir, grace_s=config.grace_s)
        self.server_id = -1
        self.registration = 0     # the scheduler's token of this registration (heartbeats)
        self.round_seconds = 0.0
        self.heartbeat_seconds = 1.0
        self.address = ""
        self._stub = pb_grpc.WorkerToSchedulerStub(
            channel(config.scheduler, token=config.token, ca=config.tls_ca))
        self._queue = LaunchQueue()
        self._lock = threading.Lock()       # the outbox's
        self._outbox: list[pb.RoundReportRequest] = []
        self._unsent = threading.Event()    # the outbox has reports for the reporter
        self._flushing = threading.Lock()   # one sender at a time: reports keep their order
        self._stopped = threading.Event()
        self._leaving = threading.Event()   # ``leave``: stopping once the runs have ended
        self._server: grpc.Server | None = None
        self._threads: list[threading.Thread] = []
        self._reached = time.monotonic()   # the last time the scheduler answered
        self._short = ""                    # why work_dir's disk takes no new run ("": room)

    # -- life cycle ------------------------------------------------------------------------
    def start(self, register_timeout_s: float = 60.0) -> None:
        """Serve SchedulerToWorker, register (retrying while the scheduler is unreachable),
        then start the heartbeat and monitor threads."""
        self._check_exposure()
        self.config.work_dir.mkdir(parents=True, exist_ok=True)
        leftovers.reap(self.config.work_dir)
        self._see_room()                    # (the first heartbeat says it too)
        servicer = _Servicer(self)
        self._server, port = serve(
            self.config.listen,
            [lambda s: pb_grpc.add_SchedulerToWorkerServicer_to_server(servicer, s)],
            token=self.config.token, tls=self.config.tls)
        listen_host = host_of(self.config.listen)
        notice = self._exposure(f"{listen_host}:{port}")
        if notice:
            log.warning("%s", notice)
        host = listen_host
        if host in ("", "0.0.0.0", "::"):
            host = self.config.hostname
        self.address = f"{host}:{port}"
        try:
            self._register(previous=leftovers.server_id(self.config.work_dir),
                           timeout_s=register_timeout_s)
        except Exception:
            self._server.stop(0)
            raise
        for target, name in ((self._heartbeats, "heartbeat"), (self._monitor, "monitor"),
                             (self._reports, "reports"), (self._disk, "disk")):
            thread = threading.Thread(target=self._keep_running, args=(target, name),
                                      name=f"worker-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _exposure(self, listen: str) -> str | None:
        """``security.exposure`` for this worker: the warning or notice to log when it
        serves ``listen`` without a token (None with one); ``SecurityError`` beyond
        loopback without a token unless ``insecure``."""
        return exposure(listen, self.config.token, insecure=self.config.insecure,
                        what="the worker", harm="run commands on this host",
                        fix="pass --token-file token (the scheduler's auth_token_file)")

    def _check_exposure(self) -> None:
        """Refuse (``WorkerError``) to serve beyond loopback without a token unless
        ``insecure``, or on loopback only for a scheduler on another host (it could not
        reach this worker at the address it is told)."""
        try:
            self._exposure(self.config.listen)
        except SecurityError as err:
            raise WorkerError(str(err)) from None
        if (is_loopback(host_of(self.config.listen))
                and is_this_machine(host_of(self.config.scheduler)) is False):
            raise WorkerError(
                f"the worker listens on {self.config.listen}, loopback only, but scheduler "
                f"{self.config.scheduler} is on another host and could not reach it: pass "
                f"--listen with an address it can reach (e.g. --listen 0.0.0.0:50061, with "
                f"--token-file)")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker stops; True when it has."""
        return self._stopped.wait(timeout)

    def leave(self, timeout_s: float | None = None) -> None:
        """Stop gracefully (SIGTERM): tell the scheduler, which drains this server (nothing
        new is planned here; docs/runtime.md, "Draining a worker"), let the runs end with
        their leases and checkpoint there as at any round's end, then ``stop``. Runs still
        going after ``timeout_s`` (default: two rounds and the grace, enough for a launch
        already planned for the next round) are killed, as by ``stop``."""
        if self._stopped.is_set() or self._leaving.is_set():
            return
        self._leaving.set()
        limit = (2 * self.round_seconds + self.config.grace_s if timeout_s is None
                 else timeout_s)
        log.info("worker %d stopping: drained; waiting up to %.0f s for jobs %s to end with "
                 "their leases", self.server_id, limit, sorted(self.launcher.running_jobs()))
        try:
            if self.server_id >= 0:        # (a signal while it registers: nothing planned
                self._beat()               # here yet, and a heartbeat would register it again)
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline and not self._stopped.is_set():
                if not self._queue and not self.launcher.running_jobs():
                    break
                time.sleep(POLL_S)
        finally:                           # (a bug above still stops it)
            self.stop("drained" if not self.launcher.running_jobs()
                      else f"jobs still running after {limit:.0f} s")

    def stop(self, reason: str = "worker stopping") -> None:
        """Kill every job, report their exits and the launches that waited (never started),
        stop serving."""
        if self._stopped.is_set():
            return
        self._report([JobExit.unstarted(spec, f"{reason} (before it started)")
                      for spec in self._queue.close()])
        deadline = time.monotonic() + 10
        while True:
            self.launcher.kill_all(reason)   # (again: a launch under way when it closed)
            if not self.launcher.running_jobs() or time.monotonic() >= deadline:
                break
            self._report(self.launcher.poll())
            time.sleep(POLL_S)
        self._report(self.launcher.poll())
        self._flush()                    # the last reports, before the scheduler hears no more
        log.info("worker %d stopped: %s", self.server_id, reason)
        if self._server is not None:
            self._server.stop(1)
        self._stopped.set()              # last: the daemon's main thread returns on it
        self.launcher.wake()             # (the monitor thread ends on it)

    # -- scheduler side ---------------------------------------------------------------------
    def _register(self, previous: int, timeout_s: float) -> None:
        request = pb.RegisterWorkerRequest(worker_type=self.config.worker_type,
                                           gpus=self.config.gpus, address=self.address,
                                           hostname=self.config.hostname,
                                           previous_server_id=previous,
                                           profile=_wire(self.config.profile),
                                           running=self._running())
        deadline = time.monotonic() + timeout_s
        told = False                    # the operator knows it is waiting (logged once)
        while True:
            try:
                reply = self._stub.RegisterWorker(request, timeout=RPC_TIMEOUT_S)
                break
            except grpc.RpcError as err:
                code = err.code()
                if code == grpc.StatusCode.UNAUTHENTICATED:
                    raise WorkerError(f"scheduler {self.config.scheduler} refused this "
                                      "worker: missing or wrong auth token") from None
                if time.monotonic() > deadline or self._stopped.is_set():
                    raise WorkerError(f"cannot register with scheduler "
                                      f"{self.config.scheduler}: {code.name}") from None
                if not told:
                    log.warning("scheduler %s not reachable (%s): retrying for up to %.0f s",
                                self.config.scheduler, code.name,
                                max(0.0, deadline - time.monotonic()))
                    told = True
                time.sleep(0.5)
        self.server_id = int(reply.server_id)
        self.registration = int(reply.registration)
        self.round_seconds = float(reply.round_seconds)
        self.heartbeat_seconds = float(reply.heartbeat_seconds) or 1.0
        self._reached = time.monotonic()
        leftovers.keep_server_id(self.config.work_dir, self.server_id)
        self.launcher.context.update(worker_env(
            self.server_id, _absolute(self.config.token_file), _absolute(self.config.tls_ca)))
        profile = self.config.profile
        log.info("registered as server %d (%s, %d GPUs, %s)%s", self.server_id,
                 self.config.worker_type, self.config.gpus, self.address,
                 f", with a profile of {profile.describe()}" if profile else "")

    def _running(self) -> list[pb.RunningJob]:
        """The runs here, as a heartbeat or a registration lists them."""
        return [pb.RunningJob(job_id=job, generation=gen, round=round_, gpus=gpus)
                for job, gen, round_, gpus in self.launcher.running()]

    def _cut_off(self) -> None:
        """No answer from the scheduler for longer than a lease: its leases cannot be
        renewed and the scheduler has placed the jobs elsewhere, so stop them (their
        writes are fenced anyway) and drop the queued launches."""
        limit = max(self.round_seconds, 3 * self.heartbeat_seconds)
        silent = time.monotonic() - self._reached
        if silent <= limit or self.server_id < 0:
            return
        queued = self._queue.clear()
        running = self.launcher.unkilled_jobs()
        if running or queued:
            reason = (f"scheduler {self.config.scheduler} unreachable for {silent:.0f} s "
                      f"(longer than a lease)")
            log.warning("%s: stopping jobs %s", reason,
                        sorted({*running, *(spec.job_id for spec in queued)}))
            self.launcher.kill_all(reason)
            self._report([JobExit.unstarted(spec, f"{reason} (before it started)")
                          for spec in queued])

    def _heartbeats(self) -> None:
        """A heartbeat every ``heartbeat_seconds`` from the last one's send, not from its
        answer: the scheduler fails a server by the silence between heartbeats, and a
        scheduler slow to answer (seconds, at 100,000 jobs on a busy host) must not stretch
        it by that much (``next_beat``)."""
        due = time.monotonic()
        while True:
            due = next_beat(due, time.monotonic(), self.heartbeat_seconds)
            if self._stopped.wait(max(0.0, due - time.monotonic())):
                return
            self._beat()

    def _disk(self) -> None:
        """The work_dir's disk, read off the heartbeat's thread (a slow or hung file system
        never holds a heartbeat up): its room every ``ROOM_EVERY_S`` (``_see_room``), the
        logs of jobs that ran here long ago every ``log_sweep_s`` (``sweep_logs``)."""
        sweep = time.monotonic() + self.config.log_sweep_s
        while not self._stopped.wait(min(ROOM_EVERY_S, self.config.log_sweep_s)):
            self._see_room()
            if time.monotonic() >= sweep:
                self.sweep_logs()
                sweep = time.monotonic() + self.config.log_sweep_s

    def sweep_logs(self) -> list[str]:
        """Remove the logs of the jobs with no process here whose logs were last written
        ``log_retention_s`` ago (``logfiles.expired``); returns those jobs."""
        work_dir, kept = self.config.work_dir, self.config.log_retention_s
        gone = []
        for job_id in logfiles.expired(work_dir, kept, time.time(),
                                       set(self.launcher.running_jobs())):
            if self.launcher.generation_of(job_id) is None:    # (not launched meanwhile)
                logfiles.remove(work_dir, job_id)
                gone.append(job_id)
        if gone:
            log.info("the logs of %d job%s last written over %.0f s ago removed "
                     "(--log-retention-s): %s", len(gone), "s" * (len(gone) > 1), kept,
                     ", ".join(gone[:10]) + (", ..." if len(gone) > 10 else ""))
        return gone

    def _see_room(self) -> None:
        """Why this worker takes no new run now (``room.short_of_room``; its heartbeats say
        it), said in the log when it starts and when it ends."""
        short = short_of_room(self.config.work_dir, self.config.min_free_mb)
        if short and not self._short:
            log.warning("%s: the scheduler plans no new run here until space is freed; the "
                        "runs here go on", short)
        elif self._short and not short:
            log.info("the disk of the work_dir %s has room again: new runs are taken",
                     self.config.work_dir)
        self._short = short

    def _beat(self) -> None:
        """One heartbeat: the runs here, and whether this worker is leaving."""
        try:
            reply = self._stub.Heartbeat(pb.HeartbeatRequest(
                server_id=self.server_id, registration=self.registration,
                leaving=self._leaving.is_set(), running=self._running(),
                sent_s=time.monotonic(), short_of_room=self._short),
                timeout=RPC_TIMEOUT_S)
            self._reached = time.monotonic()
            if not reply.known:
                log.warning("scheduler does not know server %d; registering again",
                            self.server_id)
                self._register(previous=self.server_id, timeout_s=RPC_TIMEOUT_S)
        except grpc.RpcError as err:
            log.warning("heartbeat failed: %s", err.code().name)
        except WorkerError as err:
            log.warning("%s", err)

    def _report(self, exits: list[JobExit]) -> None:
        with self._lock:
            self._outbox.extend(pb.RoundReportRequest(
                server_id=self.server_id, job_id=e.job_id, round=e.round, rank=e.rank,
                steps=e.steps, seconds=e.seconds, exit_code=e.exit_code, failed=e.failed,
                reason=e.reason, generation=e.generation) for e in exits)
        if exits:
            self._unsent.set()

    def _reports(self) -> None:
        """The reporter thread: sends reports as they come; retries each heartbeat."""
        while not self._stopped.is_set():
            self._unsent.wait(self.heartbeat_seconds)
            self._unsent.clear()
            self._flush()

    def _flush(self) -> None:
        """Send the unsent round reports, oldest first; keep the rest for the next try,
        whatever stopped the sending (a failed call, or a bug: no report is lost)."""
        with self._flushing:
            with self._lock:
                outbox, self._outbox = self._outbox, []
            sent = 0
            try:
                for report in outbox:
                    report.server_id = self.server_id
                    self._stub.ReportRound(report, timeout=RPC_TIMEOUT_S)
                    sent += 1
            except grpc.RpcError as err:
                log.warning("ReportRound for job %s failed: %s", outbox[sent].job_id,
                            err.code().name)
            finally:
                if sent < len(outbox):
                    with self._lock:
                        self._outbox[:0] = outbox[sent:]

    def _keep_running(self, loop, name: str) -> None:
        """A thread's ``loop``; one that fails (a bug) is logged with its traceback and
        started again, until the worker stops."""
        while not self._stopped.is_set():
            try:
                return loop()
            except Exception:  # noqa: BLE001 - the worker must go on running its jobs
                log.exception("worker %s thread failed; starting it again", name)
                self._stopped.wait(POLL_S)

    def _monitor(self) -> None:
        while True:
            self.launcher.wait()        # a rank's end, or the ranks' poll period
            if self._stopped.is_set():
                return
            self._cut_off()
            self._report(self.launcher.poll())
            self._start_pending()

    # -- RunJob ------------------------------------------------------------------------------
    def run_job(self, request: pb.RunJobRequest) -> pb.Ack:
        """Launch, extend or queue a job (see the protocol in docs/runtime.md)."""
        try:
            check_run_job(request, self.config.gpus)
        except BadRunJob as err:
            return pb.Ack(ok=False, message=str(err))
        gpus = tuple(request.gpus)
        held = self.launcher.gpus_of(request.job_id)
        here = self.launcher.generation_of(request.job_id)
        if held is not None and here == request.generation:
            if set(held) != set(gpus):
                return pb.Ack(ok=False, message=f"job {request.job_id} already runs here on "
                                                f"GPUs {list(held)}")
            if self.launcher.extend(request.job_id, int(request.generation),
                                    int(request.round), request.lease.max_seconds,
                                    self.round_seconds):
                return pb.Ack(ok=True, message="lease extended")
        elif here is not None and here > request.generation:
            return pb.Ack(ok=False, message=f"stale RunJob for job {request.job_id}: run "
                                            f"generation {request.generation}, generation "
                                            f"{here} runs here")
        elif here is not None:   # an older run of the job: the new one replaces it
            self.launcher.kill(request.job_id, f"superseded by run generation "
                                               f"{request.generation}", here)
        try:
            c = self.config
            spec = launch_spec(request, c.work_dir, c.scheduler, c.emulation, self.round_seconds)
            superseded = self._queue.add(spec)
        except (UnknownWorkload, LayoutEnvError, Refused) as err:
            return pb.Ack(ok=False, message=str(err))
        self._report([JobExit.unstarted(
            s, "superseded by a later placement on its GPUs (before it started)")
            for s in superseded])
        failed = self._start_pending().get(request.job_id)
        if failed is not None:   # ok: the failure reaches the scheduler once, as the
            # run's exit (``JobExit.unstarted``, failed), not a second time as a refusal
            return pb.Ack(ok=True, message=f"launch failed, reported as its exit: {failed}")
        return pb.Ack(ok=True, message="launched" if self.launcher.gpus_of(request.job_id)
                      else "queued until its GPUs are free")

    def _start_pending(self) -> dict[str, str]:
        """Launch each queued job whose GPUs are free now (``LaunchQueue.ready``); returns
        why each launch that failed did (by job id), as its exit reported it."""
        failed: dict[str, str] = {}
        for spec in self._queue.ready(self.launcher):
            try:
                self.launcher.launch(spec)
            except Exception as err:  # noqa: BLE001 - one bad launch never stops the others
                if isinstance(err, OSError):
                    why = err.strerror
                else:
                    log.exception("launching job %s failed", spec.job_id)
                    why = f"{type(err).__name__}: {err}"
                failed[spec.job_id] = f"cannot start {spec.argv[0]}: {why}"
                self._report([JobExit.unstarted(spec, failed[spec.job_id], failed=True,
                                                code=127)])
            waiting = self._queue.launched(spec, self.launcher)
            if waiting is None:
                continue
            if waiting.generation > spec.generation:   # a RunJob that came during the launch
                self.launcher.kill(spec.job_id, f"superseded by run generation "
                                                f"{waiting.generation}", spec.generation)
            else:
                self.launcher.extend(spec.job_id, spec.generation, waiting.round,
                                     waiting.max_seconds, self.round_seconds)
        return failed

    def kill_job(self, job_id: str, reason: str, generation: int = 0) -> bool:
        """Kill a running job, or drop a queued one (reported at once, as never started);
        with a ``generation``, only that run of it."""
        reason = reason or "killed by the scheduler"
        queued = self._queue.drop(job_id, generation)
        if queued is not None:
            self._report([JobExit.unstarted(queued, f"{reason} (before it started)")])
        return self.launcher.kill(job_id, reason, generation) or queued is not None


class _Servicer(pb_grpc.SchedulerToWorkerServicer):
    """SchedulerToWorker over the worker (the token check runs before any of these)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def RunJob(self, request, context):
        return self._worker.run_job(request)

    def RunJobs(self, request, context):
        """A round's RunJobs for this worker, each taken as its own, in order: one that
        fails here is refused alone, the others go on."""
        acks = []
        for run in request.runs:
            try:
                acks.append(self._worker.run_job(run))
            except Exception as err:  # noqa: BLE001 - one bad job never stops the others
                log.exception("RunJob for job %s failed here", run.job_id)
                acks.append(pb.Ack(ok=False, message=f"RunJob for job {run.job_id} failed on "
                                                     f"this worker: {type(err).__name__}: {err}"))
        return pb.RunJobsResponse(acks=acks)

    def KillJob(self, request, context):
        found = self._worker.kill_job(request.job_id, request.reason, int(request.generation))
        return pb.Ack(ok=found, message="" if found else f"job {request.job_id} not here")

    def Shutdown(self, request, context):
        threading.Thread(target=self._worker.stop, args=(request.reason or "shutdown",),
                         daemon=True).start()
        return pb.Ack(ok=True)

    def ReadLogs(self, request, context):
        try:
            return logfiles.answer(self._worker.config.work_dir, request)
        except logfiles.BadLogRequest as err:
            log.warning("ReadLogs refused: %s", err)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))


def next_beat(last_due: float, now: float, period: float) -> float:
    """When the next heartbeat is due, the last one due at ``last_due`` and sent then or
    later: a period after it, or at once if its answer took longer than that (then the
    cadence goes on from now: one heartbeat late, never a burst of them)."""
    return max(last_due + period, now)


def _wire(profile: Profile | None) -> pb.WorkerProfile | None:
    """``profile`` as ``RegisterWorkerRequest.profile`` (None: the field stays unset)."""
    if profile is None:
        return None
    return pb.WorkerProfile(precision=profile.precision, device=profile.device,
                            reduced=profile.reduced, torch=profile.torch,
                            rates=[pb.JobRate(job_type=job, steps_per_s=rate)
                                   for job, rate in profile.steps_per_s.items()])


def _absolute(path: str | None) -> str | None:
    """``path`` made absolute (a job runs in another directory), or None."""
    return str(Path(path).resolve()) if path else None
