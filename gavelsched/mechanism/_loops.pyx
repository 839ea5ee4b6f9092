# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The round's hottest loops, compiled (built with the package when a C compiler is
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
log and exp stay numpy's, called on the same arrays.
``leases`` is the arithmetic of a round's micro-tasks (``core/batch.py:task_leases``; thesis
§5.6), and ``task_seconds`` how long each holds its workers in the simulator
(``simulator/tasks.py:run_leases``). ``take_steps`` and ``add_seconds`` credit a round's
steps and seconds to the core's rows (``core/progress.py``; §5.5's received time, §5.6's
reports). Each gives exactly what the Python path gives, which ``tests/core/test_loops.py``
checks on random inputs. They read their arrays through numpy's C API (``_array``), not
typed memoryviews, whose making cost more than some loops' work.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.math cimport INFINITY, floor, rint
from libc.stdlib cimport free, malloc

import numpy as np

cnp.import_array()


# The arrays a loop reads, by numpy's C API: a typed memoryview costs about 0.3 us to make
# for each argument, more than some loops' work (a round passes some thirty; issue #30).
cdef struct Array:
    char* data
    Py_ssize_t n0, n1, n2     # the shape (1 past the array's dimensions)
    Py_ssize_t s0, s1, s2     # the strides, in bytes


_DTYPES = {cnp.NPY_DOUBLE: np.float64, cnp.NPY_INT64: np.int64, cnp.NPY_UINT8: np.uint8}


cdef object _array(object a, int kind, int ndim, str name, Array* out, bint writable=False):
    """``a`` as an array of ``kind`` (a numpy type number; uint8 takes bools too) and
    ``ndim`` dimensions, its data, shape and strides in ``out``: ``a`` itself when it is
    one, else a converted copy (only for an array the loop reads: one it writes must be of
    its type). Returns the array, which the caller keeps while it reads ``out``."""
    cdef cnp.ndarray arr
    cdef int given = cnp.PyArray_TYPE(<cnp.ndarray> a) if cnp.PyArray_Check(a) else -1
    if given != kind and not (kind == cnp.NPY_UINT8 and given == cnp.NPY_BOOL):  # (a bool
        # is one byte, 0 or 1: read and written as a uint8)
        if writable:
            raise ValueError(f"{name}: an array of {np.dtype(_DTYPES[kind]).name}, "
                             f"not {type(a).__name__} of {getattr(a, 'dtype', '?')}")
        a = np.asarray(a, dtype=_DTYPES[kind])
    arr = <cnp.ndarray> a
    if cnp.PyArray_NDIM(arr) != ndim:
        raise ValueError(f"{name}: {cnp.PyArray_NDIM(arr)} dimensions, expected {ndim}")
    if writable and not cnp.PyArray_ISWRITEABLE(arr):
        raise ValueError(f"{name}: the array is read-only")
    cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(arr)
    cdef cnp.npy_intp* strides = cnp.PyArray_STRIDES(arr)
    out.data = <char*> cnp.PyArray_DATA(arr)
    out.n0, out.s0 = dims[0], strides[0]
    out.n1, out.s1, out.n2, out.s2 = 1, 0, 1, 0
    if ndim > 1:
        out.n1, out.s1 = dims[1], strides[1]
    if ndim > 2:
        out.n2, out.s2 = dims[2], strides[2]
    return arr


cdef inline double* _f(Array a, Py_ssize_t i, Py_ssize_t j=0, Py_ssize_t k=0) noexcept nogil:
    return <double*> (a.data + i * a.s0 + j * a.s1 + k * a.s2)


cdef inline int64_t* _i(Array a, Py_ssize_t i, Py_ssize_t j=0) noexcept nogil:
    return <int64_t*> (a.data + i * a.s0 + j * a.s1)


cdef inline unsigned char* _u(Array a, Py_ssize_t i, Py_ssize_t j=0) noexcept nogil:
    return <unsigned char*> (a.data + i * a.s0 + j * a.s1)


cdef inline bint _lt(double x, double y) noexcept nogil:
    """numpy's sort order: NaN after every number."""
    return x < y or (y != y and x == x)


cdef inline bint _before(Py_ssize_t a, Py_ssize_t b, Array prio, Array deficit, Array tie,
                         Py_ssize_t j) noexcept nogil:
    """Row a comes before row b in type j's queue: keys (-priority, -deficit, tie), as
    ``order_entries``' lexsort; the stable sort keeps row order on a full tie."""
    cdef double x = -_f(prio, a, j)[0], y = -_f(prio, b, j)[0]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    x = -_f(deficit, a, j)[0]
    y = -_f(deficit, b, j)[0]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    return _lt(_f(tie, a, j)[0], _f(tie, b, j)[0])


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


cdef _same_shape(str name, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t want_rows,
                 Py_ssize_t want_columns):
    """A compiled loop reads its arrays unchecked: their shapes are checked once, here."""
    if rows != want_rows or columns != want_columns:
        raise ValueError(f"{name}: shape ({rows}, {columns}), expected "
                         f"({want_rows}, {want_columns})")


def unsnapped_priorities(allocation, received, total, runnable, allocated, double unserved):
    """X * total / received (``unserved`` * X where nothing was received), 0 where X is 0,
    the combination cannot run or the allocation does not cover it: ``priorities``' values
    before their grid, to the bit (one IEEE division and one product, as numpy's).
    ``total``: each column's received seconds; None: summed here, row after row from the
    first, as numpy's ``received.sum(axis=0)`` sums two columns or more (one column it
    sums pairwise: the caller passes that sum). ``runnable`` and ``allocated``: uint8."""
    cdef Array X, got, tot, ok, covered
    keep = (_array(allocation, cnp.NPY_DOUBLE, 2, "allocation", &X),
            _array(received, cnp.NPY_DOUBLE, 2, "received", &got),
            _array(runnable, cnp.NPY_UINT8, 2, "runnable", &ok),
            _array(allocated, cnp.NPY_UINT8, 1, "allocated", &covered))
    cdef Py_ssize_t c = X.n0, n = X.n1, i, j
    _same_shape("received", got.n0, got.n1, c, n)
    _same_shape("runnable", ok.n0, ok.n1, c, n)
    if covered.n0 != c:
        raise ValueError(f"allocated: {covered.n0} flags for {c} rows")
    if total is None:
        total = np.zeros(n)
        sums = _array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        for i in range(c):
            for j in range(n):
                _f(tot, j)[0] = _f(got, i, j)[0] if i == 0 else _f(tot, j)[0] + _f(got, i, j)[0]
    else:
        sums = _array(total, cnp.NPY_DOUBLE, 1, "total", &tot)
        if tot.n0 != n:
            raise ValueError(f"total: {tot.n0} sums for {n} columns")
    out = np.empty((c, n))
    cdef double* prio = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    cdef double x, r
    for i in range(c):
        for j in range(n):
            x = _f(X, i, j)[0]
            if not (x > 0 and _u(ok, i, j)[0] and _u(covered, i)[0]):
                prio[i * n + j] = 0.0
                continue
            r = _f(got, i, j)[0]
            prio[i * n + j] = x * (_f(tot, j)[0] / r if r > 0 else unserved)
    return out


def positive_values(prio):
    """(flat row-major indices, values) of the entries of ``prio`` above 0: ``prio[prio >
    0]`` and where it was, for ``priorities.snapped``."""
    cdef Array P
    keep = _array(prio, cnp.NPY_DOUBLE, 2, "prio", &P)
    cdef Py_ssize_t c = P.n0, n = P.n1, i, j, k = 0
    for i in range(c):
        for j in range(n):
            k += _f(P, i, j)[0] > 0
    at = np.empty(k, dtype=np.int64)
    out = np.empty(k)
    cdef int64_t* where = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> at)
    cdef double* values = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    k = 0
    for i in range(c):
        for j in range(n):
            if _f(P, i, j)[0] > 0:
                where[k] = i * n + j
                values[k] = _f(P, i, j)[0]
                k += 1
    return at, out


def to_grid(logs, double step):
    """``logs`` in place onto the multiples of ``step``: rint(x / step) * step (numpy's
    ``np.rint(x / step) * step``, to the bit: an IEEE division, rounding to the nearest
    even integer, a product)."""
    cdef Array L
    keep = _array(logs, cnp.NPY_DOUBLE, 1, "logs", &L, True)
    cdef Py_ssize_t k
    for k in range(L.n0):
        _f(L, k)[0] = rint(_f(L, k)[0] / step) * step


def put_values(prio, where, values):
    """``prio`` at the flat row-major indices ``where`` set to ``values``."""
    cdef Array P, W, V
    keep = (_array(prio, cnp.NPY_DOUBLE, 2, "prio", &P, True),
            _array(where, cnp.NPY_INT64, 1, "where", &W),
            _array(values, cnp.NPY_DOUBLE, 1, "values", &V))
    cdef Py_ssize_t n = P.n1, k, at
    if W.n0 != V.n0:
        raise ValueError(f"put_values: {W.n0} places, {V.n0} values")
    for k in range(W.n0):
        at = _i(W, k)[0]
        if not 0 <= at < P.n0 * n:
            raise IndexError(f"put_values: place {at} outside {P.n0} x {n}")
        _f(P, at // n, at % n)[0] = _f(V, k)[0]


def plan_units(prio, deficit, tie, runnable, allocated, members, scale, list free_workers,
               type_order, bint backfill, tuple keys, tuple types, dict previous,
               dict type_of, live_workers):
    """The round as ``planner._round_plan`` takes it: (rows, their keys, type columns,
    workers, lease extended, held idle, lease opportunities), with the rows, columns and
    extensions as numpy arrays; None when a combination is not a single job on one worker
    (the Python path plans it). ``runnable`` and ``allocated`` are the flags as uint8,
    ``members`` the ``member_rows``, ``scale`` the scale factors."""
    cdef Array P, D, T, R, A, M, S
    keep = (_array(prio, cnp.NPY_DOUBLE, 2, "prio", &P),
            _array(deficit, cnp.NPY_DOUBLE, 2, "deficit", &D),
            _array(tie, cnp.NPY_DOUBLE, 2, "tie", &T),
            _array(runnable, cnp.NPY_UINT8, 2, "runnable", &R),
            _array(allocated, cnp.NPY_UINT8, 1, "allocated", &A),
            _array(members, cnp.NPY_INT64, 2, "members", &M),
            _array(scale, cnp.NPY_INT64, 1, "scale", &S))
    cdef Py_ssize_t c = P.n0, i, k, m = 0, picked, opportunities = 0
    cdef int64_t* rows_out
    cdef int64_t* columns_out
    cdef Py_ssize_t n = P.n1
    _same_shape("deficit", D.n0, D.n1, c, n)
    _same_shape("tie", T.n0, T.n1, c, n)
    _same_shape("runnable", R.n0, R.n1, c, n)
    _same_shape("members", M.n0, M.n1, c, 2)
    _same_shape("allocated and scale", A.n0, S.n0, c, c)
    if len(keys) != c or len(types) != n or len(free_workers) != n or any(
            not 0 <= j < n for j in type_order):
        raise IndexError(f"plan_units: {len(keys)} keys, {len(types)} types, "
                         f"{len(free_workers)} free counts and type order {type_order} for "
                         f"({c}, {n}) priorities")
    for i in range(c):
        if _i(S, i)[0] != 1 or _i(M, i, 0)[0] < 0 or _i(M, i, 1)[0] >= 0:
            return None
    cdef Py_ssize_t* chosen = <Py_ssize_t*> malloc((2 * c + 1) * sizeof(Py_ssize_t))
    if chosen == NULL:
        raise MemoryError()
    try:
        picked = _select(P, D, T, R, M, free_workers, type_order, backfill, chosen,
                         chosen + c)
        for k in range(picked):
            m += _u(A, chosen[k])[0]
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
            if _u(A, i)[0]:
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
        jobs = max(jobs, _i(members, i, 0)[0] + 1)
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
                if (_u(runnable, i, j)[0] and (backfill or _f(prio, i, j)[0] > 0)
                        and not taken[_i(members, i, 0)[0]]):
                    rows[n] = i
                    n += 1
            _sort(rows, rows + c, n, prio, deficit, tie, j)
            for k in range(min(n, room)):
                i = rows[k]
                taken[_i(members, i, 0)[0]] = 1
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


cdef inline double _np_max(double a, double b) noexcept nogil:
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
    return <double> _i(a, t, m)[0] if whole else _f(a, t, m)[0]


def task_seconds(steps, rates):
    """``simulator/tasks.py:run_leases``' seconds of each task: the larger of its two
    members' steps / rate, a member that makes no progress (rate 0, or NaN) taking 0
    (steps / inf); as numpy divides (an integer step count cast to a float first) and
    takes ``maximum`` (NaN if either is). ``steps``: int64 or float64."""
    cdef Array S, R
    cdef int kind = _steps_kind(steps)
    cdef bint whole = kind == cnp.NPY_INT64
    keep = (_array(steps, kind, 2, "steps", &S), _array(rates, cnp.NPY_DOUBLE, 2, "rates", &R))
    cdef Py_ssize_t k = S.n0, t
    cdef double a, b
    _same_shape("steps", S.n0, S.n1, k, 2)
    _same_shape("rates", R.n0, R.n1, k, 2)
    out = np.empty(k)
    cdef double* seconds = <double*> cnp.PyArray_DATA(<cnp.ndarray> out)
    for t in range(k):
        a = _step(S, whole, t, 0) / (_f(R, t, 0)[0] if _f(R, t, 0)[0] > 0 else INFINITY)
        b = _step(S, whole, t, 1) / (_f(R, t, 1)[0] if _f(R, t, 1)[0] > 0 else INFINITY)
        seconds[t] = a if (a >= b or a != a) else b
    return out


def finished_members(steps, remaining):
    """``simulator/tasks.py:finishing``'s (task, member) pairs in row order (``np.nonzero``'s):
    the member's steps reach what its job had left, and it had some left. Both int64, or
    both float64 (compared in their type)."""
    cdef Array S, L
    cdef int kind = _steps_kind(steps)
    keep = (_array(steps, kind, 2, "steps", &S), _array(remaining, kind, 2, "remaining", &L))
    cdef Py_ssize_t k = S.n0, t, m
    _same_shape("steps", S.n0, S.n1, k, 2)
    _same_shape("remaining", L.n0, L.n1, k, 2)
    out = []
    for t in range(k):
        for m in range(2):
            if kind == cnp.NPY_INT64:
                if _i(S, t, m)[0] >= _i(L, t, m)[0] and _i(L, t, m)[0] > 0:
                    out.append((t, m))
            elif _f(S, t, m)[0] >= _f(L, t, m)[0] and _f(L, t, m)[0] > 0:
                out.append((t, m))
    return out


cdef inline double _np_min(double a, double b) noexcept nogil:
    """``np.minimum``: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a < b else b


def leases(rate, left, member_rows, combos, columns, double span, bint whole):
    """``core/batch.py:task_leases`` for the tasks at ``combos`` on ``columns``: (rates,
    steps, remaining, members) of each task's members."""
    cdef Array R, L, M, C, J
    keep = (_array(rate, cnp.NPY_DOUBLE, 3, "rate", &R),
            _array(left, cnp.NPY_DOUBLE, 1, "left", &L),
            _array(member_rows, cnp.NPY_INT64, 2, "member_rows", &M),
            _array(combos, cnp.NPY_INT64, 1, "combos", &C),
            _array(columns, cnp.NPY_INT64, 1, "columns", &J))
    cdef Py_ssize_t k = C.n0, t, m, row
    cdef int64_t job
    cdef double lease, got, have
    _same_shape("columns and members", J.n0, M.n1, k, 2)
    if R.n2 != 2 or M.n0 != R.n0:
        raise ValueError("leases: rate must be (c, n, 2) and member_rows (c, 2)")
    for t in range(k):
        if not (0 <= _i(C, t)[0] < R.n0 and 0 <= _i(J, t)[0] < R.n1):
            raise IndexError(f"leases: task {t} at row {_i(C, t)[0]}, column {_i(J, t)[0]}")
        for m in range(2):
            if _i(M, _i(C, t)[0], m)[0] >= L.n0:
                raise IndexError(f"leases: job row {_i(M, _i(C, t)[0], m)[0]} past "
                                 f"{L.n0} rows")
    rates = np.empty((k, 2))
    have_out = np.empty((k, 2))
    steps_out = np.empty((k, 2))
    counts = np.empty(k, dtype=np.int64)
    cdef double* r = <double*> cnp.PyArray_DATA(<cnp.ndarray> rates)
    cdef double* h = <double*> cnp.PyArray_DATA(<cnp.ndarray> have_out)
    cdef double* st = <double*> cnp.PyArray_DATA(<cnp.ndarray> steps_out)
    cdef int64_t* n = <int64_t*> cnp.PyArray_DATA(<cnp.ndarray> counts)
    for t in range(k):
        n[t] = 0
        row = _i(C, t)[0]
        for m in range(2):
            job = _i(M, row, m)[0]
            if job < 0:
                got = 0.0
                have = 0.0
            else:
                n[t] += 1
                got = _f(R, row, _i(J, t)[0], m)[0]
                have = _f(L, job)[0]
            r[2 * t + m] = got
            h[2 * t + m] = have
            if whole:
                lease = _np_max(floor(got * span), 1.0)
            else:
                lease = got * span
            st[2 * t + m] = _np_min(lease, have)
    if whole:
        return rates, steps_out.astype(np.int64), have_out.astype(np.int64), counts
    return rates, steps_out, have_out, counts


def take_steps(left, member_rows, where, steps):
    """``core/progress.py:_take_steps``: ``steps[i, m]`` off the steps left of member m of
    the combination at row ``where[i]`` (no member: -1), as numpy's ``left[rows] -= steps``
    does it (every value read before any is written: a row named twice keeps its last
    write); the job rows then at or below 1e-9 steps, one entry per write, sorted."""
    cdef Array L, M, W, S
    keep = (_array(left, cnp.NPY_DOUBLE, 1, "left", &L, True),
            _array(member_rows, cnp.NPY_INT64, 2, "member_rows", &M),
            _array(where, cnp.NPY_INT64, 1, "where", &W),
            _array(steps, cnp.NPY_DOUBLE, 2, "steps", &S))
    cdef Py_ssize_t k = W.n0, width = S.n1, i, m, t = 0
    cdef int64_t job
    if S.n0 != k or not 1 <= width <= 2 or M.n1 < width:
        raise ValueError(f"take_steps: steps of shape ({S.n0}, {width}) for {k} "
                         f"combinations (1 or 2 members each)")
    for i in range(k):
        if not 0 <= _i(W, i)[0] < M.n0:
            raise IndexError(f"take_steps: combination row {_i(W, i)[0]} past {M.n0} rows")
        for m in range(width):
            if _i(M, _i(W, i)[0], m)[0] >= L.n0:
                raise IndexError(f"take_steps: job row {_i(M, _i(W, i)[0], m)[0]} past "
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
                job = _i(M, _i(W, i)[0], m)[0]
                if job >= 0:
                    rows[t] = job
                    after[t] = _f(L, job)[0] - _f(S, i, m)[0]
                    t += 1
        for i in range(t):
            _f(L, rows[i])[0] = after[i]
        finished = [rows[i] for i in range(t) if _f(L, rows[i])[0] <= 1e-9]
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
    keep = (_array(received, cnp.NPY_DOUBLE, 2, "received", &G, True),
            _array(ran, cnp.NPY_UINT8, 2, "ran", &D, True),
            _array(where, cnp.NPY_INT64, 1, "where", &W),
            _array(columns, cnp.NPY_INT64, 1, "columns", &J),
            _array(seconds, cnp.NPY_DOUBLE, 1, "seconds", &S))
    cdef Py_ssize_t k = W.n0, i
    _same_shape("columns and seconds", J.n0, S.n0, k, k)
    _same_shape("ran", D.n0, D.n1, G.n0, G.n1)
    for i in range(k):
        if not (0 <= _i(W, i)[0] < G.n0 and 0 <= _i(J, i)[0] < G.n1):
            raise IndexError(f"add_seconds: task {i} at row {_i(W, i)[0]}, column {_i(J, i)[0]}")
    cdef double* after = <double*> malloc(max(k, 1) * sizeof(double))
    if after == NULL:
        raise MemoryError()
    for i in range(k):
        after[i] = _f(G, _i(W, i)[0], _i(J, i)[0])[0] + _f(S, i)[0]
    for i in range(k):
        _f(G, _i(W, i)[0], _i(J, i)[0])[0] = after[i]
        _u(D, _i(W, i)[0], _i(J, i)[0])[0] = 1
    free(after)     # (nothing above can raise)
