"""The max-min LP written straight into CSC arrays (``max_min_csc``) is the LP of
``max_min_coo`` to the bit, and Clarabel's matrix built from it without a sort
(``lp._with_bound_rows``, ``lp._level_once``) is the one the sorted path builds: the
solver sees the same numbers, so a simulation's results cannot move (issue #30)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Job, Pair, Problem, get_policy
from policies.columns import build_columns
from policies import fairness, lp
from policies.fairness import max_min_by_clarabel, max_min_coo, max_min_csc, utility_arrays
from policies.lp import _with_bound_rows, maximise_level
from policies.sparse import as_scipy, compressed, coo_arrays

from .conftest import problems

SETTINGS = {"max_examples": 60, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def same_csc(a, b) -> None:
    """Equal canonical CSC arrays: the same entries in the same order, bit for bit."""
    assert a.shape == b.shape
    for name in ("indptr", "indices", "data"):
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        assert x.shape == y.shape and x.tobytes() == y.astype(x.dtype).tobytes(), name


@settings(**SETTINGS)
@given(data=st.data(), merge=st.booleans(), agnostic=st.booleans())
def test_written_lp_is_the_sorted_lp_bit_for_bit(data, merge, agnostic):
    problem = data.draw(problems(max_jobs=9))
    cols = build_columns(problem, merge=merge, agnostic=agnostic)
    written = max_min_csc(cols)
    assert written is not None          # no pairs, no configurations: always written
    A, b, e = written
    coo, b_ref, e_ref = max_min_coo(cols, utility_arrays(cols)[1])
    same_csc(A, compressed(*coo_arrays(coo), coo.shape, "csc"))
    assert b.tobytes() == b_ref.tobytes() and e.tobytes() == e_ref.tobytes()
    if cols.num_columns:   # and Clarabel, given either, answers the same to the bit
        written, sorted_ = (maximise_level(M, b, e, "CLARABEL", "test") for M in (A, coo))
        assert written.z.tobytes() == sorted_.z.tobytes() and written.t == sorted_.t


@settings(**SETTINGS)
@given(data=st.data(), merge=st.booleans(), agnostic=st.booleans(), numpy=st.booleans())
def test_clarabel_reads_the_written_lp_as_the_general_path_gives_it(data, merge, agnostic,
                                                                   numpy):
    """``max_min_by_clarabel`` hands Clarabel the lists ``maximise_level`` hands it for
    ``max_min_csc``'s LP (t's column and the bound rows written in place), by its compiled
    loop or by numpy (``numpy``), so the level and z are the same to the bit."""
    problem = data.draw(problems(max_jobs=9))
    cols = build_columns(problem, merge=merge, agnostic=agnostic)
    if not cols.num_columns:
        return
    if numpy or fairness.compiled is None:
        compiled, fairness.compiled = fairness.compiled, None
    else:
        compiled = fairness.compiled
    seen = []
    real = lp.clarabel_lists

    def recorded(*args, **kwargs):
        seen.append(args[:4])
        return real(*args, **kwargs)

    lp.clarabel_lists = fairness.clarabel_lists = recorded
    try:
        general = maximise_level(*max_min_csc(cols), "CLARABEL", "test")
        written = max_min_by_clarabel(cols, "test")
    finally:
        lp.clarabel_lists = fairness.clarabel_lists = real
        fairness.compiled = compiled
    (q1, A1, b1, r1), (q2, A2, b2, r2) = seen
    assert r1 == r2 and A1.shape == A2.shape
    for x, y in [(q1, q2), (b1, b2)] + [(getattr(A1, a), getattr(A2, a))
                                         for a in ("data", "indices", "indptr")]:
        assert type(x) is list and type(y) is list
        assert list(map(type, x)) == list(map(type, y))   # Python floats, or ints
        assert np.array(x).tobytes() == np.array(y).tobytes()   # to the bit (-0.0 too)
    assert written.z.tobytes() == general.z.tobytes() and written.t == general.t
    assert written.dual.tobytes() == general.dual.tobytes()


@pytest.mark.skipif(fairness.compiled is None, reason="the policy loops were not compiled "
                    "(no C compiler at install, or GAVELSCHED_PURE_PYTHON=1)")
def test_the_compiled_lists_refuse_arrays_that_do_not_fit():
    """Arrays of other lengths, or a column out of range, are a clear error, not a read
    past an array's end."""
    one = np.zeros(1, dtype=np.int64)
    ptr = np.array([0, 1], dtype=np.int64)
    flag, rate = np.ones(1, dtype=np.uint8), np.ones(1)
    lists = fairness.compiled.max_min_lists
    assert lists(one, ptr, rate, one, rate, one, flag, rate, 1) == (
        [-1.0, 1.0, 1.0, -1.0, 1.0], [0, 1, 2, 3, 0], 1)
    with pytest.raises(ValueError, match="2 rates"):
        lists(one, ptr, np.ones(2), one, rate, one, flag, rate, 1)
    with pytest.raises(ValueError, match="column 5 of row 0 out of range"):
        lists(one + 5, ptr, rate, one, rate, one, flag, rate, 1)
    with pytest.raises(ValueError, match="2 coefficients for 1 runnable rows"):
        lists(one, ptr, rate, one, rate, one, flag, np.ones(2), 1)


@settings(**SETTINGS)
@given(rows=st.integers(1, 8), cols=st.integers(1, 8), density=st.floats(0.0, 1.0),
       bounded=st.integers(0, 8), seed=st.integers(0, 2 ** 16))
def test_bound_rows_are_appended_as_a_sort_places_them(rows, cols, density, bounded, seed):
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((rows, cols)) < density, rng.normal(size=(rows, cols)), 0.0)
    k = min(bounded, cols)
    r, c = np.nonzero(dense)
    A = compressed(r, c, dense[r, c], (rows, cols), "csc")
    got = _with_bound_rows(A, k)
    full = np.vstack([dense, -np.eye(cols)[:k]])
    r, c = np.nonzero(full)
    same_csc(got, compressed(r, c, full[r, c], full.shape, "csc"))
    assert (as_scipy(got).toarray() == full).all()


@settings(**SETTINGS)
@given(data=st.data())
def test_pair_columns_take_the_sorted_path(data):
    """A model with pair columns (two jobs each) is not written: ``max_min_csc`` says so
    with None, and the packed policy solves it by the sorted path."""
    problem = data.draw(problems(pairs=True, max_jobs=6))
    cols = build_columns(problem, pairs=True)
    assert (max_min_csc(cols) is None) == (not cols.single.all())
    get_policy("max_min_fairness_packed").solve(problem)


def test_a_pair_that_beats_time_slicing_is_solved_by_the_sorted_path():
    """Two jobs at 0.8 of their speed each when together (1.6 > 1): a pair column, no
    written LP, and the packed policy gives the pair the GPU."""
    problem = Problem(cluster={"v100": 1},
                      jobs=[Job("a", {"v100": 10.0}), Job("b", {"v100": 10.0})],
                      pairs=[Pair(jobs=("a", "b"), throughputs={"v100": (8.0, 8.0)})])
    cols = build_columns(problem, pairs=True)
    assert not cols.single.all() and max_min_csc(cols) is None
    allocation = get_policy("max_min_fairness_packed").solve(problem).allocation
    assert allocation["a+b"]["v100"] > 0.99
