"""``RoundClock`` (``gavelsched/daemon/clock.py``): when the daemon plans and starts rounds,
and what its loop waits for."""

from __future__ import annotations

from gavelsched.daemon.clock import RoundClock


def test_rounds_keep_their_cadence_and_the_next_is_planned_plan_lead_early():
    clock = RoundClock(10.0, 3.0)
    assert clock.idle and clock.deadlines() == []
    assert clock.start(100.0) is None
    assert (clock.plan_at, clock.next_start) == (107.0, 110.0)
    assert not clock.plan_due(106.9) and clock.plan_due(107.0)
    assert clock.start(110.5) == 10.5        # woken a little late: the cadence holds
    assert (clock.plan_at, clock.next_start) == (117.0, 120.0)
    clock.start(131.0)                       # far behind: start again from now
    assert clock.next_start == 141.0


def test_once_planned_the_loop_waits_for_the_boundary_not_the_passed_plan_time():
    """A deadline already passed made the executor's loop spin for the whole plan lead
    (a quarter of a CPU at 30 s rounds)."""
    clock = RoundClock(10.0, 3.0)
    clock.start(100.0)
    clock.planned()
    assert clock.deadlines() == [110.0]
    assert not clock.plan_due(108.0)
    clock.start(110.0)
    assert clock.deadlines() == [117.0, 120.0]


def test_stop_goes_idle():
    clock = RoundClock(10.0, 3.0)
    clock.start(0.0)
    clock.stop()
    assert clock.idle and clock.deadlines() == []
