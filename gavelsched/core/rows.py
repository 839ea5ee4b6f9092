"""Per-combination state of the core as numpy rows, kept between rounds.

One row per job or co-located pair, in insertion order (which breaks priority ties, as
Gavel's dict order does). Rows are appended on admission or when an allocation first gives
a pair time, deleted when a member finishes; received times change in place after each
round. The planner reads them as they are (``batch.demand``): it never writes its inputs,
and the core writes its rows only after a plan. ``periods.install`` replaces ``tie`` with
X; nothing writes it in place.
"""

from __future__ import annotations

import numpy as np

from ..mechanism.loops import compiled_steps

# The per-row arrays, which grow and shrink together (``_grown``, ``_without``).
ROW_ARRAYS = ("scale_factor", "rate", "received", "deficit", "allocation", "tie", "allocated",
              "ran", "left", "planned")


class Rows:
    def __init__(self, n_types: int) -> None:
        self.n = n_types
        self.keys: list[str] = []
        self.members: list[tuple[str, ...]] = []
        self.index: dict[str, int] = {}
        self.scale_factor = np.zeros(0, dtype=int)
        self.rate = np.zeros((0, n_types, 2))        # steps/s of member 0 and 1 per type
        self.received = np.zeros((0, n_types))
        self.deficit = np.zeros((0, n_types))
        self.allocation = np.zeros((0, n_types))
        self.tie = np.zeros((0, n_types))             # the sort's last key, set with X
        self.allocated = np.zeros(0, dtype=bool)
        self.ran = np.zeros((0, n_types), dtype=bool)  # has run on the type (measured)
        self.left = np.zeros(0)                      # steps a job row has left (pairs: 0)
        # a job row's priority weight, restart and SLO seconds (``JobSpec.planned``) and
        # arrival: what a re-solve reads of each job, kept here once (pairs: 0)
        self.planned = np.zeros((0, 4))
        self.version = 0                             # bumped whenever rows move
        self._member_rows = np.zeros((0, 2), dtype=int)   # kept up to date
        self._runnable: np.ndarray | None = None
        self._shared = 0    # rows that are not one job's own (pairs; none: member_rows[i] = (i, -1))

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: str) -> bool:
        return key in self.index

    @property
    def member_rows(self) -> np.ndarray:
        """(c, 2) the job rows of each combination's members (-1: no second member)."""
        return self._member_rows

    def members_of(self, where: np.ndarray) -> np.ndarray:
        """(k, 2) ``member_rows`` of the combinations at rows ``where`` (``take``: indexing
        a 2-d array by an index array costs several times more)."""
        return self._member_rows.take(where, axis=0)

    @property
    def runnable(self) -> np.ndarray:
        """(c, n): every member makes progress on the type (read-only; cached, and kept
        through admissions and deletions: only a change of rates or types makes it anew)."""
        if self._runnable is None:
            self._runnable = _runnable(self.rate, self.member_rows)
        return self._runnable

    def changed(self) -> None:
        """Rows were added, dropped or re-typed, or rates changed: drop derived caches."""
        self.version += 1
        self._runnable = None

    def add_many(self, entries, seed: float, left=None, planned=None) -> None:
        """Append rows for (key, members, scale factor, rate) entries; ``left`` gives the
        steps each new job row has to do and ``planned`` its (weight, restart seconds, SLO
        seconds, arrival) (pairs: 0)."""
        entries = list(entries)
        if not entries:
            return
        self.version += 1
        index, keys, start = self.index, self.keys, len(self.keys)
        shared = 0
        for key, members, _, _ in entries:
            if key in index:
                raise KeyError(f"combination {key!r} already tracked")
            index[key] = len(keys)
            keys.append(key)
            self.members.append(members)
            shared += members != (key,)
        k = len(entries)
        self._shared += shared
        names = self._array_names()
        values = (None if shared or k > FEW_RATES else
                  self._job_rows(entries, start, seed, left, planned))
        arrays = [getattr(self, name) for name in names]
        written = None if values is None else [values.get(name) for name in names]
        for name, grown in zip(names, _grown(arrays, k, written)):
            setattr(self, name, grown)   # (not ``__dict__.update``: attribute reads would
            # no longer be specialised, ~3x slower each, and the round makes hundreds)
        new = slice(start, start + k)
        if values is None:                   # (the new rows zero: written by slices)
            self._write_rows(entries, new, seed, left, planned, shared)
        if self._runnable is not None:
            if shared:
                self._runnable[new] = _runnable(self.rate[new], self._member_rows[new])
            else:
                np.greater(self.rate[new, :, 0], 0.0, out=self._runnable[new])
            self._runnable.flags.writeable = False

    def _write_rows(self, entries, new: slice, seed: float, left, planned,
                    shared: int) -> None:
        """``add_many``'s new rows, zero until now, written array by array."""
        new_members = self._member_rows[new]
        if shared:
            index = self.index
            new_members[:] = [(index[m[0]], index[m[1]] if len(m) > 1 else -1)
                              for _, m, _, _ in entries]
        else:                     # (each row its own job's)
            new_members[:, 0] = np.arange(new.start, new.stop)
            new_members[:, 1] = -1
        _write_rates(self.rate[new], [e[3] for e in entries])
        self.scale_factor[new] = [e[2] for e in entries]
        self.received[new] = seed
        if left is not None:
            self.left[new] = left
        if planned is not None:
            self.planned[new] = planned

    def _job_rows(self, entries, start: int, seed: float, left, planned) -> dict | None:
        """The entries of new rows that are each one job's own, as ``_grown`` writes them
        (a list per array, row-major; arrays not named stay zero): what ``_write_rows``
        writes into them, in the one call that grows them instead of a numpy call each.
        None unless every rate is a job's (n,) steps/s or fewer columns (then that way)."""
        n = self.rate.shape[1]
        rates = [0.0] * (2 * n * len(entries))
        for i, entry in enumerate(entries):
            rate = entry[3]
            if type(rate) is not np.ndarray or rate.ndim != 1 or rate.shape[0] > n:
                return None
            row = rate.tolist()
            rates[2 * n * i:2 * n * i + 2 * len(row):2] = row
        out = {"rate": rates, "received": [seed] * (n * len(entries)),
               "scale_factor": [int(e[2]) for e in entries],   # (as the slice casts)
               "_member_rows": [x for i in range(start, start + len(entries)) for x in (i, -1)]}
        if left is not None:
            out["left"] = list(left)
        if planned is not None:
            out["planned"] = [x for row in planned for x in row]
        return out

    def _array_names(self) -> tuple[str, ...]:
        """The arrays with a row per combination that a change of rows copies: those of
        ``ROW_ARRAYS``, the member rows, and the runnable flags when kept."""
        names = ROW_ARRAYS + ("_member_rows",)
        return names if self._runnable is None else names + ("_runnable",)

    def set_planned(self, key: str, planned: tuple[float, float, float]) -> None:
        """A job row's (weight, restart seconds, SLO seconds): its spec changed."""
        self.planned[self.index[key], :3] = planned

    def touching(self, job_rows) -> np.ndarray:
        """(c,) True for the combinations with a member among the job rows ``job_rows``."""
        hit = np.zeros(len(self.keys) + 1, dtype=bool)   # the last entry: "no member" (-1)
        hit[job_rows] = True
        hit[-1] = False
        return hit[self._member_rows].any(axis=1)

    def keys_touching(self, job_ids) -> list[str]:
        """The keys of the combinations with a member among ``job_ids`` (tracked jobs), in
        row order: their own rows, and the pairs' with them."""
        index = self.index
        if not self._shared:      # (each row its own job's)
            return sorted(job_ids, key=index.__getitem__)
        hit = self.touching([index[j] for j in job_ids])
        return [self.keys[i] for i in np.flatnonzero(hit).tolist()]

    def drop(self, keys) -> None:
        """Delete the rows of ``keys`` (unknown keys are ignored)."""
        index = self.index
        gone = sorted(index.pop(k) for k in keys if k in index)
        if not gone:
            return
        self.version += 1
        n = len(self.keys) - len(gone)
        names = self._array_names()
        for name, kept in zip(names, _without([getattr(self, name) for name in names], gone)):
            setattr(self, name, kept)
        if self._runnable is not None:
            self._runnable.flags.writeable = False
        if self._shared:  # each row's new index; -1 for a row that goes, and last for
            at = np.delete(np.arange(n + len(gone)), gone)       # "no member" (-1)
            moved = np.full(n + len(gone) + 1, -1, dtype=np.int64)
            moved[at] = np.arange(n)
            self._member_rows = moved.take(self._member_rows)
            self._shared -= sum(self.members[i] != (self.keys[i],) for i in gone)
        else:             # each row its own job's: (i, -1)
            self._member_rows[:, 0] = np.arange(n)
        self.keys = _without_items(self.keys, gone)
        self.members = _without_items(self.members, gone)
        first = gone[0]     # the rows before the first gone keep their numbers
        index.update(zip(self.keys[first:], range(first, n)))

    def widen(self, old_types: tuple[str, ...], new_types: tuple[str, ...], seed: float) -> None:
        """Re-index the type axis (a worker type joined)."""
        pos = [old_types.index(t) if t in old_types else -1 for t in new_types]

        def remap(arr: np.ndarray, fill: float) -> np.ndarray:
            out = np.full((arr.shape[0], len(new_types)) + arr.shape[2:], fill, dtype=arr.dtype)
            for j, p in enumerate(pos):
                if p >= 0:
                    out[:, j] = arr[:, p]
            return out

        self.n = len(new_types)
        self.changed()
        self.received = remap(self.received, seed)
        self.deficit = remap(self.deficit, 0.0)
        self.allocation = remap(self.allocation, 0.0)
        self.tie = remap(self.tie, 0.0)
        self.ran = remap(self.ran, False)
        self.rate = remap(self.rate, 0.0)


def _grown(arrays: list[np.ndarray], k: int, values: list | None = None) -> list[np.ndarray]:
    """Each array with ``k`` rows after its own: zeros, or where ``values[i]`` is a list,
    those entries, row-major (compiled when built: one call)."""
    if compiled_steps is not None:
        return compiled_steps.grown(arrays, k, values)
    values = values or [None] * len(arrays)
    return [np.concatenate([a, np.zeros((k,) + a.shape[1:], a.dtype) if v is None else
                            np.array(v, dtype=a.dtype).reshape((k,) + a.shape[1:])])
            for a, v in zip(arrays, values)]


def _without(arrays: list[np.ndarray], gone: list[int]) -> list[np.ndarray]:
    """Each array without its rows ``gone`` (sorted; compiled when built: one call)."""
    if compiled_steps is not None:
        return compiled_steps.without(arrays, gone)
    return [np.delete(a, gone, axis=0) for a in arrays]


# Rows that go at once up to which lists lose them in place (one memmove each); more, and
# the lists are made anew in one pass.
FEW_GONE = 8


def _without_items(items: list, gone: list[int]) -> list:
    """``items`` without the entries at ``gone`` (sorted; ``FEW_GONE``)."""
    if len(gone) <= FEW_GONE:
        for i in reversed(gone):
            del items[i]
        return items
    drop = set(gone)
    return [item for i, item in enumerate(items) if i not in drop]


# Rows added at once up to which they are written one by one (jobs' own rows: their
# values as the arrays grow, ``Rows._job_rows``; pairs' rates: ``_write_rates``); more,
# and numpy writes each array in one call (a daemon admitting its whole queue at a start).
FEW_RATES = 16


def _write_rates(out: np.ndarray, rates) -> None:
    """Into ``out`` (k, n, 2) of zeros: steps/s of member 0 and 1 on each column, from each
    entry's (n, 2) rates, or member 0's (n,) or fewer columns (none on the configuration
    columns)."""
    n = out.shape[1]
    if len(rates) > FEW_RATES and all(np.shape(r) == (n,) for r in rates):  # (many jobs'
        out[:, :, 0] = rates                                               # at once)
        return
    for full, rate in zip(out, rates):
        rate = np.asarray(rate, dtype=float)
        if rate.ndim == 1:
            full[:rate.shape[0], 0] = rate
        else:
            full[:rate.shape[0], :rate.shape[1]] = rate


def _runnable(rate: np.ndarray, member_rows: np.ndarray) -> np.ndarray:
    """(c, n): every member of each combination makes progress on the type, read-only."""
    single = member_rows[:, 1] < 0
    return _read_only((rate[:, :, 0] > 0) & ((rate[:, :, 1] > 0) | single[:, None]))


def _read_only(flags: np.ndarray) -> np.ndarray:
    flags.flags.writeable = False
    return flags
