"""A fresh run's InitJob is answered off the executor, from the book of launches
(``daemon/launches.py``; issue #30): at 2,048 GPUs the InitJobs of a round's fresh runs
waited behind the plan and dispatch, and a process that had no answer in 30 s gave up, its
run lost. The book answers with the lease the executor's own path gives from the same
inputs, and the executor records the start-up as of the InitJob's arrival.

The real executor on a hand-moved clock (``test_round_aligned.Scheduler``); the gRPC test
serves the real services with the executor's loop never running."""

from __future__ import annotations

import grpc
import pytest

from gavelsched.daemon import launches as launches_module
from gavelsched.daemon.dispatch import LEASE_MOVED, PLANNED
from gavelsched.daemon.jobs import RUNNING
from gavelsched.daemon.launches import Launch, StartUp
from gavelsched.daemon.metrics import DaemonMetrics
from gavelsched.rpc import pb, pb_grpc

from .test_renewals import _answers, _Held, _pumped, _seat_taken, _served
from .test_round_aligned import R, Scheduler


def _request(sched, job: str, **changes) -> pb.InitJobRequest:
    fields = dict(job_id=job, round=0, rank=0, server_id=sched.server,
                  generation=sched.gen(job))
    return pb.InitJobRequest(**{**fields, **changes})


def _booked(sched, job: str, **changes) -> tuple[pb.InitJobResponse, StartUp | None]:
    """The book's answer to the job's InitJob now, its start-up recorded on the executor
    as the handler hands it over."""
    booked = sched.x.runs.launches.answer(_request(sched, job, **changes))
    assert booked is not None
    answer, startup = booked
    if startup is not None:
        sched.x.processes.booked_init(startup)
    return answer, startup


def _after(tmp_path, name: str, story, path: str):
    """``story(sched, init)`` on a fresh scheduler, with ``init(job)`` answered by ``path``
    (``book`` or ``executor``): what the process got, then what the executor holds (the
    run's lease and lease end, its job's state, the RunJobs sent and why)."""
    sched = Scheduler(tmp_path / f"{name}-{path}")
    try:
        def init(job: str) -> pb.InitJobResponse:
            if path == "book":
                return _booked(sched, job)[0]
            return sched.x.processes.init_job(_request(sched, job))

        job, answer = story(sched, init)
        run = sched.x.runs.get(job)
        return (answer, run.lease, run.lease_end, run.started, sched.x.jobs.get(job).state,
                [r.lease for r in sched.sent.runs], sched.sent.kinds)
    finally:
        sched.close()


def _within_its_round(sched, init):
    job = sched.submit()
    sched.at(1.0)                               # round 0 starts: the run is launched
    sched.t = 1.0 + 3.0                         # three seconds of start-up
    return job, init(job)


def _longer_than_its_round(sched, init):
    job = sched.submit()
    sched.at(1.0)
    sched.t = 1.0 + 8.5                         # past the floor: the lease moves
    return job, init(job)


def _after_its_gpus_were_freed(sched, init):
    sched.submit(), sched.submit()
    sched.at(1.0)                               # one GPU: one job now, the other next
    (first,) = [r.job_id for r in sched.sent.runs]
    init(first)
    sched.at(1.0 + R - sched.x.config.plan_lead)
    sched.at(1.0 + R)                           # round 1: the other job on the same GPU
    (other,) = [r.job_id for r in sched.sent.runs if r.job_id != first]
    sched.t = 1.0 + R + 1.5                     # round 0's run saved and exited
    sched.exited(first, 100)
    sched.t = 1.0 + R + 4.0
    return other, init(other)


def _extended_before_it_started_up(sched, init):
    job = sched.submit()
    sched.at(1.0)
    sched.at(1.0 + R - sched.x.config.plan_lead)   # kept and extended, not started up
    assert sched.sent.runs[-1].lease.extended
    sched.t = 1.0 + R + 2.0                     # its process starts up in the next round
    return job, init(job)


@pytest.mark.parametrize("story", [_within_its_round, _longer_than_its_round,
                                   _after_its_gpus_were_freed,
                                   _extended_before_it_started_up])
def test_the_book_answers_a_fresh_run_as_the_executor_would(tmp_path, story):
    """The answer, the run's lease and its end, its process's start, its job's state and the
    RunJobs sent (a lease moved past the round's end included) are the same whichever
    answered: one function (``launches.started_lease``) gives both."""
    book = _after(tmp_path, story.__name__, story, "book")
    executor = _after(tmp_path, story.__name__, story, "executor")
    assert book == executor
    answer, lease, _, _, state, _, kinds = book
    assert answer.lease == lease and state == RUNNING
    assert (LEASE_MOVED in kinds) == (story is _longer_than_its_round)


def test_a_later_init_job_of_the_run_gets_the_same_answer_and_starts_it_up_once(tmp_path):
    """Another rank, or a retry whose answer was lost on the way: the first answer, which
    is the lease the executor holds, until that lease changes (an extension)."""
    sched = Scheduler(tmp_path)
    try:
        job = sched.submit()
        sched.at(1.0)
        sched.t = 3.0
        launches = sched.x.runs.launches
        first = launches.answer(_request(sched, job))
        sched.t = 3.5                            # another rank, before the executor took it
        assert first[1] is not None
        assert launches.answer(_request(sched, job, rank=1)) == (first[0], None)
        sched.x.processes.booked_init(first[1])
        run = sched.x.runs.get(job)
        assert run.started_up and run.init_at == 3.0 and run.lease == first[0].lease
        sched.t = 6.0                            # a retry, after the executor took it
        assert launches.answer(_request(sched, job)) == (first[0], None)
        assert sched.x.processes.init_job(_request(sched, job)) == first[0]
        sched.at(1.0 + R - sched.x.config.plan_lead)     # kept: its lease is extended
        assert sched.sent.runs[-1].lease.extended
        assert launches.answer(_request(sched, job)) is None
        assert launches.why_not(_request(sched, job)) == "lease_changed"
        assert sched.x.processes.init_job(_request(sched, job)).lease == run.lease
    finally:
        sched.close()


def test_a_run_the_executor_started_up_is_answered_by_the_executor(tmp_path):
    """Its lease was set on the executor's clock: the book, which never answered it, does
    not answer its later InitJobs with one of its own."""
    sched = Scheduler(tmp_path)
    try:
        job = sched.submit()
        sched.at(1.0)
        sched.t = 3.0
        lease = sched.init(job)                  # the executor's path
        sched.t = 4.0
        assert sched.x.runs.launches.answer(_request(sched, job)) is None
        assert sched.x.runs.launches.why_not(_request(sched, job)) == "executor_started"
        assert sched.init(job) == lease
    finally:
        sched.close()


def test_an_init_job_the_book_does_not_hold_goes_to_the_executor(tmp_path):
    """Another generation, a job the book never saw, a run that ended: the executor's
    path, and the book says why (``why_not``, the label of the executor's answer)."""
    sched = Scheduler(tmp_path)
    try:
        job = sched.submit()
        sched.at(1.0)
        launches = sched.x.runs.launches
        assert launches.answers(_request(sched, job))
        other = _request(sched, job, generation=sched.gen(job) + 1)
        assert not launches.answers(other) and launches.why_not(other) == "other_generation"
        unknown = _request(sched, "no-such-job", generation=1)
        assert not launches.answers(unknown) and launches.why_not(unknown) == "never_booked"
        sched.x.cancel(job)
        assert launches.answer(_request(sched, job)) is None
        assert launches.why_not(_request(sched, job)) == "run_ended"
        assert launches.why_not(other) == "other_generation"
    finally:
        sched.close()


def test_a_start_up_recorded_after_its_run_was_replaced_changes_nothing(tmp_path):
    """The handler hands the start-up over; if the executor ended the run first (cancelled,
    its server lost) and launched the job again, the old start-up is not the new run's."""
    sched = Scheduler(tmp_path)
    try:
        job = sched.submit()
        sched.at(1.0)
        sched.t = 2.0
        _, startup = sched.x.runs.launches.answer(_request(sched, job))
        sched.x.runs.kill(job, "test")                   # ended before it was recorded
        sched.x.processes.booked_init(startup)           # (no run: nothing to record)
        assert job not in sched.x.runs
        assert sched.x.jobs.get(job).state != RUNNING
        sched.at(1.0 + R - sched.x.config.plan_lead)     # the job is launched again
        sched.at(1.0 + R)
        again = sched.x.runs.get(job)
        assert again is not None and again.generation > startup.generation
        sched.x.processes.booked_init(startup)           # the old run's, late
        assert not again.started_up and sched.x.jobs.get(job).state != RUNNING
        assert sched.x.runs.launches.answers(_request(sched, job))   # the new run's book
    finally:
        sched.close()


def test_a_fresh_run_s_init_job_is_answered_over_grpc_while_the_executor_serves_nothing(
        tmp_path):
    """Nothing runs the executor's inbox here, and a burst holds the fleet's one seat: the
    booked InitJob is answered at once, takes no seat, and its start-up waits in the inbox
    for the executor; an InitJob of another generation finds no seat."""
    sched = Scheduler(tmp_path)
    sched.x.metrics = DaemonMetrics()
    held = _Held()
    try:
        job = sched.submit()
        sched.at(1.0)
        sched.t = 2.5
        with _served(sched, held) as chan, _seat_taken(chan, held):
            iterator = pb_grpc.IteratorToSchedulerStub(chan)
            reply = iterator.InitJob(_request(sched, job), timeout=10)
            with pytest.raises(grpc.RpcError) as unbooked:
                iterator.InitJob(_request(sched, job, generation=sched.gen(job) + 1),
                                 timeout=10)
            assert unbooked.value.code() == grpc.StatusCode.UNAVAILABLE
        assert reply.lease.max_steps < sched.sent.runs[0].lease.max_steps   # cut at 1.5 s
        assert _answers(sched, "init_jobs") == {"book": 1.0}
        assert not sched.x.runs.get(job).started_up      # recorded by the executor ...
        sched.x.inbox.run_pending(0.0)
        run = sched.x.runs.get(job)
        assert run.started_up and run.init_at == 2.5 and run.lease == reply.lease
        assert sched.x.jobs.get(job).state == RUNNING
        assert sched.sent.kinds == [PLANNED]
    finally:
        sched.close()


def test_init_jobs_the_executor_refuses_are_counted_by_why(tmp_path):
    """An operator sees what became of the InitJobs the book did not answer, and why it did
    not: the executor refuses one of a run that is not the job's current one (``stale``;
    the book holds another generation) and one of a job it does not know (``unknown``;
    never booked), each counted in ``gavelsched_init_jobs_total``."""
    sched = Scheduler(tmp_path)
    sched.x.metrics = DaemonMetrics()
    try:
        job = sched.submit()
        sched.at(1.0)
        with _pumped(sched) as chan:
            iterator = pb_grpc.IteratorToSchedulerStub(chan)
            codes = []
            for request in (_request(sched, job, generation=sched.gen(job) - 1),
                            _request(sched, "no-such-job")):
                with pytest.raises(grpc.RpcError) as refused:
                    iterator.InitJob(request, timeout=10)
                codes.append(refused.value.code())
        assert codes == [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND]
        assert _answers(sched, "init_jobs") == {"stale": 1.0, "unknown": 1.0}
        assert _answers(sched, "init_jobs", "why") == {"other_generation": 1.0,
                                                       "never_booked": 1.0}
    finally:
        sched.close()


def test_the_book_remembers_why_for_its_newest_dropped_entries(monkeypatch):
    """``why_not`` reads the entries dropped last, at most ``GONE_KEPT``: an older one is
    forgotten (``never_booked``), and a job booked again is the book's once more."""
    monkeypatch.setattr(launches_module, "GONE_KEPT", 2)
    book = launches_module.Launches(lambda: 0.0, lambda: 0.0)
    for job in ("a", "b", "c"):
        book.book(Launch(job, 1, pb.Lease(), 0, 1.0, 10.0, 0.0, None, 0.0, (0,), 10, 0))
        book.ended(job)
    ask = {job: pb.InitJobRequest(job_id=job, generation=1) for job in "abc"}
    assert [book.why_not(ask[job]) for job in "abc"] == ["never_booked", "run_ended",
                                                         "run_ended"]
    book.book(Launch("b", 2, pb.Lease(), 0, 1.0, 10.0, 0.0, None, 0.0, (0,), 10, 0))
    assert book.answers(pb.InitJobRequest(job_id="b", generation=2))
    assert book.why_not(ask["b"]) == "other_generation"
