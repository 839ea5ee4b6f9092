"""Choosing which co-located pairs a space-sharing problem lists (thesis §5.3.1).

The number of pairs grows as n², but "in practice we only need to consider combinations
that actually perform well". Jobs of the same kind (job type and scale factor) pair the
same way, so gains are computed once per pair of kinds; each job then keeps the partners
of the kinds it gains most with, up to ``max_partners``. The result is O(n · max_partners)
pairs, chosen deterministically.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Hashable, Mapping, Sequence

from .problem import Job, Pair

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
    ranked = {a: sorted((b for b in members if (a, b) in table or (b, a) in table),
                        key=lambda b: -_gain(table, a, b)) for a in members}
    chosen: dict[tuple[int, int], Pair] = {}
    for i, kind in enumerate(kinds):
        found = 0
        for other in ranked[kind]:
            for j in members[other]:
                if found >= max_partners:
                    break
                if j == i:
                    continue
                a, b = min(i, j), max(i, j)
                if (a, b) not in chosen:
                    chosen[(a, b)] = _pair(jobs, kinds, table, a, b)
                found += 1
            if found >= max_partners:
                break
    return [chosen[key] for key in sorted(chosen)]


def _gain(table, a, b) -> float:
    return table[(a, b)][0] if (a, b) in table else table[(b, a)][0]


def _pair(jobs, kinds, table, a: int, b: int) -> Pair:
    ka, kb = kinds[a], kinds[b]
    if (ka, kb) in table:
        together = table[(ka, kb)][1]
    else:
        together = {t: (tb, ta) for t, (ta, tb) in table[(kb, ka)][1].items()}
    return Pair((jobs[a].id, jobs[b].id), together)
