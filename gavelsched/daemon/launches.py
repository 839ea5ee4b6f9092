"""The answers to a fresh run's InitJob (thesis §5.6: a run's process starts up and asks for
its lease), given on the gRPC handler's own thread.

At 2,048 GPUs the InitJobs of a round's fresh runs were most of the fleet's calls waiting
on the executor, behind its plan and dispatch; a process whose InitJob found no answer in
30 s gave up and its run was lost, hundreds to thousands a round on a 2-core machine
(issue #30; BENCHMARKS.md, "Runs that gave up on InitJob"). Everything that answer depends
on is known at the launch, but the time it comes and when the run's GPUs were freed by the
run before it. So the executor books each launch (``book``), the book keeps the GPUs'
release times (``freed``), and the first InitJob of the run is answered from it
(``answer``) with ``started_lease``, the one function the executor's own path calls
too (``runs.RunTable.started_up``). What the start-up changes on the executor (the job
running, the start-up sample, a lease moved past the round's end on the workers) is handed
to it with the arrival time (``StartUp``), without waiting: it is queued before the process
has its answer, so before anything the process does next.

A later InitJob of the same run (another rank, or a retry whose answer was lost on the way)
gets the same answer, as long as that is the lease the executor holds. A run extended at a
plan before its process started up is booked again with its new terms. An entry goes when
the run ends, when its lease changes after its start-up, or when the executor's path
started it up: an InitJob the book does not hold (another generation, an orphan after a
restart, an unknown job) takes the executor's path (``processes.ProcessCalls.init_job``),
as every InitJob did before.
Everything but ``answer`` and ``answers`` runs on the executor thread; both sides hold the
lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from ..rpc import pb
from .leases import startup_lease
from .meter import limit_lease


class LeaseTerms(Protocol):
    """What a fresh run's lease after its start-up is made of (a ``run.Run`` or a
    ``Launch``)."""

    lease: pb.Lease          # the RunJob's: the round's steps, to the round's end
    base_steps: int          # the durable count it resumes from
    steps_per_s: float       # the rate the core planned it at
    ends: float              # monotonic end of its round
    floor_s: float           # the lease it gets past its start-up, at least
    allowed_s: float | None  # its job's time limit left at its launch


def started_lease(terms: LeaseTerms, started: float, arrived: float) -> tuple[pb.Lease, float]:
    """A fresh run whose process started at ``started`` and asked at ``arrived``
    (monotonic): its lease and the lease's monotonic end. The lease still ends with its
    round (its start-up is charged to its own round, as the simulator charges preemption
    overhead, thesis §5.7), but at least ``floor_s`` after ``arrived``: a start-up longer
    than the rest of its round must not leave the job without progress."""
    left = max(terms.ends - arrived, terms.floor_s)
    lease = startup_lease(terms.lease, terms.base_steps, terms.steps_per_s, left,
                          max(0.0, arrived - started) + left)
    return limit_lease(lease, terms.allowed_s), arrived + left


@dataclass(frozen=True)
class Launch:
    """A fresh run as launched (``LeaseTerms``), with the rest of its InitJob's answer."""

    job_id: str
    generation: int
    lease: pb.Lease
    base_steps: int
    steps_per_s: float
    ends: float
    floor_s: float
    allowed_s: float | None
    dispatched: float                # monotonic time of its RunJobs
    workers: tuple[int, ...]
    total_steps: int
    checkpoint_generation: int


def launch_of(run, total_steps: int, checkpoint_generation: int) -> Launch:
    """The book's entry of a ``run.Run`` just launched (its job's ``total_steps``; the
    generation whose commit it resumes from)."""
    return Launch(run.job_id, run.generation, run.lease, run.base_steps, run.steps_per_s,
                  run.ends, run.floor_s, run.allowed_s, run.started, run.workers, total_steps,
                  checkpoint_generation)


@dataclass(frozen=True)
class StartUp:
    """A run's first InitJob, answered from the book: for the executor to record
    (``runs.RunTable.started_up``)."""

    job_id: str
    generation: int
    arrived: float       # monotonic
    now: float           # the daemon's time at its arrival (``clock.Origin``): the job runs
    started: float       # when its process started: its dispatch or its GPUs' release


# How many dropped entries the book remembers, newest first, for ``Launches.why_not``: the
# InitJobs it explains come soon after the drop (a later rank, a retry), and a round at
# 2,048 GPUs ends at most 2,048 runs.
GONE_KEPT = 10_000


class Launches:
    """The book of fresh runs' InitJob answers (module docstring). ``clock``: monotonic
    seconds; ``now``: the daemon's time (``clock.Origin.now``)."""

    def __init__(self, clock: Callable[[], float], now: Callable[[], float]) -> None:
        self._clock, self._now = clock, now
        self._lock = threading.Lock()
        self._book: dict[str, Launch] = {}
        self._answered: dict[str, pb.InitJobResponse] = {}
        self._freed: dict[int, float] = {}   # worker id -> when its last run there ended
        self._gone: dict[str, tuple[int, str]] = {}   # job -> its last entry's (gen, why)

    # ---- on the executor thread -----------------------------------------------------------
    def book(self, launch: Launch) -> None:
        """A fresh run was launched, or its lease changed before its process started up
        (an extension at a plan): its first InitJob may be answered from here. (A start-up
        already answered stays: the executor records it from the new terms.)"""
        with self._lock:
            old = self._book.get(launch.job_id)
            self._book[launch.job_id] = launch
            self._gone.pop(launch.job_id, None)
            if old is None or old.generation != launch.generation:
                self._answered.pop(launch.job_id, None)

    def ended(self, job_id: str, why: str = "run_ended") -> None:
        """The job's run ended, or its lease changed after its start-up (``why``:
        ``lease_changed``): its InitJobs go to the executor."""
        with self._lock:
            self._drop(job_id, why)

    def recorded(self, job_id: str, lease: pb.Lease) -> None:
        """The executor recorded the run's start-up with ``lease``. The book goes on
        answering its InitJobs (a retry whose answer was lost on the way, another rank) if it
        answered that same lease; else (the executor's path started it up, or an extension
        came between) they go to the executor."""
        with self._lock:
            given = self._answered.get(job_id)
            if given is None or given.lease != lease:
                self._drop(job_id, "executor_started" if given is None else "lease_changed")

    def _drop(self, job_id: str, why: str) -> None:
        launch = self._book.pop(job_id, None)
        self._answered.pop(job_id, None)
        if launch is not None:      # (``book`` took its job out of ``_gone``: newest last)
            self._gone[job_id] = (launch.generation, why)
            if len(self._gone) > GONE_KEPT:
                del self._gone[next(iter(self._gone))]

    def freed(self, workers: Iterable[int], at: float) -> None:
        """The run on ``workers`` exited at ``at`` (monotonic): a run launched there
        started no earlier (the worker queues a launch until its GPUs are free)."""
        with self._lock:
            for w in workers:
                self._freed[w] = at

    def started(self, dispatched: float, workers: Iterable[int]) -> float:
        """When a run dispatched at ``dispatched`` on ``workers`` started: then, or when
        the last of its GPUs was freed, whichever came later."""
        with self._lock:
            return self._started(dispatched, workers)

    def _started(self, dispatched: float, workers: Iterable[int]) -> float:
        return max([dispatched, *(self._freed.get(w, 0.0) for w in workers)])

    # ---- on any thread --------------------------------------------------------------------
    def answers(self, request: pb.InitJobRequest) -> bool:
        """Whether ``answer`` would answer ``request`` now (``service.ExecutorWaits``: such a
        call takes no seat)."""
        with self._lock:
            launch = self._book.get(request.job_id)
        return launch is not None and launch.generation == request.generation

    def why_not(self, request: pb.InitJobRequest) -> str:
        """Why the book does not answer ``request`` (``answer`` gave None):
        ``other_generation``; its run's entry went (``run_ended``, ``lease_changed``, or
        ``executor_started``: the executor's path started it up); ``never_booked`` (an
        orphan after a restart, an unknown job, or an entry long gone)."""
        with self._lock:
            launch = self._book.get(request.job_id)
            gone = self._gone.get(request.job_id)
        if launch is not None and launch.generation != request.generation:
            return "other_generation"
        if gone is not None:
            return gone[1] if gone[0] == request.generation else "other_generation"
        return "never_booked"

    def answer(self, request: pb.InitJobRequest
               ) -> tuple[pb.InitJobResponse, StartUp | None] | None:
        """The answer to ``request`` from the book, with the start-up for the executor to
        record (None after the run's first InitJob); None: the executor answers it."""
        arrived, now = self._clock(), self._now()
        with self._lock:
            launch = self._book.get(request.job_id)
            if launch is None or launch.generation != request.generation:
                return None
            given = self._answered.get(launch.job_id)
            if given is not None:
                return given, None
            started = self._started(launch.dispatched, launch.workers)
            lease, _ = started_lease(launch, started, arrived)
            given = self._answered[launch.job_id] = pb.InitJobResponse(
                lease=lease, steps_done=launch.base_steps, total_steps=launch.total_steps,
                checkpoint_generation=launch.checkpoint_generation)
        return given, StartUp(launch.job_id, launch.generation, arrived, now, started)
