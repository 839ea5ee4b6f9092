"""The emulated GPU pace of GavelIterator (gavelsched/iterator.py: Pacer), on a fake clock."""

from __future__ import annotations

from itertools import pairwise

import pytest

from gavelsched.iterator import Pacer


def run(pacer: Pacer, steps: int, start: float, compute: list[float]) -> list[float]:
    """Hand out steps one by one; ``compute[i]`` is how long step i runs. Returns the time
    each step was handed out."""
    now, handed = start, []
    for i, c in enumerate(compute):
        now += pacer.delay(steps + i, now)
        handed.append(now)
        now += c
    return handed


def test_steps_come_at_the_pace_with_no_free_first_step():
    pacer = Pacer(10.0, now=100.0, steps=0)
    handed = run(pacer, 0, 100.0, [0.01] * 5)
    assert handed == pytest.approx([100.1, 100.2, 100.3, 100.4, 100.5])


def test_a_step_held_up_is_not_caught_up_in_a_burst():
    """After a 1 s stall (a checkpoint save) the next steps keep the pace: 10 steps/s, not
    the 10 missed steps at once."""
    pacer = Pacer(10.0, now=0.0, steps=0)
    compute = [0.01, 0.01, 1.0] + [0.01] * 6
    handed = run(pacer, 0, 0.0, compute)
    after = handed[3:]
    gaps = [b - a for a, b in pairwise(after)]
    assert gaps == pytest.approx([0.1] * 5)
    assert handed[3] == pytest.approx(handed[2] + 1.0)    # handed out as soon as asked


def test_steps_slower_than_the_pace_are_not_delayed():
    pacer = Pacer(10.0, now=0.0, steps=0)
    assert [pacer.delay(0, 0.0)] == [pytest.approx(0.1)]
    assert pacer.delay(1, 0.5) == 0.0                    # step 2 was due at 0.2
    assert pacer.delay(2, 0.55) == pytest.approx(0.05)   # step 3 due 0.1 after step 2


def test_a_resumed_count_paces_from_its_own_origin():
    pacer = Pacer(4.0, now=10.0, steps=40)
    assert pacer.delay(40, 10.0) == pytest.approx(0.25)
    assert pacer.delay(41, 10.25) == pytest.approx(0.25)
