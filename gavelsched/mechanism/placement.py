"""Placement (thesis §5.5, last paragraph): which workers each selected combination gets.

Per type, combinations are placed in decreasing order of scale factor (ties: selection
order). Within each size, a combination that ran on this type last round keeps exactly the
same workers when they are all still free: its lease is extended and it need not
checkpoint. The others get fresh workers packed onto as few servers as possible: the
smallest server that holds the whole job (best fit), or else the servers with the most free
workers first. Fresh placements avoid, while they can, workers that a later combination
would like to keep.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .view import ClusterView


class Request(NamedTuple):
    """A selected combination that needs ``size`` workers of ``worker_type``.

    (A NamedTuple rather than a dataclass: the planner makes one per placement per round,
    as a plain tuple in the same field order.)
    """

    key: str
    worker_type: str
    size: int
    previous: tuple[int, ...] | None  # workers it held last round, if any


def place(requests: Sequence[Request], view: ClusterView,
          first: frozenset[str] = frozenset()) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Map each request key to (worker ids, lease extended). The requests keyed in
    ``first`` (runs that must not restart, ``core/restarts.py``) keep their workers before
    any other is placed, whatever their size. Raises ``ValueError`` if the requests of a
    type need more workers than the view has live."""
    out: dict[str, tuple[tuple[int, ...], bool]] = {}
    by_type: dict[str, list[Request]] = {}
    for r in requests:
        by_type.setdefault(r[1], []).append(r)
    for worker_type, reqs in by_type.items():
        if view.one_worker_per_server(worker_type):
            out.update(_place_singles(worker_type, reqs, view.live_workers(worker_type),
                                      view.live_set(worker_type)))
        else:
            out.update(_place_type(worker_type, [Request(*r) for r in reqs],
                                   view.live_servers.get(worker_type, ()), first))
    return out


def place_units(keys: Sequence[str], worker_types: Sequence[str],
                previous: Mapping[str, tuple[int, ...]],
                view: ClusterView) -> tuple[list[tuple[int, ...]], list[bool]]:
    """``place`` for one-worker requests on types whose servers hold one worker each (the
    common case, without building ``Request`` records): aligned lists of (worker ids,
    lease extended). Same rules as ``_place_singles`` (and as the compiled loop's, which
    ``plan_round`` takes when it can: ``loops.py``)."""
    workers: list = [None] * len(keys)
    extended = [False] * len(keys)
    kept: set[int] = set()
    fresh: dict[str, list[int]] = {}
    type_of = view.live_type_of     # a request keeps last round's worker if live, same type
    for pos, (prev, t) in enumerate(zip(map(previous.get, keys), worker_types)):
        if prev is not None and len(prev) == 1 and type_of.get(prev[0]) == t:
            workers[pos] = prev
            extended[pos] = True
            kept.add(prev[0])
        elif t in fresh:
            fresh[t].append(pos)
        else:
            fresh[t] = [pos]
    for t, positions in fresh.items():
        ids = view.live_workers(t)
        spare = [w for w in ids if w not in kept] if kept else ids
        if len(positions) > len(spare):
            need = len(positions) + len(ids) - len(spare)
            raise ValueError(f"placement: {need} {t} workers requested, {len(ids)} live")
        for pos, w in zip(positions, spare):
            workers[pos] = (w,)
    return workers, extended


def _keepable(r: Request, free) -> bool:
    prev = r.previous
    if prev is None or len(prev) != r.size:
        return False
    if r.size == 1:
        return prev[0] in free
    return all(w in free for w in prev)


def _disjoint(keep: dict[str, tuple[int, ...]],
              first: frozenset[str]) -> dict[str, tuple[int, ...]]:
    """``keep`` without a request whose workers another kept request claims (the ones in
    ``first``, then the earlier): last round's assignments are disjoint, so this only
    guards against a stale one."""
    claimed: set[int] = set()
    out = {}
    for key in sorted(keep, key=lambda k: k not in first):     # (stable: else in order)
        if claimed.isdisjoint(keep[key]):
            claimed.update(keep[key])
            out[key] = keep[key]
    return {key: out[key] for key in keep if key in out}


def _by_size(reqs: list[Request]) -> list[list[Request]]:
    """Groups of equal size, largest first; selection order within a group."""
    if all(r.size == 1 for r in reqs):
        return [reqs]
    groups: dict[int, list[Request]] = {}
    for r in reqs:
        groups.setdefault(r.size, []).append(r)
    return [groups[s] for s in sorted(groups, reverse=True)]


def _place_singles(worker_type: str, reqs: list[Request], ids: Sequence[int],
                   live: frozenset[int]):
    """The rules when every server holds one worker. Any ``size`` workers then use ``size``
    servers, so packing cannot improve: every request that can keep its workers does (last
    round's assignments are disjoint), and the others take the first other free workers."""
    out: dict[str, tuple[tuple[int, ...], bool]] = {}
    fresh: list[tuple[str, int]] = []
    kept: set[int] = set()
    need = 0
    for key, _, size, prev in reqs:
        need += size
        if prev is not None and len(prev) == size and live.issuperset(prev):
            out[key] = (prev, True)
            kept.update(prev)
        else:
            fresh.append((key, size))
    if need > len(live):
        raise ValueError(f"placement: {need} {worker_type} workers requested, {len(live)} live")
    if fresh:
        spare = [w for w in ids if w not in kept] if kept else ids
        at = 0
        for key, size in fresh:
            out[key] = (tuple(spare[at:at + size]), False)
            at += size
    return out


def _place_type(worker_type: str, reqs: list[Request], servers,
                first: frozenset[str] = frozenset()):
    pool = _Pool(servers)
    need = sum(r.size for r in reqs)
    if need > pool.free_total:
        raise ValueError(f"placement: {need} {worker_type} workers requested, "
                         f"{pool.free_total} live")
    keep = _disjoint({r.key: r.previous for r in reqs if _keepable(r, pool.free)}, first)
    out: dict[str, tuple[tuple[int, ...], bool]] = {}
    if first:
        for key in [k for k in keep if k in first]:
            pool.take(keep[key])
            out[key] = (tuple(keep.pop(key)), True)
        reqs = [r for r in reqs if r.key not in out]
    for prev in keep.values():
        pool.want(prev)
    for group in _by_size(reqs):
        fresh = []
        for r in group:
            prev = keep.get(r.key)
            if prev is not None and all(pool.is_free(w) for w in prev):
                pool.take(prev)
                out[r.key] = (tuple(prev), True)
            else:
                fresh.append(r)
        for r in fresh:
            if r.key in keep:
                pool.unwant(keep[r.key])
            out[r.key] = (pool.pick(r.size), False)
    return out


class _Pool:
    """Free workers of one type, by server, with a count of the free workers nobody wants
    to keep per server and servers bucketed by that count (for best-fit picks)."""

    def __init__(self, servers) -> None:
        self.workers = [list(ws) for _, ws in servers]
        self.server_of: dict[int, int] = {}
        for si, ws in enumerate(self.workers):
            for w in ws:
                self.server_of[w] = si
        self.free: set[int] = set(self.server_of)
        self.wanted: set[int] = set()
        self.count = [len(ws) for ws in self.workers]      # free and not wanted
        top = max(self.count, default=0)
        self.buckets: list[list[int]] = [[] for _ in range(top + 1)]
        for si, c in enumerate(self.count):
            self.buckets[c].append(si)
        self.free_total = len(self.free)
        self.avail_total = self.free_total

    def is_free(self, w: int) -> bool:
        return w in self.free

    def _move(self, si: int, delta: int) -> None:
        old = self.count[si]
        bucket = self.buckets[old]
        del bucket[bisect.bisect_left(bucket, si)]
        self.count[si] = old + delta
        bisect.insort(self.buckets[old + delta], si)
        self.avail_total += delta

    def want(self, workers) -> None:
        for w in workers:
            if w in self.free and w not in self.wanted:
                self.wanted.add(w)
                self._move(self.server_of[w], -1)

    def unwant(self, workers) -> None:
        for w in workers:
            if w in self.wanted:
                self.wanted.discard(w)
                if w in self.free:
                    self._move(self.server_of[w], +1)

    def take(self, workers) -> None:
        for w in workers:
            self.free.discard(w)
            self.free_total -= 1
            if w in self.wanted:
                self.wanted.discard(w)
            else:
                self._move(self.server_of[w], -1)

    def _take_from(self, si: int, k: int) -> list[int]:
        got = [w for w in self.workers[si] if w in self.free and w not in self.wanted][:k]
        self.take(got)
        return got

    def pick(self, size: int) -> tuple[int, ...]:
        """``size`` free workers on as few servers as possible: the fullest-fitting single
        server (best fit), else the servers with the most free workers first. Workers
        others want to keep are used only when nothing else is left."""
        if self.avail_total < size:
            self.unwant(list(self.wanted))
        top = len(self.buckets) - 1
        for c in range(size, top + 1):
            if self.buckets[c]:
                return tuple(self._take_from(self.buckets[c][0], size))
        picked: list[int] = []
        for c in range(min(size, top + 1) - 1, 0, -1):
            while self.buckets[c] and len(picked) < size:
                picked += self._take_from(self.buckets[c][0], size - len(picked))
            if len(picked) == size:
                break
        return tuple(picked)
