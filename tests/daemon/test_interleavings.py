"""Launches, exits, kills, cancels and late heartbeats in any order (docs/runtime.md, "The runs
going on are kept"). A worker lists its runs in each heartbeat and reports each exit from
another thread, so a heartbeat composed before an exit can reach the executor after the
exit's report (the race behind a failure of ``test_drain.py``). A hypothesis state machine
drives the real executor on a hand-moved clock (``test_round_aligned``) with one emulated
worker of two GPUs (jobs of one GPU or both), which takes the RunJobs and KillJobs the
executor sends as the real one does (``workers/daemon/worker.py``): a launch waits until its
GPUs are free and its job's older process has exited; a process sends its InitJob, commits
checkpoints, renews its lease and exits, each exit reported; a KillJob stops the process it
names, or drops the launch it names (reported as never started); a heartbeat lists the
processes running, composed at one step and delivered at a later one; a job may be
cancelled, and the worker daemon or the scheduler restarted, at any step; and a
worker not heard for long enough is failed, and registers again at its next heartbeat. After every step:

- no run the scheduler keeps is of a process whose exit was reported, or that died with
  its worker daemon;
- a job that has ended has no run once its processes have exited (its last commit may
  end it while its process saves and exits);
- the steps counted for a job never go back (nor past its total), restarts included;
- the runs whose processes started hold disjoint GPUs;
- a heartbeat never stops a job's newest run while the job goes on."""

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
# Heartbeats are due every HEARTBEAT_S: a server the scheduler has not heard for a few
# rounds is failed (its runs end; its worker, told so at its next heartbeat, registers
# again listing its processes, as after a network that dropped).
HEARTBEAT_S = R
RESTARTS = 2        # restarts of either daemon in one run (more leave few races to see)


class Interleavings(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.s = Scheduler(Path(self.dir.name), gpus=2, heartbeat_seconds=HEARTBEAT_S)
        self.server = self.s.server
        self.alive: dict[str, tuple[int, tuple[int, ...]]] = {}   # job -> (generation, GPUs)
        self.queued: list[pb.RunJobRequest] = []     # launches waiting for their GPUs
        self.steps: dict[str, int] = {}         # job -> the steps its process has made
        self.rounds: dict[str, int] = {}        # job -> the round its process's lease is of
        self.started: set[tuple[str, int]] = set()   # processes that sent their InitJob
        self.exited: set[tuple[str, int]] = set()    # processes whose exit was reported
        self.composed: tuple[list, int] | None = None   # a heartbeat composed, not sent yet
        # the worker's registration token, which its heartbeats carry
        self.registration = self.s.x.health.servers[self.s.server].registration
        self.runs_seen = self.kills_seen = 0     # the executor's calls taken so far
        self.restarts = 0
        self.counted: dict[str, int] = {}       # job -> the steps the scheduler counted

    def teardown(self) -> None:
        if hasattr(self, "s"):
            self.s.close()
            self.dir.cleanup()

    # ---- the emulated worker --------------------------------------------------------
    def _report(self, job: str, generation: int, steps: int, code: int = 0,
                reason: str = "") -> None:
        self.s.x.processes.round_report(pb.RoundReportRequest(
            server_id=self.s.server, job_id=job, steps=steps, seconds=1.0 if steps >= 0 else 0,
            exit_code=code, reason=reason, generation=generation))

    def _exit(self, job: str, steps: int, code: int = 0, reason: str = "") -> None:
        """The job's process exits (reported): the launches waiting for its GPUs start."""
        generation, _ = self.alive.pop(job)
        self._report(job, generation, steps, code, reason)
        self.exited.add((job, generation))
        self._launch_waiting()

    def _launch_waiting(self) -> None:
        """The queued launches whose GPUs are free and whose job has no process here."""
        busy = {g for _, gpus in self.alive.values() for g in gpus}
        for request in list(self.queued):
            gpus = tuple(request.gpus)
            if request.job_id not in self.alive and not busy.intersection(gpus):
                self.queued.remove(request)
                self.alive[request.job_id] = (request.generation, gpus)
                self.steps[request.job_id] = request.steps_done
                self.rounds[request.job_id] = request.round
                busy.update(gpus)

    def _take_calls(self) -> None:
        """The RunJobs and KillJobs the executor sent since the last look. A RunJob of the
        generation running or queued extends it; one of a new generation is queued (an
        older one queued for the job is dropped: superseded). A KillJob stops the process
        it names, or drops its queued launch."""
        sent = self.s.sent
        while self.runs_seen < len(sent.runs) or self.kills_seen < len(sent.killed_runs):
            for request in sent.runs[self.runs_seen:]:
                job, generation = request.job_id, request.generation
                self.runs_seen += 1
                if self.alive.get(job, (0,))[0] == generation:
                    self.rounds[job] = request.round       # (an extension)
                    continue
                if any(q.job_id == job and q.generation == generation for q in self.queued):
                    continue
                for q in [q for q in self.queued if q.job_id == job]:
                    self.queued.remove(q)
                    self._report(job, q.generation, -1, reason="superseded")
                self.queued.append(request)
            for job, generation in sent.killed_runs[self.kills_seen:]:
                self.kills_seen += 1
                if self.alive.get(job, (0,))[0] == generation:
                    self._exit(job, self.steps[job], code=-15, reason="killed")
                for q in [q for q in self.queued if (q.job_id, q.generation) == (job, generation)]:
                    self.queued.remove(q)
                    self._report(job, generation, -1, reason="killed (before it started)")
            self._launch_waiting()

    def _listed(self) -> list[pb.RunningJob]:
        """The processes running here, as a heartbeat or a registration lists them."""
        return [pb.RunningJob(job_id=job, generation=generation, gpus=gpus)
                for job, (generation, gpus) in sorted(self.alive.items())]

    def _register(self) -> None:
        """The worker registers again (as the same server), listing its processes."""
        reply = self.s.x.roster.register(pb.RegisterWorkerRequest(
            worker_type="v100", gpus=2, address="127.0.0.1:1", hostname="h",
            previous_server_id=self.server, running=self._listed()), self.s.t)
        self.s.server, self.registration = reply.server_id, reply.registration
        self._take_calls()

    def _running(self) -> list[tuple[str, int]]:
        return sorted((job, generation) for job, (generation, _) in self.alive.items())

    def _making_steps(self, data, made: int) -> tuple[str, int]:
        """A process that has started up, drawn, after it made ``made`` more steps (never
        past its job's total): its job and generation."""
        job, generation = data.draw(st.sampled_from(
            [p for p in self._running() if p in self.started]))
        self.steps[job] = min(self.s.x.jobs[job].spec.total_steps, self.steps[job] + made)
        return job, generation

    # ---- rules ------------------------------------------------------------------------
    @precondition(lambda self: len(self.s.x.jobs) < JOBS)
    @rule(steps=st.integers(20, 200), gpus=st.sampled_from([1, 1, 2]))
    def submit(self, steps: int, gpus: int) -> None:
        self.s.submit(steps=steps, scale_factor=gpus)

    @rule(dt=st.sampled_from([0.5, 0.3 * R, 0.7 * R, R]))
    def tick(self, dt: float) -> None:
        self.s.at(self.s.t + dt)
        self._take_calls()

    @precondition(lambda self: any(p not in self.started for p in self._running()))
    @rule(data=st.data())
    def init(self, data) -> None:
        job, generation = data.draw(st.sampled_from(
            [p for p in self._running() if p not in self.started]))
        try:
            self.s.x.processes.init_job(pb.InitJobRequest(
                job_id=job, round=0, rank=0, server_id=self.s.server, generation=generation))
        except AskAgain:
            return                      # (it asks again later)
        except StaleRun:                # its process stops
            self._exit(job, self.steps[job], code=1, reason="InitJob refused")
        else:
            self.started.add((job, generation))
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._running()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def commit(self, data, made: int) -> None:
        """A checkpoint: the process's steps so far are durable (its last may end the job)."""
        job, generation = self._making_steps(data, made)
        self.s.x.processes.durable_steps(job, self.steps[job], generation)
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._running()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def renew(self, data, made: int) -> None:
        """The process asks for its next lease at its lease's end; a lease that stops it
        (round -1) has it save and exit (one the next plan answers, a future, it waits
        for: it asks again later)."""
        job, generation = self._making_steps(data, made)
        lease = self.s.x.processes.renew_lease(pb.RenewLeaseRequest(
            job_id=job, round=self.rounds.get(job, 0), steps=self.steps[job], seconds=1.0,
            generation=generation))
        if isinstance(lease, pb.Lease):
            if lease.round < 0:
                self.s.x.processes.durable_steps(job, self.steps[job], generation)
                self._exit(job, self.steps[job])
            else:
                self.rounds[job] = lease.round
        self._take_calls()

    @precondition(lambda self: any(p in self.started for p in self._running()))
    @rule(data=st.data(), made=st.integers(0, 80))
    def exit(self, data, made: int) -> None:
        job, _ = self._making_steps(data, made)
        self._exit(job, self.steps[job])
        self._take_calls()

    @precondition(lambda self: any(not row.final for row in self.s.x.jobs.values()))
    @rule(data=st.data())
    def cancel(self, data) -> None:
        job = data.draw(st.sampled_from(
            sorted(job for job, row in self.s.x.jobs.items() if not row.final)))
        assert self.s.x.cancel(job).ok
        self._take_calls()

    @precondition(lambda self: self.restarts < RESTARTS)
    @rule()
    def restart_worker(self) -> None:
        """The worker daemon restarts: its processes die unreported, its launches are lost,
        and it registers again (a heartbeat it composed before may still arrive)."""
        self.restarts += 1
        self.exited.update((job, generation) for job, (generation, _) in self.alive.items())
        self.alive.clear()
        self.queued.clear()
        self._register()

    @precondition(lambda self: self.restarts < RESTARTS)
    @rule()
    def restart_scheduler(self) -> None:
        """The scheduler restarts on its state; the worker, its processes going on, registers
        with it again (the newest runs are adopted as orphans: docs/runtime.md)."""
        self.restarts += 1
        self.s.close()
        self.s = Scheduler(Path(self.dir.name), gpus=0, t=self.s.t,
                           heartbeat_seconds=HEARTBEAT_S)
        self.runs_seen = self.kills_seen = 0
        self._register()

    @precondition(lambda self: self.composed is None)
    @rule()
    def compose_heartbeat(self) -> None:
        self.composed = (self._listed(), self.registration)

    @precondition(lambda self: self.composed is not None)
    @rule()
    def deliver_heartbeat(self) -> None:
        (listed, registration), self.composed = self.composed, None
        kills = len(self.s.sent.killed_runs)
        running, gpus = running_of(listed)
        known = self.s.x.roster.heartbeat(self.s.server, self.s.t, running,
                                          registration=registration, gpus=gpus)
        for job, generation in self.s.sent.killed_runs[kills:]:
            row = self.s.x.jobs.get(job)
            assert row is None or row.final or generation != self.s.gen(job), (
                f"a heartbeat stopped job {job}'s newest run ({generation})")
        if not known:           # failed for its silence: it registers again, as it is
            self._register()
        self._take_calls()

    # ---- invariants -------------------------------------------------------------------
    @invariant()
    def no_run_of_an_exited_process(self) -> None:
        for job, generation in self.exited:
            run = self.s.x.runs.get(job)
            assert run is None or run.generation != generation, (
                f"job {job}: its run {generation} is kept after its exit was reported")

    @invariant()
    def an_ended_job_has_no_run_once_its_process_is_gone(self) -> None:
        here = set(self.alive) | {q.job_id for q in self.queued}
        for job_id, row in self.s.x.jobs.items():
            assert not (row.final and job_id in self.s.x.runs and job_id not in here), (
                f"job {job_id} ended, its processes exited, and it still has a run")

    @invariant()
    def counted_steps_never_go_back(self) -> None:
        for job_id, row in self.s.x.jobs.items():
            done = row.steps_done
            assert self.counted.get(job_id, 0) <= done <= row.spec.total_steps, (
                f"job {job_id}: {done} steps counted after {self.counted.get(job_id, 0)}")
            self.counted[job_id] = done

    @invariant()
    def started_runs_hold_disjoint_gpus(self) -> None:
        held = [w for run in self.s.x.runs.live() if run.started_up for w in run.workers]
        assert len(held) == len(set(held)), f"GPUs held twice: {sorted(held)}"


Interleavings.TestCase.settings = settings(max_examples=150, stateful_step_count=50,
                                           deadline=None)
TestInterleavings = Interleavings.TestCase
