"""When the executor republishes its picture (``publish.Publisher``): a large table's
picture is built on a thread of its own, and not so that it would run into the executor's
next plan or round start, whose work its turns at the GIL slowed 2-3 fold (issue #30)."""

from __future__ import annotations

import time

import pytest

from gavelsched.daemon import publish
from gavelsched.daemon.publish import BACKGROUND_TABLE, Publisher


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The views pictures were built of; each build takes 50 ms."""
    views: list[str] = []

    def build(view):
        time.sleep(0.05)
        views.append(view)
        return view

    monkeypatch.setattr(publish, "build_snapshot", build)
    return views


def test_a_background_build_is_put_off_past_a_plan_it_would_run_into(built):
    t = [0.0]
    pictures = Publisher("first", lambda: f"at {t[0]:g}", None,
                         jobs=lambda: BACKGROUND_TABLE + 1, clock=lambda: t[0])

    def due(at: float, quiet_at: float | None) -> None:
        t[0] = at
        pictures.due(at, True, quiet_at)
        if pictures._building is not None:
            pictures._building.join()

    due(10.0, 10.01)            # no build timed yet: nothing to put off
    assert built == ["first", "at 10"]
    pictures.changed()
    due(20.0, 20.01)            # the plan comes before a 50-ms build would end: after it
    due(20.005, 20.01)
    assert built == ["first", "at 10"]
    due(20.02, 29.0)            # after the plan: the next boundary is far
    assert built[-1] == "at 20.02"
    pictures.changed()
    due(40.0, 40.01)
    due(40.01, 40.02)           # put off once, not again: a picture is not starved
    assert built[-2:] == ["at 20.02", "at 40.01"]


def test_a_small_table_is_built_at_once_whatever_comes_next(built):
    pictures = Publisher("first", lambda: "now", None, jobs=lambda: 10, clock=lambda: 5.0)
    pictures.changed()
    pictures.due(5.0, True, 5.001)
    assert built == ["first", "now"]


@pytest.mark.parametrize("build_s", [0.05, 1.5])
def test_the_next_deadline_is_when_a_picture_is_next_built_never_one_already_passed(
        built, monkeypatch, build_s):
    """The executor loop waits until the earliest deadline: one already passed, which ``due``
    does not act on, made it spin (an aged picture waits for ``_next`` too). Each read of
    the build's clock moves it by ``build_s``: a build takes that long."""
    monkeypatch.setattr(publish, "SNAPSHOT_MAX_AGE_S", 0.1)
    ticks = iter(range(10**6))
    monkeypatch.setattr(publish.time, "perf_counter", lambda: next(ticks) * build_s)
    t = [0.0]
    pictures = Publisher("first", lambda: f"at {t[0]:g}", None,
                         jobs=lambda: BACKGROUND_TABLE + 1, clock=lambda: t[0])
    for _ in range(6):          # the executor loop: due, then wait until the deadline
        pictures.due(t[0], True)
        if pictures._building is not None:
            pictures._building.join()
        deadline = min(pictures.deadlines(True))
        assert deadline > t[0]
        t[0] = deadline
    assert len(built) == 7      # the first picture, then one at each wake-up: none wasted
