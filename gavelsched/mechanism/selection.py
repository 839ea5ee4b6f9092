"""Greedy selection without conflicts (thesis §5.5, Algorithm 2).

Entries (combination, type) are visited in decreasing priority; ties go to the larger
deficit, then the larger allocation, then the earlier combination (a stable sort). The
allocation is compared on the priorities' grid (``priorities.RELATIVE_TIE``): the solver
gave two identical jobs X one ulp apart, which decided their tie, and a replay of the same
state, whose solve came out the other way, ran them in the other order (issue #29). An entry
is taken when its type still has room for its scale factor and none of its jobs is already
taken this round: a job runs at most once per round, and a pair conflicts with its members.
A multi-GPU job takes all its workers on one type, so it is never split.

By default each type's queue is served in turn, in ``type_order`` (Gavel's per-type
queues); ``global_queue`` merges them into one list sorted across types.

With a ``Quota`` (per-entity GPU caps, ``quota.py``) an entry is also skipped when one of
its jobs' entities has too little room left, and the walk goes on to the next entry.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .priorities import snapped
from .quota import Quota, fits, take


def tie_break(allocation: np.ndarray) -> np.ndarray:
    """The sort's last key: -X on the priorities' grid (``priorities.snapped``). It changes
    only with X, so a caller that keeps X between rounds may keep it too
    (``Demand.tie_break``)."""
    return -snapped(allocation.copy())


def order_entries(prio: np.ndarray, deficit: np.ndarray, allocation: np.ndarray,
                  type_order: Sequence[int], global_queue: bool,
                  tie: np.ndarray | None = None) -> list[tuple[int, np.ndarray]]:
    """The visiting order: a list of (type index, combination indices) runs.

    Per-type mode gives one run per type in ``type_order``; global mode splits the merged
    sort into runs of consecutive entries of the same type. ``tie``: ``tie_break(allocation)``
    if the caller has it.
    """
    tie = tie_break(allocation) if tie is None else tie
    if not global_queue:
        # One lexsort sorts every type's column at once.
        order = np.lexsort((tie, -deficit, -prio), axis=0)
        return [(j, order[:, j]) for j in type_order]
    return _merged_runs(prio, deficit, tie, np.array(type_order, dtype=int))


def _merged_runs(prio, deficit, tie, cols: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The entries of columns ``cols`` in one sorted list, cut into runs of one column."""
    p, d, x = prio[:, cols], deficit[:, cols], tie[:, cols]
    # Flattened row-major: combination-major, then column in ``cols`` order (stable tie-break).
    flat = np.lexsort((x.ravel(), -d.ravel(), -p.ravel()))
    combos, type_pos = np.divmod(flat, len(cols))
    cuts = np.flatnonzero(np.diff(type_pos)) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [len(flat)])).tolist()
    return [(int(cols[type_pos[a]]), combos[a:b]) for a, b in zip(starts, ends) if b > a]


def select(runs, prio: np.ndarray, runnable: np.ndarray, scale_factor: np.ndarray,
           member_rows: np.ndarray, free: list[int], backfill: bool,
           quota: Quota | None = None) -> tuple[list[int], list[int]]:
    """Walk ``runs`` and take every entry that fits and conflicts with nothing taken.

    ``member_rows[i]`` holds the job indices of combination i's members (-1: none);
    ``free[j]`` is the number of live workers of type j. Without ``backfill``, entries of
    priority <= 0 never run (Gavel's FIFO rule). ``quota``: per-entity GPU caps
    (``quota.py``). Returns aligned lists of combination and type indices, in the order
    they were taken.
    """
    if quota is None and (scale_factor == 1).all() and not (member_rows[:, 1] >= 0).any():
        return _select_unit(runs, prio, runnable, member_rows[:, 0], free, backfill)
    return _select_walk(runs, prio, runnable, scale_factor, member_rows, free, backfill,
                        quota)


def _select_walk(runs, prio, runnable, scale_factor, member_rows, free, backfill,
                 quota: Quota | None = None):
    """The general walk: entries one by one, in order."""
    capped, ea, eb = _quota_lists(quota)
    left = list(free)
    first = member_rows[:, 0].tolist()
    second = member_rows[:, 1].tolist()
    taken = bytearray(max(len(first), int(member_rows.max(initial=-1)) + 1))
    sf = scale_factor.tolist()
    combos: list[int] = []
    types: list[int] = []
    for j, order in runs:
        room = left[j]
        if room <= 0:
            continue
        usable = _usable(runnable, prio, j, backfill)
        ok = usable.tolist()
        for i in order.tolist():
            if not ok[i]:
                continue
            a = first[i]
            if taken[a]:
                continue
            b = second[i]
            if b >= 0 and taken[b]:
                continue
            size = sf[i]
            if size > room:
                continue
            if capped is not None:
                if not fits(capped, ea[i], eb[i], size):
                    continue
                take(capped, ea[i], eb[i], size)
            room -= size
            taken[a] = 1
            if b >= 0:
                taken[b] = 1
            combos.append(i)
            types.append(j)
            if room == 0:
                break
        left[j] = room
    return combos, types


def _select_unit(runs, prio, runnable, first, free, backfill):
    """``select`` when every combination is a single job on one worker: nothing in a run
    conflicts with anything else in it, so each run takes its first ``room`` usable entries
    whose job is not yet taken (same result as the general walk, vectorised)."""
    left = list(free)
    taken = np.zeros(int(first.max(initial=-1)) + 1, dtype=bool)
    combos: list[int] = []
    types: list[int] = []
    for j, order in runs:
        room = left[j]
        if room <= 0:
            continue
        usable = _usable(runnable, prio, j, backfill)
        ok = usable[order] > taken[first[order]]     # usable and not taken (bools)
        pick = order[ok][:room]
        taken[first[pick]] = True
        combos += pick.tolist()
        types += [j] * len(pick)
        left[j] = room - len(pick)
    return combos, types


def _quota_lists(quota: Quota | None):
    """(room per entity, first members' entities, second members') as lists for a walk;
    Nones without a quota."""
    if quota is None:
        return None, None, None
    return (quota.room.tolist(), quota.entity_of[:, 0].tolist(),
            quota.entity_of[:, 1].tolist())


def _usable(runnable: np.ndarray, prio: np.ndarray, j: int, backfill: bool) -> np.ndarray:
    """Combinations that may run on type j: runnable there, and (without backfill) with a
    positive priority (Gavel's FIFO rule)."""
    return runnable[:, j] if backfill else runnable[:, j] & (prio[:, j] > 0)


# ---- several worker types in one column (VirtualFlow §6.5.2) ----------------------------

def order_entries_mixed(prio: np.ndarray, deficit: np.ndarray, allocation: np.ndarray,
                        type_order: Sequence[int], configs: np.ndarray, primary: np.ndarray,
                        global_queue: bool,
                        tie: np.ndarray | None = None) -> list[tuple[int, np.ndarray]]:
    """``order_entries`` with configuration columns ``configs`` (several types at once):
    a configuration joins the queue of its ``primary`` type (its first type in
    ``type_order``), sorted with that type's entries by the same keys; the runs are maximal
    stretches of one column, as in global mode. ``global_queue`` sorts every column at once."""
    if global_queue:
        groups = [np.concatenate([np.array(type_order, dtype=int), configs])]
    else:
        groups = [np.concatenate([[j], configs[primary == j]]).astype(int) for j in type_order]
    tie = tie_break(allocation) if tie is None else tie
    return [run for cols in groups for run in _merged_runs(prio, deficit, tie, cols)]


def select_mixed(runs, prio: np.ndarray, runnable: np.ndarray, scale_factor: np.ndarray,
                 member_rows: np.ndarray, free: list[int], backfill: bool,
                 gpus: np.ndarray, quota: Quota | None = None) -> tuple[list[int], list[int]]:
    """``select`` when the trailing columns are configurations: ``gpus[c]`` workers of each
    real type configuration c takes. An entry is taken when every type it uses has room
    and none of its jobs is taken yet (and, with a ``quota``, its entity has room for all
    its workers). A configuration runs only with a positive priority (time the policy gave
    it): idle workers are backfilled with single-type entries only."""
    n_real = len(free)
    capped, ea, eb = _quota_lists(quota)
    left = list(free)
    first, second = member_rows[:, 0].tolist(), member_rows[:, 1].tolist()
    taken = bytearray(max(len(first), int(member_rows.max(initial=-1)) + 1))
    sf = scale_factor.tolist()
    combos: list[int] = []
    types: list[int] = []
    needs: dict[int, list[tuple[int, int]]] = {}  # (type, workers) a configuration takes
    for j, order in runs:
        need = None
        if j >= n_real:
            need = needs.get(j)
            if need is None:
                row = gpus[j - n_real]
                need = needs[j] = [(t, int(row[t])) for t in np.flatnonzero(row).tolist()]
        if need is not None:
            if any(left[t] < k for t, k in need):
                continue
            ok = (runnable[:, j] & (prio[:, j] > 0)).tolist()
        else:
            if left[j] <= 0:
                continue
            ok = _usable(runnable, prio, j, backfill).tolist()
        for i in order.tolist():
            if not ok[i] or taken[first[i]] or (second[i] >= 0 and taken[second[i]]):
                continue
            if need is not None:
                if any(left[t] < k for t, k in need):
                    break
                size = sum(k for _, k in need)
            else:
                if sf[i] > left[j]:
                    continue
                size = sf[i]
            if capped is not None:
                if not fits(capped, ea[i], eb[i], size):
                    continue
                take(capped, ea[i], eb[i], size)
            if need is not None:
                for t, k in need:
                    left[t] -= k
            else:
                left[j] -= size
            taken[first[i]] = 1
            if second[i] >= 0:
                taken[second[i]] = 1
            combos.append(i)
            types.append(j)
    return combos, types
