"""The column model's arrays of single-job columns, written without a sort
(``columns._single_arrays``), are the arrays the sorted path gives (``sparse.
compressed_alike_arrays``), to the bit and with the same index types: the solver sees the
same LP, so a simulation's results cannot move (issue #30)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.columns import _single_arrays
from policies.sparse import compressed_alike_arrays


def same(a, b) -> None:
    assert a.shape == b.shape and a.format == b.format
    for name in ("data", "indices", "indptr"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name


@settings(max_examples=200, deadline=None)
@given(m=st.integers(0, 9), n=st.integers(1, 5), density=st.floats(0.0, 1.0),
       seed=st.integers(0, 2 ** 16))
def test_single_columns_are_written_as_the_sort_orders_them(m, n, density, seed):
    rng = np.random.default_rng(seed)
    rows, cols = np.nonzero(rng.random((m, n)) < density)   # row order, as build_columns
    c = rows.size
    rates, used = rng.normal(size=c), rng.integers(1, 4, size=c).astype(float)
    member, throughput, usage = _single_arrays(rows, cols, rates.copy(), used, (m, n))
    ref_member, ref_throughput = compressed_alike_arrays(rows, np.arange(c),
                                                         [np.ones(c), rates], (m, c))
    ref_usage, = compressed_alike_arrays(cols, np.arange(c), [used], (n, c))
    same(member, ref_member)
    same(throughput, ref_throughput)
    same(usage, ref_usage)
    # the two matrices over job rows share no array: a caller may change one alone
    assert not np.shares_memory(member.indices, throughput.indices)
    assert not np.shares_memory(member.indptr, throughput.indptr)
