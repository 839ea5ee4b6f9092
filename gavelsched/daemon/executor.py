"""``DaemonExecutor``: the scheduler core run on real time (thesis §5.5-5.6).

Threading contract of ``SchedulerCore`` (it has no locks): exactly one thread, the
executor's, ever calls the core, the store and this object's private state. gRPC handlers
and the dispatcher's pool threads never touch them; they hand the executor an event with
``post(fn)`` / ``call(fn)`` (a closure put on a ``queue.Queue``, run in order on the
executor thread; ``call`` returns a future with its result) and read only ``snapshot``, an
immutable value the executor republishes after it changed something.

The executor owns time: a monotonic clock, passed to the core as seconds since the
daemon's first start (``now``). Each round lasts ``round_seconds``. ``plan_lead`` seconds
before round r ends it plans round r+1 (``core.end_round`` then ``core.start_round``, the
same calls the simulator makes), so that a job kept on the same workers gets its lease
extended (RunJob on the same GPUs, and the answer to the iterator's ``RenewLease``) instead
of being checkpointed and restarted. Jobs placed on new workers are launched at the round
boundary, once their previous run (if any) has exited, so a checkpoint is never read while
it is being written.

Leases are round-aligned (``leases``): every lease ends when its round ends on this clock.
A fresh run's start-up eats into its own round (its first ``InitJob`` cuts its steps to what
it can make in the time left), so no run holds its GPUs into the next round, rounds keep
their cadence, and a restart costs what the simulator charges as preemption overhead.

Progress reaches the core only as durable step counts (``ReportSteps(checkpointed)`` and
``RoundReport``), through ``core.add_progress``: a job's count is the max of what was
reported, so a report sent twice counts once and a crash loses at most the steps since the
last checkpoint. Round reports to ``end_round`` carry the time each task held its workers.
A worker silent for 3 x ``heartbeat_seconds`` is failed (``core.fail_workers``); its jobs
are placed again from their last checkpoint.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from policies import Policy

from ..core import CoreConfig, JobSpec, MicroTask, Report, Round, SchedulerCore
from ..core.type_order import fastest_first
from ..mechanism import ClusterView, Server
from ..rpc import pb
from .config import DaemonConfig
from .dispatch import Dispatcher
from .leases import MIN_LEASE_FRACTION, extended_lease, new_lease, run_requests, startup_lease, stop_lease
from .metrics import DaemonMetrics
from .snapshot import Snapshot, build_snapshot
from .store import JobRow, ServerRow, Store
from .submissions import check_submission
from .throughputs import OnlineThroughputs

log = logging.getLogger(__name__)

HEARTBEAT_MISSES = 3
# An idle scheduler starts its first round this long after a job arrives, so that jobs
# submitted together are planned together.
ARRIVAL_GRACE_S = 0.5
SNAPSHOT_EVERY_S = 0.5


@dataclass
class _Server:
    row: ServerRow
    alive: bool
    last_seen: float            # monotonic


@dataclass
class _Run:
    """A job's live processes: started by a RunJob, extended by later ones, over when every
    server hosting it reported its exit (or died)."""

    job_id: str
    worker_type: str
    servers: dict[int, pb.RunJobRequest]
    left: set[int]               # servers whose processes have not exited yet
    lease: pb.Lease
    round: int
    started: float               # monotonic time of the first RunJob (then: its start)
    ends: float                  # monotonic end of its lease's round
    steps_per_s: float           # the rate the core planned it at
    base_steps: int              # durable count the run started from
    # (steps, seconds on the process's clock) of its last checkpointed report; seconds None
    # before its first one (that sample is timed on this clock, from its first InitJob)
    last: tuple[int, float | None] = (0, 0.0)
    init_at: float = 0.0                 # monotonic time of its first InitJob
    started_up: bool = False             # its first InitJob arrived
    orphan: bool = False                 # found running after a scheduler restart
    workers: tuple[int, ...] = ()        # the core's worker ids it holds
    round_start: float = 0.0             # monotonic start of its first round


@dataclass
class _Waiter:
    job_id: str
    future: Future = field(default_factory=Future)


class DaemonExecutor:
    """One thread drives ``SchedulerCore`` on real time (see the module docstring)."""

    def __init__(self, config: DaemonConfig, store: Store, policy: Policy, table,
                 dispatcher: Dispatcher, metrics: DaemonMetrics | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.store, self.table = config, store, table
        self.dispatcher, self.metrics = dispatcher, metrics
        self.scheduler_address = ""
        self._clock = clock
        self._events: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._mono0 = clock()
        epoch = store.get_meta("epoch_unix")
        if epoch is None:
            epoch = time.time()
            store.set_meta({"epoch_unix": epoch})
        self._base = max(0.0, time.time() - float(epoch))
        self._round_base = int(store.get_meta("round", "0"))
        R = config.round_seconds
        core_config = CoreConfig.for_policy(policy, round_seconds=R,
                                            min_resolve_interval_s=config.resolve_interval,
                                            seed=config.seed, on_solve_error="keep",
                                            type_order=fastest_first(table,
                                                                     table.worker_types))
        self.servers: dict[int, _Server] = {}
        for row in store.servers():
            self.servers[row.id] = _Server(row, alive=False, last_seen=0.0)
        view = ClusterView(tuple(Server(s.id, s.worker_type, s.workers)
                                 for s in store.servers()),
                           frozenset(w for s in store.servers() for w in s.workers))
        self.core = SchedulerCore(policy, view, table, core_config)
        self.online = OnlineThroughputs(table)
        self.online.restore(store.throughputs())
        self.jobs: dict[str, JobRow] = {}
        self._unapplied: dict[str, int] = {}   # durable steps of jobs not admitted yet
        for row in store.jobs():
            if not row.final:
                row = row.but(state="queued")
                self.core.submit(self._spec(row), row.arrival_s, steps_done=row.steps_done)
            self.jobs[row.id] = row
        self._runs: dict[str, _Run] = {}
        self._deferred: dict[str, tuple[int, MicroTask, int]] = {}  # waits for a run's end
        self._inflight: Round | None = None      # the core's round in flight
        self._planned: Round | None = None       # planned, not yet started
        self._next_start: float | None = None    # monotonic boundary of the planned round
        self._plan_at: float | None = None
        self._round_started: float | None = None
        self._held: dict[str, float] = {}        # task key -> seconds it held its workers
        self._freed: dict[int, float] = {}       # worker id -> when its last run there ended
        self._startups: dict[str, tuple[float, int]] = {}   # job type -> (mean s, runs)
        # job -> (monotonic deadline, reason): a rank of a multi-server run exited nonzero;
        # the job fails at the deadline unless a server of the run is found dead first
        self._suspects: dict[str, tuple[float, str]] = {}
        self._waiters: list[_Waiter] = []
        self._last_period: dict[str, dict[str, float]] = {}
        self._started_index = -1
        self._woken = self._clock()       # when an idle scheduler last got work
        self._dirty = True
        self._next_snapshot = 0.0
        self.snapshot: Snapshot = build_snapshot(self, 0.0)

    # ---- the thread's inbox ---------------------------------------------------------
    def post(self, fn: Callable[[], Any], *, changes: bool = True) -> Future:
        """Run ``fn`` on the executor thread; its result (or exception) lands in the future.
        ``changes=False``: it changes nothing ``Status`` shows (no new snapshot needed)."""
        fut: Future = Future()
        self._events.put((fn, fut, changes))
        return fut

    def call(self, fn: Callable[[], Any], timeout: float = 30.0, *,
             changes: bool = True) -> Any:
        return self.post(fn, changes=changes).result(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._events.put((lambda: None, Future(), False))

    def now(self) -> float:
        """Seconds since the daemon first started (its state's time origin)."""
        return self._base + self._clock() - self._mono0

    def run(self) -> None:
        """The executor loop: events, heartbeats, round deadlines, snapshots."""
        while not self._stop.is_set():
            try:
                self._handle(*self._events.get(timeout=self._wait()))
                while True:
                    self._handle(*self._events.get_nowait())
            except queue.Empty:
                pass
            self._tick()
            mono = self._clock()
            if self._dirty and mono >= self._next_snapshot:
                # Large job tables are re-pictured at most every SNAPSHOT_EVERY_S.
                self._next_snapshot = mono + (SNAPSHOT_EVERY_S if len(self.jobs) > 500
                                              else 0.0)
                self.snapshot = build_snapshot(self, self.now())
                if self.metrics is not None:
                    self.metrics.on_state(self)
                self._dirty = False
        for waiter in self._waiters:
            waiter.future.set_result(None)

    def _handle(self, fn, fut: Future, changes: bool) -> None:
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - handed back to the caller
            fut.set_exception(err)
        else:
            fut.set_result(result)
        self._dirty = self._dirty or changes

    def _wait(self) -> float:
        deadlines = [d for d in (self._plan_at, self._next_start) if d is not None]
        if self._dirty:
            deadlines.append(self._next_snapshot)
        wait = self.config.heartbeat_seconds / 2
        if deadlines:
            wait = min(wait, max(0.0, min(deadlines) - self._clock()))
        return wait

    # ---- time-driven ------------------------------------------------------------------
    def _tick(self) -> None:
        mono = self._clock()
        self._check_heartbeats(mono)
        for job_id, (deadline, reason) in list(self._suspects.items()):
            if mono >= deadline:
                del self._suspects[job_id]
                self._fail_job(job_id, reason)
        if self._next_start is None:            # idle: start as soon as there is work
            if (self.core.has_jobs and self._ready()
                    and mono >= self._woken + ARRIVAL_GRACE_S):
                self._plan(mono)
                self._start_round(mono)
            return
        if self._planned is None and self._plan_at is not None and mono >= self._plan_at:
            self._plan(mono)
        if mono >= self._next_start:
            self._start_round(mono)

    def _ready(self) -> bool:
        gpus = sum(len(s.row.workers) for s in self.servers.values() if s.alive)
        return gpus >= max(1, self.config.expected_workers)

    def _plan(self, mono: float) -> None:
        """Close the round in flight and plan the next one (the core's own recipe)."""
        self._dirty = True
        now = self.now()
        if self._inflight is not None:
            flight, self._inflight = self._inflight, None
            reports = [Report(t.key, (0,) * len(t.job_ids), self._held.get(t.key, 0.0))
                       for t in flight.tasks]
            for job_id in self.core.end_round(reports, now).completed:
                self._finish(job_id, now)
        rnd = self.core.start_round(now)
        self._after_admission(rnd.admitted, now)
        if rnd.resolved is not None:
            self._keep_last_period()
            if self.metrics is not None:
                self.metrics.on_solve(rnd.resolved.solve_s)
        self._planned = rnd
        self._inflight = rnd
        self._held = {}
        if len(rnd.batch) == 0 and self.core.active_jobs:
            self.core.force_resolve()     # nothing placed: re-solve at the next boundary
        index = self._round_base + rnd.index
        self.store.set_meta({"round": index + 1})
        for task in rnd.tasks:
            if task.extended and self._continues(task, index):
                self._extend(task, index)
        for waiter in self._waiters:
            run = self._runs.get(waiter.job_id)
            waiter.future.set_result(None if run is None else run.lease)
        self._waiters.clear()

    def _start_round(self, mono: float) -> None:
        """The planned round begins: launch its new runs; schedule the next plan."""
        rnd, self._planned = self._planned, None
        self._dirty = True
        R = self.config.round_seconds
        if self.metrics is not None and self._round_started is not None:
            self.metrics.on_round(mono - self._round_started)
        self._round_started = mono
        if rnd is not None:
            self._started_index = self._round_base + rnd.index
        if rnd is None or (not self.core.has_jobs and len(rnd.batch) == 0):
            self._next_start = self._plan_at = None      # go idle
            if rnd is not None and self._inflight is rnd:
                self.core.end_round((), self.now())
                self._inflight = None
            return
        index = self._round_base + rnd.index
        # Rounds keep their cadence: this one ends a round after its boundary was due (the
        # loop may wake a little late), unless the scheduler was idle or far behind.
        due = self._next_start
        start = due if due is not None and 0.0 <= mono - due < R / 2 else mono
        self._next_start = start + R
        self._plan_at = start + R - self.config.plan_lead
        self._deferred.clear()           # this round's placements supersede older ones
        for task in rnd.tasks:
            if not all(j in self._runs and self._runs[j].round == index
                       and self._runs[j].workers == task.workers for j in task.job_ids):
                for m, job_id in enumerate(task.job_ids):
                    self._launch_or_defer(task, m, job_id, index)
        if self.metrics is not None:
            self.metrics.on_plan(self)

    # ---- runs ---------------------------------------------------------------------------
    def _launch_or_defer(self, task: MicroTask, m: int, job_id: str, index: int) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return
        if job_id in self._runs:              # its last run is still saving: wait for it
            self._deferred[job_id] = (m, task, index)
            return
        if not all(self.core.view.server_of[w] in self.servers
                   and self.servers[self.core.view.server_of[w]].alive for w in task.workers):
            return
        mono = self._clock()
        ends = self._next_start if self._next_start is not None else mono + \
            self.config.round_seconds
        left = ends - mono
        if left < min(self._startup(job.job_type)[0], self.config.round_seconds / 2):
            # A launch that waited (for its last run to save) and could not start up before
            # the round ends is not made: it would only checkpoint what it loaded.
            log.info("job %s: %.1fs left in round %d, less than its start-up; not launched",
                     job_id, left, index)
            return
        lease = new_lease(index, job.steps_done, task.steps[m], job.total_steps, left)
        addresses = {sid: s.row.address for sid, s in self.servers.items()}
        requests = run_requests(task, m, job, lease, self.core.view, addresses,
                                round_index=index, scheduler_address=self.scheduler_address,
                                checkpoint_dir=str(self.config.checkpoints / job_id))
        self._runs[job_id] = _Run(job_id, task.worker_type, requests, set(requests), lease,
                                  index, mono, ends, float(task.throughputs[m]),
                                  job.steps_done, (job.steps_done, 0.0), workers=task.workers,
                                  round_start=ends - self.config.round_seconds)
        self._held[task.key] = self.config.round_seconds
        for server_id, request in requests.items():
            self.dispatcher.run_job(self.servers[server_id].row.address, request,
                                    self._on_dispatched(job_id, server_id))

    def _continues(self, task: MicroTask, index: int) -> bool:
        """Every member still runs, from last round, on exactly this task's GPUs."""
        return all(j in self._runs and not self._runs[j].orphan
                   and self._runs[j].round == index - 1
                   and self._runs[j].workers == task.workers for j in task.job_ids)

    def _extend(self, task: MicroTask, index: int) -> None:
        """Lease extension: the same workers next round (RunJob on the same GPUs), one
        more round of time and the round's steps on top of the lease in force."""
        R = self.config.round_seconds
        for m, job_id in enumerate(task.job_ids):
            run = self._runs[job_id]
            job = self.jobs[job_id]
            run.round, run.ends = index, run.ends + R
            # ends with the next round (a run that overran its first round for its minimum
            # lease is back on the rounds' cadence)
            run.lease = extended_lease(run.lease, index, task.steps[m], job.total_steps,
                                       run.ends - run.started)
            run.steps_per_s = float(task.throughputs[m])
            for server_id, old in run.servers.items():
                request = pb.RunJobRequest()
                request.CopyFrom(old)
                request.round = index
                request.lease.CopyFrom(run.lease)
                request.steps_done = job.steps_done
                run.servers[server_id] = request
                self.dispatcher.run_job(self.servers[server_id].row.address, request,
                                        self._on_dispatched(job_id, server_id))
        self._held[task.key] = R

    def _on_dispatched(self, job_id: str, server_id: int) -> Callable[[bool, str], None]:
        def done(ok: bool, message: str) -> None:
            if not ok:
                self.post(lambda: self._dispatch_failed(job_id, server_id, message))
        return done

    def _dispatch_failed(self, job_id: str, server_id: int, message: str) -> None:
        """A worker refused a RunJob (bad workload, ...) or was unreachable."""
        server = self.servers.get(server_id)
        if server is not None and not server.alive:
            return
        if "UNAVAILABLE" in message or "DEADLINE_EXCEEDED" in message:
            self._run_exited(job_id, server_id)   # the heartbeat check decides its fate
            return
        self._fail_job(job_id, f"worker {server_id} refused the job: {message}")

    def _run_exited(self, job_id: str, server_id: int) -> None:
        run = self._runs.get(job_id)
        if run is None:
            return
        run.left.discard(server_id)
        mono = self._clock()
        for w in run.workers:
            if self.core.view.server_of[w] == server_id:
                self._freed[w] = mono
        if run.left:
            return
        del self._runs[job_id]
        job = self.jobs.get(job_id)
        if job is not None and job.state == "running":
            self.jobs[job_id] = job.but(state="queued")
        deferred = self._deferred.pop(job_id, None)
        if deferred is not None:
            m, task, index = deferred
            self._launch_or_defer(task, m, job_id, index)

    def _kill_run(self, job_id: str, reason: str) -> None:
        run = self._runs.pop(job_id, None)
        self._deferred.pop(job_id, None)
        if run is None:
            return
        for server_id in run.left:
            server = self.servers.get(server_id)
            if server is not None and server.alive:
                self.dispatcher.kill_job(server.row.address, job_id, reason)

    # ---- progress -------------------------------------------------------------------------
    def durable_steps(self, job_id: str, steps: int, seconds: float | None = None) -> None:
        """A checkpoint holds ``steps`` (absolute) for the job: count what is new, once."""
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return
        run = self._runs.get(job_id)
        if run is not None and not run.orphan and seconds is not None and steps > run.last[0]:
            then = run.last[1]
            took = self._clock() - run.init_at if then is None else seconds - then
            self._measure(job, run, steps - run.last[0], took)
            run.last = (steps, seconds)
        steps = min(int(steps), job.total_steps)
        if steps <= job.steps_done:
            return
        delta = steps - job.steps_done
        self.jobs[job_id] = job.but(steps_done=steps)
        now = self.now()
        if job_id in self.core.active_jobs:
            if self.core.add_progress(job_id, delta, now).completed:
                self._finish(job_id, now)
                return
        elif job_id in self.core.pending_jobs:
            self._unapplied[job_id] = self._unapplied.get(job_id, 0) + delta
        self.store.update_jobs([self.jobs[job_id]])

    def _measure(self, job: JobRow, run: _Run, steps: int, seconds: float) -> None:
        """Online throughputs (thesis §5.3.3) from a run's checkpointed reports. A run on a
        configuration of several types (VirtualFlow §6.5.2) is not recorded: its steps/s is
        not the job's throughput on any one type; the core prices configurations from the
        throughput table with the split solver (``core/configurations.py``), so a daemon
        whose workers run at X times the table should get a table scaled by X
        (``local-cluster`` writes one)."""
        if run.worker_type not in self.core.worker_types:
            return
        if self.online.observe(job.id, run.worker_type, steps, seconds) is None:
            return
        self.store.put_throughput(job.id, run.worker_type,
                                  self.online.measured[job.id][run.worker_type])
        if job.id in self.core.active_jobs:
            row = self.online.changed_row(job.id, job.job_type, job.scale_factor,
                                          self.core.worker_types)
            if row is not None:
                self.core.set_job_throughputs(job.id, row, self.now())

    def _after_admission(self, admitted: tuple[str, ...], now: float) -> None:
        for job_id in admitted:
            job = self.jobs[job_id]
            if job_id in self.online.measured:
                self.core.set_job_throughputs(job_id, self.online.row(
                    job_id, job.job_type, job.scale_factor, self.core.worker_types), now)
            delta = self._unapplied.pop(job_id, 0)
            if delta and self.core.add_progress(job_id, delta, now).completed:
                self._finish(job_id, now)

    def _finish(self, job_id: str, now: float) -> None:
        job = self.jobs[job_id]
        self.jobs[job_id] = job.but(state="done", steps_done=job.total_steps, completion_s=now)
        self.store.update_jobs([self.jobs[job_id]])
        self._deferred.pop(job_id, None)
        log.info("job %s done at %.1fs", job_id, now)

    def _fail_job(self, job_id: str, reason: str) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return
        self._end_job(job_id, job.but(state="failed", reason=reason, completion_s=None))
        log.warning("job %s failed: %s", job_id, reason)

    def _end_job(self, job_id: str, row: JobRow) -> None:
        if job_id in self.core.active_jobs or job_id in self.core.pending_jobs:
            self.core.cancel(job_id, self.now())
        self._kill_run(job_id, row.reason or row.state)
        self.jobs[job_id] = row
        self.store.update_jobs([row])

    # ---- events from handlers (run on this thread through ``call``) ---------------------
    def submit(self, request: pb.JobRequest) -> str:
        gpus: dict[str, int] = {}
        for s in self.servers.values():
            gpus[s.row.worker_type] = gpus.get(s.row.worker_type, 0) + len(s.row.workers)
        row = check_submission(request, self.table, tuple(self.table.worker_types), gpus)
        now = self.now()
        row = row.but(id=str(self.store.next_job_id()), arrival_s=now)
        if self._next_start is None and not self.core.has_jobs:
            self._woken = self._clock()
        self.store.add_job(row)
        self.jobs[row.id] = row
        self.core.submit(self._spec(row), now)
        return row.id

    def cancel(self, job_id: str) -> pb.Ack:
        job = self.jobs.get(job_id)
        if job is None:
            return pb.Ack(ok=False, message=f"unknown job {job_id!r}")
        if job.final:
            return pb.Ack(ok=False, message=f"job {job_id} is already {job.state}")
        self._end_job(job_id, job.but(state="cancelled", reason="cancelled"))
        return pb.Ack(ok=True)

    def register(self, request: pb.RegisterWorkerRequest, mono: float) -> pb.RegisterWorkerResponse:
        previous = self.servers.get(request.previous_server_id)
        if (previous is not None and previous.row.worker_type == request.worker_type
                and len(previous.row.workers) == request.gpus):
            row = ServerRow(previous.row.id, request.worker_type, previous.row.workers,
                            request.address, request.hostname)
            if not previous.alive:
                self.core.restore_workers(row.workers, self.now())
            else:  # it restarted before we noticed: its processes are gone
                self._lost_server(previous.row.id, "worker restarted")
        else:
            if request.gpus < 1:
                raise ValueError(f"gpus must be >= 1, got {request.gpus}")
            if not request.worker_type:
                raise ValueError("worker_type is empty")
            view = self.core.add_workers(request.worker_type, request.gpus, self.now(),
                                         gpus_per_server=request.gpus)
            server = view.servers[-1]
            row = ServerRow(server.id, server.worker_type, server.workers, request.address,
                            request.hostname)
        self.store.put_server(row)
        self.servers[row.id] = _Server(row, alive=True, last_seen=mono)
        log.info("worker %d (%s x%d) at %s registered", row.id, row.worker_type,
                 len(row.workers), row.address)
        return pb.RegisterWorkerResponse(server_id=row.id, worker_ids=list(row.workers),
                                         round_seconds=self.config.round_seconds,
                                         heartbeat_seconds=self.config.heartbeat_seconds)

    def heartbeat(self, server_id: int, mono: float, running: tuple[str, ...] = ()) -> bool:
        server = self.servers.get(server_id)
        if server is None or not server.alive:
            return False
        server.last_seen = max(server.last_seen, mono)
        self._reconcile(server, set(running), mono)
        return True

    def _reconcile(self, server: _Server, running: set[str], mono: float) -> None:
        """Processes this scheduler did not start (it restarted while they ran) are held
        as *orphan* runs, so the job is not launched elsewhere while one may still write
        its checkpoint; their next RenewLease ends them (an expired lease). An orphan run
        ends when its exit is reported or the worker stops listing it."""
        sid = server.row.id
        for job_id in running:
            job = self.jobs.get(job_id)
            if job_id in self._runs or job is None or job.final:
                continue
            self._runs[job_id] = _Run(job_id, server.row.worker_type, {sid: pb.RunJobRequest()},
                                      {sid}, stop_lease(job.steps_done), -1, mono, mono, 0.0,
                                      job.steps_done, (job.steps_done, 0.0), started_up=True,
                                      orphan=True, round_start=mono)
        for job_id, run in list(self._runs.items()):
            if run.orphan and sid in run.left and job_id not in running:
                self._run_exited(job_id, sid)

    def round_report(self, request: pb.RoundReportRequest) -> None:
        if request.steps >= 0:
            self.durable_steps(request.job_id, int(request.steps))
        run = self._runs.get(request.job_id)
        if request.failed and run is not None and request.server_id in run.servers:
            reason = request.reason or f"exit code {request.exit_code}"
            if len(run.servers) == 1:
                self._fail_job(request.job_id, reason)
                return
            # A rank of a multi-server job also fails when a peer's machine dies under it
            # (gloo reports the lost connection): that is not the job's fault. Wait for the
            # heartbeat check to tell; a server of the run found dead clears the suspicion.
            limit = (HEARTBEAT_MISSES + 1) * self.config.heartbeat_seconds
            if request.job_id not in self._suspects:
                log.info("job %s: a rank on server %d failed (%s); the job fails in %.1fs "
                         "unless a server of its run is found dead", request.job_id,
                         request.server_id, reason, limit)
                self._suspects[request.job_id] = (self._clock() + limit, reason)
        self._run_exited(request.job_id, request.server_id)

    def init_job(self, request: pb.InitJobRequest) -> pb.InitJobResponse:
        job = self.jobs.get(request.job_id)
        if job is None:
            raise KeyError(f"unknown job {request.job_id!r}")
        run = self._runs.get(request.job_id)
        if run is not None and not run.started_up:
            self._after_startup(run)
        if run is not None and job.state == "queued":   # running: its process has started
            self.jobs[job.id] = job.but(state="running")
        lease = run.lease if run is not None else stop_lease(job.steps_done)
        return pb.InitJobResponse(lease=lease, steps_done=job.steps_done,
                                  total_steps=job.total_steps)

    def _after_startup(self, run: _Run) -> None:
        """A fresh run's process has started up (its first InitJob): its lease still ends
        with its round, so its steps become what it can make in the time left at its
        planned rate (round-aligned leases; thesis §5.6). Its start-up is thus charged to
        its own round, as the simulator charges preemption overhead (§5.7)."""
        run.started_up = True
        mono = self._clock()
        # The process started at its dispatch, or when its GPUs were freed by the run before
        # it (the worker queues a launch until then), whichever came later.
        run.started = max([run.started, *(self._freed.get(w, 0.0) for w in run.workers)])
        elapsed = max(0.0, mono - run.started)
        # Throughput samples start here: a fresh process's imports and model build are a
        # per-run overhead (recorded apart, per job type), not slower steps. The first one
        # is timed on this clock (the process's own clock at this moment is not known).
        run.last, run.init_at = (run.last[0], None), mono
        self._record_startup(run.job_id, max(0.0, mono - run.round_start))
        # At least MIN_LEASE_FRACTION of a round after start-up, even past the round's end:
        # a start-up longer than the rest of its round must not leave the job without any
        # progress (then its GPUs' next run starts that much later).
        floor = MIN_LEASE_FRACTION * self.config.round_seconds
        left = max(run.ends - mono, floor)
        run.lease = startup_lease(run.lease, run.base_steps, run.steps_per_s, left,
                                  elapsed + left)
        if run.ends - mono < floor:
            # past the round's end: the workers' kill deadlines move too (a RunJob on the
            # same GPUs), or they would kill the run before it saves
            for server_id, old in list(run.servers.items()):
                request = pb.RunJobRequest()
                request.CopyFrom(old)           # the old one may still be on the wire
                request.lease.CopyFrom(run.lease)
                run.servers[server_id] = request
                self.dispatcher.run_job(self.servers[server_id].row.address, request,
                                        self._on_dispatched(run.job_id, server_id))

    def _record_startup(self, job_id: str, seconds: float) -> None:
        """Keep the mean start-up of fresh runs per job type in the store
        (``startup_s/<job type>``, over ``startup_n/<job type>`` runs): the seconds from its
        round's start to its first InitJob, which a restart takes out of its round."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        mean, n = self._startup(job.job_type)
        mean = (n * mean + seconds) / (n + 1)
        self._startups[job.job_type] = (mean, n + 1)
        self.store.set_meta({f"startup_s/{job.job_type}": f"{mean:.3f}",
                             f"startup_n/{job.job_type}": n + 1})

    def _startup(self, job_type: str) -> tuple[float, int]:
        """(mean start-up, fresh runs) recorded for ``job_type``; (0, 0) before the first."""
        got = self._startups.get(job_type)
        if got is None:
            got = (float(self.store.get_meta(f"startup_s/{job_type}", "0") or 0.0),
                   int(self.store.get_meta(f"startup_n/{job_type}", "0") or 0))
            self._startups[job_type] = got
        return got

    def renew_lease(self, request: pb.RenewLeaseRequest) -> pb.Lease | Future:
        """The lease for the next round: extended when the job keeps its workers. Before
        the next round is planned the answer waits for the plan (a future)."""
        run = self._runs.get(request.job_id)
        job = self.jobs.get(request.job_id)
        if run is None or job is None or job.final:
            return stop_lease(int(request.steps), request.seconds)
        if run.round > request.round:          # already extended by the next plan
            return run.lease
        if self._planned is None and run.round >= self._started_index and self._plan_at:
            waiter = _Waiter(request.job_id)   # the next round is not planned yet
            self._waiters.append(waiter)
            return waiter.future
        return run.lease

    # ---- failures -------------------------------------------------------------------------
    def _check_heartbeats(self, mono: float) -> None:
        limit = HEARTBEAT_MISSES * self.config.heartbeat_seconds
        dead = [s for s in self.servers.values() if s.alive and mono - s.last_seen > limit]
        for server in dead:
            server.alive = False
            self.core.fail_workers(server.row.workers, self.now())
            log.warning("worker %d (%s) missed heartbeats: failed", server.row.id,
                        server.row.address)
            self._lost_server(server.row.id, f"worker {server.row.id} failed")
            self._dirty = True

    def _lost_server(self, server_id: int, reason: str) -> None:
        """The processes on ``server_id`` are gone: end their runs (the jobs resume from
        their last checkpoint when placed again)."""
        for job_id, run in list(self._runs.items()):
            if server_id in run.servers:
                run.left.discard(server_id)
                if self._suspects.pop(job_id, None) is not None:
                    log.info("job %s: its failed rank lost its peer on server %d; the job "
                             "goes on from its checkpoint", job_id, server_id)
                deferred = self._deferred.pop(job_id, None)
                self._kill_run(job_id, reason)
                job = self.jobs[job_id]
                if job.state == "running":
                    self.jobs[job_id] = job.but(state="queued")
                if deferred is not None:
                    m, task, index = deferred
                    self._launch_or_defer(task, m, job_id, index)

    # ---- allocation against received share ----------------------------------------------
    def _keep_last_period(self) -> None:
        """The received fractions of the allocation period a re-solve just closed."""
        for period in self.core.take_closed_periods():
            span = period.end_s - period.start_s
            if span > 0:
                self._last_period = {
                    key: dict(zip(period.types, (period.received[i] / span).tolist()))
                    for i, key in enumerate(period.keys) if "+" not in key}

    def shares(self, now: float) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
        """Each active job's X and the fraction of time it received per type (thesis §5.5):
        over the current allocation period, or the last closed one while the current one
        is younger than a round."""
        shares = self.core.shares(now)
        if now - self.core.last_resolve_s >= self.config.round_seconds:
            return shares
        return {job: (x, self._last_period.get(job, got)) for job, (x, got) in shares.items()}

    # ---- helpers --------------------------------------------------------------------------
    @staticmethod
    def _spec(row: JobRow) -> JobSpec:
        return JobSpec(id=row.id, job_type=row.job_type, scale_factor=row.scale_factor,
                       total_steps=row.total_steps, weight=row.priority_weight,
                       slo_s=row.slo_s, entity=row.entity, mixed=row.mixed,
                       min_scale_factor=row.min_scale_factor)

    @property
    def round_index(self) -> int:
        """The round running now (or the last one), counted across restarts."""
        return max(self._started_index, self._round_base)
