# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The round's planning loops, compiled (built with the package when a C compiler is
present; ``loops.py`` says whether they were).

``plan_units`` plans the common round, in which every combination is a single job on one
worker and every server holds one worker: the selection of ``selection.py`` (per-type
queues, thesis §5.5, Algorithm 2), the split of ``planner._hold_unallocated`` and the
placement of ``placement._place_units`` (§5.5, last paragraph). In Python that is about a
hundred numpy and list calls on arrays of about a hundred rows; here each type's usable rows
are sorted by one stable merge sort on the same keys as ``order_entries``' lexsort, and the
first ``room`` are taken. ``unsnapped_priorities`` is the arithmetic of
``priorities.priorities`` (thesis §5.5); of its grid (``priorities.snapped``), the gather,
rounding and scatter are here (``positive_values``, ``to_grid``, ``put_values``) and the
log and exp stay numpy's, called on the same arrays. (A round's steps and seconds are
``_steps.pyx``'s.) Each gives exactly what the Python path gives, which
``tests/core/test_loops.py`` checks on random inputs.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.math cimport INFINITY, rint
from libc.stdlib cimport free, malloc

from gavelsched.mechanism._arrays cimport Array, check_shape, f64, i64, read_array, u8

import numpy as np

cnp.import_array()


cdef inline bint _lt(double x, double y) noexcept nogil:
    """numpy's sort order: NaN after every number."""
    return x < y or (y != y and x == x)


cdef inline bint _before(Py_ssize_t a, Py_ssize_t b, Array prio, Array deficit, Array tie,
                         Py_ssize_t j) noexcept nogil:
    """Row a comes before row b in type j's queue: keys (-priority, -deficit, tie), as
    ``order_entries``' lexsort; the stable sort keeps row order on a full tie."""
    cdef double x = -f64(prio, a, j)[0], y = -f64(prio, b, j)[0]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    x = -f64(deficit, a, j)[0]
    y = -f64(deficit, b, j)[0]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    return _lt(f64(tie, a, j)[0], f64(tie, b, j)[0])


cdef void _sort(Py_ssize_t* rows, Py_ssize_t* spare, Py_ssize_t n, Array prio, Array deficit,
                Array tie, Py_ssize_t j) noexcept nogil:
    """Stable sort of ``rows[:n]`` into queue order: insertion sort of runs of 8, then
    merges (``spare`` holds n more)."""
    cdef Py_ssize_t run = 8, lo, mid, hi, a, b, k, i, x, width
    cdef Py_ssize_t* src = rows
    cdef Py_ssize_t* dst = spare
    cdef Py_ssize_t* swap
    lo = 0
    while lo < n:
        hi = min(lo + run, n)
        for i in range(lo + 1, hi):
            x = src[i]
            k = i
            while k > lo and _before(x, src[k - 1], prio, deficit, tie, j):
                src[k] = src[k - 1]
                k -= 1
            src[k] = x
        lo = hi
    width = run
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if _before(src[b], src[a], prio, deficit, tie, j):
                    dst[k] = src[b]
                    b += 1
                else:
                    dst[k] = src[a]
                    a += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
            lo = hi
        swap = src
        src = dst
        dst = swap
        width *= 2
    if src != rows:
        for i in range(n):
            rows[i] = src[i]


def unsnapped_priorities(allocation, received, total, runnable, allocated, double unserved):
    """X * total / received (``unserved`` * X where nothing was received), 0 where X is 0,
    the combination cannot run or the allocation does not cover it: ``priorities``' values
    before their grid, to the bit (one IEEE division and one product, as numpy's).
    ``total``: each column's received seconds; None: summed here, row after row from the
    first, as numpy's ``received.sum(axis=0)`` sums two columns or more (one column it
    sums pairwise: the caller passes that sum). ``runnable`` and ``allocated``: uint8."""
    cdef Array X, got, tot, ok, covered
    keep = (read_array(allocation, cnp.NPY_DOUBLE, 2, "allocation", &X),
            read_array(received, cnp.NPY_DOUBLE, 2, "received", &got),
            read_array(runnable, cnp.NPY_UINT8, 2, "runnable", &ok),
            read_array(allocated, cnp.NPY_UINT8, 1, "allocated", &covered))
    cdef Py_ssize_t c = X.n0, n = X.n1, i, j
    check_shape("received", got.n0, got.n1, c, n)
    check_shape("runnable", ok.n0, ok.n1, c, n)
    if covered.n0 != c:
        raise ValueError(f"allocated: {covered.n0} flags for {c} rows")
    if total is None:
        total = np.zeros(n)
        sums = read_array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        for i in range(c):
            for j in range(n):
                f64(tot, j)[0] = f64(got, i, j)[0] if i == 0 else f64(tot, j)[0] + f64(got, i, j)[0]
    else:
        sums = read_array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        if tot.n0 != n:
            raise ValueError(f"total: {tot.n0} sums for {n} columns")
    out = np.empty((c, n))
    cdef double* prio = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    cdef double x, r
    for i in range(c):
        for j in range(n):
            x = f64(X, i, j)[0]
            if not (x > 0 and u8(ok, i, j)[0] and u8(covered, i)[0]):
                prio[i * n + j] = 0.0
                continue
            r = f64(got, i, j)[0]
            prio[i * n + j] = x * (f64(tot, j)[0] / r if r > 0 else unserved)
    return out


def positive_values(prio):
    """(flat row-major indices, values) of the entries of ``prio`` above 0: ``prio[prio >
    0]`` and where it was, for ``priorities.snapped``."""
    cdef Array P
    keep = read_array(prio, cnp.NPY_DOUBLE, 2, "prio", &P)
    cdef Py_ssize_t c = P.n0, n = P.n1, i, j, k = 0
    for i in range(c):
        for j in range(n):
            k += f64(P, i, j)[0] > 0
    at = np.empty(k, dtype=np.int64)
    out = np.empty(k)
    cdef int64_t* where = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> at)
    cdef double* values = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    k = 0
    for i in range(c):
        for j in range(n):
            if f64(P, i, j)[0] > 0:
                where[k] = i * n + j
                values[k] = f64(P, i, j)[0]
                k += 1
    return at, out


def to_grid(logs, double step):
    """``logs`` in place onto the multiples of ``step``: rint(x / step) * step (numpy's
    ``np.rint(x / step) * step``, to the bit: an IEEE division, rounding to the nearest
    even integer, a product)."""
    cdef Array L
    keep = read_array(logs, cnp.NPY_DOUBLE, 1, "logs", &L, True)
    cdef Py_ssize_t k
    for k in range(L.n0):
        f64(L, k)[0] = rint(f64(L, k)[0] / step) * step


def put_values(prio, where, values):
    """``prio`` at the flat row-major indices ``where`` set to ``values``."""
    cdef Array P, W, V
    keep = (read_array(prio, cnp.NPY_DOUBLE, 2, "prio", &P, True),
            read_array(where, cnp.NPY_INT64, 1, "where", &W),
            read_array(values, cnp.NPY_DOUBLE, 1, "values", &V))
    cdef Py_ssize_t n = P.n1, k, at
    if W.n0 != V.n0:
        raise ValueError(f"put_values: {W.n0} places, {V.n0} values")
    for k in range(W.n0):
        at = i64(W, k)[0]
        if not 0 <= at < P.n0 * n:
            raise IndexError(f"put_values: place {at} outside {P.n0} x {n}")
        f64(P, at // n, at % n)[0] = f64(V, k)[0]


def plan_units(prio, deficit, tie, runnable, allocated, members, scale, list free_workers,
               type_order, bint backfill, tuple keys, tuple types, dict previous,
               dict type_of, live_workers):
    """The round as ``planner._round_plan`` takes it: (rows, their keys, type columns,
    workers, lease extended, held idle, lease opportunities), with the rows, columns and
    extensions as numpy arrays; None when a combination is not a single job on one worker
    (the Python path plans it). ``runnable`` and ``allocated`` are the flags as uint8,
    ``members`` the ``member_rows``, ``scale`` the scale factors."""
    cdef Array P, D, T, R, A, M, S
    keep = (read_array(prio, cnp.NPY_DOUBLE, 2, "prio", &P),
            read_array(deficit, cnp.NPY_DOUBLE, 2, "deficit", &D),
            read_array(tie, cnp.NPY_DOUBLE, 2, "tie", &T),
            read_array(runnable, cnp.NPY_UINT8, 2, "runnable", &R),
            read_array(allocated, cnp.NPY_UINT8, 1, "allocated", &A),
            read_array(members, cnp.NPY_INT64, 2, "members", &M),
            read_array(scale, cnp.NPY_INT64, 1, "scale", &S))
    cdef Py_ssize_t c = P.n0, i, k, m = 0, picked, opportunities = 0
    cdef int64_t* rows_out
    cdef int64_t* columns_out
    cdef Py_ssize_t n = P.n1
    check_shape("deficit", D.n0, D.n1, c, n)
    check_shape("tie", T.n0, T.n1, c, n)
    check_shape("runnable", R.n0, R.n1, c, n)
    check_shape("members", M.n0, M.n1, c, 2)
    check_shape("allocated and scale", A.n0, S.n0, c, c)
    if len(keys) != c or len(types) != n or len(free_workers) != n or any(
            not 0 <= j < n for j in type_order):
        raise IndexError(f"plan_units: {len(keys)} keys, {len(types)} types, "
                         f"{len(free_workers)} free counts and type order {type_order} for "
                         f"({c}, {n}) priorities")
    for i in range(c):
        if i64(S, i)[0] != 1 or i64(M, i, 0)[0] < 0 or i64(M, i, 1)[0] >= 0:
            return None
    cdef Py_ssize_t* chosen = <Py_ssize_t*> malloc((2 * c + 1) * sizeof(Py_ssize_t))
    if chosen == NULL:
        raise MemoryError()
    try:
        picked = _select(P, D, T, R, M, free_workers, type_order, backfill, chosen,
                         chosen + c)
        for k in range(picked):
            m += u8(A, chosen[k])[0]
        combo_index = np.empty(m, dtype=np.int64)
        type_index = np.empty(m, dtype=np.int64)
        extended = np.zeros(m, dtype=bool)
        rows_out = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> combo_index)
        columns_out = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> type_index)
        held, task_keys, task_types = [], [], []
        m = 0
        for k in range(picked):
            i = chosen[k]
            column = chosen[c + k]
            if u8(A, i)[0]:
                rows_out[m] = i
                columns_out[m] = column
                task_keys.append(keys[i])
                task_types.append(types[column])
                m += 1
            else:   # admitted after the last re-solve: holds its worker idle (Gavel)
                held.append((keys[i], types[column], 1))
    finally:
        free(chosen)
    workers = _place(task_keys, task_types, previous, type_of, live_workers,
                     <unsigned char*> cnp.PyArray_DATA(<cnp.ndarray> extended))
    for key in keys:
        if key in previous:
            opportunities += 1
    return (combo_index, tuple(task_keys), type_index, tuple(workers), extended, tuple(held),
            opportunities)


cdef Py_ssize_t _select(Array prio, Array deficit, Array tie, Array runnable, Array members,
                        list free_workers, type_order, bint backfill, Py_ssize_t* chosen,
                        Py_ssize_t* columns) except -1:
    """The round's selection, in the order taken: ``chosen[k]`` the row of the k-th entry
    and ``columns[k]`` its type column (room for one per row each); returns their number."""
    cdef Py_ssize_t c = prio.n0, i, j, n, room, k, picked = 0, jobs = 0
    for i in range(c):
        jobs = max(jobs, i64(members, i, 0)[0] + 1)
    cdef Py_ssize_t* rows = <Py_ssize_t*> malloc((2 * c + 1) * sizeof(Py_ssize_t))
    cdef unsigned char* taken = <unsigned char*> malloc(jobs + 1)
    if rows == NULL or taken == NULL:
        free(rows)
        free(taken)
        raise MemoryError()
    for i in range(jobs + 1):
        taken[i] = 0
    try:
        for column in type_order:
            j = column
            room = free_workers[j]
            if room <= 0:
                continue
            n = 0
            for i in range(c):
                if (u8(runnable, i, j)[0] and (backfill or f64(prio, i, j)[0] > 0)
                        and not taken[i64(members, i, 0)[0]]):
                    rows[n] = i
                    n += 1
            _sort(rows, rows + c, n, prio, deficit, tie, j)
            for k in range(min(n, room)):
                i = rows[k]
                taken[i64(members, i, 0)[0]] = 1
                chosen[picked] = i
                columns[picked] = j
                picked += 1
    finally:
        free(rows)
        free(taken)
    return picked


def place_units(keys, worker_types, dict previous, dict type_of, live_workers):
    """``placement.place_units`` with the view's ``live_type_of`` and ``live_workers``."""
    extended = np.zeros(len(keys), dtype=bool)
    workers = _place(keys, worker_types, previous, type_of, live_workers,
                     <unsigned char*> cnp.PyArray_DATA(<cnp.ndarray> extended))
    return workers, extended.tolist()


cdef list _place(keys, worker_types, dict previous, dict type_of, live_workers,
                 unsigned char* extended):
    """Each key's workers (a list); ``extended[k]`` (one flag a key, a bool array's data)
    set where key k keeps last round's."""
    cdef Py_ssize_t n = len(keys), pos
    cdef list workers = [None] * n
    cdef set kept = set()
    cdef dict fresh = {}
    for pos in range(n):
        prev = previous.get(keys[pos])
        t = worker_types[pos]
        if prev is not None and len(prev) == 1 and type_of.get(prev[0]) == t:
            workers[pos] = prev
            extended[pos] = 1
            kept.add(prev[0])
            continue
        queue = fresh.get(t)
        if queue is None:
            fresh[t] = [pos]
        else:
            (<list> queue).append(pos)
    for t, positions in fresh.items():
        ids = live_workers(t)
        spare = [w for w in ids if w not in kept] if kept else ids
        if len(positions) > len(spare):
            need = len(positions) + len(ids) - len(spare)
            raise ValueError(f"placement: {need} {t} workers requested, {len(ids)} live")
        for pos, w in zip(positions, spare):
            workers[pos] = (w,)
    return workers
