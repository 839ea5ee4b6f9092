"""Steps into the rows (``gavelsched/core/progress.py``): the jobs left with no steps come
back in row order, whatever the order of the tasks; none: an empty tuple."""

from __future__ import annotations

import numpy as np

from gavelsched.core.progress import credit_keys, credit_rows
from gavelsched.core.rows import Rows


def _rows() -> Rows:
    rows = Rows(2)
    rows.add_many([(str(i), (str(i),), 1, np.ones(2)) for i in range(4)], 0.0,
                  left=[100.0, 50.0, 80.0, 10.0])
    rows.add_many([("0+2", ("0", "2"), 1, np.ones((2, 2)))], 0.0)
    return rows


def test_finished_jobs_come_back_in_row_order():
    rows = _rows()
    done = credit_rows(rows, np.array([3, 4, 1]), np.array([[10, 0], [100, 30], [5, 0]]))
    assert done == ("0", "3")
    assert rows.left.tolist() == [0.0, 45.0, 50.0, 0.0, 0.0]


def test_no_finished_job_is_an_empty_tuple():
    rows = _rows()
    assert credit_keys(rows, ["1", "0+2"], [[5, 0], [1, 1]]) == ()
    assert rows.left.tolist() == [99.0, 45.0, 79.0, 10.0, 0.0]


def test_integer_steps_are_taken_as_their_floats():
    steps = np.array([[3, 0], [2**53 + 1, 7], [1, 0]])
    as_ints, as_floats = _rows(), _rows()
    as_ints.left[:] = as_floats.left[:] = [1e17, 50.0, 80.0, 10.0, 0.0]
    where = np.array([1, 4, 3])
    assert credit_rows(as_ints, where, steps) == credit_rows(as_floats, where,
                                                             steps.astype(float))
    assert as_ints.left.tobytes() == as_floats.left.tobytes()
