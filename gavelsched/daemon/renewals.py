"""The answers to RenewLease (thesis §5.6: a job asks for its next lease shortly before its
lease ends, and keeps its workers when the next round does).

A renewal asked before the next round is planned waits for the plan (``after_plan``), which
answers it (``at_plan``); its handler stops waiting before its caller does, and tells it to
ask again (``service.RENEW_WAIT_S``). Once a plan has judged the runs of the round it
follows, each one's answer is known (the extended lease of a run it kept on its GPUs, the
lease in force of one it did not) and is booked (``at_plan``), so that a renewal asked
after the plan is answered from the book on the gRPC handler's own thread (``answer``),
without the executor's inbox or a fleet seat (``service.ExecutorWaits``): at 2,048 GPUs and
50,000 jobs renewals sent at 95% of a round were answered 6-17 s later, behind the next
round's InitJobs and reports, and a renewal past the iterator's 10 s deadline ends its run
even where the plan kept it (issue #30; BENCHMARKS.md, "Renewals answered off the
executor", says what this did and did not change).

The book holds only what no later event can change but a run's end: a run's entry goes
when it ends (``ended``), and a renewal the book does not answer (another generation or
round, a kept orphan whose lease is set from its renewal, a run placed after the plan)
takes the executor's path (``processes.ProcessCalls.renew_lease``), as every renewal did
before. Everything but ``answer`` runs on the executor thread; the book is replaced whole
at each plan and read under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Protocol

from ..rpc import pb


class _Run(Protocol):
    job_id: str
    generation: int
    round: int
    lease: pb.Lease
    orphan: bool
    rebase: bool
    done_at: float


class Renewals:
    """The renewals of a run table's runs (module docstring). ``runs()``: the live runs;
    ``run(job_id)``: one of them or None; ``renewed(run, request, arrived)``: the lease a
    renewal of a run gets on the executor thread (``RunTable.renewed``)."""

    def __init__(self, runs: Callable[[], Iterable[_Run]], run: Callable[[str], _Run | None],
                 renewed: Callable[[_Run, pb.RenewLeaseRequest, float], pb.Lease],
                 clock: Callable[[], float]) -> None:
        self._runs, self._run, self._renewed, self._clock = runs, run, renewed, clock
        # RenewLeases waiting for the plan: (job, answer, request, monotonic arrival)
        self._waiting: list[tuple[str, Future, pb.RenewLeaseRequest, float]] = []
        self._lock = threading.Lock()
        # job -> (run generation, the round a renewal asks from, the answer)
        self._book: dict[str, tuple[int, int, pb.Lease]] = {}

    # ---- on the executor thread -----------------------------------------------------------
    @property
    def waiting(self) -> tuple[str, ...]:
        """The jobs whose renewals or InitJobs wait for the plan."""
        return tuple(entry[0] for entry in self._waiting)

    def after_plan(self, request: pb.RenewLeaseRequest) -> Future:
        """A RenewLease asked before the next round is planned: its answer (the job's lease
        then; None: it has no run) waits for the plan (``at_plan``)."""
        future: Future = Future()
        self._waiting.append((request.job_id, future, request, self._clock()))
        return future

    def at_plan(self, index: int) -> None:
        """The plan of round ``index`` has extended the runs it keeps: book the answer of
        every run of round ``index - 1`` it judged (settled: no orphan, no lease still to
        set from a renewal, no job done), then answer the renewals that waited for it."""
        book = {run.job_id: (run.generation, index - 1, run.lease) for run in self._runs()
                if run.round in (index - 1, index)
                and not (run.orphan or run.rebase or run.done_at)}
        with self._lock:
            self._book = book
        self.answer_waiting()

    def answer_waiting(self, *, stopping: bool = False) -> None:
        """Answer the RenewLeases waiting for the plan (``stopping``: the daemon stops;
        each gets None)."""
        waiting, self._waiting = self._waiting, []
        self._answer(waiting, stopping)

    def answer_now(self, job_id: str) -> None:
        """Answer ``job_id``'s RenewLeases waiting for the plan now, when no plan can change
        their answer: its run ended (``ended``: none, a lease that is over), or its last
        step is durable (``RunTable.finished``). A scheduler left with no job plans none:
        an orphan's InitJob waited for good when its job ended before the first plan
        after a restart."""
        mine = [entry for entry in self._waiting if entry[0] == job_id]
        if mine:
            self._waiting = [entry for entry in self._waiting if entry[0] != job_id]
            self._answer(mine, False)

    def _answer(self, waiting: list, stopping: bool) -> None:
        for job_id, future, request, arrived in waiting:
            run = None if stopping else self._run(job_id)
            future.set_result(None if run is None else self._renewed(run, request, arrived))

    def ended(self, job_id: str) -> None:
        """The job's run ended (exited, killed, its server lost): no answer is booked, and
        the renewals that waited for the plan are answered now (``answer_now``; a run of
        the job launched next is not theirs)."""
        with self._lock:
            self._book.pop(job_id, None)
        self.answer_now(job_id)

    # ---- on any thread --------------------------------------------------------------------
    def answers(self, request: pb.RenewLeaseRequest) -> bool:
        """Whether ``answer`` would answer ``request`` now (``service.ExecutorWaits``: such a
        call takes no seat)."""
        return self.answer(request) is not None

    def answer(self, request: pb.RenewLeaseRequest) -> pb.Lease | None:
        """The booked answer to ``request`` (its run's generation, asked from the round the
        book was made for), or None: the executor answers it."""
        with self._lock:
            entry = self._book.get(request.job_id)
        if entry is None or entry[:2] != (request.generation, request.round):
            return None
        return entry[2]
