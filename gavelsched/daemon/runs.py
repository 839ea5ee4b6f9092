"""The run table: each job's live processes on the workers (thesis §5.5-5.6).

A *run* starts with the RunJobs of a micro-task on new workers, is extended by later RunJobs
on the same GPUs (lease extension), and is over when every server hosting it reported its
exit, died, or was told to kill it. A job placed while its last run is still saving waits
(*deferred*) until that run exits, so a checkpoint is never read while it is written. A run
found on a worker after a scheduler restart is an *orphan* (``orphans``): it is held, so the
job is not launched elsewhere, until it exits, unless the next plan keeps it on its GPUs.
Every launch gets a new run generation (``fences``); a process of an older generation found
on a worker is told to stop. The servers of every launch are recorded (``logs.Hosts``: where
the job's output is). A run's first ``InitJob`` makes its job ``running``; when the run
ends, the job is ``preempted`` (or still ``queued``, if its process never started) until
its next run starts (``jobs``).

A server's report that its processes of a job exited is judged by ``exits.exit_verdict``
(a typed value) and acted on here: a run that died is tried again or its job fails
(``retries``), a failed rank makes its job suspected (``health``), and a run that ended
on its own is counted with or without progress (``retries``).

Everything here runs on the executor thread; the collaborators it needs (the jobs, the
servers' health, the dispatcher, start-up statistics, the core's cluster view, the clock,
the executor's inbox and its way to fail a job) are handed in.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping

from ..core import MicroTask, Round, SchedulerCore
from ..core.batch import worth_launching
from ..core.waves import machine_of
from ..rpc import pb
from .config import DaemonConfig
from .dispatch import AFTER_SAVE, LEASE_MOVED, PLANNED, REFILL, Delivery, Dispatcher
from .exits import Died, Ended, RankFailed, exit_verdict
from .fences import Fences
from .health import Health
from .holding import runs_per_server
from .inbox import FLEET
from .launches import Launches, StartUp, launch_of, started_lease
from .leases import (MIN_LEASE_FRACTION, extended_lease, new_lease, rebased_lease, run_requests,
                     stop_lease)
from .logs import Hosts
from .meter import limit_lease
from .renewals import Renewals
from .retries import Retries
from .run import Run
from .startups import Startups
from .jobs import HELD, RUNNING, JobRow, Jobs

log = logging.getLogger(__name__)

# A run's last commit this close to its lease's end (or after) is its save's: the iterator
# stops early by its last save's duration, so that commit lands at about the lease's end.
SAVE_COMMIT_WINDOW_S = 1.0
# Why a placement was not launched (``RunTable.not_launched``; Prometheus counts them): its
# servers failed or were drained since the plan; its job backs off after a killed run; it
# waited for its last run's save and less than its start-up is left (``worth_launching``).
NOT_LAUNCHED = ("servers_down", "backing_off", "too_late")


class RunTable:
    """The live runs, by job id (module docstring)."""

    def __init__(self, config: DaemonConfig, jobs: Jobs, health: Health,
                 dispatcher: Dispatcher, startups: Startups, retries: Retries,
                 fences: Fences, hosts: Hosts, core: SchedulerCore, *,
                 clock: Callable[[], float], now: Callable[[], float],
                 monotonic: Callable[[float], float], post: Callable[..., object],
                 fail: Callable[[str, str], None],
                 allowed: Callable[[JobRow], float | None] = lambda job: None,
                 ended: Callable[[Run], None] = lambda run: None,
                 job_env: Callable[[JobRow], Mapping[str, str]] = lambda job: {}) -> None:
        """``clock``: monotonic seconds; ``now``: the daemon's time (``clock.Origin``);
        ``monotonic``: the monotonic reading at a daemon's time. ``allowed(job)``: seconds
        the job may still run (its time limit; None: none), which bounds each lease of its
        run; ``ended(run)`` follows every run's end; ``job_env(job)`` is added to its
        processes' environment."""
        self.config, self.jobs, self.health = config, jobs, health
        self.dispatcher, self.startups, self.retries = dispatcher, startups, retries
        self.fences, self.hosts = fences, hosts
        self.core = core
        self._clock, self._monotonic, self._post, self._fail = clock, monotonic, post, fail
        self._allowed, self._ended, self._job_env = allowed, ended, job_env
        self._round: Round | None = None      # the round running now (``begin``)
        self._running = False                 # False: the daemon is idle
        self.scheduler_address = ""
        self._runs: dict[str, Run] = {}
        self.unplanned: set[str] = set()   # orphans no plan has judged yet (``orphans``)
        # job -> (member, task, round, refill): a placement waiting for its last run's end
        self._deferred: dict[str, tuple[int, MicroTask, int, bool]] = {}
        self.held: dict[str, float] = {}     # task key -> seconds it held its workers
        self._members: dict[str, list[str]] = {}  # task key -> its jobs' runs this round
        self._waves: Counter[tuple[int, str]] = Counter()   # (round, machine) -> launches
        self.not_launched = dict.fromkeys(NOT_LAUNCHED, 0)  # reason -> placements (scraped)
        self.renewals = Renewals(self.live, self.get, self.renewed, clock)
        self.launches = Launches(clock, now)   # fresh runs' InitJob answers, and GPUs freed

    def get(self, job_id: str) -> Run | None:
        return self._runs.get(job_id)

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._runs

    def live(self) -> tuple[Run, ...]:
        return tuple(self._runs.values())

    def forget(self, job_ids: list[str]) -> None:
        """Jobs that left memory (``retired``; none has a run): their generations and
        servers."""
        self.fences.forget(job_ids)
        self.hosts.forget(job_ids)

    def __bool__(self) -> bool:
        """Whether any run is live (the executor's loop asks at each wake)."""
        return bool(self._runs)

    # ---- placing a round ------------------------------------------------------------------
    def begin(self, rnd: Round | None) -> None:
        """Round ``rnd`` has started (``RoundDriver.start``); None: the daemon went idle.
        Launches read the running round's length and end from it."""
        if rnd is not None:
            self._round = rnd
        self._running = rnd is not None

    def _window(self, mono: float) -> tuple[float, float]:
        """(the round's length, when the running round ends on the monotonic clock); idle:
        a round of the last length (before any, the core's) from now."""
        rnd = self._round
        R = rnd.round_seconds if rnd is not None else self.core.config.round_seconds
        if not self._running:
            return R, mono + R
        return R, self._monotonic(self._round.end_s)

    def planned_end(self, R: float) -> float:
        """When the round planned now, of ``R`` seconds, ends on the monotonic clock: a
        round after the running one's end; idle, a round from now (it starts at once)."""
        _, end = self._window(mono := self._clock())
        return end + R if self._running else mono + R

    def place(self, tasks: tuple[MicroTask, ...], index: int, *, refill: bool = False) -> None:
        """Round ``index`` begins: launch every task not already running on its GPUs (the
        extended ones were sent at the plan); older deferred placements are superseded.
        ``refill``: tasks on GPUs freed mid-round (``SchedulerCore.place_freed``), launched
        for the rest of round ``index``."""
        if not refill:
            self._deferred.clear()
            self._waves = Counter({k: n for k, n in self._waves.items() if k[0] >= index})
        for task in tasks:
            if not all(j in self._runs and self._runs[j].round == index
                       and self._runs[j].workers == task.workers for j in task.job_ids):
                for m, job_id in enumerate(task.job_ids):
                    self._launch_or_defer(task, m, job_id, index, refill)

    def uncredited_steps(self) -> dict[str, float]:
        """Per job with a live run, the steps its lease lets it make by the end of the
        round beyond its durable count: what it will have made at the boundary the next
        round is planned for, which its checkpoint reports only then (policies that read
        the remaining steps plan net of them, as the simulator, which plans at the
        boundary, does)."""
        out = {}
        for job_id, run in self._runs.items():
            job = self.jobs.get(job_id)
            if job is not None and not run.orphan and not job.final:
                out[job_id] = float(max(0, int(run.lease.max_steps) - job.steps_done))
        return out

    def on_server(self, server_id: int) -> int:
        """How many runs still have processes on ``server_id``."""
        return runs_per_server(self._runs.values())[server_id]

    def idle_workers(self, live: frozenset[int] | set[int]) -> set[int]:
        """Of the ``live`` workers, those no run holds and no deferred placement waits for
        (what a mid-round refill may use). A run whose job has finished holds none: its
        process is exiting, and a launch on its GPUs waits at the worker until it has
        (the refill is not lost to the half second a torch process takes to exit when
        it comes just before the next plan, issue #29)."""
        taken = {w for run in self._runs.values() if not run.done_at for w in run.workers}
        taken.update(w for _, task, _, _ in self._deferred.values() for w in task.workers)
        return set(live) - taken

    def extend_continuing(self, rnd: Round, index: int) -> None:
        """At the plan of ``rnd`` (round ``index``): a task whose members all run, from last
        round, on exactly its GPUs gets its leases extended by ``rnd``'s length (no
        checkpoint, no restart). Then (``Orphans.at_plan``) the orphans it keeps in place
        become runs, and the renewals are answered (``Renewals.at_plan``)."""
        self.held, self._members = {}, {}
        for task in rnd.tasks:
            if task.extended and all(j in self._runs and not self._runs[j].orphan
                                     and self._runs[j].round == index - 1
                                     and self._runs[j].workers == task.workers
                                     for j in task.job_ids):
                self._extend(task, index, rnd.round_seconds)

    def renewed(self, run: Run, request: pb.RenewLeaseRequest,
                arrived: float | None = None) -> pb.Lease:
        """The lease a renewal of ``run`` gets (asked at ``arrived``; None: now): its lease,
        set first from the renewal when it is a kept orphan's (``leases.rebased_lease``;
        its process's start is then known on this clock)."""
        if run.rebase and request.generation == run.generation:
            run.rebase = False
            job = self.jobs[run.job_id]
            arrived = self._clock() if arrived is None else arrived
            lease = rebased_lease(run.round, run.ends, run.steps_per_s, job.spec.total_steps,
                                  int(request.steps), float(request.seconds), arrived)
            run.started = run.ends - lease.max_seconds
            run.last = (int(request.steps), float(request.seconds))   # (samples from here)
            allowed = self._allowed(job)       # (its job's time limit left now)
            run.lease = limit_lease(lease, None if allowed is None
                                    else arrived - run.started + allowed)
            log.info("job %s: its kept run renewed: to %d steps in round %d", run.job_id,
                     run.lease.max_steps, run.round)
        return run.lease

    def held_s(self, keys: list[str]) -> list[float]:
        """Seconds each micro-task of ``keys`` held its workers in the round in flight, for
        the core's accounting (thesis §5.5: priorities divide by the time received): the
        round, start-up included, as the simulator counts it; nothing for a task whose run
        (launched or extended) has not started up and waits at the plan for another task's
        run that overran (a long start-up or save at short rounds). That run may be
        superseded before it starts: a round credited to it lowers its job's priority for
        time it never had."""
        holders: dict[int, set[str]] = {}
        for run in self._runs.values():
            for worker in run.workers:
                holders.setdefault(worker, set()).add(run.job_id)

        def queued(key: str) -> bool:
            mine = self._members.get(key, ())
            return any(holders[w].difference(mine) for run in map(self._runs.get, mine)
                       if run and not run.started_up for w in run.workers)

        return [0.0 if queued(key) else self.held.get(key, 0.0) for key in keys]

    def deferred(self) -> dict[str, str]:
        """Per job whose placement waits for its last run to exit, the worker type (or
        configuration) it goes to."""
        return {job_id: task.worker_type for job_id, (_, task, _, _) in self._deferred.items()}

    def _launch_or_defer(self, task: MicroTask, m: int, job_id: str, index: int,
                         refill: bool = False, after_save: bool = False) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.final or job.steps_done >= job.spec.total_steps:
            return                            # (a run that can do no step is never sent)
        if job.state == HELD:                 # (held while this placement waited)
            return
        if job_id in self._runs:              # its last run is still saving: wait for it
            self._deferred[job_id] = (m, task, index, refill)
            return
        view = self.core.view
        if not task.workers or any(w in view.down or not self.health.alive(view.server_of[w])
                                   for w in task.workers):
            return self._not_launched("servers_down", "job %s: its servers failed or were "
                                      "drained since the plan of round %d", job_id, index)
        mono = self._clock()
        if self.retries.backing_off(job_id, mono):
            return self._not_launched("backing_off", "job %s: backing off after a killed run "
                                      "in round %d", job_id, index)
        R, ends = self._window(mono)
        left = ends - mono
        startup = self.startups.expected_startup(job.spec.job_type)
        if not worth_launching(left, startup, R, refill):
            # A launch that waited (for its last run to save) and could not start up before
            # the round ends is not made: it would only checkpoint what it loaded.
            return self._not_launched("too_late", "job %s: %.1fs left in round %d, less than "
                                      "its start-up (%.1fs expected)", job_id, left, index,
                                      startup)
        # The lease counts from the durable count, which is exactly the commit the run
        # loads (``fences``): it always allows at least one step past it.
        allowed = self._allowed(job)
        lease = limit_lease(new_lease(index, job.steps_done, task.steps[m],
                                      job.spec.total_steps, left), allowed)
        generation = self.fences.issue(job_id)
        addresses = self.health.addresses()
        requests = self.requests(task, m, job, lease, index, generation)
        # A refill's round starts at its launch (its start-up is measured from when its
        # GPUs are free: ``started_up``); its received time is the rest of the round. Its
        # lease has no floor past its start-up (``launches.started_lease``): it only uses
        # time that would otherwise be idle.
        run = Run(job_id, task.worker_type, requests, set(requests), lease, index, mono, ends,
                  float(task.throughputs[m]), job.steps_done, (job.steps_done, 0.0),
                  workers=task.workers, round_start=mono if refill else ends - R,
                  generation=generation, task_key=task.key, refill=refill, allowed_s=allowed,
                  floor_s=0.0 if refill else MIN_LEASE_FRACTION * R)
        self._runs[job_id] = run
        self._book(run, job)
        if not refill:      # (a refill starts alone: its GPUs freed as a job ended)
            run.wave_keys = tuple((index, machine_of(addresses[view.server_of[w]]))
                                  for w in task.workers)
            self._waves.update(run.wave_keys)
        self.held[task.key] = left if refill else R
        self._members.setdefault(task.key, []).append(job_id)
        self.hosts.add(job_id, requests)
        kind = REFILL if refill else AFTER_SAVE if after_save else PLANNED
        for server_id, request in requests.items():
            self.send(job_id, server_id, request, kind)

    def _not_launched(self, reason: str, message: str, *args) -> None:
        """A placement not launched, for ``reason`` (``NOT_LAUNCHED``): counted and logged."""
        self.not_launched[reason] += 1
        log.info(message + "; not launched", *args)

    def _extend(self, task: MicroTask, index: int, R: float) -> None:
        """Lease extension: the same workers next round (RunJob on the same GPUs), one more
        round (``R`` seconds) of time and the round's steps on top of the lease in force."""
        for m, job_id in enumerate(task.job_ids):
            run = self._runs[job_id]
            job = self.jobs[job_id]
            run.round, run.ends = index, run.ends + R
            # ends with the next round (a run that overran its first round for its minimum
            # lease is back on the rounds' cadence)
            run.lease = limit_lease(extended_lease(run.lease, index, task.steps[m],
                                                   job.spec.total_steps,
                                                   run.ends - run.started), run.allowed_s)
            run.steps_per_s = float(task.throughputs[m])
            if not run.started_up:            # (its first InitJob: from the new terms)
                self._book(run, job)
            else:
                self.launches.ended(job_id, "lease_changed")   # (not what the book gave)
            for server_id, old in run.servers.items():
                request = pb.RunJobRequest()
                request.CopyFrom(old)
                request.round = index
                request.lease.CopyFrom(run.lease)
                request.steps_done = job.steps_done
                self.send(job_id, server_id, request, PLANNED)
        self.held[task.key] = R
        self._members[task.key] = list(task.job_ids)

    def _book(self, run: Run, job: JobRow) -> None:
        """A run not started up yet: its first InitJob may be answered off the executor."""
        self.launches.book(launch_of(run, job.spec.total_steps, self.fences.checkpoint(job.id)))

    def requests(self, task: MicroTask, m: int, job: JobRow, lease: pb.Lease, index: int,
                 generation: int) -> dict[int, pb.RunJobRequest]:
        """The RunJobs of member ``m`` of ``task`` in round ``index``, by server
        (``leases.run_requests``); each member of a pair names the other."""
        partner = [self.jobs[j] for j in task.job_ids if j != job.id]
        return run_requests(task, m, job, lease, self.core.view, self.health.addresses(),
                            round_index=index, scheduler_address=self.scheduler_address,
                            checkpoint_dir=str(self.config.checkpoints / job.id),
                            generation=generation, job_env=self._job_env(job),
                            partner=partner[0] if partner else None)

    def send(self, job_id: str, server_id: int, request: pb.RunJobRequest, kind: str) -> None:
        """``kind``: why it is sent (``dispatch.PLANNED`` ...), as the round's dispatch line
        counts it."""
        run = self._runs[job_id]
        run.servers[server_id] = request
        self.dispatcher.run_job(self.health.address(server_id), request,
                                self._on_delivered(job_id, server_id), kind=kind)

    def _on_delivered(self, job_id: str, server_id: int) -> Callable[[Delivery], None]:
        def done(delivery: Delivery) -> None:       # a dispatcher pool thread
            if not delivery.ok:
                self._post(lambda: self._refused(job_id, server_id, delivery), lane=FLEET)
        return done

    def _refused(self, job_id: str, server_id: int, delivery: Delivery) -> None:
        """A worker refused a RunJob (bad workload, ...) or was unreachable."""
        server = self.health.servers.get(server_id)
        if server is not None and not server.alive:
            return
        if delivery.unreachable:
            self.exited(job_id, server_id)   # the heartbeat check decides its fate
            return
        self._fail(job_id, f"worker {server_id} refused the job: {delivery.message}")

    # ---- a run's life -------------------------------------------------------------------
    def init(self, job: JobRow, now: float, booked: StartUp | None = None) -> pb.Lease:
        """A process of the job asks for its lease (``InitJob``, at ``now``): a fresh run has
        started up (``started_up``) and its job runs (``Jobs.start``). Without a run: a
        lease that stops at once. ``booked``: an InitJob ``launches`` answered, recorded
        here as it was answered (its arrival, its process's start)."""
        run = self._runs.get(job.id)
        if run is None:
            return stop_lease(job.steps_done)
        if not run.started_up:
            self.started_up(run, *(() if booked is None else (booked.arrived, booked.started)))
        if not job.final and job.state != RUNNING:
            self.jobs.start(job.id, now, run.worker_type)
        return run.lease

    def started_up(self, run: Run, arrived: float | None = None,
                   started: float | None = None) -> None:
        """A fresh run's process has started up (its first InitJob, ``arrived``: now when
        None): its lease still ends with its round, so its steps become what it can make in
        the time left at its planned rate (round-aligned leases; thesis §5.6;
        ``launches.started_lease``, which an InitJob answered from ``launches`` got too).
        Its start-up is thus charged to its own round, as the simulator charges preemption
        overhead (§5.7). ``started``: when its process started (None: its dispatch, or when
        its GPUs were freed by the run before it, whichever came later: the worker queues a
        launch until then)."""
        run.started_up = True
        mono = self._clock() if arrived is None else arrived
        run.started = self.launches.started(run.started, run.workers) if started is None \
            else started
        # Throughput samples start here: a fresh process's imports and model build are a
        # per-run overhead (recorded apart, per job type), not slower steps. The first one
        # is timed on this clock (the process's own clock at this moment is not known).
        run.last, run.init_at = (run.last[0], None), mono
        job = self.jobs.get(run.job_id)
        if job is not None:
            # from its round's start (a wait for the GPUs' last run to save is the
            # restart's cost); a refill, from when its GPUs were free: the wait for a
            # finished process to exit is its own (``Startups.record_exit``), which the
            # forecast adds to a refill's start-up only
            since = run.started if run.refill else run.round_start
            took = max(0.0, mono - since)
            wave = max((self._waves[k] for k in run.wave_keys), default=1)
            self.startups.record(job.spec.job_type, took, wave)
            log.info("job %s: its run in round %d started up in %.3fs (from %s, %d "
                     "launched at once on its machine)", job.id, run.round, took,
                     "its GPUs' release" if run.refill else "its round's start", wave)
        run.lease, run.lease_end = started_lease(run, run.started, mono)
        self.launches.recorded(run.job_id, run.lease)
        if run.ends - mono < run.floor_s:
            # past the round's end: the workers' kill deadlines move too (a RunJob on the
            # same GPUs), or they would kill the run before it saves
            for server_id, old in list(run.servers.items()):
                request = pb.RunJobRequest()
                request.CopyFrom(old)           # the old one may still be on the wire
                request.lease.CopyFrom(run.lease)
                self.send(run.job_id, server_id, request, LEASE_MOVED)

    def finished(self, job_id: str) -> None:
        """The job's last step is durable: its GPUs may be refilled now (``idle_workers``),
        its run's exit is timed from now (``Startups.record_exit``), and its renewals that
        wait for the plan are answered now (``Renewals.answer_now``)."""
        run = self._runs.get(job_id)
        if run is not None:
            run.done_at = self._clock()
            self.renewals.answer_now(job_id)

    def exited(self, job_id: str, server_id: int) -> None:
        """``server_id``'s processes of the job exited; the run ends when all have, and a
        placement that waited for it is launched."""
        run = self._runs.get(job_id)
        if run is None:
            return
        run.left.discard(server_id)
        mono = self._clock()
        server_of = self.core.view.server_of
        self.launches.freed([w for w in run.workers if server_of[w] == server_id], mono)
        if run.left:
            return
        del self._runs[job_id]
        self.launches.ended(job_id)
        job = self.jobs.get(job_id)
        lease_end = max(run.ends, run.lease_end)
        if run.started_up and job is not None and not job.final and mono >= lease_end:
            # its lease ended and it saved: what a preemption costs past the lease (a run
            # that exited before its lease's end failed or finished: no save to time)
            self.startups.record_save(job.spec.job_type, mono - lease_end)
            if run.committed_at >= lease_end - SAVE_COMMIT_WINDOW_S:
                # from its save's commit to its exit, the path a finished run's process
                # takes from its last commit: measured from a type's first preemption on,
                # not only once one of its jobs has finished (issue #29: until then the
                # forecast started refills that much early)
                self.startups.record_exit(job.spec.job_type, mono - run.committed_at)
        if run.done_at and job is not None:
            self.startups.record_exit(job.spec.job_type, mono - run.done_at)
        self.jobs.preempt(job_id)
        self.renewals.ended(job_id)
        self._ended(run)
        self._launch_deferred(job_id)

    def reported_exit(self, job_id: str, server_id: int, failed: bool, exit_code: int,
                      reason: str, round_index: int) -> str | None:
        """A server reports its processes of the job exited (``exit_verdict``): the reason
        the job fails with, or None (its run goes on to ``exited``)."""
        match exit_verdict(self._runs.get(job_id), self.jobs.get(job_id), server_id, failed,
                           exit_code, reason):
            case Died(code, why):
                return self.retries.died(job_id, round_index, code, why, self._clock())
            case RankFailed(code, why):
                limit = self.health.suspect(job_id, why, code, self._clock())
                if limit is not None:
                    log.info("job %s: a rank on server %d failed (%s); the job fails in "
                             "%.1fs unless a server of its run is found dead", job_id,
                             server_id, why, limit)
            case Ended(progressed, reached, why):   # (a lost run says where: a full disk's)
                where = f"{why} (on server {server_id})" if why else why
                return self.retries.ran(job_id, progressed, reached, where)
        return None

    def kill(self, job_id: str, reason: str) -> None:
        """End the job's run (its placement too): KillJob to every live server of it."""
        run = self._runs.pop(job_id, None)
        self._deferred.pop(job_id, None)
        if run is None:
            return
        self.jobs.preempt(job_id)
        self.renewals.ended(job_id)
        self.launches.ended(job_id)
        self._ended(run)
        for server_id in run.left:
            if self.health.alive(server_id):
                self.dispatcher.kill_job(self.health.address(server_id), job_id, reason,
                                         run.generation)

    def lost_server(self, server_id: int, reason: str) -> None:
        """The processes on ``server_id`` are gone: end their runs (the jobs resume from
        their last checkpoint when placed again)."""
        for job_id, run in list(self._runs.items()):
            if server_id in run.servers:
                run.left.discard(server_id)
                if self.health.clear(job_id):
                    log.info("job %s: its failed rank lost its peer on server %d; the job "
                             "goes on from its checkpoint", job_id, server_id)
                deferred = self._deferred.pop(job_id, None)
                self.kill(job_id, reason)
                if deferred is not None:
                    self._deferred[job_id] = deferred
                    self._launch_deferred(job_id)

    def hold(self, job: JobRow, worker_type: str, generation: int, mono: float) -> Run:
        """A run of ``job`` found going on (``orphans``), over until a plan keeps it."""
        run = Run(job.id, worker_type, {}, set(), stop_lease(job.steps_done), -1, mono, mono,
                  0.0, job.steps_done, (job.steps_done, 0.0), started_up=True, orphan=True,
                  round_start=mono, generation=generation)
        self._runs[job.id] = run
        return run

    def _launch_deferred(self, job_id: str) -> None:
        deferred = self._deferred.pop(job_id, None)
        if deferred is not None:
            m, task, index, refill = deferred
            self._launch_or_defer(task, m, job_id, index, refill, after_save=True)
