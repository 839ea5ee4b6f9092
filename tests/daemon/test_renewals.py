"""A renewal the plan has decided is answered off the executor (``daemon/renewals.py``;
issue #30): at 2,048 GPUs and 50,000 jobs renewals were answered 6-17 s after they were
sent, behind a round's InitJobs and reports, and one past its 10 s deadline ends a run the
plan had kept. Here the executor's loop never runs at all (a hand-moved clock,
``test_round_aligned.Scheduler``): a booked renewal is still answered over real gRPC, and
takes no seat from a burst; one whose plan comes late is told to ask again, not to stop."""

from __future__ import annotations

import contextlib
import threading

import grpc
import pytest

from gavelsched.daemon import service
from gavelsched.daemon.metrics import DaemonMetrics
from gavelsched.daemon.server import unseated
from gavelsched.daemon.service import ExecutorWaits, health_servicer, registrations
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.codes import BUSY
from gavelsched.rpc.identity import Identities
from gavelsched.rpc.security import channel, serve

from .test_round_aligned import R, Scheduler


@pytest.fixture
def kept(tmp_path):
    """A job run in round 0, started up, and kept on its GPU by round 1's plan:
    (scheduler, job, the lease its process holds)."""
    sched = Scheduler(tmp_path)
    job = sched.submit()
    sched.at(1.0)                                      # round 0 starts
    sched.t = 2.0
    lease = sched.init(job)
    sched.at(1.0 + R - sched.x.config.plan_lead)       # round 1 planned: kept, extended
    assert sched.sent.runs[-1].lease.extended
    yield sched, job, lease
    sched.close()


def _renewal(sched, job, lease, **changes) -> pb.RenewLeaseRequest:
    fields = dict(job_id=job, round=lease.round, generation=sched.gen(job), steps=10,
                  seconds=9.0)
    return pb.RenewLeaseRequest(**{**fields, **changes})


def test_the_plan_books_each_renewal_s_answer_as_the_executor_gives_it(kept):
    sched, job, lease = kept
    renewals = sched.x.runs.renewals
    request = _renewal(sched, job, lease)
    booked = renewals.answer(request)
    assert booked is not None and booked.extended and booked.round == lease.round + 1
    assert booked == sched.x.processes.renew_lease(request)      # the executor's answer
    # another generation, or a renewal asked from another round: the executor answers it
    assert renewals.answer(_renewal(sched, job, lease, generation=sched.gen(job) + 1)) is None
    assert renewals.answer(_renewal(sched, job, lease, round=lease.round + 1)) is None
    sched.x.cancel(job)                                # its run ends: nothing is booked
    assert renewals.answer(request) is None


def test_a_run_the_plan_did_not_keep_is_booked_as_not_extended(tmp_path):
    """Two jobs on one GPU: round 1's plan runs the other one, so the first job's renewal
    is booked as its lease in force (the iterator reads: not renewed), as the executor
    answers it."""
    sched = Scheduler(tmp_path)
    try:
        sched.submit(), sched.submit()
        sched.at(1.0)
        (ran,) = [r.job_id for r in sched.sent.runs]
        lease = sched.init(ran)
        sched.at(1.0 + R - sched.x.config.plan_lead)
        assert not any(r.lease.extended for r in sched.sent.runs)     # the other one next
        request = _renewal(sched, ran, lease)
        booked = sched.x.runs.renewals.answer(request)
        assert booked is not None and not booked.extended and booked.round == lease.round
        assert booked == sched.x.processes.renew_lease(request)
    finally:
        sched.close()


class _Held:
    """A fleet call stuck on the executor (a burst's ReportRound): holds the one fleet seat."""

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, request, context):
        self.entered.set()
        self.release.wait(30)
        return pb.Ack(ok=True)


@contextlib.contextmanager
def _served(sched, held: _Held | None = None):
    """The scheduler's real gRPC services over ``sched``'s executor, whose loop never runs
    (one fleet seat; ``held``: a fleet call ``test.Burst/ReportRound`` that may take it):
    a channel to them (their address: ``sched.address``)."""
    ids = Identities(None, None)                      # an open loopback cluster
    waits = ExecutorWaits({"fleet": 1}, unseated(sched.x.runs))
    extra = [] if held is None else [lambda s: s.add_generic_rpc_handlers([
        grpc.method_handlers_generic_handler("test.Burst", {
            "ReportRound": grpc.unary_unary_rpc_method_handler(
                held, response_serializer=pb.Ack.SerializeToString)})])]
    server, port = serve("127.0.0.1:0", [
        *registrations(sched.x, health_servicer(), lambda *a: None, lambda: ids,
                       lambda user: ""), *extra],
        identities=lambda: ids, interceptors=[waits])
    sched.address = f"127.0.0.1:{port}"
    chan = channel(sched.address)
    try:
        yield chan
    finally:
        if held is not None:
            held.release.set()
        chan.close()
        server.stop(0)


@contextlib.contextmanager
def _seat_taken(chan, held: _Held):
    """A burst's fleet call holds the one fleet seat (``_served(sched, held)``) until the
    block ends."""
    burst = threading.Thread(target=chan.unary_unary("/test.Burst/ReportRound"),
                             args=(b"",), kwargs={"timeout": 30})
    burst.start()
    assert held.entered.wait(30)
    try:
        yield
    finally:
        held.release.set()
        burst.join(30)


@contextlib.contextmanager
def _pumped(sched):
    """``_served``, with a thread running the executor's inbox (but no tick: no plan)."""
    stop = threading.Event()

    def pump():
        while not stop.is_set():
            sched.x.inbox.run_pending(0.05)

    pumping = threading.Thread(target=pump)
    pumping.start()
    try:
        with _served(sched) as chan:
            yield chan
    finally:
        stop.set()
        pumping.join(30)


def test_a_booked_renewal_is_answered_over_grpc_while_the_executor_serves_nothing(kept):
    """Nothing runs the executor's inbox here: a renewal the book answers comes back at
    once, even with every fleet seat taken, while one it does not answer finds no one to
    answer it before its deadline (how every renewal fared behind a round's burst)."""
    sched, job, lease = kept
    sched.x.metrics = DaemonMetrics()
    held = _Held()
    with _served(sched, held) as chan:
        iterator = pb_grpc.IteratorToSchedulerStub(chan)
        with _seat_taken(chan, held):
            reply = iterator.RenewLease(_renewal(sched, job, lease), timeout=10)
            assert reply.lease.extended and reply.lease.round == lease.round + 1
            assert _answers(sched) == {"book": 1.0}
            with pytest.raises(grpc.RpcError) as unbooked:   # the executor's: refused
                iterator.RenewLease(_renewal(sched, job, lease, round=lease.round + 1),
                                    timeout=10)
            assert unbooked.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as waited:     # a seat now, but no executor
            iterator.RenewLease(_renewal(sched, job, lease, round=lease.round + 1),
                                timeout=1)
        assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_renewal_asked_again_after_the_boundary_still_gets_the_kept_run_s_lease(kept):
    """A run whose lease ends before its renewal's answer comes waits for it after its
    checkpoint (``lease_calls.RENEW_TIMEOUT_S``), and one whose renewal did not reach the
    scheduler asks again then (``RENEW_AGAIN_S``): after its round's end, the next round
    started. The plan kept the run, so the answer is still the extended lease, from the book
    or the executor: the run goes on in the same process."""
    sched, job, lease = kept
    sched.x.metrics = DaemonMetrics()
    sched.at(1.0 + R)                                  # round 1 starts, the run still in it
    sched.t = 1.0 + R + 8.0                            # asked again 8 s into round 1
    request = _renewal(sched, job, lease, seconds=R + 8.0)
    with _pumped(sched) as chan:       # (the executor's, for an answer the book lacks)
        reply = pb_grpc.IteratorToSchedulerStub(chan).RenewLease(request, timeout=10)
    assert reply.lease.extended and reply.lease.round == lease.round + 1
    assert reply.lease == sched.x.processes.renew_lease(request)


def test_a_renewal_whose_plan_comes_late_is_asked_again_not_ended(kept, monkeypatch):
    """A renewal asked before the next plan waits for it. A plan later than the wait was
    answered with a lease already over, which ended a run that plan might keep; now the
    answer is BUSY, which the iterator asks again after a pause (``iterator.py``)."""
    sched, job, lease = kept
    sched.x.metrics = DaemonMetrics()
    monkeypatch.setattr(service, "RENEW_WAIT_S", 0.3)
    sched.at(1.0 + R)                  # round 1 starts; the next plan is not made yet
    with _pumped(sched) as chan:
        with pytest.raises(grpc.RpcError) as late:
            pb_grpc.IteratorToSchedulerStub(chan).RenewLease(
                _renewal(sched, job, lease, round=lease.round + 1), timeout=10)
    assert late.value.code() == grpc.StatusCode.UNAVAILABLE
    assert late.value.details().startswith(BUSY)
    assert _answers(sched) == {"ask_again": 1.0}


def _answers(sched, metric: str = "renewals", label: str = "answer") -> dict[str, float]:
    """``gavelsched_renewals_total`` (or ``gavelsched_<metric>_total``) by answer (or by
    another ``label``), summed over the other labels; an empty label left out."""
    counts: dict[str, float] = {}
    for m in sched.x.metrics.registry.collect():
        for s in m.samples:
            if m.name == f"gavelsched_{metric}" and s.name.endswith("_total") \
                    and s.labels[label]:
                counts[s.labels[label]] = counts.get(s.labels[label], 0.0) + s.value
    return counts
