# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""A round's steps and seconds, compiled (built with the package when a C compiler is
present; ``loops.py`` says whether they were).

``leases`` is the arithmetic of a round's micro-tasks (``core/batch.py:task_leases``; thesis
§5.6), and ``task_seconds`` how long each holds its workers in the simulator
(``simulator/tasks.py:run_leases``). ``take_steps`` and ``add_seconds`` credit a round's
steps and seconds to the core's rows (``core/progress.py``; §5.5's received time, §5.6's
reports). ``grown`` and ``without`` copy the rows' arrays as jobs come and go
(``core/rows.py``: one call for all of them instead of one numpy call each). Each gives
exactly what the Python path gives, which ``tests/core/test_loops.py`` checks on random
inputs.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.math cimport INFINITY, floor
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from gavelsched.mechanism._arrays cimport (Array, check_shape, empty_array, f64, i64,
                                           read_array, u8, zeros_array)

import numpy as np

cnp.import_array()


cdef inline double np_max(double a, double b) noexcept nogil:
    """``np.maximum``: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a > b else b


cdef int _steps_kind(object steps) except -1:
    """The type number of a round's step counts: int64 (whole steps) or float64."""
    if cnp.PyArray_Check(steps) and cnp.PyArray_TYPE(<cnp.ndarray> steps) == cnp.NPY_INT64:
        return cnp.NPY_INT64
    return cnp.NPY_DOUBLE


cdef inline double _step(Array a, bint whole, Py_ssize_t t, Py_ssize_t m) noexcept nogil:
    """Entry (t, m) of step counts of int64 (``whole``, cast as numpy casts) or float64."""
    return <double> i64(a, t, m)[0] if whole else f64(a, t, m)[0]


def task_seconds(steps, rates):
    """``simulator/tasks.py:run_leases``' seconds of each task: the larger of its two
    members' steps / rate, a member that makes no progress (rate 0, or NaN) taking 0
    (steps / inf); as numpy divides (an integer step count cast to a float first) and
    takes ``maximum`` (NaN if either is). ``steps``: int64 or float64."""
    cdef Array S, R
    cdef int kind = _steps_kind(steps)
    cdef bint whole = kind == cnp.NPY_INT64
    keep = (read_array(steps, kind, 2, "steps", &S), read_array(rates, cnp.NPY_DOUBLE, 2, "rates", &R))
    cdef Py_ssize_t k = S.n0, t
    cdef double a, b
    check_shape("steps", S.n0, S.n1, k, 2)
    check_shape("rates", R.n0, R.n1, k, 2)
    out = empty_array(cnp.NPY_DOUBLE, k)
    cdef double* seconds = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    for t in range(k):
        a = _step(S, whole, t, 0) / (f64(R, t, 0)[0] if f64(R, t, 0)[0] > 0 else INFINITY)
        b = _step(S, whole, t, 1) / (f64(R, t, 1)[0] if f64(R, t, 1)[0] > 0 else INFINITY)
        seconds[t] = a if (a >= b or a != a) else b
    return out


def finished_members(steps, remaining):
    """``simulator/tasks.py:finishing``'s (task, member) pairs in row order (``np.nonzero``'s):
    the member's steps reach what its job had left, and it had some left. Both int64, or
    both float64 (compared in their type)."""
    cdef Array S, L
    cdef int kind = _steps_kind(steps)
    keep = (read_array(steps, kind, 2, "steps", &S), read_array(remaining, kind, 2, "remaining", &L))
    cdef Py_ssize_t k = S.n0, t, m
    check_shape("steps", S.n0, S.n1, k, 2)
    check_shape("remaining", L.n0, L.n1, k, 2)
    out = []
    for t in range(k):
        for m in range(2):
            if kind == cnp.NPY_INT64:
                if i64(S, t, m)[0] >= i64(L, t, m)[0] and i64(L, t, m)[0] > 0:
                    out.append((t, m))
            elif f64(S, t, m)[0] >= f64(L, t, m)[0] and f64(L, t, m)[0] > 0:
                out.append((t, m))
    return out


cdef inline double np_min(double a, double b) noexcept nogil:
    """``np.minimum``: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a < b else b


def leases(rate, left, member_rows, combos, columns, double span, bint whole):
    """``core/batch.py:task_leases`` for the tasks at ``combos`` on ``columns``: (rates,
    steps, remaining, members) of each task's members."""
    cdef Array R, L, M, C, J
    keep = (read_array(rate, cnp.NPY_DOUBLE, 3, "rate", &R),
            read_array(left, cnp.NPY_DOUBLE, 1, "left", &L),
            read_array(member_rows, cnp.NPY_INT64, 2, "member_rows", &M),
            read_array(combos, cnp.NPY_INT64, 1, "combos", &C),
            read_array(columns, cnp.NPY_INT64, 1, "columns", &J))
    cdef Py_ssize_t k = C.n0, t, m, row
    cdef int64_t job
    cdef double lease, got, have
    check_shape("columns and members", J.n0, M.n1, k, 2)
    if R.n2 != 2 or M.n0 != R.n0:
        raise ValueError("leases: rate must be (c, n, 2) and member_rows (c, 2)")
    for t in range(k):
        if not (0 <= i64(C, t)[0] < R.n0 and 0 <= i64(J, t)[0] < R.n1):
            raise IndexError(f"leases: task {t} at row {i64(C, t)[0]}, column {i64(J, t)[0]}")
        for m in range(2):
            if i64(M, i64(C, t)[0], m)[0] >= L.n0:
                raise IndexError(f"leases: job row {i64(M, i64(C, t)[0], m)[0]} past "
                                 f"{L.n0} rows")
    rates = empty_array(cnp.NPY_DOUBLE, k, 2)
    have_out = empty_array(cnp.NPY_DOUBLE, k, 2)
    steps_out = empty_array(cnp.NPY_DOUBLE, k, 2)
    counts = empty_array(cnp.NPY_INT64, k)
    cdef double* r = <double*> cnp.PyArray_DATA(<cnp.ndarray> rates)
    cdef double* h = <double*> cnp.PyArray_DATA(<cnp.ndarray> have_out)
    cdef double* st = <double*> cnp.PyArray_DATA(<cnp.ndarray> steps_out)
    cdef int64_t* n = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> counts)
    for t in range(k):
        n[t] = 0
        row = i64(C, t)[0]
        for m in range(2):
            job = i64(M, row, m)[0]
            if job < 0:
                got = 0.0
                have = 0.0
            else:
                n[t] += 1
                got = f64(R, row, i64(J, t)[0], m)[0]
                have = f64(L, job)[0]
            r[2 * t + m] = got
            h[2 * t + m] = have
            if whole:
                lease = np_max(floor(got * span), 1.0)
            else:
                lease = got * span
            st[2 * t + m] = np_min(lease, have)
    if whole:
        return rates, steps_out.astype(np.int64), have_out.astype(np.int64), counts
    return rates, steps_out, have_out, counts


def take_steps(left, member_rows, where, steps):
    """``core/progress.py:_take_steps``: ``steps[i, m]`` off the steps left of member m of
    the combination at row ``where[i]`` (no member: -1), as numpy's ``left[rows] -= steps``
    does it (every value read before any is written: a row named twice keeps its last
    write); the job rows then at or below 1e-9 steps, one entry per write, sorted."""
    cdef Array L, M, W, S
    keep = (read_array(left, cnp.NPY_DOUBLE, 1, "left", &L, True),
            read_array(member_rows, cnp.NPY_INT64, 2, "member_rows", &M),
            read_array(where, cnp.NPY_INT64, 1, "where", &W),
            read_array(steps, cnp.NPY_DOUBLE, 2, "steps", &S))
    cdef Py_ssize_t k = W.n0, width = S.n1, i, m, t = 0
    cdef int64_t job
    if S.n0 != k or not 1 <= width <= 2 or M.n1 < width:
        raise ValueError(f"take_steps: steps of shape ({S.n0}, {width}) for {k} "
                         f"combinations (1 or 2 members each)")
    for i in range(k):
        if not 0 <= i64(W, i)[0] < M.n0:
            raise IndexError(f"take_steps: combination row {i64(W, i)[0]} past {M.n0} rows")
        for m in range(width):
            if i64(M, i64(W, i)[0], m)[0] >= L.n0:
                raise IndexError(f"take_steps: job row {i64(M, i64(W, i)[0], m)[0]} past "
                                 f"{L.n0} rows")
    cdef double* after = <double*> malloc(max(k * width, 1) * sizeof(double))
    cdef int64_t* rows = <int64_t*> malloc(max(k * width, 1) * sizeof(int64_t))
    if after == NULL or rows == NULL:
        free(after)
        free(rows)
        raise MemoryError()
    try:
        for i in range(k):
            for m in range(width):
                job = i64(M, i64(W, i)[0], m)[0]
                if job >= 0:
                    rows[t] = job
                    after[t] = f64(L, job)[0] - f64(S, i, m)[0]
                    t += 1
        for i in range(t):
            f64(L, rows[i])[0] = after[i]
        finished = [rows[i] for i in range(t) if f64(L, rows[i])[0] <= 1e-9]
    finally:
        free(after)
        free(rows)
    finished.sort()
    return finished


def add_seconds(received, ran, where, columns, seconds):
    """``core/progress.py:credit_round``'s ``received[where, columns] += seconds`` (every
    value read before any is written, as numpy does) and ``ran[where, columns] = True``
    (``ran``: uint8)."""
    cdef Array G, D, W, J, S
    keep = (read_array(received, cnp.NPY_DOUBLE, 2, "received", &G, True),
            read_array(ran, cnp.NPY_UINT8, 2, "ran", &D, True),
            read_array(where, cnp.NPY_INT64, 1, "where", &W),
            read_array(columns, cnp.NPY_INT64, 1, "columns", &J),
            read_array(seconds, cnp.NPY_DOUBLE, 1, "seconds", &S))
    cdef Py_ssize_t k = W.n0, i
    check_shape("columns and seconds", J.n0, S.n0, k, k)
    check_shape("ran", D.n0, D.n1, G.n0, G.n1)
    for i in range(k):
        if not (0 <= i64(W, i)[0] < G.n0 and 0 <= i64(J, i)[0] < G.n1):
            raise IndexError(f"add_seconds: task {i} at row {i64(W, i)[0]}, column {i64(J, i)[0]}")
    cdef double* after = <double*> malloc(max(k, 1) * sizeof(double))
    if after == NULL:
        raise MemoryError()
    for i in range(k):
        after[i] = f64(G, i64(W, i)[0], i64(J, i)[0])[0] + f64(S, i)[0]
    for i in range(k):
        f64(G, i64(W, i)[0], i64(J, i)[0])[0] = after[i]
        u8(D, i64(W, i)[0], i64(J, i)[0])[0] = 1
    free(after)     # (nothing above can raise)


def grown(list arrays, Py_ssize_t k, list values=None):
    """Each array (C-ordered) with ``k`` rows after its own: zeros, as
    ``np.concatenate([a, np.zeros((k,) + a.shape[1:], a.dtype)])`` makes them, or, where
    ``values[i]`` is not None, those of the i-th array: a list of the new rows' entries in
    row-major order (Python floats, ints or bools), as numpy converts them for a float64,
    int64 or bool array."""
    cdef cnp.ndarray arr, new
    cdef cnp.npy_intp dims[8]
    cdef int d, kind
    cdef Py_ssize_t e, size
    cdef char* tail
    if k < 0:
        raise ValueError(f"grown: {k} rows")
    if values is not None and len(values) != len(arrays):
        raise ValueError(f"grown: {len(values)} lists of values for {len(arrays)} arrays")
    out = []
    for i, a in enumerate(arrays):
        arr = _rows_of(a, "grown")
        for d in range(arr.ndim):
            dims[d] = arr.shape[d]
        dims[0] += k
        kind = cnp.PyArray_TYPE(arr)
        new = cnp.PyArray_ZEROS(arr.ndim, dims, kind, 0)
        memcpy(cnp.PyArray_DATA(new), cnp.PyArray_DATA(arr), cnp.PyArray_NBYTES(arr))
        given = None if values is None else values[i]
        if given is not None:
            size = cnp.PyArray_SIZE(new) - cnp.PyArray_SIZE(arr)
            if type(given) is not list or len(<list> given) != size:
                raise ValueError(f"grown: array {i} takes {size} new entries as a list")
            tail = <char*> cnp.PyArray_DATA(new) + cnp.PyArray_NBYTES(arr)
            if kind == cnp.NPY_DOUBLE:
                for e in range(size):
                    (<double*> tail)[e] = (<list> given)[e]
            elif kind == cnp.NPY_INT64:
                for e in range(size):
                    (<int64_t*> tail)[e] = (<list> given)[e]
            elif kind == cnp.NPY_BOOL:
                for e in range(size):
                    tail[e] = 1 if (<list> given)[e] else 0
            else:
                raise ValueError(f"grown: array {i} of {arr.dtype} takes no values")
        out.append(new)
    return out


def without(list arrays, gone):
    """Each array (C-ordered) without its rows ``gone`` (sorted, distinct, in range: ints),
    as ``np.delete(a, gone, axis=0)`` makes it: the rows between two that go copied as one
    block."""
    cdef Array rows
    cdef cnp.ndarray arr, new
    cdef cnp.npy_intp dims[8]
    cdef Py_ssize_t g, width, count, start, end, to
    cdef int d
    held = read_array(gone, cnp.NPY_INT64, 1, "gone", &rows)
    for g in range(1, rows.n0):
        if i64(rows, g)[0] <= i64(rows, g - 1)[0]:
            raise ValueError(f"without: rows {held.tolist()} are not sorted and distinct")
    out = []
    for a in arrays:
        arr = _rows_of(a, "without")
        for d in range(arr.ndim):
            dims[d] = arr.shape[d]
        count = dims[0]
        if rows.n0 and not (0 <= i64(rows, 0)[0] and i64(rows, rows.n0 - 1)[0] < count):
            raise IndexError(f"without: rows {held.tolist()} of {count}")
        dims[0] = count - rows.n0
        new = cnp.PyArray_EMPTY(arr.ndim, dims, cnp.PyArray_TYPE(arr), 0)
        width = cnp.PyArray_NBYTES(arr) // count if count else 0
        start = to = 0
        for g in range(rows.n0 + 1):
            end = i64(rows, g)[0] if g < rows.n0 else count
            memcpy(<char*> cnp.PyArray_DATA(new) + to * width,
                   <char*> cnp.PyArray_DATA(arr) + start * width, (end - start) * width)
            to += end - start
            start = end + 1
        out.append(new)
    return out


cdef cnp.ndarray _rows_of(object a, str name):
    """``a`` as a C-ordered array of at most 8 dimensions, rows along the first."""
    if not cnp.PyArray_Check(a) or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray> a):
        a = np.ascontiguousarray(a)
    if not 1 <= cnp.PyArray_NDIM(<cnp.ndarray> a) <= 8:
        raise ValueError(f"{name}: an array of {cnp.PyArray_NDIM(<cnp.ndarray> a)} dimensions")
    return <cnp.ndarray> a
