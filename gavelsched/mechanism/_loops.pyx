# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The round's planning loops, compiled (built with the package when a C compiler is
present; ``loops.py`` says whether they were).

``plan_units`` plans the common round, in which every combination is a single job on one
worker and every server holds one worker: the selection of ``selection.py`` (per-type
queues, thesis §5.5, Algorithm 2), the split of ``planner._hold_unallocated`` and the
placement of ``placement.place_units`` (§5.5, last paragraph). In Python that is about a
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
from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject

from gavelsched.mechanism._arrays cimport (Array, check_shape, empty_array, f64, i64,
                                           read_array, u8, zeros_array)

import numpy as np

cnp.import_array()


cdef inline bint _lt(double x, double y) noexcept nogil:
    """numpy's sort order: NaN after every number."""
    return x < y or (y != y and x == x)


cdef struct Entry:
    double prio, deficit, tie     # a row's sort keys in one column: -priority, -deficit, tie
    Py_ssize_t row


cdef inline bint _before(Entry* a, Entry* b) noexcept nogil:
    """Entry a comes before entry b in a type's queue: keys (-priority, -deficit, tie), as
    ``order_entries``' lexsort; the stable sort keeps row order on a full tie."""
    if _lt(a.prio, b.prio):
        return True
    if _lt(b.prio, a.prio):
        return False
    if _lt(a.deficit, b.deficit):
        return True
    if _lt(b.deficit, a.deficit):
        return False
    return _lt(a.tie, b.tie)


cdef void _sort(Entry* entries, Entry* spare, Py_ssize_t n) noexcept nogil:
    """Stable sort of ``entries[:n]`` into queue order: insertion sort of runs of 8, then
    merges (``spare`` holds n more). The keys sit side by side (``Entry``): read from the
    rows' arrays at each comparison, the selection took a tenth more instructions (issue
    #30)."""
    cdef Py_ssize_t run = 8, lo, mid, hi, a, b, k, i, width
    cdef Entry* src = entries
    cdef Entry* dst = spare
    cdef Entry* swap
    cdef Entry x
    lo = 0
    while lo < n:
        hi = min(lo + run, n)
        for i in range(lo + 1, hi):
            x = src[i]
            k = i
            while k > lo and _before(&x, &src[k - 1]):
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
                if _before(&src[b], &src[a]):
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
    if src != entries:
        for i in range(n):
            entries[i] = src[i]


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
        total = zeros_array(cnp.NPY_DOUBLE, n)
        sums = read_array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        for i in range(c):
            for j in range(n):
                f64(tot, j)[0] = f64(got, i, j)[0] if i == 0 else f64(tot, j)[0] + f64(got, i, j)[0]
    else:
        sums = read_array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        if tot.n0 != n:
            raise ValueError(f"total: {tot.n0} sums for {n} columns")
    out = empty_array(cnp.NPY_DOUBLE, c, n)
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
    at = empty_array(cnp.NPY_INT64, k)
    out = empty_array(cnp.NPY_DOUBLE, k)
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
    cdef bint misfit = len(keys) != c or len(types) != n or len(free_workers) != n
    for column in type_order:      # (a loop: a generator here cost more than the check)
        misfit |= not 0 <= column < n
    if misfit:
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
        combo_index = empty_array(cnp.NPY_INT64, m)
        type_index = empty_array(cnp.NPY_INT64, m)
        extended = zeros_array(cnp.NPY_BOOL, m)
        rows_out = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> combo_index)
        columns_out = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> type_index)
        held, task_keys = [], []
        m = 0
        for k in range(picked):
            i = chosen[k]
            column = chosen[c + k]
            if u8(A, i)[0]:
                rows_out[m] = i
                columns_out[m] = column
                task_keys.append(keys[i])
                m += 1
            else:   # admitted after the last re-solve: holds its worker idle (Gavel)
                held.append((keys[i], types[column], 1))
    finally:
        free(chosen)
    workers = _place(task_keys, columns_out, types, previous, type_of, live_workers,
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
    cdef Entry* entries = <Entry*> malloc((2 * c + 1) * sizeof(Entry))
    cdef unsigned char* taken = <unsigned char*> malloc(jobs + 1)
    if entries == NULL or taken == NULL:
        free(entries)
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
                    entries[n].prio = -f64(prio, i, j)[0]
                    entries[n].deficit = -f64(deficit, i, j)[0]
                    entries[n].tie = f64(tie, i, j)[0]
                    entries[n].row = i
                    n += 1
            _sort(entries, entries + c, n)
            for k in range(min(n, room)):
                i = entries[k].row
                taken[i64(members, i, 0)[0]] = 1
                chosen[picked] = i
                columns[picked] = j
                picked += 1
    finally:
        free(entries)
        free(taken)
    return picked


def place_units(keys, worker_types, dict previous, dict type_of, live_workers):
    """``placement.place_units`` with the view's ``live_type_of`` and ``live_workers``."""
    cdef dict column_of = {}
    for t in worker_types:
        column_of.setdefault(t, len(column_of))
    columns = np.array([column_of[t] for t in worker_types], dtype=np.int64)
    extended = zeros_array(cnp.NPY_BOOL, len(keys))
    workers = _place(list(keys), <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> columns),
                     tuple(column_of), previous, type_of, live_workers,
                     <unsigned char*> cnp.PyArray_DATA(<cnp.ndarray> extended))
    return workers, extended.tolist()


cdef list _place(list keys, int64_t* columns, tuple types, dict previous, dict type_of,
                 live_workers, unsigned char* extended):
    """Each key's workers (a list): key k wants one worker of ``types[columns[k]]``; it
    keeps last round's (``previous``) when that one is live and of that type, and
    ``extended[k]`` is set; the others take the type's spare live workers in server order,
    the types in the order their first such key comes. Types are compared by column, not
    name, and the waiting keys kept in one array, not a list per type: that way round,
    placement took 60% of ``plan_units``' time (issue #30)."""
    cdef Py_ssize_t m = len(keys), pos, j, a, b, i, size, need, spare
    cdef list workers = [None] * m
    cdef set kept = set()
    cdef PyObject* prev
    cdef PyObject* t
    cdef Py_ssize_t fresh = 0
    # the positions that wait for a fresh worker (m), then a flag per type: placed yet
    cdef Py_ssize_t* waiting = <Py_ssize_t*> malloc((m + len(types) + 1) * sizeof(Py_ssize_t))
    if waiting == NULL:
        raise MemoryError()
    cdef Py_ssize_t* placed = waiting + m
    try:
        for pos in range(m):
            prev = PyDict_GetItem(previous, keys[pos])
            if prev is not NULL and len(<object> prev) == 1:
                w = (<object> prev)[0]
                t = PyDict_GetItem(type_of, w)
                if t is not NULL and (<object> t is types[columns[pos]]
                                      or <object> t == types[columns[pos]]):
                    workers[pos] = <object> prev
                    extended[pos] = 1
                    kept.add(w)
                    continue
            waiting[fresh] = pos
            fresh += 1
        for j in range(len(types)):
            placed[j] = 0
        for a in range(fresh):
            j = columns[waiting[a]]
            if placed[j]:
                continue
            placed[j] = 1
            ids = live_workers(types[j])
            size = len(ids)
            i = 0
            for b in range(a, fresh):
                pos = waiting[b]
                if columns[pos] != j:
                    continue
                while i < size and kept and ids[i] in kept:
                    i += 1
                if i >= size:
                    need = 0
                    for b in range(fresh):
                        need += columns[waiting[b]] == j
                    spare = 0
                    for w in ids:
                        spare += w not in kept
                    raise ValueError(f"placement: {need + size - spare} {types[j]} workers "
                                     f"requested, {size} live")
                workers[pos] = (ids[i],)
                i += 1
    finally:
        free(waiting)
    return workers
