"""What a job's own processes ask of the scheduler (thesis §5.6, Gavel's lease protocol):
``InitJob`` (a run starts up and gets its lease), ``RenewLease`` (the next round's lease,
extended when the job keeps its workers), a durable commit (``ReportSteps`` with a
checkpoint) and the worker's ``ReportRound`` for each process that exits.

Every message is fenced first (``fences.Fences``): one from an older run of the job is
ignored or refused. Runs on the executor thread, as the run table and the jobs it reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future

from traces.checks import shown

from ..core.driver import RoundDriver
from ..rpc import pb
from .clock import RoundClock
from .fences import Fences, StaleRun
from .jobs import Jobs
from .launches import StartUp
from .leases import stop_lease
from .progress import Progress
from .refills import Refills
from .runs import RunTable

log = logging.getLogger(__name__)


class AskAgain(Exception):
    """A call that came before the scheduler can answer it (answered UNAVAILABLE, as busy:
    the caller asks again after a pause)."""


def _then(future: Future, answer: Callable) -> Future:
    """A future of ``answer(future's result)``, set where ``future`` is."""
    out: Future = Future()
    future.add_done_callback(lambda done: out.set_result(answer(done.result())))
    return out


class ProcessCalls:
    """The executor's answers to a job's processes. ``round_index``: the round running
    now (store's numbering); ``started``: the index of the round started last; ``fail``:
    ends a job as failed with a reason."""

    def __init__(self, jobs: Jobs, runs: RunTable, fences: Fences, progress: Progress,
                 refills: Refills, driver: RoundDriver, clock: RoundClock, *,
                 now: Callable[[], float], round_index: Callable[[], int],
                 started: Callable[[], int], fail: Callable[[str, str], None]) -> None:
        self.jobs, self.runs, self.fences, self.progress = jobs, runs, fences, progress
        self.refills, self.driver, self.clock = refills, driver, clock
        self._now, self._round_index, self._started, self._fail = now, round_index, started, fail
        self._asked_again: set[str] = set()   # jobs whose InitJob came before their server

    def init_job(self, request: pb.InitJobRequest) -> pb.InitJobResponse | Future:
        """A run's process starts up: its lease, the steps done and the checkpoint it
        resumes from. Raises ``LookupError`` for an unknown job and ``StaleRun`` for a run
        that is not the job's current one.

        After a restart (docs/runtime.md, "The runs going on are kept") a process that the
        scheduler before it launched may start up now. Before its server has registered
        again its run is not known: ``AskAgain``. Once adopted, an orphan the next plan has
        not judged yet waits for that plan, as its renewal would (a future): kept, it gets
        the kept run's lease (``RunTable.renewed``: to the round's end from now); not kept,
        or its job ended meanwhile, a lease that is over."""
        job = self.jobs.get(request.job_id)
        if job is None:
            raise LookupError(f"unknown job {shown(request.job_id)}")
        if not self.fences.admits(job.id, int(request.generation), "InitJob"):
            raise StaleRun(job.id, int(request.generation), self.fences.current(job.id))
        run = self.runs.get(job.id)
        server = int(request.server_id)
        if run is None and self.runs.health.awaited(server):
            if job.id not in self._asked_again:       # (once a job: it asks every few s)
                self._asked_again.add(job.id)
                log.info("job %s: its process started up before its server %d registered "
                         "again after this scheduler's restart; asked to come again",
                         job.id, server)
            raise AskAgain(f"server {server} has not registered again since this "
                           "scheduler's restart")
        if run is not None and job.final and job.id in self.runs.unplanned:
            return self._init_response(job, None)    # no plan keeps it: a lease that is over
        if run is not None and (job.id in self.runs.unplanned or run.rebase):
            # (its process's count and clock: resumed from the steps done, started now)
            asked = pb.RenewLeaseRequest(job_id=job.id, round=run.round, steps=job.steps_done,
                                         seconds=0.0, generation=run.generation)
            if run.rebase:                  # kept by a plan: its lease is set from here
                return self._init_response(job, self.runs.renewed(run, asked))
            return _then(self.runs.renewals.after_plan(asked),
                         lambda lease: self._init_response(job, lease))
        return self._init_response(job, self.runs.init(job, self._now()))   # (a run starts up)

    def booked_init(self, startup: StartUp) -> None:
        """A run's first InitJob, answered from the book (``launches``) on its handler's
        thread: recorded as ``init_job`` records one, at its arrival."""
        job, run = self.jobs.get(startup.job_id), self.runs.get(startup.job_id)
        if job is not None and run is not None and run.generation == startup.generation:
            self.runs.init(job, startup.now, startup)

    def _init_response(self, job, lease: pb.Lease | None) -> pb.InitJobResponse:
        return pb.InitJobResponse(lease=stop_lease(job.steps_done) if lease is None else lease,
                                  steps_done=job.steps_done, total_steps=job.spec.total_steps,
                                  checkpoint_generation=self.fences.checkpoint(job.id))

    def renew_lease(self, request: pb.RenewLeaseRequest) -> pb.Lease | Future:
        """The lease for the next round: extended when the job keeps its workers. Before
        the next round is planned the answer waits for the plan (a future). (Most renewals
        asked after a plan are answered from ``Renewals``' book and never get here.)"""
        run = self.runs.get(request.job_id)
        job = self.jobs.get(request.job_id)
        if (run is None or job is None or job.final or run.generation != request.generation
                or not self.fences.admits(job.id, int(request.generation), "RenewLease")):
            return stop_lease(int(request.steps), request.seconds)
        if run.round > request.round:          # already extended by the next plan
            return self.runs.renewed(run, request)
        if run.job_id in self.runs.unplanned or (
                self.driver.planned is None and run.round >= self._started()
                and self.clock.plan_at):
            return self.runs.renewals.after_plan(request)   # the next round is not planned
        return run.lease

    def durable_steps(self, job_id: str, steps: int, generation: int,
                      seconds: float | None = None, lease_start_s: float = 0.0) -> bool:
        """A commit by run ``generation`` holds ``steps`` (absolute) for the job
        (``progress.Progress``; ``seconds`` and ``lease_start_s`` on the process's clock).
        False when that run is stale: the commit is not taken."""
        if not self.fences.admits(job_id, generation, "durable steps"):
            return False
        now = self._now()
        if self.progress.durable(job_id, steps, generation, seconds, now, lease_start_s):
            self.jobs.finish(job_id, now)
            self.runs.finished(job_id)
            self.refills.soon()
        return True

    def round_report(self, request: pb.RoundReportRequest) -> None:
        """A process of the job exited on a worker: its last durable steps, then what the
        exit means for the run (``exits.exit_verdict``); its GPUs go to waiting jobs."""
        job_id = request.job_id
        if not self.fences.admits(job_id, int(request.generation), "ReportRound"):
            return
        if request.steps >= 0:
            self.durable_steps(job_id, int(request.steps), int(request.generation))
        failed = self.runs.reported_exit(job_id, request.server_id, request.failed,
                                         int(request.exit_code), request.reason,
                                         self._round_index())   # (the run-failure verdict)
        if failed is not None:
            self._fail(job_id, failed)
            return
        job = self.jobs.get(job_id)
        if job is not None and not job.final:   # (a job that ended: its listing is stale)
            self.fences.exited(job_id, int(request.generation), request.server_id)
        self.runs.exited(job_id, request.server_id)
        self.refills.soon()
