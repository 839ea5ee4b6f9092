"""The core's rows (``gavelsched/core/rows.py``): dropping rows keeps every other row's
values and renumbers the members; ``members_of`` reads ``member_rows``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.core.rows import Rows

ARRAYS = ("scale_factor", "rate", "received", "deficit", "allocation", "tie", "allocated",
          "ran", "left")


def _rows(jobs: int, pairs: int, rng) -> Rows:
    """``jobs`` single rows, then ``pairs`` pair rows of random jobs, random values."""
    rows = Rows(3)
    rows.add_many([(str(i), (str(i),), int(rng.integers(1, 4)), rng.random(3))
                   for i in range(jobs)], 10.0, left=rng.random(jobs) * 100)
    ab = [rng.choice(jobs, 2, replace=False).tolist() for _ in range(pairs if jobs > 1 else 0)]
    ab = list(dict.fromkeys(tuple(sorted(p)) for p in ab))
    rows.add_many([(f"{a}+{b}", (str(a), str(b)), 1, rng.random((3, 2))) for a, b in ab], 10.0)
    for name in ("received", "deficit", "allocation", "tie"):
        getattr(rows, name)[:] = rng.random(getattr(rows, name).shape)
    rows.allocated[:] = rng.random(len(rows)) < 0.5
    rows.ran[:] = rng.random(rows.ran.shape) < 0.5
    return rows


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 6), st.integers(0, 2**31 - 1))
def test_drop_keeps_the_other_rows(jobs, pairs, seed):
    rng = np.random.default_rng(seed)
    rows = _rows(jobs, pairs, rng)
    before = {name: getattr(rows, name).copy() for name in ARRAYS}
    keys, members = list(rows.keys), list(rows.members)
    gone = [k for k in keys if rng.random() < 0.3]
    rows.drop(gone + ["unknown"])
    keep = np.array([k not in gone for k in keys])
    assert rows.keys == [k for k in keys if k not in gone]
    assert rows.members == [m for k, m in zip(keys, members) if k not in gone]
    assert rows.index == {k: i for i, k in enumerate(rows.keys)}
    for name in ARRAYS:
        got, want = getattr(rows, name), before[name][keep]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    for i, (m, pair) in enumerate(zip(rows.members, rows.member_rows.tolist())):
        # a member whose row was dropped reads -1 (the core drops such pairs too)
        assert pair == [rows.index.get(m[0], -1), rows.index.get(m[1], -1) if len(m) > 1
                        else -1], i


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 6), st.integers(0, 2**31 - 1))
def test_members_of_reads_member_rows(jobs, pairs, seed):
    rng = np.random.default_rng(seed)
    rows = _rows(jobs, pairs, rng)
    where = rng.integers(0, len(rows), int(rng.integers(0, 2 * len(rows))))
    assert np.array_equal(rows.members_of(where), rows.member_rows[where])
    assert rows.members_of(where).shape == (where.size, 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 8), st.integers(0, 2**31 - 1))
def test_runnable_is_kept_through_admissions_and_deletions(jobs, pairs, seed):
    """The runnable flags, read once and then kept as rows come and go, are the flags
    made anew from the rates: zero rates (a type a job cannot use) included."""
    rng = np.random.default_rng(seed)
    rows = _rows(jobs, pairs, rng)
    rows.rate[rng.random(rows.rate.shape) < 0.3] = 0.0
    rows.changed()                      # (rates written in place: the caller says so)
    for step in range(6):
        assert not rows.runnable.flags.writeable
        if step % 2 and len(rows):      # jobs, and every pair of theirs (as ``_remove``)
            jobs_gone = rng.choice(len(rows), min(len(rows), 2), replace=False)
            rows.drop([rows.keys[i] for i in np.flatnonzero(rows.touching(jobs_gone))])
        else:
            rate = np.where(rng.random(3) < 0.3, 0.0, rng.random(3))
            rows.add_many([(f"new{step}", (f"new{step}",), 1, rate)], 10.0, left=[5.0])
        kept = rows.runnable
        rows.changed()
        assert kept.tobytes() == rows.runnable.tobytes() and kept.shape == rows.runnable.shape


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 6), st.integers(0, 2**31 - 1))
def test_keys_touching_are_the_rows_with_those_jobs_in_row_order(jobs, pairs, seed):
    """``keys_touching``: the jobs' own rows and every pair with one of them, in row order,
    whether the rows hold pairs or not (then each row is its own job's)."""
    rng = np.random.default_rng(seed)
    rows = _rows(jobs, pairs, rng)
    for _ in range(3):
        ids = [str(i) for i in rng.permutation(jobs)[:int(rng.integers(1, jobs + 1))]
               if str(i) in rows]
        want = [key for key, m in zip(rows.keys, rows.members) if set(m) & set(ids)]
        assert rows.keys_touching(ids) == want
        rows.drop(want)                 # (as ``_remove``: the jobs, and their pairs)
        assert rows.member_rows.tolist() == [
            [rows.index[m[0]], rows.index[m[1]] if len(m) > 1 else -1] for m in rows.members]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.integers(0, 4), st.integers(1, 6), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_new_job_rows_are_written_as_the_slices_write_them(jobs, pairs, k, runnable, seed):
    """A few jobs' own rows, written as they grow (``Rows._job_rows``: one call), are the
    rows ``add_many``'s slice by slice writing makes: their rates over fewer columns than
    the rows', zero rates, the runnable flags when kept, steps left and planned numbers."""
    from gavelsched.core import rows as module

    rng = np.random.default_rng(seed)
    entries = [(f"new{i}", (f"new{i}",), int(rng.integers(1, 4)),
                np.where(rng.random(w) < 0.3, 0.0, rng.random(w)))
               for i, w in enumerate(rng.integers(1, 4, k).tolist())]
    left = (rng.random(k) * 100).tolist()
    planned = [tuple(rng.random(4).tolist()) for _ in range(k)]
    made = []
    for few in (module.FEW_RATES, -1):    # (-1: every add by slices)
        rows = _rows(jobs, pairs, np.random.default_rng(seed)) if jobs else Rows(3)
        if runnable:
            assert not rows.runnable.flags.writeable     # (read once: kept from now on)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "FEW_RATES", few)
            rows.add_many(entries, 7.5, left=left, planned=planned)
        made.append(rows)
    fast, slow = made
    for name in fast._array_names():
        got, want = getattr(fast, name), getattr(slow, name)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name
    assert fast._array_names() == slow._array_names()
    assert fast.runnable.tobytes() == slow.runnable.tobytes()
    assert not fast.runnable.flags.writeable
