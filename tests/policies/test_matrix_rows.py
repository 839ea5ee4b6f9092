"""``policies.matrix_rows.MatrixRows``: allocation rows held as one matrix read as the
read-only mapping of read-only rows that ``Allocation.allocation`` is."""

from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import Allocation, Job, Problem, get_policy
from policies.matrix_rows import MatrixRows

TYPES = ("v100", "p100", "k80")


@given(st.integers(1, 12), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_the_rows_read_as_the_dict_they_stand_for(jobs, classes, seed):
    """Every key reads its class's row over the types, in the keys' order, the keys of one
    class share one read-only row, and the mapping equals, pickles and prints as the dict."""
    rng = np.random.default_rng(seed)
    X = rng.random((classes, len(TYPES)))
    row_of = rng.integers(0, classes, size=jobs)
    keys = tuple(f"j{i}" for i in range(jobs))
    rows = MatrixRows(keys, TYPES, X, row_of)
    expected = {k: dict(zip(TYPES, X[r].tolist())) for k, r in zip(keys, row_of.tolist())}
    assert list(rows) == list(keys) and len(rows) == jobs and rows.keys() == expected.keys()
    assert rows == expected and {k: dict(v) for k, v in rows.items()} == expected
    assert "j0" in rows and "nobody" not in rows and rows.get("nobody") is None
    first = {}
    for key, r in zip(keys, row_of.tolist()):
        assert rows[key] is first.setdefault(r, rows[key])      # a class's one row
        with pytest.raises(TypeError):
            rows[key]["v100"] = 1.0                             # read-only rows
    with pytest.raises(TypeError):
        rows["j0"] = {}                                         # a read-only mapping
    assert pickle.loads(pickle.dumps(rows)) == expected
    assert eval(repr(rows)) == expected
    got_keys, matrix = rows.matrix()
    assert got_keys == keys and not matrix.flags.writeable
    assert matrix.tobytes() == X[row_of].tobytes()


def test_the_matrix_is_its_own():
    """A later write into the caller's array changes nothing; nor can X be written."""
    X = np.ones((2, len(TYPES)))
    rows = MatrixRows(("a", "b"), TYPES, X)
    X[:] = 7.0
    assert rows["a"]["v100"] == 1.0 and rows.matrix()[1].max() == 1.0
    with pytest.raises(ValueError):
        rows.matrix()[1][0, 0] = 2.0


@pytest.mark.parametrize("keys, X, row_of", [
    (("a",), np.ones((1, 2)), None),                 # X over two types, three named
    (("a", "b"), np.ones((1, 3)), None),             # a row short
    (("a", "a"), np.ones((2, 3)), None),             # a key twice
    (("a", "b", "c"), np.ones((2, 3)), [0, 1]),      # a class for two keys of three
])
def test_a_matrix_that_does_not_fit_its_keys_is_refused(keys, X, row_of):
    with pytest.raises(ValueError, match="MatrixRows"):
        MatrixRows(keys, TYPES, X, row_of)


def test_an_allocation_of_a_max_min_solve_carries_its_matrix():
    """Max-min fairness over single-job columns hands its rows as one matrix; identical jobs
    share a row; a ``replace`` of the rows, or other types, has no matrix."""
    jobs = tuple(Job(id=str(i), throughputs={"v100": 4.0, "p100": 2.0, "k80": 1.0})
                 for i in range(4))
    problem = Problem(cluster={"v100": 1, "p100": 1, "k80": 2}, jobs=jobs)
    allocation = get_policy("max_min_fairness_perf").solve(problem)
    assert type(allocation.allocation) is MatrixRows
    assert allocation.allocation["0"] is allocation.allocation["3"]   # one class
    keys, X = allocation.matrix(TYPES)
    assert keys == ("0", "1", "2", "3") and X.shape == (4, 3)
    assert allocation.matrix(TYPES[::-1]) is None
    assert replace(allocation, allocation={}).matrix(TYPES) is None
    again = Allocation.from_dict(allocation.to_dict())
    assert again.allocation == allocation.allocation and again.matrix(TYPES) is None
