"""The compiled round loops (``gavelsched/mechanism/_loops.pyx``, ``_steps.pyx``) give what
their Python twins give, on random inputs: the selection's order (ties, infinities and NaNs
included), the placement's workers and extensions, the priorities to the bit, a whole
``plan_round``, the leases and task times to the bit, and the crediting of steps and
seconds."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.mechanism import (ClusterView, Demand, PlannerConfig, placement, plan_round,
                                  planner, selection)
from gavelsched.mechanism.loops import compiled, compiled_steps

# (the package's ``priorities`` is the function; its module, by name)
priorities = importlib.import_module("gavelsched.mechanism.priorities")

pytestmark = pytest.mark.skipif(
    compiled is None or compiled_steps is None, reason="the round loops were not compiled (no C compiler at install, "
    "or GAVELSCHED_PURE_PYTHON=1)")


def _keys(rng, c: int, n: int) -> np.ndarray:
    """Values with many ties, and some infinities and NaNs."""
    values = rng.integers(0, 4, (c, n)).astype(float)
    values[rng.random((c, n)) < 0.1] = np.inf
    values[rng.random((c, n)) < 0.05] = np.nan
    values[rng.random((c, n)) < 0.05] = -np.inf
    return values


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 40), st.integers(1, 3), st.booleans(), st.integers(0, 2**31 - 1))
def test_compiled_selection_matches_the_python_walk(c, n, backfill, seed):
    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")[:n]
    view = ClusterView.build({t: int(rng.integers(0, c + 2)) for t in types})
    prio = np.where(rng.random((c, n)) < 0.3, 0.0, _keys(rng, c, n))
    deficit, tie = _keys(rng, c, n), _keys(rng, c, n)
    runnable = rng.random((c, n)) < 0.8
    first = rng.permutation(c + int(rng.integers(0, 3)))[:c].astype(np.int64)  # job numbers
    members = np.stack([first, -np.ones(c, dtype=np.int64)], axis=1)
    free = [view.count(t) for t in types]
    order = [int(j) for j in rng.permutation(n)]
    runs = selection.order_entries(prio, deficit, np.zeros((c, n)), order, False, tie)
    rows, columns = selection.select(runs, prio, runnable, np.ones(c, dtype=int), members,
                                     free, backfill)
    keys = tuple(f"j{i}" for i in range(c))
    got = compiled.plan_units(prio, deficit, tie, runnable.view(np.uint8),
                              np.ones(c, dtype=np.uint8), members, np.ones(c, dtype=np.int64),
                              free, order, backfill, keys, types, {}, view.live_type_of,
                              view.live_workers)
    assert (got[0].tolist(), got[2].tolist()) == (rows, columns)


def test_a_pair_or_a_multi_gpu_job_leaves_the_round_to_python():
    view = ClusterView.build({"a": 4})
    args = (np.ones((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)), np.ones((2, 1), np.uint8),
            np.ones(2, np.uint8))
    rest = ([4], [0], True, ("x", "y"), ("a",), {}, view.live_type_of, view.live_workers)
    single = np.array([[0, -1], [1, -1]], dtype=np.int64)
    assert compiled.plan_units(*args, single, np.array([1, 1], np.int64), *rest) is not None
    assert compiled.plan_units(*args, single, np.array([1, 2], np.int64), *rest) is None
    pair = np.array([[0, -1], [0, 1]], dtype=np.int64)
    assert compiled.plan_units(*args, pair, np.array([1, 1], np.int64), *rest) is None


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_compiled_unit_placement_matches_python(seed):
    rng = np.random.default_rng(seed)
    view = ClusterView.build({"a": 6, "b": 4}).without(
        [int(w) for w in rng.choice(10, size=int(rng.integers(0, 4)), replace=False)])
    room = {t: view.count(t) for t in ("a", "b")}
    keys, types, previous = [], [], {}
    for i in range(14):
        t = ("a", "b")[int(rng.integers(2))]
        if room[t] == 0:
            continue
        room[t] -= 1
        keys.append(f"j{i}")
        types.append(t)
        if rng.random() < 0.6:  # last round's workers: maybe down, of the other type, or two
            taken = {w for p in previous.values() for w in p}
            pool = [w for w in range(10) if w not in taken]
            if pool:
                size = 1 if rng.random() < 0.9 or len(pool) < 2 else 2
                previous[f"j{i}"] = tuple(int(w) for w in rng.choice(pool, size, replace=False))
    expected = placement.place_units(keys, types, previous, view)
    got = compiled.place_units(keys, types, previous, view.live_type_of, view.live_workers)
    assert got == expected


def test_compiled_placement_names_a_type_that_lacks_workers():
    view = ClusterView.build({"a": 1})
    with pytest.raises(ValueError, match="placement: 2 a workers requested, 1 live"):
        compiled.place_units(["x", "y"], ["a", "a"], {}, view.live_type_of, view.live_workers)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 3), st.booleans(), st.integers(0, 2**31 - 1))
def test_a_round_planned_with_and_without_the_compiled_loops_is_the_same(c, n, backfill,
                                                                         seed):
    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")[:n]
    view = ClusterView.build({t: int(rng.integers(1, 8)) for t in types})
    keys = tuple(f"j{i}" for i in range(c))
    live = {t: view.live_workers(t) for t in types}
    previous = {k: (live[t][int(rng.integers(len(live[t])))],) for k in keys
                if rng.random() < 0.5 for t in [types[int(rng.integers(n))]]}
    demand = Demand(
        keys=keys, members=tuple((k,) for k in keys), types=types,
        scale_factor=np.ones(c, dtype=int),
        allocation=np.where(rng.random((c, n)) < 0.3, 0.0, rng.random((c, n)) / n),
        received=rng.integers(0, 3, (c, n)) * 360.0, deficit=rng.integers(-2, 3, (c, n)) * 1.0,
        runnable=rng.random((c, n)) < 0.9, allocated=rng.random(c) < 0.9,
        previous=_disjoint(previous))
    config = PlannerConfig(type_order=tuple(rng.permutation(types)), backfill=backfill)
    fast = plan_round(demand, view, config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner, "compiled", None)
        patch.setattr(priorities, "compiled", None)
        slow = plan_round(demand, view, config)
    assert fast.placements == slow.placements
    assert fast.held_idle == slow.held_idle
    assert fast.priorities.tobytes() == slow.priorities.tobytes()
    assert (fast.lease_opportunities, fast.lease_extensions) == (
        slow.lease_opportunities, slow.lease_extensions)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 30), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_compiled_priorities_are_the_python_ones_to_the_bit(c, n, seed):
    rng = np.random.default_rng(seed)
    X = np.where(rng.random((c, n)) < 0.3, 0.0, rng.random((c, n)))
    X[rng.random((c, n)) < 0.05] = np.nan
    received = np.where(rng.random((c, n)) < 0.3, 0.0, rng.random((c, n)) * 360.0)
    received[rng.random((c, n)) < 0.1] = 1e-320         # X * total / tiny: inf
    received[rng.random((c, n)) < 0.05] = np.nan
    runnable, allocated = rng.random((c, n)) < 0.8, rng.random(c) < 0.8
    fast = priorities.priorities(X, received, runnable, allocated)
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):
        patch.setattr(priorities, "compiled", None)
        slow = priorities.priorities(X, received, runnable, allocated)
    assert fast.tobytes() == slow.tobytes()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3000), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_compiled_column_sums_are_numpys(c, n, seed):
    """The compiled priorities sum each column's received seconds themselves (two columns
    or more): numpy's ``sum(axis=0)`` to the bit, at any number of rows."""
    rng = np.random.default_rng(seed)
    received = rng.random((c, n)) * 10.0 ** rng.integers(-6, 7, (c, n))
    X, flags = np.ones((c, n)), np.ones((c, n), dtype=np.uint8)
    args = (X, received), (flags, np.ones(c, dtype=np.uint8), 1e9)
    own = compiled.unsnapped_priorities(*args[0], None, *args[1])
    given_sum = compiled.unsnapped_priorities(*args[0], received.sum(axis=0), *args[1])
    assert own.tobytes() == given_sum.tobytes()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 30), st.integers(1, 4), st.integers(0, 2**31 - 1), st.booleans())
def test_compiled_grid_is_the_numpy_grid_to_the_bit(c, n, seed, strided):
    """``snapped``'s gather, rounding and scatter, compiled, around numpy's own log and
    exp: the same values in place, zeros, negatives, NaNs, infinities and subnormals kept
    or snapped as numpy does, on a strided array too."""
    rng = np.random.default_rng(seed)
    values = rng.choice([0.0, -0.0, -1.0, 5e-324, 1e-300, 1e300, np.inf, -np.inf, np.nan],
                        size=(c, n))
    values = np.where(rng.random((c, n)) < 0.6, rng.random((c, n)) * 10.0 ** rng.integers(
        -8, 9, (c, n)), values)
    fast_in = np.repeat(values, 2, axis=1)[:, ::2] if strided else values.copy()
    fast = priorities.snapped(fast_in)
    assert fast is fast_in                               # in place
    slow_in = values.copy()
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):
        patch.setattr(priorities, "compiled", None)
        slow = priorities.snapped(slow_in)
    assert fast.tobytes() == slow.tobytes()


def _disjoint(previous: dict) -> dict:
    """Last round's assignments hold each worker once."""
    seen, out = set(), {}
    for key, workers in previous.items():
        if seen.isdisjoint(workers):
            seen.update(workers)
            out[key] = workers
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 20), st.integers(1, 4), st.integers(0, 25), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_compiled_leases_are_the_python_ones(c, n, k, whole, seed):
    from gavelsched.core import batch

    rng = np.random.default_rng(seed)
    rate = np.where(rng.random((c, n, 2)) < 0.2, 0.0, rng.random((c, n, 2)) * 5)
    rate[rng.random((c, n, 2)) < 0.05] = np.inf
    jobs = c + 3
    left = np.where(rng.random(jobs) < 0.2, 0.0, rng.integers(0, 3000, jobs) * 1.0)
    left[rng.random(jobs) < 0.2] += 0.5                 # a fraction of a step left
    member_rows = np.stack([rng.integers(0, jobs, c),
                            np.where(rng.random(c) < 0.4, rng.integers(0, jobs, c), -1)], axis=1)
    r, j = rng.integers(0, c, k), rng.integers(0, n, k)
    span = float(rng.choice([360.0, 0.5, 1e-3, 123.25]))
    fast = batch.task_leases(rate, left, member_rows, r, j, span, whole)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch, "compiled_steps", None)
        slow = batch.task_leases(rate, left, member_rows, r, j, span, whole)
    for got, want in zip(fast, slow):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


def _rows_for_crediting(rng, c: int, n: int):
    """Rows of ``c`` jobs and some pairs of them, with steps left (fractions, zeros, NaNs)
    and received times."""
    from gavelsched.core.rows import Rows

    rows = Rows(n)
    pairs = [(int(a), int(b)) for a, b in rng.integers(0, c, (int(rng.integers(0, 4)), 2))
             if a != b]
    rows.keys = [f"j{i}" for i in range(c)] + [f"j{a}+j{b}" for a, b in pairs]
    rows._member_rows = np.array([(i, -1) for i in range(c)] + pairs,
                                 dtype=np.int64).reshape(-1, 2)
    rows.left = rng.integers(0, 50, len(rows.keys)) + rng.choice([0.0, 0.25, 1e-10],
                                                                  len(rows.keys))
    rows.left[rng.random(len(rows.keys)) < 0.05] = np.nan
    rows.received = rng.integers(0, 5, (len(rows.keys), n)) * 360.0
    rows.ran = rng.random((len(rows.keys), n)) < 0.5
    return rows


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 12), st.integers(1, 3), st.integers(0, 15), st.integers(1, 2),
       st.integers(0, 2**31 - 1))
def test_compiled_crediting_is_the_python_crediting(c, n, k, width, seed):
    """Steps off the steps left, and seconds into received time, as numpy's fancy
    indexing does them: a row named twice keeps its last write."""
    from gavelsched.core import progress

    rng = np.random.default_rng(seed)
    fast = _rows_for_crediting(rng, c, n)
    where = rng.integers(0, len(fast.keys), k)
    steps = rng.choice([0.0, 1.0, 7.0, 49.75, np.nan], (k, width))
    columns, seconds = rng.integers(0, n, k), rng.random(k) * 360
    slow = _rows_for_crediting(np.random.default_rng(seed), c, n)
    got = progress._take_steps(fast, where, steps)
    progress._add_seconds(fast, where, columns, seconds)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(progress, "compiled_steps", None)
        want = progress._take_steps(slow, where, steps)
        progress._add_seconds(slow, where, columns, seconds)
    assert got == want
    for name in ("left", "received", "ran"):
        assert getattr(fast, name).tobytes() == getattr(slow, name).tobytes(), name


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 20), st.booleans(), st.integers(0, 2**31 - 1))
def test_compiled_task_seconds_are_the_python_ones_to_the_bit(k, whole, seed):
    """A round's task times (``simulator/tasks.py:run_leases``): steps over rate, a member
    without progress taking none, the larger of two; integer or fractional steps."""
    from types import SimpleNamespace

    from simulator import tasks

    rng = np.random.default_rng(seed)
    rates = rng.choice([0.0, 0.5, 3.0, 1e-300, np.inf, np.nan], (k, 2))
    steps = (rng.integers(0, 2000, (k, 2)) if whole
             else rng.choice([0.0, 0.25, 7.0, np.inf, np.nan], (k, 2)))
    batch = SimpleNamespace(steps=steps, rates=rates)
    with np.errstate(all="ignore"):
        fast = tasks.run_leases(batch, 360.0, None)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tasks, "compiled_steps", None)
            slow = tasks.run_leases(batch, 360.0, None)
    assert fast[0].tobytes() == slow[0].tobytes()
    assert fast[1] is slow[1]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 20), st.booleans(), st.integers(0, 2**31 - 1))
def test_compiled_finishes_are_the_python_ones(k, whole, seed):
    """The (task, member) pairs whose steps finish their jobs, in row order, and when."""
    from types import SimpleNamespace

    from simulator import tasks

    rng = np.random.default_rng(seed)
    if whole:
        remaining = rng.integers(0, 4, (k, 2))
        steps = rng.integers(0, 4, (k, 2))
    else:
        remaining = rng.choice([0.0, 0.5, 2.0, np.nan], (k, 2))
        steps = rng.choice([0.0, 0.5, 2.0, np.inf, np.nan], (k, 2))
    batch = SimpleNamespace(remaining=remaining,
                            members=[(f"a{i}", f"b{i}") for i in range(k)])
    ends = rng.random(k) * 360
    fast = tasks.finishes(batch, steps, ends, 10.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tasks, "compiled_steps", None)
        slow = tasks.finishes(batch, steps, ends, 10.0)
    assert fast == slow


def test_the_compiled_loops_refuse_arrays_they_would_read_past():
    """They read their arrays unchecked, so shapes and indices are checked at their door:
    a clear error, never a read past an array."""
    view = ClusterView.build({"a": 2})
    ok = (np.ones((2, 1)), np.zeros((2, 1)), np.zeros((2, 1)), np.ones((2, 1), np.uint8),
          np.ones(2, np.uint8), np.array([[0, -1], [1, -1]], np.int64), np.ones(2, np.int64))
    rest = (view.live_type_of, view.live_workers)
    assert compiled.plan_units(*ok, [2], [0], True, ("x", "y"), ("a",), {}, *rest) is not None
    with pytest.raises(ValueError, match=r"deficit: shape \(1, 1\), expected \(2, 1\)"):
        compiled.plan_units(ok[0], np.zeros((1, 1)), *ok[2:], [2], [0], True, ("x", "y"),
                            ("a",), {}, *rest)
    with pytest.raises(IndexError, match="type order"):
        compiled.plan_units(*ok, [2], [1], True, ("x", "y"), ("a",), {}, *rest)
    with pytest.raises(IndexError, match="1 keys"):
        compiled.plan_units(*ok, [2], [0], True, ("x",), ("a",), {}, *rest)
    with pytest.raises(ValueError, match="received: shape"):
        compiled.unsnapped_priorities(np.ones((2, 1)), np.ones((1, 1)), np.ones(1),
                                      np.ones((2, 1), np.uint8), np.ones(2, np.uint8), 1e9)
    rate, left = np.ones((2, 1, 2)), np.ones(2)
    members = np.array([[0, -1], [1, -1]], np.int64)
    with pytest.raises(IndexError, match="task 0 at row 2"):
        compiled_steps.leases(rate, left, members, np.array([2], np.int64),
                              np.array([0], np.int64), 360.0, True)
    with pytest.raises(IndexError, match="job row 1 past 1 rows"):
        compiled_steps.leases(rate, np.ones(1), members, np.array([1], np.int64),
                              np.array([0], np.int64), 360.0, True)
    with pytest.raises(IndexError, match="combination row 2 past 2 rows"):
        compiled_steps.take_steps(left, members, np.array([2], np.int64), np.ones((1, 2)))
    with pytest.raises(IndexError, match="job row 1 past 1 rows"):
        compiled_steps.take_steps(np.ones(1), members, np.array([1], np.int64), np.ones((1, 1)))
    with pytest.raises(ValueError, match=r"steps of shape \(1, 3\)"):
        compiled_steps.take_steps(left, members, np.array([0], np.int64), np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"rates: shape \(1, 2\), expected \(2, 2\)"):
        compiled_steps.task_seconds(np.ones((2, 2)), np.ones((1, 2)))
    with pytest.raises(IndexError, match="task 0 at row 0, column 1"):
        compiled_steps.add_seconds(np.ones((2, 1)), np.ones((2, 1), np.uint8),
                                   np.array([0], np.int64), np.array([1], np.int64), np.ones(1))


def test_a_compiled_loop_converts_what_it_reads_and_refuses_what_it_cannot_write():
    """``_arrays.pxd``'s ``read_array``: an array a loop only reads is converted (a list,
    another type); one it writes in place must be of its type and writable."""
    assert compiled_steps.task_seconds([[1, 2]], np.array([[1, 0]], np.int32)).tolist() == [1.0]
    at = (np.array([0], np.int64), np.array([0], np.int64), np.ones(1))
    with pytest.raises(ValueError, match="received: an array of float64, not ndarray of float32"):
        compiled_steps.add_seconds(np.ones((2, 1), np.float32), np.ones((2, 1), np.uint8), *at)
    frozen = np.ones((2, 1))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="received: the array is read-only"):
        compiled_steps.add_seconds(frozen, np.ones((2, 1), np.uint8), *at)
    with pytest.raises(ValueError, match="ran: 1 dimensions, expected 2"):
        compiled_steps.add_seconds(np.ones((2, 1)), np.ones(2, np.uint8), *at)
    received, ran = np.ones((2, 1)), np.zeros((2, 1), dtype=bool)   # (a bool is a byte)
    compiled_steps.add_seconds(received, ran, *at)
    assert received.tolist() == [[2.0], [1.0]] and ran.tolist() == [[True], [False]]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 12), st.integers(0, 4), st.integers(0, 5), st.integers(0, 2**31 - 1))
def test_compiled_row_copies_are_numpys(c, n, k, seed):
    """The rows' arrays grown by ``k`` rows of zeros or of given values, and without the
    rows that go (``core/rows.py``), are numpy's ``concatenate`` and ``delete``: every type
    the rows hold, 1 to 3 dimensions, a strided array among them."""
    from gavelsched.core import rows

    rng = np.random.default_rng(seed)
    arrays = [rng.random((c, n)), rng.random((c, n, 2)), rng.integers(0, 9, c),
              rng.random(c) < 0.5, rng.random((c, n)) < 0.5, rng.random((c, 2 * n))[:, ::2]]
    gone = np.flatnonzero(rng.random(c) < 0.4).tolist()
    values = [rng.random(k * n).tolist(), None, rng.integers(-9, 9, k).tolist(),
              (rng.random(k) < 0.5).tolist(), (rng.random(k * n) < 0.5).tolist(), None]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rows, "compiled_steps", None)
        want = (rows._grown(arrays, k) + rows._grown(arrays, k, values),
                rows._without(arrays, gone))
    got = rows._grown(arrays, k) + rows._grown(arrays, k, values), rows._without(arrays, gone)
    for x, y in zip(got[0] + got[1], want[0] + want[1]):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        assert x.flags.c_contiguous and x.flags.writeable
    with pytest.raises(ValueError, match="takes 1 new entries as a list"):
        compiled_steps.grown([np.zeros(c)], 1, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="lists of values"):
        compiled_steps.grown(arrays, 1, [None])
    with pytest.raises(IndexError, match="without"):
        compiled_steps.without(arrays, [c])
    with pytest.raises(ValueError, match="sorted and distinct"):
        compiled_steps.without(arrays, [1, 0])
