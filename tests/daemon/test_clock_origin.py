"""The daemon's clock never goes back across a restart (``gavelsched/daemon/clock.py``,
``Origin``): a wall clock set back while the scheduler was down (a host booted before NTP
set its clock, a virtual machine restored) would put every stored time in the future, and
the saved allocation period was thrown away as "not an allocation period". The real
executor on a hand-moved clock and a real store (``test_round_aligned.Scheduler``)."""

from __future__ import annotations

import logging
import time

from gavelsched.daemon.clock import Origin
from gavelsched.daemon.meta import CLOCK_SEEN, EPOCH_UNIX
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb

from .test_control_unit import LEAD_FREE, submit
from .test_round_aligned import R, Scheduler


def origin_at(tmp_path, wall_s: float, seen_s: float | None) -> Origin:
    """An origin whose wall clock says ``wall_s`` seconds since the state's epoch, with
    ``seen_s`` the latest time the state saw (None: never planned)."""
    store = Store(tmp_path)
    store.set_meta({EPOCH_UNIX.key(): time.time() - wall_s,
                    **({} if seen_s is None else {CLOCK_SEEN.key(): seen_s})})
    try:
        return Origin(store, time.monotonic)
    finally:
        store.close()


def test_the_clock_counts_on_from_the_last_time_seen_when_the_wall_clock_is_behind(
        tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="gavelsched.daemon.clock")
    assert 500.0 <= origin_at(tmp_path / "a", 500.0, 200.0).now() < 510.0   # (ahead: the wall)
    assert 500.0 <= origin_at(tmp_path / "b", 500.0, None).now() < 510.0
    assert not caplog.records
    behind = origin_at(tmp_path / "c", 100.0, 3700.0)
    assert 3700.0 <= behind.now() < 3710.0
    (record,) = caplog.records
    assert record.getMessage().startswith("the wall clock is 3600 s behind the time this "
                                          "scheduler's state last saw (its last plan, at ")


def test_a_restart_with_the_wall_clock_set_back_keeps_the_allocation_period(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    s = Scheduler(tmp_path, t=5000.0)
    for _ in range(3):
        submit(s)
    s.t = 5000.0 + LEAD_FREE
    for _ in range(4):
        s.at(s.t + R)
        for run in list(s.x.runs.live()):
            if not run.started_up:
                s.t += 0.5
                s.init(run.job_id)
    period_start, last = s.x.core.period_state().start_s, s.x.now()
    s.close()
    again = Scheduler(tmp_path, gpus=0, t=s.t - 3600.0)      # the wall clock an hour back
    assert again.x.now() >= last - R
    assert again.x.core.period_state().start_s == period_start
    again.x.roster.register(pb.RegisterWorkerRequest(
        worker_type="v100", gpus=1, address="127.0.0.1:1", hostname="h",
        previous_server_id=s.server), again.t)
    again.at(again.t + R)
    again.x.publish()
    received = [sum(j.received.values()) for j in again.x.snapshot.status().jobs]
    assert sum(received) <= 1.0 + 1e-9                         # one GPU's time, shared
    assert not any("not an allocation period" in r.getMessage() for r in caplog.records)
    again.close()
