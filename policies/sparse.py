"""Small sparse matrices built with numpy (the column model's ``member``, ``throughput`` and
``usage``, and each LP handed to a solver).

A simulation solves thousands of LPs of a few dozen rows, and scipy.sparse's conversions
(COO -> CSR/CSC, ``vstack``, ``tocoo``) cost more than the solver on matrices that small
(BENCHMARKS.md, Simulator speed). ``compressed`` makes the matrix scipy's own conversion
would make, its canonical form (each row's or column's indices sorted, the smallest index
dtype), with one sort; ``coo_arrays`` reads any sparse matrix as coordinate arrays without
building a scipy object."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._lazy import sp

class Coo(NamedTuple):
    """A sparse matrix as coordinate arrays, without a scipy object behind it (cheap to
    build and to hand on); ``coo_arrays`` reads it like any sparse matrix."""

    row: np.ndarray
    col: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def tocsr(self) -> sp.csr_matrix:
        return compressed(self.row, self.col, self.data, self.shape, "csr")

    def tocsc(self) -> sp.csc_matrix:
        return compressed(self.row, self.col, self.data, self.shape, "csc")


def stacked(blocks) -> Coo:
    """The matrices ``blocks`` (any sparse, the same number of columns) one above the
    other, as ``Coo`` (``sp.vstack`` without its conversions)."""
    rows, cols, data, at = [], [], [], 0
    for block in blocks:
        r, c, d = coo_arrays(block)
        rows.append(r + at)
        cols.append(c)
        data.append(d)
        at += block.shape[0]
    return Coo(np.concatenate(rows), np.concatenate(cols), np.concatenate(data),
               (at, blocks[0].shape[1]))


def coo_arrays(A) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, values) of the stored entries of ``A`` (any scipy sparse matrix, or
    a ``Coo``)."""
    if isinstance(A, Coo):
        return A.row, A.col, A.data
    fmt = A.format
    if fmt == "csr":
        return np.repeat(np.arange(A.shape[0]), np.diff(A.indptr)), A.indices, A.data
    if fmt == "csc":
        return A.indices, np.repeat(np.arange(A.shape[1]), np.diff(A.indptr)), A.data
    A = A.tocoo()
    return A.row, A.col, A.data


class Compressed(NamedTuple):
    """A canonical CSR or CSC matrix as its three arrays, without a scipy object: what a
    solver reads of one (Clarabel reads these attributes and nothing else), and what the
    column model keeps (``coo_arrays`` reads it, ``matvec`` multiplies, ``as_scipy``
    makes the scipy matrix). ``lp._clarabel`` hands Clarabel one whose three are lists."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]
    format: str
    has_canonical_format = True

    @property
    def nnz(self) -> int:
        return len(self.data)

    def lists(self) -> Compressed:
        """The same matrix with its three arrays as lists: Clarabel reads its inputs
        element by element, and a list's elements are Python floats already (an array
        makes a scalar object for each)."""
        return self._replace(data=self.data.tolist(), indices=self.indices.tolist(),
                             indptr=self.indptr.tolist())

    def tocsr(self) -> sp.csr_matrix:
        return as_scipy(self).tocsr()

    def tocsc(self) -> sp.csc_matrix:
        return as_scipy(self).tocsc()


def as_scipy(A: Compressed) -> sp.csr_matrix | sp.csc_matrix:
    """The scipy matrix of ``A``'s arrays (shared, not copied)."""
    build = sp.csr_matrix if A.format == "csr" else sp.csc_matrix
    return build((A.data, A.indices, A.indptr), shape=A.shape)


def matvec(A: Compressed, x: np.ndarray) -> np.ndarray:
    """``A @ x`` for a CSR ``A``, each row's products summed in stored order from 0, as
    scipy's own product sums them: the same floats to the bit (``tests/policies/
    test_sparse.py``), without a scipy object."""
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return np.bincount(rows, weights=A.data * x[A.indices], minlength=A.shape[0])


def row_entries(A: Compressed, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A[rows]`` as coordinate arrays, each entry's row numbered by its row's place in
    ``rows`` (distinct rows of a CSR ``A``): the rows of a few jobs, without a scipy object."""
    place = np.full(A.shape[0], -1)
    place[rows] = np.arange(len(rows))
    row, col, data = coo_arrays(A)
    kept = place[row] >= 0
    return place[row[kept]], col[kept], data[kept]


def compressed(rows: np.ndarray, cols: np.ndarray, data: np.ndarray, shape: tuple[int, int],
               fmt: str = "csr"):
    """``sp.csr_matrix((data, (rows, cols)), shape)`` (``fmt="csc"``: ``csc_matrix``), the
    same matrix to the bit: canonical, explicit zeros kept. Coordinates that repeat, which
    scipy sums, go through scipy itself."""
    return compressed_alike(rows, cols, [data], shape, fmt)[0]


def compressed_alike(rows: np.ndarray, cols: np.ndarray, datas, shape: tuple[int, int],
                     fmt: str = "csr") -> list:
    """``compressed`` for each array of ``datas`` at the same coordinates (matrices that
    share their sparsity, as the column model's ``member`` and ``throughput``): one sort,
    each matrix with index arrays of its own."""
    return [as_scipy(A) for A in compressed_alike_arrays(rows, cols, datas, shape, fmt)]


def compressed_alike_arrays(rows: np.ndarray, cols: np.ndarray, datas, shape: tuple[int, int],
                            fmt: str = "csr") -> list[Compressed]:
    """The arrays of ``compressed_alike``'s matrices, without scipy objects (but where
    coordinates repeat: scipy sums them)."""
    rows, cols = np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)
    datas = [np.asarray(data, dtype=float) for data in datas]
    canonical = _canonical(rows, cols, shape, fmt)
    if canonical is None:
        build = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
        return [Compressed(A.data, A.indices, A.indptr, shape, fmt)
                for A in (build((data, (rows, cols)), shape=shape) for data in datas)]
    order, indices, indptr = canonical
    return [Compressed(data[order], indices if k == 0 else indices.copy(),
                       indptr if k == 0 else indptr.copy(), shape, fmt)
            for k, data in enumerate(datas)]


def compressed_arrays(rows: np.ndarray, cols: np.ndarray, data: np.ndarray,
                      shape: tuple[int, int], fmt: str = "csr") -> Compressed:
    """The arrays of ``compressed``'s matrix, without building it (a solver's input; where
    coordinates repeat, scipy sums them)."""
    return compressed_alike_arrays(rows, cols, [data], shape, fmt)[0]


def from_blocks(blocks, shape: tuple[int, int], fmt: str = "csc") -> Compressed:
    """``compressed_arrays`` of the non-zero entries of ``blocks``, each a (rows, columns,
    values) triple of arrays: a solver's matrix written block by block, without the
    explicit zeros (cvxpy's canonicalisation drops them too)."""
    rows, cols, data = (np.concatenate(part) for part in zip(*blocks))
    if not data.all():
        kept = data != 0
        rows, cols, data = rows[kept], cols[kept], data[kept]
    return compressed_arrays(rows, cols, data, shape, fmt)


def _canonical(rows, cols, shape: tuple[int, int], fmt: str):
    """(the stored order of the entries, indices, indptr) of the canonical CSR or CSC
    matrix with entries at (``rows``, ``cols``); None when coordinates repeat."""
    rows, cols = np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)
    major, minor = (rows, cols) if fmt == "csr" else (cols, rows)
    order = np.lexsort((minor, major))
    major, minor = major[order], minor[order]
    if major.size > 1 and ((major[1:] == major[:-1]) & (minor[1:] == minor[:-1])).any():
        return None
    size = shape[0] if fmt == "csr" else shape[1]
    index = np.int32 if max(shape[0], shape[1], major.size) < 2 ** 31 - 1 else np.int64
    indptr = np.zeros(size + 1, dtype=index)
    np.cumsum(np.bincount(major, minlength=size), out=indptr[1:])
    return order, minor.astype(index), indptr
