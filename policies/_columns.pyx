# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The column model's loops (``columns.py``), compiled (built with the package when a C
compiler is present; ``compiled.py`` says whether they were).

- ``single_columns`` builds the model of single-job columns (no pairs, no configurations,
  the heterogeneity-aware view: what max-min fairness and most policies solve) in one
  pass where numpy takes some forty calls on arrays of a few hundred entries, a re-solve's
  largest cost beside the solver (issue #30): the types too small for a job zeroed, the
  identical jobs merged, one column per (job, type) it runs on, and ``member``,
  ``throughput`` and ``usage`` as ``columns._single_arrays`` writes them.
- ``row_classes`` finds identical jobs (``columns.row_classes``) through a hash table of
  their rows' bytes.
- ``repaired_single`` is ``Columns.repaired`` of such a model, with the allocation rows
  it gives as one matrix (``Columns.to_rows``).

Each gives exactly the numpy path's arrays (``tests/policies/test_compiled_columns.py``).
"""

from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

import numpy as np


cdef inline uint64_t _fnv(const unsigned char* data, size_t n) noexcept nogil:
    """FNV-1a of ``n`` bytes."""
    cdef uint64_t h = 14695981039346656037ULL
    cdef size_t i
    for i in range(n):
        h = (h ^ data[i]) * 1099511628211ULL
    return h


cdef Py_ssize_t _classes(const unsigned char* rows, size_t width, Py_ssize_t m,
                         int64_t* first, int64_t* inverse) except -1:
    """Number the ``m`` rows of ``width`` bytes at ``rows`` by their class, rows equal
    byte for byte in one class, classes in order of their first row: ``first[k]`` the
    first row of class k, ``inverse[i]`` the class of row i. Returns the number of
    classes. One pass, through a hash table of the rows' bytes (open addressing)."""
    cdef size_t size = 1, slot
    cdef Py_ssize_t i, k = 0
    cdef int64_t c
    while size < 2 * <size_t> m:
        size *= 2
    cdef int64_t* table = <int64_t*> malloc(size * sizeof(int64_t))   # a class, or -1
    if table == NULL:
        raise MemoryError()
    for slot in range(size):
        table[slot] = -1
    for i in range(m):
        slot = _fnv(rows + i * width, width) & (size - 1)
        while True:
            c = table[slot]
            if c < 0:                   # a new class, first seen here
                table[slot] = k
                first[k] = i
                inverse[i] = k
                k += 1
                break
            if memcmp(rows + first[c] * width, rows + i * width, width) == 0:
                inverse[i] = c
                break
            slot = (slot + 1) & (size - 1)
    free(table)
    return k


def row_classes(const double[:, ::1] signature):
    """``columns.row_classes`` of a C-ordered float64 ``signature`` of at least one row and
    column: (first row of each class, class of each row) of the rows equal byte for byte,
    classes numbered in order of their first row."""
    cdef Py_ssize_t m = signature.shape[0]
    cdef size_t width = signature.shape[1] * sizeof(double)
    if m == 0 or width == 0:
        raise ValueError("row_classes: a signature of at least one row and one column")
    inverse = np.empty(m, dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    cdef int64_t[::1] inv = inverse, fst = first
    k = _classes(<const unsigned char*> &signature[0, 0], width, m, &fst[0], &inv[0])
    return first[:k].copy(), inverse


def single_columns(const double[:, :] T, const double[:, :] numbers,
                   const double[:] largest, tuple ids, bint merge):
    """``columns.build_columns`` of a problem without pairs or configurations, in the
    heterogeneity-aware view: its jobs' throughputs ``T`` (m, n), ``numbers`` (m, w: scale
    factor, weight, then the times), the largest scale factor each type hosts and the jobs'
    ``ids``; with ``merge``, identical jobs (equal rows of T, scale factor and weight) share
    a row. Returns (the rows' ids, each column's key, the class of each job or None, T and
    numbers of the rows, each column's type, its steps/s, the member and throughput index
    arrays (two of each), the usage matrix's data, indices and row pointers); None when a
    number is not finite or there is no job (the numpy path says which, or builds it)."""
    cdef Py_ssize_t m = T.shape[0], n = T.shape[1], w = numbers.shape[1]
    cdef Py_ssize_t i, j, k, r, p, c = 0, rows_kept
    if numbers.shape[0] != m or largest.shape[0] != n or len(ids) != m or w < 2:
        raise ValueError(f"single_columns: T {m} x {n}, numbers {numbers.shape[0]} x {w}, "
                         f"{largest.shape[0]} largest jobs and {len(ids)} ids")
    if m == 0 or n == 0 or m >= 2 ** 31 - 1 or m * n >= 2 ** 31 - 1:
        return None
    for i in range(m):
        for j in range(n):
            if not isfinite(T[i, j]):
                return None
        for j in range(w):
            if not isfinite(numbers[i, j]):
                return None
    cdef Py_ssize_t width = n + 2
    cdef double* sig = <double*> malloc(m * width * sizeof(double))
    cdef int64_t* first = <int64_t*> malloc(m * sizeof(int64_t))
    if sig == NULL or first == NULL:
        free(sig)
        free(first)
        raise MemoryError()
    inverse = np.empty(m, dtype=np.int64)
    cdef int64_t[::1] inv = inverse
    cdef double[:, ::1] Tk
    cdef double[:, ::1] Nk
    cdef double[::1] mult
    try:
        for i in range(m):              # T with the types too small for the job zeroed
            for j in range(n):
                sig[i * width + j] = 0.0 if numbers[i, 0] > largest[j] else T[i, j]
            sig[i * width + n] = numbers[i, 0]
            sig[i * width + n + 1] = numbers[i, 1]
        if merge:                       # the classes compare the values (-0.0 is 0.0)
            for p in range(m * width):
                sig[p] = sig[p] + 0.0
            rows_kept = _classes(<const unsigned char*> sig, width * sizeof(double), m,
                                 first, &inv[0])
        else:
            rows_kept = m
            for i in range(m):
                first[i] = i
        T_rows = np.empty((rows_kept, n))
        numbers_rows = np.empty((rows_kept, w))
        multiplicity = np.zeros(rows_kept)
        Tk, Nk, mult = T_rows, numbers_rows, multiplicity
        if merge:
            for i in range(m):
                mult[inv[i]] += 1.0
        else:
            mult[:] = 1.0
        for k in range(rows_kept):
            r = first[k]
            for j in range(n):
                Tk[k, j] = 0.0 if numbers[r, 0] > largest[j] else T[r, j]
                c += Tk[k, j] > 0
            for j in range(w):
                Nk[k, j] = numbers[r, j]
        row_ids = tuple([ids[first[k]] for k in range(rows_kept)])
    finally:
        free(sig)
        free(first)
    if c >= 2 ** 31 - 1:
        return None
    col_type = np.empty(c, dtype=np.int64)
    rates = np.empty(c)
    used = np.empty(c)
    at, at_copy = np.empty(c, dtype=np.int32), np.empty(c, dtype=np.int32)
    job_ptr, job_ptr_copy = (np.empty(rows_kept + 1, dtype=np.int32),
                             np.empty(rows_kept + 1, dtype=np.int32))
    usage_data, order = np.empty(c), np.empty(c, dtype=np.int32)
    type_ptr = np.zeros(n + 1, dtype=np.int32)
    cdef int64_t[::1] types_of = col_type
    cdef double[::1] rate = rates, use = used, use_sorted = usage_data
    cdef int32_t[::1] a1 = at, a2 = at_copy, p1 = job_ptr, p2 = job_ptr_copy
    cdef int32_t[::1] by_type = order, t_ptr = type_ptr
    keys = [None] * c
    c = 0
    p1[0] = p2[0] = 0
    for k in range(rows_kept):          # the columns in row order (``np.nonzero``'s)
        for j in range(n):
            if Tk[k, j] > 0:
                types_of[c] = j
                rate[c] = Tk[k, j]
                use[c] = Nk[k, 0] * mult[k]
                a1[c] = a2[c] = <int32_t> c
                keys[c] = row_ids[k]
                t_ptr[j + 1] += 1
                c += 1
        p1[k + 1] = p2[k + 1] = <int32_t> c
    for j in range(n):
        t_ptr[j + 1] += t_ptr[j]
    cdef int32_t* slot = <int32_t*> malloc((n + 1) * sizeof(int32_t))
    if slot == NULL:
        raise MemoryError()
    for j in range(n):
        slot[j] = t_ptr[j]
    for p in range(c):                  # each type's columns in column order (a stable sort)
        j = types_of[p]
        by_type[slot[j]] = <int32_t> p
        use_sorted[slot[j]] = use[p]
        slot[j] += 1
    free(slot)
    return (row_ids, keys, inverse if merge else None, T_rows, numbers_rows, col_type, rates,
            at, job_ptr, at_copy, job_ptr_copy, usage_data, order, type_ptr)


def repaired_single(const double[:] z, const int64_t[:] member_indices,
                    const int64_t[:] member_indptr, const double[:] member_data,
                    const int64_t[:] usage_indices, const int64_t[:] usage_indptr,
                    const double[:] usage_data, const int64_t[:] col_type,
                    const double[:] workers, double zero, bint fit_types):
    """(z repaired, the (m, n) matrix of each job row's time on each type) for a model whose
    every column is one job on one type (``member`` has one entry in each column; else
    None): ``Columns.repaired``'s floats to the bit. Its row sums, in stored order from
    0, are ``sparse.matvec``'s (numpy's ``bincount``); NaN goes through as numpy's
    ``clip``, ``maximum`` and comparisons let it."""
    cdef Py_ssize_t c = z.shape[0], m = member_indptr.shape[0] - 1
    cdef Py_ssize_t n = workers.shape[0], i, p, k, j
    if (member_indices.shape[0] != c or member_data.shape[0] != c or m < 0
            or col_type.shape[0] != c or usage_indptr.shape[0] != n + 1
            or usage_indices.shape[0] != usage_data.shape[0]):
        raise ValueError(f"repaired_single: {c} columns, {member_indices.shape[0]} member "
                         f"entries, {col_type.shape[0]} column types, "
                         f"{usage_indptr.shape[0] - 1} usage rows for {n} types")
    out = np.empty(c)
    dense = np.zeros((m, n))
    cdef double[::1] x = out
    cdef double[:, ::1] rows = dense
    cdef double v, total
    cdef int64_t* col_row = <int64_t*> malloc((c + 1) * sizeof(int64_t))
    cdef double* shrink = <double*> malloc((m + n + 1) * sizeof(double))
    if col_row == NULL or shrink == NULL:
        free(col_row)
        free(shrink)
        raise MemoryError()
    try:
        for k in range(c):
            col_row[k] = -1
            if not 0 <= col_type[k] < n:
                return None
        for i in range(m):              # each column one job's: its row
            for p in range(member_indptr[i], member_indptr[i + 1]):
                k = member_indices[p]
                if not 0 <= k < c or col_row[k] >= 0:
                    return None
                col_row[k] = i
        for k in range(c):
            if col_row[k] < 0:
                return None
            v = z[k]
            if v <= zero:
                x[k] = 0.0
            elif v != v:
                x[k] = v
            else:
                x[k] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)
        scaled = False
        for i in range(m):              # 1 / max(member @ z, 1): a job above 1 scaled down
            total = 0.0
            for p in range(member_indptr[i], member_indptr[i + 1]):
                total = total + member_data[p] * x[member_indices[p]]
            shrink[i] = 1.0 / (total if total != total or total > 1.0 else 1.0)
            scaled = scaled or shrink[i] != 1.0
        if scaled:
            for k in range(c):
                x[k] = x[k] * shrink[col_row[k]]
        if fit_types:                   # a type above its workers scaled down
            scaled = False
            for j in range(n):
                total = 0.0
                for p in range(usage_indptr[j], usage_indptr[j + 1]):
                    k = usage_indices[p]
                    if not 0 <= k < c:
                        raise ValueError(f"repaired_single: usage column {k} out of range")
                    total = total + usage_data[p] * x[k]
                shrink[m + j] = 1.0
                if total > workers[j]:
                    shrink[m + j] = workers[j] / (total if total > 1e-300 else 1e-300)
                    scaled = True
            if scaled:
                for k in range(c):
                    x[k] = x[k] * shrink[m + col_type[k]]
        for k in range(c):
            rows[col_row[k], col_type[k]] = x[k]
    finally:
        free(col_row)
        free(shrink)
    return out, dense
