"""Full garbage collections when the scheduler chooses (``gavelsched/daemon/collector.py``,
issue #30): while taken over, CPython collects its oldest generation never on its own, the
executor collects once as each round starts, and every collection is reported; given back,
CPython's thresholds are as they were."""

from __future__ import annotations

import gc

import pytest

from gavelsched.daemon import collector as module
from gavelsched.daemon.collector import IDLE_EVERY_S, NEVER, Collector

from .test_round_aligned import R, Scheduler


@pytest.fixture
def full_collections():
    """The generation-2 collections that start while the test runs."""
    seen: list[int] = []

    def callback(phase, info):
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(callback)
    yield seen
    gc.callbacks.remove(callback)


def test_taken_over_the_oldest_generation_waits_for_collect(full_collections):
    before = gc.get_threshold()
    took = []
    c = Collector(took.append)
    c.take_over()
    try:
        assert gc.get_threshold() == (before[0], before[1], NEVER)
        kept = [[i] for i in range(300_000)]     # survivors enough to start CPython's own
        gc.collect(1)
        assert full_collections == []
        assert c.collect() > 0 and len(took) == 1 and full_collections == [1]
    finally:
        c.give_back()
        del kept
    assert gc.get_threshold() == before


def test_several_collectors_give_back_once_the_last_does():
    before = gc.get_threshold()
    a, b = Collector(), Collector()
    a.take_over()
    b.take_over()
    a.take_over()                                # (twice: counted once)
    a.give_back()
    assert gc.get_threshold()[2] == NEVER        # b still holds it
    b.give_back()
    b.give_back()
    assert gc.get_threshold() == before and module._holders == 0


def test_not_taken_over_it_collects_nothing_and_reports_nothing():
    took = []
    assert Collector(took.append).collect() == 0.0 and took == []


def test_idle_it_collects_once_a_while():
    now = [0.0]
    took = []
    c = Collector(took.append, clock=lambda: now[0])
    c.take_over()
    try:
        now[0] = IDLE_EVERY_S - 1
        c.due()
        assert took == []
        now[0] = IDLE_EVERY_S
        c.due()
        c.due()                                  # (the clock has not moved since)
        assert len(took) == 1
    finally:
        c.give_back()


def test_the_executor_collects_as_each_round_starts(tmp_path):
    s = Scheduler(tmp_path)
    took = []
    s.x.collector = c = Collector(took.append, clock=lambda: s.t)
    c.take_over()
    try:
        s.submit()
        s.at(1.0)                                # round 0 is planned and starts
        assert len(took) == 1
        s.at(1.0 + R - s.x.config.plan_lead)     # round 1 is planned: not yet
        assert len(took) == 1
        s.at(1.0 + R)                            # and starts
        assert len(took) == 2
    finally:
        c.give_back()
        s.close()
