"""Entities share each round in proportion to their allocation (issue #28).

Gavel's priorities (thesis §5.5) are per job: X over the time fraction received. With
entities (the tenants of the hierarchical policies, §5.4.3) whose jobs are alike, the jobs
of one entity fall due together, and the round goes to one entity whole: two teams weighted
2:1 on 3 GPUs get rounds a, b, a, a, b, ... Over many rounds that is 2:1, but over any 10
rounds it is 7:3 or 6:4, and a team sees its share come in lumps of the whole cluster.

So when the demand names entities, each type's queue is interleaved across them as weighted
fair queueing does (Demers, Keshav and Shenker, SIGCOMM '89). An entity's share of a type is
``asked``, the GPUs its jobs' X asks for; its k-th entry in the queue (in its own priority
order) gets the finish tag (the GPU-seconds it has had on the type + a round of the GPUs of
its first k entries) / ``asked``, and the queue is served by increasing tag, ties in the
queue's order. What it has had is what it received since the last re-solve less what it
was owed before (Gavel's deficit: X x elapsed - received, over the periods closed). Each round then splits each type between
entities as X does (2 GPUs and 1 of the 3), and what an entity received before carries
over: a share below one GPU (0.6 of 6 GPUs for weights 4:3:2:1) gets its GPU every few
rounds instead of never. Each job's own turn still follows its priority within its entity;
entries with no time in X on the type (backfill) keep their place after the others. Pure:
arrays in, runs out.
"""

from __future__ import annotations

import numpy as np


def interleave(runs: list[tuple[int, np.ndarray]], entity: np.ndarray,
               allocation: np.ndarray, scale_factor: np.ndarray, had: np.ndarray,
               round_seconds: float) -> list[tuple[int, np.ndarray]]:
    """``runs`` (type index, combination indices in visiting order) with each run's
    entries reordered by their entity's finish tags. ``entity`` (c,) numbers each
    combination's entity (0..E-1), ``allocation`` (c, n) is X, ``scale_factor`` (c,),
    ``had`` (c, n) the seconds each combination has had on each type (negative: owed)."""
    count = int(entity.max(initial=-1)) + 1
    if count < 2:
        return runs
    out = []
    for j, order in runs:
        asked = allocation[order, j] > 0
        e, size = entity[order], scale_factor[order].astype(float)
        target = np.bincount(e[asked], weights=(allocation[order, j] * size)[asked],
                             minlength=count)
        served = np.bincount(e, weights=had[order, j] * size, minlength=count)
        tags = np.full(len(order), np.inf)
        for k in np.flatnonzero(target > 0).tolist():
            mine = asked & (e == k)
            tags[mine] = (served[k] + round_seconds * np.cumsum(size[mine])) / target[k]
        out.append((j, order[np.lexsort((np.arange(len(order)), tags))]))
    return out
