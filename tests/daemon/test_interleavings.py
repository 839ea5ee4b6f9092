"""Launches, exits, kills, cancels, drains and late heartbeats in any order (docs/runtime.md,
"The runs going on are kept"). A worker lists its runs in each heartbeat and reports each
exit from another thread, so a heartbeat composed before an exit can reach the executor
after the exit's report (the race behind a failure of ``test_drain.py``). A hypothesis
state machine drives the real executor on a hand-moved clock (``test_round_aligned``) with
two emulated workers of two GPUs each (jobs of one GPU, two, or four across both), again
with one (``OneWorker``: its own races come up in fewer steps), and with one under a
space-sharing policy (``Pairs``: two jobs share a GPU as a co-located pair). Each worker takes
the RunJobs and KillJobs the executor sends it as the real one does
(``workers/daemon/worker.py``): a launch waits until its GPUs are free (but for its pair's
partner) and its job's older process there has exited; a process sends its InitJob, commits checkpoints, renews its
lease and exits, each exit reported by its own worker (a run over both workers ends when
both have reported); a KillJob stops the process it names, or drops the launch it names
(reported as never started); a heartbeat lists the worker's processes running, composed at
one step and delivered at a later one; a job may be cancelled, a worker drained or put
back, and either worker daemon or the scheduler restarted, at any step; and a worker not
heard for long enough is failed, and registers again at its next heartbeat. After every
step:

- no run the scheduler keeps waits on a process whose exit was reported, or that died
  with its worker daemon;
- a job that has ended has no run once its processes have exited (its last commit may
  end it while its processes save and exit);
- the steps counted for a job never go back (nor past its total), restarts included;
- the runs of a round whose processes started hold disjoint GPUs, a co-located pair
  counting as one task (a run over both workers starts up at its first InitJob, while its
  launch on the other may wait there for the GPUs an older round's run saves on; a run
  whose job's last step is durable holds none, as ``RunTable.idle_workers`` counts them),
  and the runs found going on after a restart no more jobs a GPU than its worker runs;
- a heartbeat never stops a job's newest run while the job goes on;
- no InitJob or renewal of an ended job waits for a plan (a scheduler whose jobs have all
  ended makes none)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from gavelsched.daemon.fences import StaleRun
from gavelsched.daemon.processes import AskAgain
from gavelsched.daemon.servers import running_of
from gavelsched.rpc import pb

from .test_round_aligned import R, Scheduler

JOBS = 5
GPUS = 2                  # of each emulated worker daemon
# Heartbeats are due every HEARTBEAT_S: a server the scheduler has not heard for a few
# rounds is failed (its runs end; its worker, told so at its next heartbeat, registers
# again listing its processes, as after a network that dropped).
HEARTBEAT_S = R
RESTARTS = 2        # restarts of any daemon in one run (more leave few races to see)

Process = tuple[int, str, int]      # (worker, job, generation)


def _address(worker: int) -> str:
    return f"127.0.0.1:{worker + 1}"


def _worker_at(address: str) -> int:
    return int(address.rsplit(":", 1)[1]) - 1


class Interleavings(RuleBasedStateMachine):
    workers = 2     # emulated worker daemons
    config: tuple = ()  # the scheduler's ``DaemonConfig`` fields (``Pairs``: its policy)
    per_gpu = 1         # the most jobs a worker runs on one GPU

    @initialize()
    def start(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.s = Scheduler(Path(self.dir.name), gpus=0, heartbeat_seconds=HEARTBEAT_S,
                           **dict(self.config))
        self.ids = [-1] * self.workers         # each worker's server id at the scheduler
        self.registration = [0] * self.workers  # ... and its token, which heartbeats carry
        # (worker, job) -> (generation, GPUs): the processes running
        self.alive: dict[tuple[int, str], tuple[int, tuple[int, ...]]] = {}
        self.queued: list[list[pb.RunJobRequest]] = [[] for _ in range(self.workers)]
        self.steps: dict[tuple[str, int], int] = {}   # (job, generation) -> steps made
        self.rounds: dict[tuple[str, int], int] = {}  # ... -> the round its lease is of
        self.started: set[Process] = set()     # processes that sent their InitJob
        self.exited: set[Process] = set()      # processes whose exit was reported, or died
        self.composed: dict[int, tuple[list, int]] = {}   # worker -> a heartbeat not sent yet
        self.runs_seen = self.kills_seen = 0     # the executor's calls taken so far
        self.restarts = 0
        self.counted: dict[str, int] = {}       # job -> the steps the scheduler counted
        for worker in range(self.workers):
            self._register(worker)

    def teardown(self) -> None:
        if hasattr(self, "s"):
            self.s.close()
            self.dir.cleanup()

    # ---- the emulated workers -------------------------------------------------------
    def _report(self, worker: int, job: str, generation: int, steps: int, code: int = 0,
                reason: str = "") -> None:
        self.s.x.processes.round_report(pb.RoundReportRequest(
            server_id=self.ids[worker], job_id=job, steps=steps,
            seconds=1.0 if steps >= 0 else 0, exit_code=code, reason=reason,
            generation=generation))

    def _exit(self, worker: int, job: str, code: int = 0, reason: str = "") -> None:
        """The job's process on ``worker`` exits (reported): the launches waiting for its
        GPUs start."""
        generation, _ = self.alive.pop((worker, job))
        self._report(worker, job, generation, self.steps[job, generation], code, reason)
        self.exited.add((worker, job, generation))
        self._launch_waiting()

    def _launch_waiting(self) -> None:
        """The queued launches whose GPUs are free (no other job on them, or only the
        partner of its co-located pair) and whose job has no process there."""
        for worker, queue in enumerate(self.queued):
            busy: dict[int, set[str]] = {}
            for (w, other), (_, gpus) in self.alive.items():
                for g in gpus if w == worker else ():
                    busy.setdefault(g, set()).add(other)
            for request in list(queue):
                job, generation, gpus = request.job_id, request.generation, tuple(request.gpus)
                pair = {job, request.colocated_job_id}
                if (worker, job) not in self.alive and not any(busy.get(g, pair) - pair
                                                               for g in gpus):
                    queue.remove(request)
                    self.alive[worker, job] = (generation, gpus)
                    self.steps.setdefault((job, generation), request.steps_done)
                    self.rounds[job, generation] = request.round
                    for g in gpus:
                        busy.setdefault(g, set()).add(job)

    def _take_calls(self) -> None:
        """The RunJobs and KillJobs the executor sent since the last look, each taken by
        the worker it was sent to. A RunJob of the generation running or queued there
        extends it; one of a new generation is queued (an older one queued for the job is
        dropped: superseded). A KillJob stops the process it names, or drops its queued
        launch."""
        sent = self.s.sent
        while self.runs_seen < len(sent.runs) or self.kills_seen < len(sent.killed_runs):
            for request, address in zip(sent.runs[self.runs_seen:], sent.run_at[self.runs_seen:]):
                self.runs_seen += 1
                worker, job, generation = _worker_at(address), request.job_id, request.generation
                queue = self.queued[worker]
                if self.alive.get((worker, job), (0,))[0] == generation:
                    self.rounds[job, generation] = request.round       # (an extension)
                    continue
                if any(q.job_id == job and q.generation == generation for q in queue):
                    continue
                for q in [q for q in queue if q.job_id == job]:
                    queue.remove(q)
                    self._report(worker, job, q.generation, -1, reason="superseded")
                queue.append(request)
            for (job, generation), address in zip(sent.killed_runs[self.kills_seen:],
                                                  sent.killed_at[self.kills_seen:]):
                self.kills_seen += 1
                worker = _worker_at(address)
                queue = self.queued[worker]
                if self.alive.get((worker, job), (0,))[0] == generation:
                    self._exit(worker, job, code=-15, reason="killed")
                for q in [q for q in queue if (q.job_id, q.generation) == (job, generation)]:
                    queue.remove(q)
                    self._report(worker, job, generation, -1, reason="killed (before it started)")
            self._launch_waiting()

    def _listed(self, worker: int) -> list[pb.RunningJob]:
        """The processes running on ``worker``, as its heartbeat or registration lists them."""
        return [pb.RunningJob(job_id=job, generation=generation, gpus=gpus)
                for (w, job), (generation, gpus) in sorted(self.alive.items()) if w == worker]

    def _register(self, worker: int) -> None:
        """``worker`` registers (again, as the same server), listing its processes."""
        reply = self.s.x.roster.register(pb.RegisterWorkerRequest(
            worker_type="v100", gpus=GPUS, address=_address(worker), hostname=f"h{worker}",
            previous_server_id=self.ids[worker], running=self._listed(worker)), self.s.t)
        self.ids[worker], self.registration[worker] = reply.server_id, reply.registration
        self._take_calls()

    def _processes(self) -> list[Process]:
        return sorted((w, job, generation) for (w, job), (generation, _) in self.alive.items())

    def _making_steps(self, data, made: int) -> Process:
        """A process that has started up, drawn, whose job's run made ``made`` more steps
        (never past the job's total)."""
        worker, job, generation = data.draw(st.sampled_from(
            [p for p in self._processes() if p in self.started]))
        total = self.s.x.jobs[job].spec.total_steps
        self.steps[job, generation] = min(total, self.steps[job, generation] + made)
        return worker, job, generation

    # ---- rules ------------------------------------------------------------------------
    @precondition(lambda self: len(self.s.x.jobs) < JOBS)
    @rule(steps=st.integers(20, 200), gpus=st.sampled_from([1, 1, 2, 4]))
    def submit(self, steps: int, gpus: int) -> None:
        self.s.submit(steps=steps, scale_factor=min(gpus, self.workers * GPUS))

    @rule(dt=st.sampled_from([0.5, 0.3 * R, 0.7 * R, R]))
    def tick(self, dt: float) -> None:
        self.s.at(self.s.t + dt)
        self._take_calls()

    @precondition(lambda self: any(p not in self.started for p in self._processes()))
    @rule(data=st.data())
    def init(self, data) -> None:
        worker, job, generation = data.draw(st.sampled_from(
            [p for p in self._processes() if p not in self.started]))
        try:
            self.s.x.processes.init_job(pb.InitJobRequest(
                job_id=job, round=0, rank=0, server_id=self.ids[worker], generation=generation))
        except AskAgain:
            return                      # (it asks again later)
        except StaleRun:                # its process stops
            self._exit(worker, job, code=1, reason="InitJob refused")
        else:
            self.started.add((worker, job, generation))
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._processes()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def commit(self, data, made: int) -> None:
        """A checkpoint: the run's steps so far are durable (its last may end the job)."""
        _, job, generation = self._making_steps(data, made)
        self.s.x.processes.durable_steps(job, self.steps[job, generation], generation)
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._processes()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def renew(self, data, made: int) -> None:
        """A process asks for its next lease at its lease's end; a lease that stops it
        (round -1) has its run save and its processes exit (one the next plan answers, a
        future, it waits for: it asks again later)."""
        _, job, generation = self._making_steps(data, made)
        lease = self.s.x.processes.renew_lease(pb.RenewLeaseRequest(
            job_id=job, round=self.rounds[job, generation], steps=self.steps[job, generation],
            seconds=1.0, generation=generation))
        if isinstance(lease, pb.Lease):
            if lease.round < 0:
                self.s.x.processes.durable_steps(job, self.steps[job, generation], generation)
                for worker, other, gen in self._processes():
                    if (other, gen) == (job, generation):
                        self._exit(worker, job)
            else:
                self.rounds[job, generation] = lease.round
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._processes()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def exit(self, data, made: int) -> None:
        worker, job, _ = self._making_steps(data, made)
        self._exit(worker, job)
        self._take_calls()

    @precondition(lambda self: any(not row.final for row in self.s.x.jobs.values()))
    @rule(data=st.data())
    def cancel(self, data) -> None:
        job = data.draw(st.sampled_from(
            sorted(job for job, row in self.s.x.jobs.items() if not row.final)))
        assert self.s.x.cancel(job).ok
        self._take_calls()

    @rule(data=st.data(), undo=st.booleans())
    def drain(self, data, undo: bool) -> None:
        """An operator drains a worker (nothing new planned on it; its runs end with their
        leases), or puts it back."""
        worker = data.draw(st.sampled_from(range(self.workers)))
        self.s.x.roster.drain(self.ids[worker], undo=undo)
        self._take_calls()

    @precondition(lambda self: self.restarts < RESTARTS)
    @rule(data=st.data())
    def restart_worker(self, data) -> None:
        """A worker daemon restarts: its processes die unreported, its launches are lost,
        and it registers again (a heartbeat it composed before may still arrive)."""
        worker = data.draw(st.sampled_from(range(self.workers)))
        self.restarts += 1
        for w, job, generation in self._processes():
            if w == worker:
                del self.alive[w, job]
                self.exited.add((w, job, generation))
        self.queued[worker].clear()
        self._register(worker)

    @precondition(lambda self: self.restarts < RESTARTS)
    @rule()
    def restart_scheduler(self) -> None:
        """The scheduler restarts on its state; the workers, their processes going on,
        register with it again (the newest runs are adopted as orphans: docs/runtime.md)."""
        self.restarts += 1
        self.s.close()
        self.s = Scheduler(Path(self.dir.name), gpus=0, t=self.s.t,
                           heartbeat_seconds=HEARTBEAT_S, **dict(self.config))
        self.runs_seen = self.kills_seen = 0
        for worker in range(self.workers):
            self._register(worker)

    @precondition(lambda self: len(self.composed) < self.workers)
    @rule(data=st.data())
    def compose_heartbeat(self, data) -> None:
        worker = data.draw(st.sampled_from(
            [w for w in range(self.workers) if w not in self.composed]))
        self.composed[worker] = (self._listed(worker), self.registration[worker])

    @precondition(lambda self: self.composed)
    @rule(data=st.data())
    def deliver_heartbeat(self, data) -> None:
        worker = data.draw(st.sampled_from(sorted(self.composed)))
        listed, registration = self.composed.pop(worker)
        kills = len(self.s.sent.killed_runs)
        running, gpus = running_of(listed)
        known = self.s.x.roster.heartbeat(self.ids[worker], self.s.t, running,
                                          registration=registration, gpus=gpus)
        for job, generation in self.s.sent.killed_runs[kills:]:
            row = self.s.x.jobs.get(job)
            assert row is None or row.final or generation != self.s.gen(job), (
                f"a heartbeat stopped job {job}'s newest run ({generation})")
        if not known:           # failed for its silence: it registers again, as it is
            self._register(worker)
        self._take_calls()

    # ---- invariants -------------------------------------------------------------------
    @invariant()
    def no_run_waits_on_an_exited_process(self) -> None:
        for worker, job, generation in self.exited:
            run = self.s.x.runs.get(job)
            assert not (run is not None and run.generation == generation
                        and self.ids[worker] in run.left), (
                f"job {job}: its run {generation} waits on worker {worker}'s process, "
                "whose exit was reported")

    @invariant()
    def an_ended_job_has_no_run_once_its_processes_are_gone(self) -> None:
        here = {job for _, job in self.alive} | {q.job_id for queue in self.queued for q in queue}
        for job_id, row in self.s.x.jobs.items():
            assert not (row.final and job_id in self.s.x.runs and job_id not in here), (
                f"job {job_id} ended, its processes exited, and it still has a run")

    @invariant()
    def no_ended_jobs_call_waits_for_a_plan(self) -> None:
        """An ended job's InitJob or renewal is answered at once (a lease that is over): a
        plan would not change it, and a scheduler whose jobs have all ended makes none."""
        ended = sorted(job for job in self.s.x.runs.renewals.waiting
                       if self.s.x.jobs[job].final)
        assert not ended, f"ended jobs {ended} have calls waiting for a plan"

    @invariant()
    def counted_steps_never_go_back(self) -> None:
        for job_id, row in self.s.x.jobs.items():
            done = row.steps_done
            assert self.counted.get(job_id, 0) <= done <= row.spec.total_steps, (
                f"job {job_id}: {done} steps counted after {self.counted.get(job_id, 0)}")
            self.counted[job_id] = done

    @invariant()
    def started_runs_of_a_round_hold_disjoint_gpus(self) -> None:
        """... each GPU one task of the plan (a co-located pair is one, thesis §5.3.1);
        the runs found going on after a restart (orphans, of no round) as many jobs a GPU
        as its worker runs at most (``per_gpu``: a pair's two)."""
        tasks: dict[tuple[int, int], set[str]] = {}
        found: dict[int, set[str]] = {}
        for run in self.s.x.runs.live():
            if run.started_up and not run.done_at:
                for w in run.workers:
                    if run.orphan:
                        found.setdefault(w, set()).add(run.job_id)
                    else:
                        tasks.setdefault((run.round, w), set()).add(run.task_key or run.job_id)
        twice = sorted(key for key, held in tasks.items() if len(held) > 1)
        assert not twice, f"(round, GPU) held twice: {twice}"
        crowded = sorted(w for w, jobs in found.items() if len(jobs) > self.per_gpu)
        assert not crowded, f"GPUs {crowded} hold more runs found going on than can run there"


class OneWorker(Interleavings):
    workers = 1


class Pairs(Interleavings):
    """Under a space-sharing policy: two jobs of a GPU share it as a co-located pair, each
    run's RunJob naming the other (the worker launches a member beside its partner)."""

    workers = 1
    config = (("policy", "max_min_fairness_packed"), ("restart_rule", "gavel"))
    per_gpu = 2


for machine in (Interleavings, OneWorker, Pairs):
    machine.TestCase.settings = settings(max_examples=150, stateful_step_count=50,
                                         deadline=None)
TestTwoWorkers = Interleavings.TestCase
TestPairs = Pairs.TestCase
# The races of one worker's messages (a heartbeat composed before its own daemon restarted,
# then delivered) come up in fewer steps here than among two workers' rules.
TestOneWorker = OneWorker.TestCase
