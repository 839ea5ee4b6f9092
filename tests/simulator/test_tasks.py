"""How tasks run (``simulator/tasks.py``): the shortcuts of ``run_leases``, ``finishes`` and
``made_steps`` give what their plain numpy forms give, bit for bit; ``started_among`` what
``made_steps`` gives of the waiting jobs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.tasks import finishes, made_steps, run_leases, started_among


def _batch(k: int, seed: int) -> SimpleNamespace:
    """``k`` tasks, some of them pairs, some members with no progress (rate 0)."""
    rng = np.random.default_rng(seed)
    pair = rng.random(k) < 0.3
    rates = rng.uniform(0.1, 50.0, (k, 2)) * (rng.random((k, 2)) < 0.9)
    rates[~pair, 1] = 0.0
    remaining = rng.integers(1, 20_000, (k, 2)) * np.stack([np.ones(k), pair], 1)
    steps = np.minimum(np.floor(rates * 360.0), remaining).astype(np.int64)
    members = tuple((f"{i}a", f"{i}b") if p else (f"{i}a",) for i, p in enumerate(pair))
    return SimpleNamespace(steps=steps, rates=rates, remaining=remaining.astype(np.int64),
                           members=members)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1), st.booleans())
def test_run_leases_times_each_task_by_its_slower_member(k, seed, paused):
    batch = _batch(k, seed)
    pause = np.random.default_rng(seed).uniform(0.0, 400.0, k) if paused else None
    seconds, steps = run_leases(batch, 360.0, pause)
    took = np.divide(steps, batch.rates, out=np.zeros(batch.rates.shape),
                     where=batch.rates > 0)
    if pause is not None:
        took = took + pause[:, None]
    assert np.array_equal(seconds, took.max(axis=1)) and seconds.dtype == took.dtype


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1), st.floats(0.0, 1.0))
def test_finishes_are_the_members_whose_steps_reach_their_remaining(k, seed, share):
    batch = _batch(k, seed)
    rng = np.random.default_rng(seed)
    ends = rng.uniform(0.0, 360.0, k)
    steps = np.where(rng.random((k, 2)) < share, batch.remaining, batch.steps)
    finish, at = finishes(batch, steps, ends, 1000.0)
    done = (steps >= batch.remaining) & (batch.remaining > 0)
    assert finish == list(zip(*(x.tolist() for x in np.nonzero(done))))
    assert at == {batch.members[i][m]: 1000.0 + float(ends[i]) for i, m in finish}


def test_nothing_finishes():
    batch = _batch(5, 1)
    steps = np.zeros_like(batch.steps)
    assert finishes(batch, steps, np.zeros(5), 0.0) == ([], {})


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_made_steps_names_each_member_that_made_steps(k, seed):
    batch = _batch(k, seed)
    made = list(made_steps(batch.members, batch.steps))
    expected = [m[0] for m, s in zip(batch.members, batch.steps) if s[0] > 0]
    expected += [m[1] for m, s in zip(batch.members, batch.steps) if len(m) > 1 and s[1] > 0]
    assert made == expected


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**31 - 1), st.booleans())
def test_started_among_is_made_steps_among_the_waiting(k, seed, singles_only):
    """The waiting jobs that made steps, looked up from the waiting side, are those of
    ``made_steps``: pairs among the tasks, members without steps and jobs not in the
    round included."""
    batch = _batch(k, seed)
    if singles_only:
        batch.members = [m[:1] for m in batch.members]
        batch.steps[:, 1] = 0
    rng = np.random.default_rng(seed + 1)
    jobs = [j for m in batch.members for j in m] + ["elsewhere"]
    waiting = {j for j in jobs if rng.random() < 0.5}
    got = started_among(waiting, batch.members, batch.steps)
    assert set(got) == waiting.intersection(made_steps(batch.members, batch.steps))
