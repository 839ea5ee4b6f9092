"""Choosing which co-located pairs a space-sharing problem lists (thesis §5.3.1).

The number of pairs grows as n², but "in practice we only need to consider combinations
that actually perform well". Jobs of the same kind (job type and scale factor) pair the
same way, so gains are computed once per pair of kinds. Each job then gets up to
``max_partners`` partners spread over the kinds it gains with (one of each, best kind
first, then a second of each...), so the LP can still balance who pairs with whom. The
result is O(n · max_partners) pairs, chosen deterministically. On the default catalog,
8 partners per job reach the max-min objective of all pairs to within 1% (BENCHMARKS.md).
Of the pairs a problem lists, ``useful_pairs`` gives the column model those that beat time
slicing on some type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np

from .errors import ProblemError
from .jobs import Job, Pair
from .problem import Problem

PairThroughputs = Callable[[Hashable, Hashable], Mapping[str, tuple[float, float]] | None]


def pair_gain(solo_a: Mapping[str, float], solo_b: Mapping[str, float],
              together: Mapping[str, tuple[float, float]]) -> float:
    """Best normalised throughput of the pair over worker types: above 1 beats time slicing."""
    best = 0.0
    for t, (ta, tb) in together.items():
        if solo_a.get(t, 0.0) > 0 and solo_b.get(t, 0.0) > 0 and ta > 0 and tb > 0:
            best = max(best, ta / solo_a[t] + tb / solo_b[t])
    return best


def select_pairs(jobs: Sequence[Job], kinds: Sequence[Hashable], pair_throughputs: PairThroughputs,
                 max_partners: int = 8) -> list[Pair]:
    """Pairs worth offering to a ``_packed`` policy.

    ``kinds[i]`` is job i's kind; ``pair_throughputs(kind_a, kind_b)`` gives the co-located
    steps/s per worker type (first of a, then of b) or None when they cannot share. Only
    pairs of equal scale factor that beat time slicing somewhere are kept.
    """
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, kind in enumerate(kinds):
        members[kind].append(i)
    solo = {kind: jobs[rows[0]].throughputs for kind, rows in members.items()}
    scale = {kind: jobs[rows[0]].scale_factor for kind, rows in members.items()}
    table: dict[tuple, tuple[float, Mapping]] = {}
    for a in members:
        for b in members:
            if scale[a] != scale[b] or (b, a) in table:
                continue
            together = pair_throughputs(a, b)
            if together:
                gain = pair_gain(solo[a], solo[b], together)
                if gain > 1.0:
                    table[(a, b)] = (gain, together)
    return [_pair(jobs, kinds, table, a, b) for a, b in
            partner_pairs(kinds, {k: gain for k, (gain, _) in table.items()}, max_partners)]


def partner_pairs(kinds: Sequence[Hashable], gains: Mapping[tuple[Hashable, Hashable], float],
                  max_partners: int) -> list[tuple[int, int]]:
    """The pairs of jobs (i, j), i < j, sorted, that ``select_pairs`` offers: job i is of
    kind ``kinds[i]``; ``gains[(a, b)]`` (either order) is what a pair of kinds a and b
    gains over time slicing, listed only where it beats it. Each job takes up to
    ``max_partners`` partners over the kinds it gains with (module docstring):
    O(n · max_partners) pairs in O(n · max_partners + kinds²) time."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, kind in enumerate(kinds):
        members[kind].append(i)

    def gain(a, b) -> float:
        return gains[(a, b)] if (a, b) in gains else gains[(b, a)]
    ranked = {a: sorted((b for b in members if (a, b) in gains or (b, a) in gains),
                        key=lambda b: -gain(a, b)) for a in members}
    chosen: set[tuple[int, int]] = set()
    position = {i: rank for rows in members.values() for rank, i in enumerate(rows)}
    for i, kind in enumerate(kinds):
        for j in _partners(i, kind, ranked[kind], members, position[i], max_partners):
            chosen.add((min(i, j), max(i, j)))
    return sorted(chosen)


def _partners(i: int, own_kind, kinds_by_gain, members, offset: int, limit: int) -> list[int]:
    """Up to ``limit`` partners for job ``i``: one job of each helpful kind in order of gain,
    then a second of each, and so on, so that a job's options span many kinds (the LP can
    then balance the pairing); inside a kind, jobs take turns by ``offset`` (``i``'s place
    in its own kind, which it skips)."""
    picked: list[int] = []
    for round_ in range(limit):
        live = [kind for kind in kinds_by_gain
                if round_ < len(members[kind]) - (kind == own_kind)]
        if not live:
            break
        for kind in live:
            rows = members[kind]
            if kind != own_kind:
                picked.append(rows[(offset + round_) % len(rows)])
            else:          # the kind's jobs but i, without copying them
                at = (offset + round_) % (len(rows) - 1)
                picked.append(rows[at if at < offset else at + 1])
            if len(picked) == limit:
                return picked
    return picked


def _pair(jobs, kinds, table, a: int, b: int) -> Pair:
    ka, kb = kinds[a], kinds[b]
    if (ka, kb) in table:
        together = table[(ka, kb)][1]
    else:
        together = {t: (tb, ta) for t, (ta, tb) in table[(kb, ka)][1].items()}
    return Pair((jobs[a].id, jobs[b].id), together)


def useful_pairs(problem: Problem, T: np.ndarray, types, max_partners):
    """The pair columns of the column model (``columns.build_columns``, ``T``: its jobs'
    throughputs): (pair index, first job, second job, type index, steps/s of the first, of
    the second), one entry per pair and type where the pair beats time slicing (its
    normalised throughputs sum above 1, §5.3.1), in the order of
    ``problem.pairs`` then of ``types`` (vectorised; only ``max_partners`` walks the
    candidates in Python)."""
    index = {job_id: i for i, job_id in enumerate(problem.table.ids)}
    count, n = len(problem.pairs), len(types)
    ab = np.array([(index[p.jobs[0]], index[p.jobs[1]]) for p in problem.pairs],
                  dtype=int).reshape(count, 2)
    zero = (0.0, 0.0)
    together = np.array([[p.throughputs.get(t, zero) for t in types] for p in problem.pairs],
                        dtype=float).reshape(count, n, 2)
    if not np.isfinite(together).all():
        k = int(np.argwhere(~np.isfinite(together))[0][0])
        raise ProblemError(f"pairs[{k}] (pair {problem.pairs[k].key!r}).throughputs: must be "
                           "finite")
    a, b = ab[:, 0], ab[:, 1]
    ta, tb = together[..., 0], together[..., 1]
    solo_a, solo_b = T[a], T[b]
    runs = (ta > 0) & (tb > 0) & (solo_a > 0) & (solo_b > 0)
    gain = np.zeros_like(ta)
    gain[runs] = ta[runs] / solo_a[runs] + tb[runs] / solo_b[runs]
    p, j = np.nonzero(runs & (gain > 1.0))
    if max_partners is not None:
        p, j = _best_partners(gain[p, j], a[p], b[p], p, j, max_partners)
    return p, a[p], b[p], j, ta[p, j], tb[p, j]


def _best_partners(gain, a, b, p, j, max_partners: int):
    """The candidates kept when each job may have at most ``max_partners`` partners, taken
    greedily by decreasing gain; returned sorted by (first job, second job, type)."""
    order = np.lexsort((j, b, a, -gain))
    partners: dict[int, set[int]] = {}
    kept = []
    for k in order.tolist():
        x, y = int(a[k]), int(b[k])
        px, py = partners.setdefault(x, set()), partners.setdefault(y, set())
        if (y in px) or (len(px) < max_partners and len(py) < max_partners):
            px.add(y)
            py.add(x)
            kept.append(k)
    kept = np.array(kept, dtype=int)
    kept = kept[np.lexsort((j[kept], b[kept], a[kept]))]
    return p[kept], j[kept]
