# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The max-min LP of single-job columns as the lists Clarabel reads (built with the
package when a C compiler is present; ``compiled.py`` says whether it was).

``max_min_lists`` writes ``fairness.max_min_by_clarabel``'s matrix: each column's -U,
member and usage entries, its bound row, then the level's column (thesis §5.4.1: maximise
t subject to U z >= t and (5.1)-(5.3)). In numpy that is some twenty calls and three
``tolist`` on arrays of a few hundred entries, a re-solve's largest set-up cost beside the
column model (issue #30); here one pass. It gives exactly the numpy path's lists, which
``tests/policies/test_fairness_lp.py`` checks on random problems. (The column model's own
loops are ``_columns.pyx``'s.)
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc


def max_min_lists(const int64_t[:] member_indices, const int64_t[:] member_indptr,
                  const double[:] rates, const int64_t[:] usage_indices,
                  const double[:] usage_data, const int64_t[:] col_type,
                  const unsigned char[:] runnable, const double[:] coef, Py_ssize_t n):
    """(data, indices, k): the matrix's entries and row indices, column by column, and the
    number of -U rows (the runnable job rows). ``member_*``: the member matrix's CSR index
    arrays (one entry per column), ``rates`` the throughput matrix's entries (its
    sparsity), ``usage_*`` the usage matrix's (one entry per column), ``coef`` the
    fairness coefficient of each runnable row (``fairness._utility_coefficients``), ``n``
    the number of types."""
    cdef Py_ssize_t m = member_indptr.shape[0] - 1, c = member_indices.shape[0]
    cdef Py_ssize_t i, p, j, col, k = 0, rows
    if (rates.shape[0] != c or usage_indices.shape[0] != c or usage_data.shape[0] != c
            or col_type.shape[0] != c or runnable.shape[0] != m or m < 0):
        raise ValueError(f"max_min_lists: {c} columns, {rates.shape[0]} rates, "
                         f"{usage_indices.shape[0]} usage entries, {col_type.shape[0]} "
                         f"column types, {runnable.shape[0]} runnable flags for {m} rows")
    cdef int64_t* col_row = <int64_t*> malloc((2 * c + m + 1) * sizeof(int64_t))
    cdef double* values = <double*> malloc((2 * c + 1) * sizeof(double))
    if col_row == NULL or values == NULL:
        free(col_row)
        free(values)
        raise MemoryError()
    cdef int64_t* u_row = col_row + c       # each job row's -U row (-1: not runnable)
    cdef double* rate = values              # each column's steps/s, and its usage
    cdef double* used = values + c
    try:
        for i in range(m):
            if runnable[i]:
                u_row[i] = k
                k += 1
            else:
                u_row[i] = -1
        if coef.shape[0] != k:
            raise ValueError(f"max_min_lists: {coef.shape[0]} coefficients for {k} runnable rows")
        for i in range(m):
            for p in range(member_indptr[i], member_indptr[i + 1]):
                col = member_indices[p]
                if not 0 <= col < c or u_row[i] < 0:
                    raise ValueError(f"max_min_lists: column {col} of row {i} out of range")
                col_row[col] = i
                rate[col] = rates[p]
        for p in range(c):
            col = usage_indices[p]
            if not 0 <= col < c:
                raise ValueError(f"max_min_lists: usage column {col} out of range")
            used[col] = usage_data[p]
        rows = k + m + n
        data = [None] * (4 * c + k)
        indices = [None] * (4 * c + k)
        for j in range(c):
            i = col_row[j]
            data[4 * j] = (rate[j] * coef[u_row[i]]) * -1.0   # -U: the rows t - U @ z <= 0
            data[4 * j + 1] = 1.0
            data[4 * j + 2] = used[j]
            data[4 * j + 3] = -1.0                            # the bound row -z <= 0
            indices[4 * j] = u_row[i]
            indices[4 * j + 1] = k + i
            indices[4 * j + 2] = k + m + col_type[j]
            indices[4 * j + 3] = rows + j
        for p in range(k):                                    # the level's column
            data[4 * c + p] = 1.0
            indices[4 * c + p] = p
    finally:
        free(col_row)
        free(values)
    return data, indices, k
