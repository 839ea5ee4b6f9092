"""Throughput lookups for the core, cached per worker-type layout (thesis §5.3.1's T: a
job's steps/s on each type, a pair's co-located steps/s; §5.3.3: a pair's throughputs may
be planned on an estimate until it has run).

``Lookups`` asks the throughput sources once per job key or pair of keys and keeps the
answer until the cluster's worker types change (``set_types``); ``PairRecords`` keeps the
policy's ``Pair`` records made from those answers between re-solves."""

from __future__ import annotations

import numpy as np

from policies import Pair
from policies.packing import pair_gain

from .records import ThroughputSource


class Lookups:
    """Solo and pair throughputs on ``types``, from ``source`` (what jobs make) or
    ``planned`` (what policies plan pairs on; None: ``source``)."""

    def __init__(self, source: ThroughputSource, planned: ThroughputSource | None,
                 types: tuple[str, ...]) -> None:
        self._source = source
        self._planned_source = planned
        self._types = types
        self._solo_cache: dict[tuple[str, int], np.ndarray] = {}
        self._pair_cache: dict[tuple[tuple[str, int], tuple[str, int]], np.ndarray | None] = {}
        self._planned_cache: dict[tuple[tuple[str, int], tuple[str, int]], np.ndarray | None] = {}
        self._gains: dict[tuple[tuple[str, int], tuple[str, int]], float] = {}
        self.pair_records = PairRecords()    # (``problem.problem_pairs``)

    @property
    def types(self) -> tuple[str, ...]:
        """The worker types each row is over, in column order."""
        return self._types

    @property
    def has_planned(self) -> bool:
        """Whether pairs are planned on a source of their own (estimates)."""
        return self._planned_source is not None

    def set_types(self, types: tuple[str, ...]) -> None:
        """The worker types changed: every cached row is stale."""
        self._types = types
        self._solo_cache.clear()
        self._pair_cache.clear()
        self._planned_cache.clear()
        self._gains.clear()

    def solo(self, key: tuple[str, int]) -> np.ndarray:
        """(n,) steps/s of a (job type, scale factor) on each type (0: cannot run there);
        cached: callers copy before they write."""
        row = self._solo_cache.get(key)
        if row is None:
            job_type, sf = key
            row = np.array([max(0.0, float(self._source.get(t, job_type, sf)))
                            for t in self._types])
            self._solo_cache[key] = row
        return row

    def pair(self, a: tuple[str, int], b: tuple[str, int], *,
             planned: bool = False) -> np.ndarray | None:
        """(n, 2) co-located steps/s of (a, b), or None when unknown on every type; from the
        planning source when ``planned`` (and there is one)."""
        source, cache = self._source, self._pair_cache
        if planned and self._planned_source is not None:
            source, cache = self._planned_source, self._planned_cache
        if (a, b) not in cache:
            rows = []
            for t in self._types:
                got = source.pair(t, a, b)
                rows.append((0.0, 0.0) if got is None else (float(got[0]), float(got[1])))
            arr = np.array(rows, dtype=float)
            cache[(a, b)] = arr if (arr > 0).all(axis=1).any() else None
        return cache[(a, b)]

    def pair_gain(self, a: tuple[str, int], b: tuple[str, int]) -> float:
        """What a pair of keys ``a`` and ``b`` gains over time slicing by the rates policies
        plan pairs on (``policies.packing.pair_gain``: above 1 beats it); cached."""
        if (a, b) not in self._gains:
            together = self.pair(a, b, planned=True)
            self._gains[a, b] = 0.0 if together is None else pair_gain(
                dict(zip(self._types, self.solo(a).tolist())),
                dict(zip(self._types, self.solo(b).tolist())),
                {t: (float(x), float(y)) for t, (x, y) in zip(self._types, together)})
        return self._gains[a, b]


class PairRecords:
    """The ``Pair`` records of the last problem by job ids, each with the array of
    co-located steps/s it was made from. Made again for a pair only when that array is
    another object: the source's rates are cached and never written (``Lookups``; a new
    type layout makes new ones), a measured or planned pair's are new arrays. A re-solve
    of n jobs otherwise made n^2/2 records anew (~9 us each: most of a simulation of
    Gandiva or a ``_packed`` policy)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[np.ndarray, tuple[str, ...], Pair | None]] = {}
        self._now: dict[tuple[str, str], tuple[np.ndarray, tuple[str, ...], Pair | None]] = {}

    def record(self, a: str, b: str, pt: np.ndarray, types: tuple[str, ...]) -> Pair | None:
        """The pair's record (None: it can share no type) from ``pt``, (n, 2) steps/s."""
        kept = self._last.get((a, b))
        if kept is not None and kept[0] is pt and kept[1] is types:
            self._now[a, b] = kept
            return kept[2]
        thr = {t: (float(pt[j, 0]), float(pt[j, 1]))
               for j, t in enumerate(types) if pt[j, 0] > 0 and pt[j, 1] > 0}
        pair = Pair(jobs=(a, b), throughputs=thr) if thr else None
        self._now[a, b] = (pt, types, pair)
        return pair

    def done(self) -> None:
        """The problem is built: keep its pairs' records only."""
        self._last, self._now = self._now, {}
