"""The column model's compiled loops (``policies/_columns.pyx``) build the model, repair an
allocation and write its rows exactly as the numpy path does: the same arrays to the bit,
with the same types, so a simulation's results cannot move (issue #30)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Job, Problem, columns
from policies.columns import build_columns
from policies.compiled import compiled_columns
from policies.errors import ProblemError

pytestmark = pytest.mark.skipif(compiled_columns is None, reason="the policy loops were not "
                                "compiled (no C compiler at install, or GAVELSCHED_PURE_PYTHON=1)")

TYPES = ("v100", "p100", "k80")
SETTINGS = {"max_examples": 150, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow]}


@st.composite
def crowds(draw) -> Problem:
    """Problems of a few kinds of job, each kind several times (so that merging finds
    classes), scale factors up to 8 on clusters of 1-6 workers a type (so that some types
    are too small for some jobs), rates of 0 and -0.0 among them."""
    cluster = {t: draw(st.integers(1, 6)) for t in TYPES}
    rate = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.5, 7.25])
    kinds = [({t: draw(rate) for t in TYPES}, draw(st.sampled_from([1, 2, 4, 8])),
              draw(st.sampled_from([1.0, 2.0]))) for _ in range(draw(st.integers(1, 4)))]
    jobs = []
    for i in range(draw(st.integers(1, 12))):
        thr, sf, weight = kinds[draw(st.integers(0, len(kinds) - 1))]
        if all(v == 0 for v in thr.values()):
            thr = {**thr, "v100": 1.0}
        jobs.append(Job(id=f"j{i}", throughputs=thr, scale_factor=sf, weight=weight,
                        remaining_steps=draw(st.sampled_from([10.0, 500.0])),
                        elapsed_s=draw(st.floats(0.0, 1e4))))
    return Problem(cluster=cluster, jobs=tuple(jobs))


def numpy_path(fn, *args, **kwargs):
    """``fn`` with the compiled column loops switched off."""
    compiled, columns.compiled_columns = columns.compiled_columns, None
    try:
        return fn(*args, **kwargs)
    finally:
        columns.compiled_columns = compiled


def same(a, b, name: str) -> None:
    if a is None or b is None:
        assert a is None and b is None, name
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name


@settings(**SETTINGS)
@given(problem=crowds(), merge=st.booleans())
def test_the_compiled_model_is_the_numpy_model(problem, merge):
    got = build_columns(problem, merge=merge)
    want = numpy_path(build_columns, problem, merge=merge)
    for name in ("job_ids", "types", "keys", "config_names"):
        assert getattr(got, name) == getattr(want, name), name
    for name in ("T", "scale_factor", "weight", "remaining", "elapsed", "isolated_elapsed",
                 "workers", "prices", "col_type", "unusable"):
        same(getattr(got, name), getattr(want, name), name)
    for matrix in ("member_arrays", "throughput_arrays", "usage_arrays"):
        x, y = getattr(got, matrix), getattr(want, matrix)
        assert x.shape == y.shape and x.format == y.format, matrix
        for part in ("data", "indices", "indptr"):
            same(getattr(x, part), getattr(y, part), f"{matrix}.{part}")
    assert (got.merged is None) == (want.merged is None)
    if got.merged is not None:
        assert got.merged[0] == want.merged[0]
        same(got.merged[1], want.merged[1], "merged")


@settings(**SETTINGS)
@given(problem=crowds(), merge=st.booleans(), fit_types=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_repaired_rows_are_the_numpy_rows(problem, merge, fit_types, seed):
    """An allocation with noise below zero, entries above 1 and types over their workers
    (what solver tolerance leaves) comes out repaired, and as rows, the same."""
    cols = build_columns(problem, merge=merge)
    z = np.random.default_rng(seed).normal(0.4, 0.5, cols.num_columns)
    z[::3] = 1e-9
    same(cols.repaired(z, fit_types=fit_types),
         numpy_path(cols.repaired, z, fit_types=fit_types), "z")
    got = cols.to_rows(z, fit_types=fit_types)
    want = numpy_path(cols.to_rows, z, fit_types=fit_types)
    assert list(got) == list(want)
    for key in want:
        assert list(got[key].items()) == list(want[key].items()), key
        same(list(got[key].values()), list(want[key].values()), key)   # (-0.0 too)


def test_a_non_finite_number_is_the_numpy_paths_error():
    """A NaN throughput leaves the compiled loop to the numpy path, which names the job."""
    job = Job(id="a", throughputs={"v100": float("nan"), "p100": 1.0, "k80": 1.0},
              scale_factor=1)
    with pytest.raises(ProblemError, match="job .a.*must be finite"):
        build_columns(Problem(cluster={t: 1 for t in TYPES}, jobs=(job,)))


def test_the_compiled_loops_refuse_arrays_that_do_not_fit():
    T, numbers = np.ones((2, 3)), np.ones((2, 6))
    with pytest.raises(ValueError, match="single_columns"):
        compiled_columns.single_columns(T, numbers, np.ones(2), ("a", "b"), True)
    with pytest.raises(ValueError, match="single_columns"):
        compiled_columns.single_columns(T, numbers, np.ones(3), ("a",), True)
    one, ptr = np.zeros(1, np.int64), np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="repaired_single"):   # 2 column types, 1 column
        compiled_columns.repaired_single(np.ones(1), one, ptr, np.ones(1), one, ptr,
                                         np.ones(1), np.zeros(2, np.int64), np.ones(1),
                                         1e-7, True)
    with pytest.raises(ValueError, match="usage column"):     # a usage column out of range
        compiled_columns.repaired_single(np.ones(1), one, ptr, np.ones(1),
                                         np.array([5], np.int64), ptr, np.ones(1), one,
                                         np.ones(1), 1e-7, True)
