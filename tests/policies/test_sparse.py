"""policies/sparse.py builds, with numpy, the very matrices scipy's conversions build (the
simulator's results must not move by a bit: BENCHMARKS.md, Simulator speed)."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.sparse import (Compressed, Coo, as_scipy, compressed, compressed_alike,
                             compressed_alike_arrays, compressed_arrays, coo_arrays, matvec,
                             row_entries, stacked)


def _same(a, b) -> None:
    assert type(a) is type(b)
    assert a.shape == b.shape
    for name in ("data", "indices", "indptr"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert x.tobytes() == y.tobytes(), name


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(0, 40), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_compressed_is_scipys_conversion_bit_for_bit(m, n, k, repeat, seed):
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(0, m, k), rng.integers(0, n, k)
    if not repeat:   # distinct coordinates (the column model's), else scipy sums them
        _, first = np.unique(rows * n + cols, return_index=True)
        rows, cols = rows[first], cols[first]
        rows, cols = rows[rng.permutation(rows.size)], cols[rng.permutation(cols.size)]
    data = rng.normal(size=rows.size)
    data[rng.random(rows.size) < 0.2] = 0.0     # explicit zeros are kept, as scipy keeps them
    for fmt, build in (("csr", sp.csr_matrix), ("csc", sp.csc_matrix)):
        want = build((data, (rows, cols)), shape=(m, n))
        _same(compressed(rows, cols, data, (m, n), fmt), want)
        other = rng.normal(size=rows.size)      # a second matrix of the same sparsity
        alike = compressed_alike(rows, cols, [data, other], (m, n), fmt)
        _same(alike[0], want)
        _same(alike[1], build((other, (rows, cols)), shape=(m, n)))
        assert alike[0].indices is not alike[1].indices
        kept = compressed_alike_arrays(rows, cols, [data, other], (m, n), fmt)  # the columns'
        _same(as_scipy(kept[0]), want)
        assert kept[1].format == fmt and kept[1].nnz == alike[1].nnz
        arrays = compressed_arrays(rows, cols, data, (m, n), fmt)  # a solver's input
        assert arrays.has_canonical_format and arrays.shape == (m, n)
        _same(build(arrays[:3], shape=(m, n)), want)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_coo_arrays_reads_every_format(fmt):
    dense = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
    A = sp.coo_matrix(dense).asformat(fmt)
    rows, cols, data = coo_arrays(A)
    back = np.zeros_like(dense)
    back[rows, cols] = data
    assert (back == dense).all()


def test_stacked_is_vstack():
    rng = np.random.default_rng(1)
    blocks = [sp.random(3, 5, density=0.4, format="csr", random_state=rng),
              sp.random(2, 5, density=0.5, format="csc", random_state=rng),
              Coo(np.array([0]), np.array([4]), np.array([7.0]), (1, 5))]
    got = stacked(blocks)
    assert got.shape == (6, 5)
    want = sp.vstack([b if not isinstance(b, Coo) else b.tocsr() for b in blocks],
                     format="csr")
    _same(got.tocsr(), want)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(1, 90), st.floats(0.05, 0.9),
       st.integers(0, 2**31 - 1))
def test_matvec_is_scipys_product_bit_for_bit(m, n, density, seed):
    """The column model multiplies by its arrays (``Columns.repaired``): the floats must be
    scipy's, summed in the same order (magnitudes far apart, so any other order shows)."""
    rng = np.random.default_rng(seed)
    A = sp.random(m, n, density=density, format="csr", random_state=rng)
    A.data = rng.uniform(0, 10, A.nnz) * rng.choice([1.0, 1e-8, 1e5], A.nnz)
    x = rng.uniform(0, 1, n) * rng.choice([1.0, 1e-9], n)
    rows, cols, data = coo_arrays(A)
    arrays = compressed_alike_arrays(rows, cols, [data], (m, n))[0]
    assert (A @ x).tobytes() == matvec(arrays, x).tobytes()


def test_row_entries_is_the_rows_of_scipys_selection():
    rng = np.random.default_rng(3)
    A = sp.random(7, 5, density=0.5, format="csr", random_state=rng)
    arrays = Compressed(A.data, A.indices, A.indptr, A.shape, "csr")
    rows = np.array([5, 0, 3])
    job, col, data = row_entries(arrays, rows)
    picked = np.zeros((3, 5))
    picked[job, col] = data
    assert (picked == A[rows].toarray()).all() and len(data) == A[rows].nnz
