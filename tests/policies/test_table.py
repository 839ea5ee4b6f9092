"""``JobTable``: a Problem's jobs as arrays, the same to the column model whether made from
records or handed over as arrays (the scheduler core's re-solves)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import Job, Problem, get_policy
from policies.columns import build_columns
from policies.table import JobTable, value_rows

TYPES = ("v100", "p100", "k80")
JOBS = (Job("a", {"v100": 10.0, "p100": 4.0, "k80": 1.0}, 1, 1.0, 500.0, 20.0),
        Job("b", {"v100": 5.0, "k80": 2.0}, 2, 2.0, 800.0, 10.0, slo_s=900.0),
        Job("c", {"v100": 10.0, "p100": 4.0, "k80": 1.0}, 1, 1.0, 70.0, 5.0,
            isolated_elapsed_s=3.0))
CLUSTER = {"v100": 2, "p100": 2, "k80": 4}


def as_arrays(jobs=JOBS) -> JobTable:
    """The table a caller holding arrays hands over: records made only when read."""
    made = JobTable.of(jobs, TYPES)
    calls = []

    def records():
        calls.append(1)
        return jobs

    table = JobTable(made.ids, TYPES, made.T.copy(), made.numbers.copy(), records)
    table.calls = calls
    return table


def test_table_of_records_reads_numbers_as_the_column_model_does():
    table = JobTable.of(JOBS, TYPES)
    assert table.ids == ("a", "b", "c")
    assert table.T.tolist() == [[10.0, 4.0, 1.0], [5.0, 0.0, 2.0], [10.0, 4.0, 1.0]]
    # scale factor, weight, steps, elapsed, isolated (or elapsed), SLO (or 0)
    assert table.numbers[1].tolist() == [2.0, 2.0, 800.0, 10.0, 10.0, 900.0]
    assert table.numbers[2].tolist() == [1.0, 1.0, 70.0, 5.0, 3.0, 0.0]
    assert not table.T.flags.writeable and not table.numbers.flags.writeable


def test_records_are_made_once_and_only_when_read():
    table = as_arrays()
    problem = Problem(cluster=CLUSTER, jobs=table)
    assert problem.jobs is table and problem.table is table and len(problem.jobs) == 3
    build_columns(problem, merge=True)
    assert table.calls == []
    assert problem.jobs[1] == JOBS[1] and tuple(problem.jobs) == JOBS
    assert table.calls == [1]
    assert problem.jobs == JOBS


def test_a_table_over_other_types_is_read_from_its_records():
    table = as_arrays()
    problem = Problem(cluster={"k80": 4, "v100": 2}, jobs=table)
    assert problem.table.types == ("k80", "v100")
    assert problem.table.T.tolist() == [[1.0, 10.0], [2.0, 5.0], [1.0, 10.0]]


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "max_min_fairness",
                                    "finish_time_fairness_perf", "fifo_perf",
                                    "max_sum_throughput_perf"])
def test_policies_solve_a_table_as_its_records(policy):
    given = get_policy(policy).solve(Problem(cluster=CLUSTER, jobs=as_arrays()))
    records = get_policy(policy).solve(Problem(cluster=CLUSTER, jobs=JOBS))
    assert given.allocation == records.allocation


def test_columns_of_a_table_are_those_of_its_records():
    a = build_columns(Problem(cluster=CLUSTER, jobs=as_arrays()), merge=True)
    b = build_columns(Problem(cluster=CLUSTER, jobs=JOBS), merge=True)
    assert a.job_ids == b.job_ids and a.classes == b.classes == (("a", "c"), ("b",))
    np.testing.assert_array_equal(a.T, b.T)
    assert (a.throughput != b.throughput).nnz == 0


def test_a_problem_with_a_table_pickles_with_its_records():
    given = Problem(cluster=CLUSTER, jobs=as_arrays())
    assert given.table is given.jobs
    problem = pickle.loads(pickle.dumps(given))
    assert problem.jobs == JOBS and problem.table.ids == ("a", "b", "c")
    np.testing.assert_array_equal(problem.table.numbers, given.table.numbers)


def test_configured_is_told_or_read_from_the_records():
    from policies.jobs import Configuration

    assert JobTable.of(JOBS, TYPES).configured is False
    split = Configuration({"v100": 1, "k80": 1}, 3.0)
    mixed = (JOBS[0], Job("d", {"v100": 1.0}, configurations=(split,)))
    assert JobTable.of(mixed, TYPES).configured is True
    table = as_arrays()
    told = JobTable(table.ids, TYPES, table.T, table.numbers, lambda: JOBS, configured=True)
    assert told.configured is True and "records" not in told.__dict__    # none made
    assert as_arrays().configured is False


def test_row_classes_number_equal_rows_by_their_first_row():
    from policies.columns import row_classes

    first, inverse = row_classes(np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [-0.0, 0.0]])
                                 + 0.0)
    assert first.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2]
    # rows of no column (jobs that have none) are all alike; no rows, no classes
    assert [a.tolist() for a in row_classes(np.zeros((3, 0)))] == [[0], [0, 0, 0]]
    assert [a.tolist() for a in row_classes(np.zeros((0, 2)))] == [[], []]


def _classes_one_by_one(signature: np.ndarray) -> tuple[list[int], list[int]]:
    """``row_classes`` row by row: a row's bytes name its class, numbered as first seen."""
    number: dict[bytes, int] = {}
    inverse = [number.setdefault(row.tobytes(), len(number)) for row in signature]
    return [inverse.index(k) for k in range(len(number))], inverse


@pytest.mark.parametrize("path", ["compiled", "numpy"])
@settings(max_examples=80, deadline=None)
@given(st.integers(0, 40), st.integers(1, 4), st.integers(1, 6), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_row_classes_are_those_found_row_by_row(path, m, width, kinds, strided, seed):
    """By the compiled pass (``policies/_columns.pyx``, when built) and by numpy's dicts, on
    rows with zeros of both signs, infinities and NaNs, in C order or strided."""
    from policies import columns

    if path == "compiled" and columns.compiled_columns is None:
        pytest.skip("the policies' loops were not compiled")
    rng = np.random.default_rng(seed)
    values = np.array([0.0, -0.0, 1.0, 2.5, np.inf, np.nan])
    signature = values[rng.integers(0, values.size, (kinds, width))][
        rng.integers(0, kinds, m)]
    if strided:
        signature = np.repeat(signature, 2, axis=1)[:, ::2]
    with pytest.MonkeyPatch.context() as patch:
        if path == "numpy":
            patch.setattr(columns, "compiled_columns", None)
        first, inverse = columns.row_classes(signature)
    assert first.dtype == inverse.dtype == np.int64
    assert (first.tolist(), inverse.tolist()) == _classes_one_by_one(signature)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3), st.lists(st.dictionaries(st.sampled_from("abcd"),
                                                   st.floats(allow_nan=False)), max_size=6),
       st.booleans())
def test_value_rows_read_every_key_at_once_as_key_by_key(n, rows, complete):
    keys = tuple("abc"[:n])
    if complete:       # every row names every key: the lookup of all keys at once
        rows = [{**dict.fromkeys(keys, 1.5), **row} for row in rows]
    got = value_rows(rows, keys)
    want = np.array([[row.get(k, 0.0) for k in keys] for row in rows],
                    dtype=float).reshape(len(rows), n)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
