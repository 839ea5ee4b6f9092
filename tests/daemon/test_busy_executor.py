"""Workers stay alive while the scheduler's executor thread is busy (issue #30: at 2,048 GPUs
and 50,000 jobs plans of seconds held heartbeats that waited on that thread, and 1,840 of
2,048 GPUs were failed). A heartbeat is answered as it arrives (``DaemonExecutor.heard``),
and the executor's own stalls do not count as a server's silence (``Health.excuse``). A
server that really goes silent is still failed."""

from __future__ import annotations

import math
import os
import re
import signal
import threading
import time

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.daemon.config import load_config
from gavelsched.daemon.health import DEAF_LIMIT, Health
from gavelsched.daemon.inbox import CLIENTS, FLEET, LATE_WAKE_NOTE_S, Inbox, TooLate, caller_waits
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.daemon.store import ServerRow
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import Cluster, running, wait_until
from .fake_worker import FakeWorker

HEARTBEAT_S = 0.4          # a server silent for 1.2 s is failed


def test_the_executors_stall_is_not_a_servers_silence():
    health = Health(1.0)
    row = ServerRow(0, "v100", "127.0.0.1:1", (0,))
    health.up(row, 0.0)
    health.excuse(4.0, 5.0)                  # busy from 1 s to 5 s: silent 1 s of its own
    assert health.newly_dead(5.0) == []
    assert health.newly_dead(7.5) == [health.servers[0]]      # then 3.5 s more: failed
    health.up(row, 10.0)
    health.excuse(30.0, 11.0)                # never beyond now
    assert health.servers[0].last_seen == 11.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["up", "seen", "late", "excuse", "check"]),
                          st.integers(0, 5), st.floats(0.0, 4.0)), max_size=60))
def test_failing_silent_servers_skips_the_scan_only_when_none_can_be_silent(events):
    """The executor asks ``newly_dead`` after every batch of events (thousands a second as
    a round starts at 2,048 GPUs), and the scan of every server under the lock that
    heartbeats take was a seventh of the scheduler's GIL: it now returns at once while no
    alive server can be silent past the limit. The same servers die as with a full scan,
    which grants every server the longest delay of the heartbeats of the last limit."""
    health, mono = Health(1.0), 0.0
    clock = {sid: 1000.0 * sid for sid in range(6)}      # each worker's clock, apart
    delays: list[tuple[float, float]] = []               # (arrival, delay) of each heartbeat
    for kind, server, step in events:
        mono += step
        if kind == "up":
            health.up(ServerRow(server, "v100", f"127.0.0.1:{server}", (server,)), mono)
        elif kind in ("seen", "late"):      # a heartbeat sent at once, or `step` s before
            sent = mono - (step if kind == "late" else 0.0)
            if health.seen(server, mono, sent + clock[server]) is not None:
                delays.append((mono, health.servers[server].delay))
        elif kind == "excuse":
            health.excuse(step, mono)
        else:
            grant = min(max((d for t, d in delays if t >= mono - health.limit), default=0.0),
                        (DEAF_LIMIT - 1) * health.limit)
            assert health.intake_delay(mono) == grant
            expected = [] if health.deaf(mono) else sorted(
                sid for sid, st_ in health.servers.items()
                if st_.alive and mono - st_.last_seen > health.limit + grant)
            assert sorted(s.row.id for s in health.newly_dead(mono)) == expected


def test_a_heartbeat_s_delay_is_read_against_its_server_s_fastest():
    """Stamps on the worker's own clock: the clocks' difference is not delay, nor is their
    drift; a heartbeat that arrived later than its server's fastest is."""
    health = _health(1)
    for beat in range(10):                  # a clock 500 s ahead, and drifting 0.5 ms a beat
        health.seen(0, 1.0 + beat, 1.0 + beat + 500.0 - 0.0005 * beat)
        assert health.servers[0].delay == 0.0
    health.seen(0, 12.0, 11.0 + 500.0)      # a beat that took a second more
    assert health.servers[0].delay == pytest.approx(1.0, abs=0.01)
    health.seen(0, 13.0)                    # an unstamped one (an older worker): no delay read
    for bad in (math.nan, math.inf, -1.0):  # nor from a stamp that is not a time
        health.seen(0, 13.0, bad)
    assert health.servers[0].delay == pytest.approx(1.0, abs=0.01)
    assert health.intake_delay(13.0) == pytest.approx(1.0, abs=0.01)
    assert health.intake_delay(15.1) == 0.0     # none in the last limit (3 s)


def test_heartbeats_that_arrive_late_grant_every_server_that_much_more():
    """At 2,048 GPUs and 50,000 jobs a round's burst of calls held heartbeats for seconds
    in gRPC's intake, and the servers whose heartbeats had not come through yet were failed
    by the dozen: while the heartbeats taken arrive up to d seconds late, a server is
    failed after the limit and d more (at most DEAF_LIMIT limits in all)."""
    health = _health(2)                     # limit 3 s; both seen at 0 s
    for t in (1.0, 2.0, 3.0):               # server 0 heard on time; server 1 silent
        health.seen(0, t, t)
    health.seen(0, 4.5, 2.5)                # sent at 2.5 s, arrived 2 s late
    assert health.intake_delay(4.5) == pytest.approx(2.0, abs=0.01)
    assert health.newly_dead(4.9) == []     # server 1 silent 4.9 s: within 3 + 2
    assert [s.row.id for s in health.newly_dead(5.1)] == [1]
    # a rank's failure waits for its peers' servers as long (``Health.suspect``)
    assert health.suspect("job", "exit 1", 1, 1.0) == 4.0       # due at 5 s, and 2 s more
    assert health.due(5.5) == [] and health.due(7.1) == [("job", "exit 1", 1)]
    health.seen(0, 7.2, 7.1)                # served at once again
    assert health.intake_delay(7.2) == pytest.approx(2.0, abs=0.01)  # the late one is recent
    assert health.intake_delay(7.6) == pytest.approx(0.1, abs=0.01)  # 3 s on: the prompt one
    ahead = _health(1)                      # its worker's clock 100 s ahead
    ahead.seen(0, 1.0, 101.0)
    ahead.seen(0, 2.0, 102.0 - 20.0)        # 20 s late: granted at most 4 limits more
    assert ahead.intake_delay(2.0) == (DEAF_LIMIT - 1) * ahead.limit


def test_a_handler_waits_on_the_executor_no_longer_than_its_caller():
    """A gRPC handler's ``call`` gives up at its caller's deadline (``caller_waits``), not
    after its own 30 s: at 2,048 GPUs handler threads held that long ran out; the event
    still runs when the executor gets to it."""
    inbox, ran = Inbox(), []
    with caller_waits(0.2):
        began = time.monotonic()
        with pytest.raises(TooLate, match="did not get to it within 0.2 s"):
            inbox.call(lambda: ran.append(1))          # nobody runs the inbox yet
        assert time.monotonic() - began < 10
    assert inbox.run_pending(0) and ran == [1]
    with caller_waits(None):                           # no deadline: the event's result
        thread = threading.Thread(target=lambda: inbox.run_pending(5))
        thread.start()
        assert inbox.call(lambda: 7) == 7
        thread.join()


def test_a_client_call_waits_for_one_fleet_event_not_for_the_whole_burst():
    """At 4,096 GPUs a round's 4,096 InitJobs arrived at once, and a Submit queued behind
    them waited past its 30 s deadline: the lanes are served in turn, each in order."""
    inbox, ran = Inbox(), []
    for i in range(1000):
        inbox.tell(lambda i=i: ran.append(f"init {i}"), lane=FLEET)
    submitted = inbox.post(lambda: ran.append("submit") or "job 7")
    inbox.tell(lambda: ran.append("init 1000"), lane=FLEET)
    inbox.tell(lambda: ran.append("cancel"), lane=CLIENTS)
    while len(ran) < 1003:
        inbox.run_pending(0)
    assert ran[:4] == ["submit", "init 0", "cancel", "init 1"]    # in turn, not behind 1,000
    assert [r for r in ran if r.startswith("init")] == [f"init {i}" for i in range(1001)]
    assert submitted.result(0) == "job 7"


class _Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code, self.details = code, details


class _Context:
    """What ``ExecutorWaits`` reads of a gRPC handler's context."""

    def time_remaining(self):
        return None

    def abort(self, code, details):
        raise _Aborted(code, details)


def _handler(waits, method: str, fn):
    """``fn`` as the handler of ``method``, behind ``waits``."""
    import grpc

    call = type("Details", (), {"method": f"/gavelsched.Service/{method}"})()
    return waits.intercept_service(lambda _: grpc.unary_unary_rpc_method_handler(fn),
                                   call).unary_unary


def test_calls_that_may_wait_take_at_most_their_seats_and_heartbeats_none():
    """At 2,048 GPUs x 100,000 jobs, fleet calls waiting out multi-second plans held every
    handler thread and heartbeats queued until live servers were failed: calls that may
    wait hold at most their kind's seats; one more is told UNAVAILABLE at once, and a
    fleet that took all its seats leaves a user's seats and heartbeats alone."""
    import grpc

    from gavelsched.daemon.service import ExecutorWaits

    waits = ExecutorWaits({"fleet": 2, "client": 1})
    entered, release = [], threading.Event()

    def stuck(request, context):            # a fleet call waiting on a busy executor
        entered.append(request)
        release.wait(30)
        return f"answered {request}"

    report = _handler(waits, "ReportSteps", stuck)
    submit = _handler(waits, "Submit", lambda request, context: "submitted")
    heartbeat = _handler(waits, "Heartbeat", lambda request, context: "alive")
    held = [threading.Thread(target=report, args=(i, _Context())) for i in range(2)]
    for thread in held:
        thread.start()
    deadline = time.monotonic() + 30
    while len(entered) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(_Aborted) as refused:
        report(3, _Context())
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    assert refused.value.details.startswith("the scheduler is busy: 2 fleet calls")
    assert entered == [0, 1]
    assert submit(0, _Context()) == "submitted"         # the clients' seat is its own
    assert heartbeat(0, _Context()) == "alive"          # takes no seat
    release.set()
    for thread in held:
        thread.join()
    assert report(4, _Context()) == "answered 4"        # the seats came back


def test_a_call_refused_as_busy_is_counted_and_logged_with_the_calls_that_held_the_seats(
        caplog):
    """An operator of an overloaded scheduler sees which calls it refused and which held
    every seat then (``Refusals``): one line at once, then at most one per ``every_s``
    for each kind, which counts the refusals since the last."""
    import logging

    from gavelsched.daemon.service import ExecutorWaits, Refusals

    counted, now = [], [0.0]
    waits = ExecutorWaits({"fleet": 3}, on_refused=Refusals(counted.append, every_s=5.0,
                                                             clock=lambda: now[0]))
    entered, release = [], threading.Event()

    def stuck(request, context):
        entered.append(request)
        release.wait(30)
        return "answered"

    held = [threading.Thread(target=_handler(waits, method, stuck), args=(i, _Context()))
            for i, method in enumerate(["ReportSteps", "ReportSteps", "InitJob"])]
    for thread in held:
        thread.start()
    deadline = time.monotonic() + 30
    while len(entered) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    renew = _handler(waits, "RenewLease", stuck)
    with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.service"):
        for t in (0.0, 1.0, 2.0, 6.0):           # refused four times in 6 s: two lines
            now[0] = t
            with pytest.raises(_Aborted):
                renew(t, _Context())
    lines = [r.getMessage() for r in caplog.records if "as busy" in r.getMessage()]
    assert lines == [
        "refused 1 fleet calls as busy (RenewLease 1); the 3 fleet seats were held by "
        "ReportSteps 2, InitJob 1",
        "refused 3 fleet calls as busy in the last 6.0 s (RenewLease 3); the 3 fleet seats "
        "were held by ReportSteps 2, InitJob 1"]
    assert counted == ["RenewLease"] * 4
    release.set()
    for thread in held:
        thread.join()
    assert renew(7, _Context()) == "answered"          # the seats came back


def test_a_handler_s_events_take_its_method_s_lane():
    """One list says which calls are the fleet's (``service.FLEET_METHODS``): their
    handlers' events take the FLEET lane, the others' the CLIENTS lane."""
    from gavelsched.daemon.service import ExecutorWaits

    inbox, ran, waits = Inbox(), [], ExecutorWaits()
    report = _handler(waits, "ReportSteps",
                      lambda request, context: inbox.tell(lambda: ran.append("report")))
    submit = _handler(waits, "Submit",
                      lambda request, context: inbox.tell(lambda: ran.append(request)))
    submit("submit 1", _Context())
    submit("submit 2", _Context())
    report(0, _Context())                # posted last, run second: the other lane's turn
    while len(ran) < 3:
        inbox.run_pending(0)
    assert ran == ["submit 1", "report", "submit 2"]


def _health(servers: int) -> Health:
    """Servers registered at 0 s; 1 s heartbeats: silent 3 s, failed."""
    health = Health(1.0)
    for i in range(servers):
        health.up(ServerRow(i, "v100", f"127.0.0.1:{i + 1}", (i,)), 0.0)
    return health


def test_a_scheduler_that_hears_no_server_fails_none_then_counts_from_when_it_hears():
    # at 2,048 GPUs every server was failed at once while every gRPC thread waited on the
    # executor: silence of all is the scheduler's own (Kubernetes' full disruption)
    health = _health(3)
    assert health.deaf(10.0) == 10.0 and health.newly_dead(10.0) == []
    health.seen(0, 10.0)                    # heard again: the 10 s count against none
    assert health.deaf(10.5) == 0.0 and health.newly_dead(12.5) == []
    health.seen(0, 13.0)
    assert [s.row.id for s in health.newly_dead(13.5)] == [1, 2]   # 3.5 s silent since


def test_a_lone_server_or_a_whole_dead_cluster_is_still_failed():
    lone = _health(1)
    assert lone.deaf(3.5) == 0.0 and len(lone.newly_dead(3.5)) == 1
    cluster = _health(2)
    limit = cluster.limit
    assert cluster.newly_dead(DEAF_LIMIT * limit) == []
    assert len(cluster.newly_dead(DEAF_LIMIT * limit + 0.1)) == 2


def _daemon(tmp_path) -> SchedulerDaemon:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({
        "listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 2,
        "state_dir": str(tmp_path / "state"), "eta": False,
        "heartbeat_seconds": HEARTBEAT_S}))
    return SchedulerDaemon(load_config(str(path))).start()


def _register(stub) -> int:
    return stub.RegisterWorker(pb.RegisterWorkerRequest(
        worker_type="v100", gpus=1, address="127.0.0.1:1", hostname="h",
        previous_server_id=-1), timeout=30).server_id


def _busy(daemon: SchedulerDaemon, seconds: float):
    """Hold the executor thread for ``seconds`` (a long plan); the future of that event."""
    return daemon.executor.post(lambda: time.sleep(seconds))


def test_heartbeats_are_answered_while_the_executor_is_busy(tmp_path):
    daemon = _daemon(tmp_path)
    try:
        stub = pb_grpc.WorkerToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        server = _register(stub)
        release = threading.Event()
        busy = daemon.executor.post(lambda: release.wait(60))   # a plan that does not end
        try:
            for _ in range(3):
                assert stub.Heartbeat(pb.HeartbeatRequest(server_id=server), timeout=30).known
            assert not busy.done()               # all three answered while it was busy
        finally:
            release.set()
        busy.result(30)
        assert daemon.executor.health.alive(server)
    finally:
        daemon.stop()


def test_a_worker_whose_heartbeats_could_not_be_served_is_not_failed(tmp_path):
    """No heartbeat at all reaches the scheduler while its executor is busy (as when every
    gRPC thread waits on it): the stall is excused, and the server lives on."""
    daemon = _daemon(tmp_path)
    try:
        stub = pb_grpc.WorkerToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        server = _register(stub)
        _busy(daemon, 10 * HEARTBEAT_S).result(30)
        time.sleep(HEARTBEAT_S)                  # a tick after the stall, no heartbeat yet
        assert daemon.executor.health.alive(server)
        assert stub.Heartbeat(pb.HeartbeatRequest(server_id=server), timeout=30).known
    finally:
        daemon.stop()


def test_a_registration_that_waited_on_the_executor_counts_silence_from_its_answer(tmp_path):
    """A restarted scheduler at 50,000 jobs had its executor busy with a burst of short
    fleet events (none long enough to be excused as a stall); a registration queued
    behind them took effect seconds after it arrived, and its server was failed as silent
    before its worker could send a heartbeat. Silence counts from the answer."""
    from gavelsched.daemon.inbox import FLEET

    daemon = _daemon(tmp_path)
    try:
        stub = pb_grpc.WorkerToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        _register(stub)             # (a cluster of one server is not taken as deaf)
        step = 0.75 * HEARTBEAT_S   # each event shorter than a heartbeat: no stall excused
        burst = [daemon.executor.post(lambda: time.sleep(step), lane=FLEET)
                 for _ in range(round(3 * daemon.executor.health.limit / step))]
        began = time.monotonic()
        server = _register(stub)    # queued behind the burst, in its lane
        assert time.monotonic() - began > 2 * daemon.executor.health.limit
        assert all(event.done() for event in burst)
        time.sleep(HEARTBEAT_S / 2)                 # a tick or more; no heartbeat yet
        assert daemon.executor.health.alive(server)
        assert stub.Heartbeat(pb.HeartbeatRequest(server_id=server), timeout=30).known
    finally:
        daemon.stop()


def test_a_silent_server_is_still_failed(tmp_path):
    daemon = _daemon(tmp_path)
    try:
        stub = pb_grpc.WorkerToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        silent, beating = _register(stub), _register(stub)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                stub.Heartbeat(pb.HeartbeatRequest(server_id=beating), timeout=30)

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            wait_until(lambda: not daemon.executor.health.alive(silent), 30,
                       "the silent server to be failed")
            assert daemon.executor.health.alive(beating)
            assert not stub.Heartbeat(pb.HeartbeatRequest(server_id=silent),
                                      timeout=30).known      # it must register again
        finally:
            stop.set()
            thread.join()
    finally:
        daemon.stop()


def test_a_silent_server_lives_on_while_heartbeats_arrive_late_then_is_failed(tmp_path, caplog):
    """Through the real daemon: while one worker's heartbeats reach the scheduler seconds
    late (stamped that long before they arrive), a silent server is not failed after the
    limit, but after the limit and that delay (at most DEAF_LIMIT limits in all)."""
    daemon = _daemon(tmp_path)
    late = (DEAF_LIMIT - 1) * HEARTBEAT_S * 3          # the most that is granted: 4.8 s
    try:
        stub = pb_grpc.WorkerToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        beating = _register(stub)
        stub.Heartbeat(pb.HeartbeatRequest(server_id=beating, sent_s=time.monotonic()),
                       timeout=30)                     # on time: its fastest
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S / 2):
                stub.Heartbeat(pb.HeartbeatRequest(server_id=beating,
                                                   sent_s=time.monotonic() - late), timeout=30)

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            wait_until(lambda: daemon.executor.health.intake_delay(time.monotonic()) > 0, 30,
                       "a late heartbeat to be taken")
            silent, since = _register(stub), time.monotonic()
            time.sleep(3 * 3 * HEARTBEAT_S)                # past the limit (1.2 s) thrice
            assert daemon.executor.health.alive(silent)
            with caplog.at_level("WARNING", logger="gavelsched.daemon.servers"):
                wait_until(lambda: not daemon.executor.health.alive(silent), 30,
                           "the silent server to be failed")
            assert time.monotonic() - since > 3 * HEARTBEAT_S + late
            assert daemon.executor.health.alive(beating)
            assert "s more: heartbeats reach here that late" in caplog.text
            delays = daemon.metrics.registry.get_sample_value(
                "gavelsched_heartbeat_delay_seconds_count")
            assert delays >= 2
        finally:
            stop.set()
            thread.join()
    finally:
        daemon.stop()


def test_a_scheduler_stopped_for_a_while_fails_no_server_for_it(tmp_path):
    """A scheduler process stopped (SIGSTOP here; a frozen VM, a host in swap) heard no
    heartbeat while it was, and its workers' heartbeats wait in its sockets. Woken past
    every limit (5 silence limits: ``DEAF_LIMIT``), it failed each server at once, and
    killed their runs; the time its executor overslept now counts as its own, as a busy
    executor's does (``Inbox.take_busy_s``), and the log says how late it woke. (Beats of
    0.6 s: a loaded machine's late heartbeat fails no server of its own.)"""
    heartbeat = 0.6
    limit = 3 * heartbeat                      # a server silent this long is failed
    with running(Cluster(tmp_path / "c", heartbeat_seconds=heartbeat)) as c:
        c.fakes.extend(FakeWorker(c.address, kind) for kind in ("k80", "v100"))
        wait_until(lambda: c.alive_workers() == 2, 30, "both workers to register")
        log_path = c.root / "scheduler.log"
        os.kill(c.scheduler.pid, signal.SIGSTOP)
        try:
            before = log_path.stat().st_size        # (what it logged until it was stopped)
            time.sleep(max(DEAF_LIMIT * limit, LATE_WAKE_NOTE_S) + 2.0)
        finally:
            os.kill(c.scheduler.pid, signal.SIGCONT)
        wait_until(lambda: "woke" in log_path.read_text(), 30,
                   "the scheduler to say it woke late")
        time.sleep(limit)
        assert c.alive_workers() == 2
        woken = log_path.read_bytes()[before:].decode()
        assert "missed heartbeats: failed" not in woken, woken[-2000:]
        assert re.search(r"the scheduler's executor woke \d+\.\d s late: its process was "
                         r"stopped or starved of CPU", woken)
