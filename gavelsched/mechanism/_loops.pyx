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
checks on random inputs.
"""

from libc.stdint cimport int64_t
from libc.math cimport INFINITY, floor, rint
from libc.stdlib cimport free, malloc

import numpy as np


cdef inline bint _lt(double x, double y) noexcept nogil:
    """numpy's sort order: NaN after every number."""
    return x < y or (y != y and x == x)


cdef inline bint _before(Py_ssize_t a, Py_ssize_t b, const double[:, :] prio,
                         const double[:, :] deficit, const double[:, :] tie,
                         Py_ssize_t j) noexcept nogil:
    """Row a comes before row b in type j's queue: keys (-priority, -deficit, tie), as
    ``order_entries``' lexsort; the stable sort keeps row order on a full tie."""
    cdef double x = -prio[a, j], y = -prio[b, j]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    x = -deficit[a, j]
    y = -deficit[b, j]
    if _lt(x, y):
        return True
    if _lt(y, x):
        return False
    return _lt(tie[a, j], tie[b, j])


cdef void _sort(Py_ssize_t* rows, Py_ssize_t* spare, Py_ssize_t n, const double[:, :] prio,
                const double[:, :] deficit, const double[:, :] tie,
                Py_ssize_t j) noexcept nogil:
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


def unsnapped_priorities(const double[:, :] allocation, const double[:, :] received,
                         const double[:] total, const unsigned char[:, :] runnable,
                         const unsigned char[:] allocated, double unserved):
    """X * total / received (``unserved`` * X where nothing was received), 0 where X is 0,
    the combination cannot run or the allocation does not cover it: ``priorities``' values
    before their grid, to the bit (one IEEE division and one product, as numpy's)."""
    cdef Py_ssize_t c = allocation.shape[0], n = allocation.shape[1], i, j
    _same_shape("received", received.shape[0], received.shape[1], c, n)
    _same_shape("runnable", runnable.shape[0], runnable.shape[1], c, n)
    _same_shape("total and allocated", total.shape[0], allocated.shape[0], n, c)
    out = np.empty((c, n))
    cdef double[:, :] prio = out
    cdef double x, r
    for i in range(c):
        for j in range(n):
            x = allocation[i, j]
            if not (x > 0 and runnable[i, j] and allocated[i]):
                prio[i, j] = 0.0
                continue
            r = received[i, j]
            prio[i, j] = x * (total[j] / r if r > 0 else unserved)
    return out


def positive_values(const double[:, :] prio):
    """(flat row-major indices, values) of the entries of ``prio`` above 0: ``prio[prio >
    0]`` and where it was, for ``priorities.snapped``."""
    cdef Py_ssize_t c = prio.shape[0], n = prio.shape[1], i, j, k = 0
    for i in range(c):
        for j in range(n):
            k += prio[i, j] > 0
    at = np.empty(k, dtype=np.int64)
    out = np.empty(k)
    cdef int64_t[:] where = at
    cdef double[:] values = out
    k = 0
    for i in range(c):
        for j in range(n):
            if prio[i, j] > 0:
                where[k] = i * n + j
                values[k] = prio[i, j]
                k += 1
    return at, out


def to_grid(double[:] logs, double step):
    """``logs`` in place onto the multiples of ``step``: rint(x / step) * step (numpy's
    ``np.rint(x / step) * step``, to the bit: an IEEE division, rounding to the nearest
    even integer, a product)."""
    cdef Py_ssize_t k
    for k in range(logs.shape[0]):
        logs[k] = rint(logs[k] / step) * step


def put_values(double[:, :] prio, const int64_t[:] where, const double[:] values):
    """``prio`` at the flat row-major indices ``where`` set to ``values``."""
    cdef Py_ssize_t n = prio.shape[1], k, at
    if where.shape[0] != values.shape[0]:
        raise ValueError(f"put_values: {where.shape[0]} places, {values.shape[0]} values")
    for k in range(where.shape[0]):
        at = where[k]
        if not 0 <= at < prio.shape[0] * n:
            raise IndexError(f"put_values: place {at} outside {prio.shape[0]} x {n}")
        prio[at // n, at % n] = values[k]


def plan_units(const double[:, :] prio, const double[:, :] deficit, const double[:, :] tie,
               const unsigned char[:, :] runnable, const unsigned char[:] allocated,
               const int64_t[:, :] members, const int64_t[:] scale, list free_workers,
               type_order, bint backfill, tuple keys, tuple types, dict previous,
               dict type_of, live_workers):
    """The round as ``planner._round_plan`` takes it: (rows, their keys, type columns,
    workers, lease extended, held idle, lease opportunities), with the rows, columns and
    extensions as numpy arrays; None when a combination is not a single job on one worker
    (the Python path plans it). ``runnable`` and ``allocated`` are the flags as uint8,
    ``members`` the ``member_rows``, ``scale`` the scale factors."""
    cdef Py_ssize_t c = prio.shape[0], i, k, m = 0, picked, opportunities = 0
    cdef int64_t[:] rows_out, columns_out
    cdef Py_ssize_t n = prio.shape[1]
    _same_shape("deficit", deficit.shape[0], deficit.shape[1], c, n)
    _same_shape("tie", tie.shape[0], tie.shape[1], c, n)
    _same_shape("runnable", runnable.shape[0], runnable.shape[1], c, n)
    _same_shape("members", members.shape[0], members.shape[1], c, 2)
    _same_shape("allocated and scale", allocated.shape[0], scale.shape[0], c, c)
    if len(keys) != c or len(types) != n or len(free_workers) != n or any(
            not 0 <= j < n for j in type_order):
        raise IndexError(f"plan_units: {len(keys)} keys, {len(types)} types, "
                         f"{len(free_workers)} free counts and type order {type_order} for "
                         f"({c}, {n}) priorities")
    for i in range(c):
        if scale[i] != 1 or members[i, 0] < 0 or members[i, 1] >= 0:
            return None
    cdef Py_ssize_t* chosen = <Py_ssize_t*> malloc((2 * c + 1) * sizeof(Py_ssize_t))
    if chosen == NULL:
        raise MemoryError()
    try:
        picked = _select(prio, deficit, tie, runnable, members, free_workers, type_order,
                         backfill, chosen, chosen + c)
        for k in range(picked):
            m += allocated[chosen[k]]
        combo_index = np.empty(m, dtype=np.int64)
        type_index = np.empty(m, dtype=np.int64)
        extended = np.zeros(m, dtype=bool)
        rows_out = combo_index
        columns_out = type_index
        held, task_keys, task_types = [], [], []
        m = 0
        for k in range(picked):
            i = chosen[k]
            column = chosen[c + k]
            if allocated[i]:
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
                     extended.view(np.uint8))
    for key in keys:
        if key in previous:
            opportunities += 1
    return (combo_index, tuple(task_keys), type_index, tuple(workers), extended, tuple(held),
            opportunities)


cdef Py_ssize_t _select(const double[:, :] prio, const double[:, :] deficit,
                        const double[:, :] tie, const unsigned char[:, :] runnable,
                        const int64_t[:, :] members, list free_workers, type_order,
                        bint backfill, Py_ssize_t* chosen, Py_ssize_t* columns) except -1:
    """The round's selection, in the order taken: ``chosen[k]`` the row of the k-th entry
    and ``columns[k]`` its type column (room for one per row each); returns their number."""
    cdef Py_ssize_t c = prio.shape[0], i, j, n, room, k, picked = 0, jobs = 0
    for i in range(c):
        jobs = max(jobs, members[i, 0] + 1)
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
                if runnable[i, j] and (backfill or prio[i, j] > 0) and not taken[members[i, 0]]:
                    rows[n] = i
                    n += 1
            _sort(rows, rows + c, n, prio, deficit, tie, j)
            for k in range(min(n, room)):
                i = rows[k]
                taken[members[i, 0]] = 1
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
                     extended.view(np.uint8))
    return workers, extended.tolist()


cdef list _place(keys, worker_types, dict previous, dict type_of, live_workers,
                 unsigned char[:] extended):
    """Each key's workers (a list); ``extended[k]`` set where key k keeps last round's."""
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


ctypedef fused steps_t:
    int64_t
    double


def task_seconds(const steps_t[:, :] steps, const double[:, :] rates):
    """``simulator/tasks.py:run_leases``' seconds of each task: the larger of its two
    members' steps / rate, a member that makes no progress (rate 0, or NaN) taking 0
    (steps / inf); as numpy divides (an integer step count cast to a float first) and
    takes ``maximum`` (NaN if either is)."""
    cdef Py_ssize_t k = steps.shape[0], t
    cdef double a, b
    _same_shape("steps", steps.shape[0], steps.shape[1], k, 2)
    _same_shape("rates", rates.shape[0], rates.shape[1], k, 2)
    out = np.empty(k)
    cdef double[:] seconds = out
    for t in range(k):
        a = (<double> steps[t, 0]) / (rates[t, 0] if rates[t, 0] > 0 else INFINITY)
        b = (<double> steps[t, 1]) / (rates[t, 1] if rates[t, 1] > 0 else INFINITY)
        seconds[t] = a if (a >= b or a != a) else b
    return out


def finished_members(const steps_t[:, :] steps, const steps_t[:, :] remaining):
    """``simulator/tasks.py:finishing``'s (task, member) pairs in row order (``np.nonzero``'s):
    the member's steps reach what its job had left, and it had some left."""
    cdef Py_ssize_t k = steps.shape[0], t, m
    _same_shape("steps", steps.shape[0], steps.shape[1], k, 2)
    _same_shape("remaining", remaining.shape[0], remaining.shape[1], k, 2)
    out = []
    for t in range(k):
        for m in range(2):
            if steps[t, m] >= remaining[t, m] and remaining[t, m] > 0:
                out.append((t, m))
    return out


cdef inline double _np_min(double a, double b) noexcept nogil:
    """``np.minimum``: NaN if either is NaN."""
    if a != a or b != b:
        return a + b
    return a if a < b else b


def leases(const double[:, :, :] rate, const double[:] left, const int64_t[:, :] member_rows,
           const int64_t[:] combos, const int64_t[:] columns, double span, bint whole):
    """``core/batch.py:task_leases`` for the tasks at ``combos`` on ``columns``: (rates,
    steps, remaining, members) of each task's members."""
    cdef Py_ssize_t k = combos.shape[0], t, m
    cdef int64_t job
    cdef double lease
    _same_shape("columns and members", columns.shape[0], member_rows.shape[1], k, 2)
    if rate.shape[2] != 2 or member_rows.shape[0] != rate.shape[0]:
        raise ValueError("leases: rate must be (c, n, 2) and member_rows (c, 2)")
    for t in range(k):
        if not (0 <= combos[t] < rate.shape[0] and 0 <= columns[t] < rate.shape[1]):
            raise IndexError(f"leases: task {t} at row {combos[t]}, column {columns[t]}")
        for m in range(2):
            if member_rows[combos[t], m] >= left.shape[0]:
                raise IndexError(f"leases: job row {member_rows[combos[t], m]} past "
                                 f"{left.shape[0]} rows")
    rates = np.empty((k, 2))
    have_out = np.empty((k, 2))
    steps_out = np.empty((k, 2))
    counts = np.empty(k, dtype=np.int64)
    cdef double[:, :] r = rates, h = have_out, st = steps_out
    cdef int64_t[:] n = counts
    for t in range(k):
        n[t] = 0
        for m in range(2):
            job = member_rows[combos[t], m]
            if job < 0:
                r[t, m] = 0.0
                h[t, m] = 0.0
            else:
                n[t] += 1
                r[t, m] = rate[combos[t], columns[t], m]
                h[t, m] = left[job]
            if whole:
                lease = _np_max(floor(r[t, m] * span), 1.0)
            else:
                lease = r[t, m] * span
            st[t, m] = _np_min(lease, h[t, m])
    if whole:
        return rates, steps_out.astype(np.int64), have_out.astype(np.int64), counts
    return rates, steps_out, have_out, counts


def take_steps(double[:] left, const int64_t[:, :] member_rows, const int64_t[:] where,
               const double[:, :] steps):
    """``core/progress.py:_take_steps``: ``steps[i, m]`` off the steps left of member m of
    the combination at row ``where[i]`` (no member: -1), as numpy's ``left[rows] -= steps``
    does it (every value read before any is written: a row named twice keeps its last
    write); the job rows then at or below 1e-9 steps, one entry per write, sorted."""
    cdef Py_ssize_t k = where.shape[0], width = steps.shape[1], i, m, t = 0
    cdef int64_t job
    if steps.shape[0] != k or not 1 <= width <= 2:
        raise ValueError(f"take_steps: steps of shape ({steps.shape[0]}, {width}) for {k} "
                         f"combinations (1 or 2 members each)")
    for i in range(k):
        if not 0 <= where[i] < member_rows.shape[0]:
            raise IndexError(f"take_steps: combination row {where[i]} past "
                             f"{member_rows.shape[0]} rows")
        for m in range(width):
            if member_rows[where[i], m] >= left.shape[0]:
                raise IndexError(f"take_steps: job row {member_rows[where[i], m]} past "
                                 f"{left.shape[0]} rows")
    cdef double* after = <double*> malloc(max(k * width, 1) * sizeof(double))
    cdef int64_t* rows = <int64_t*> malloc(max(k * width, 1) * sizeof(int64_t))
    if after == NULL or rows == NULL:
        free(after)
        free(rows)
        raise MemoryError()
    try:
        for i in range(k):
            for m in range(width):
                job = member_rows[where[i], m]
                if job >= 0:
                    rows[t] = job
                    after[t] = left[job] - steps[i, m]
                    t += 1
        for i in range(t):
            left[rows[i]] = after[i]
        finished = [rows[i] for i in range(t) if left[rows[i]] <= 1e-9]
    finally:
        free(after)
        free(rows)
    finished.sort()
    return finished


def add_seconds(double[:, :] received, unsigned char[:, :] ran, const int64_t[:] where,
                const int64_t[:] columns, const double[:] seconds):
    """``core/progress.py:credit_round``'s ``received[where, columns] += seconds`` (every
    value read before any is written, as numpy does) and ``ran[where, columns] = True``."""
    cdef Py_ssize_t k = where.shape[0], i
    _same_shape("columns and seconds", columns.shape[0], seconds.shape[0], k, k)
    _same_shape("ran", ran.shape[0], ran.shape[1], received.shape[0], received.shape[1])
    for i in range(k):
        if not (0 <= where[i] < received.shape[0] and 0 <= columns[i] < received.shape[1]):
            raise IndexError(f"add_seconds: task {i} at row {where[i]}, column {columns[i]}")
    cdef double* after = <double*> malloc(max(k, 1) * sizeof(double))
    if after == NULL:
        raise MemoryError()
    for i in range(k):
        after[i] = received[where[i], columns[i]] + seconds[i]
    for i in range(k):
        received[where[i], columns[i]] = after[i]
        ran[where[i], columns[i]] = 1
    free(after)     # (nothing above can raise)
