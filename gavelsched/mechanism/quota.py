"""Per-entity GPU caps, held by the round planner whatever the policy.

An entity (a tenant of the hierarchical policies, thesis §5.4.3) may cap the GPUs its jobs
hold at once (``policies.Entity.max_gpus``). The cap is a quota of the mechanism, not a
term of one policy's program, as Kueue's nominal quota or Slurm's ``GrpTRES`` limit holds
whatever orders the queue: every policy's allocation goes through the same greedy selection
(thesis §5.5, Algorithm 2), and there an entry whose entity would go over its cap is
skipped for this round (the job stays pending, as Slurm leaves a job whose association is at
its ``GrpTRES`` limit) and the next entry in priority order gets the workers. So a round's
plan never gives an entity's jobs more GPUs than its cap, and a refill (``place_freed``)
counts what the round in flight still holds (``holding``).

A job counts its GPUs (its scale factor, or a configuration's workers of every type) for
its own entity. A co-located pair's GPUs count once for each entity of its members: two
jobs of one entity sharing a GPU hold 1 of its cap (the GPUs its jobs hold at once, as
``gavelsched status`` counts them), and jobs of two entities sharing one hold 1 of each
entity's cap (each team's job holds it). Picks held idle (a job the allocation does not
cover yet, ``PlannerConfig.hold_unallocated``) count too: the plan keeps those workers for
the job. Pure: values in, a frozen ``Quota`` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Quota:
    """The caps of one plan, aligned with a ``Demand``'s combinations.

    - ``names``: the capped entities;
    - ``room``: (E,) the GPUs each may still take in this plan (its cap less what it holds);
    - ``entity_of``: (c, 2) for each member of each combination (as ``Demand.member_rows``),
      the index of its capped entity in ``names``; -1 where it has none, or no cap.
    """

    names: tuple[str, ...]
    room: np.ndarray
    entity_of: np.ndarray

    def __post_init__(self) -> None:
        if self.room.shape != (len(self.names),):
            raise ValueError(f"quota.room: shape {self.room.shape}, expected "
                             f"{(len(self.names),)}")
        if self.entity_of.ndim != 2 or self.entity_of.shape[1] != 2:
            raise ValueError(f"quota.entity_of: shape {self.entity_of.shape}, expected (c, 2)")


def entity_quota(members: Sequence[tuple[str, ...]], entity_of: Mapping[str, str | None],
                 caps: Mapping[str, int],
                 running: Iterable[tuple[tuple[str, ...], int]] = ()) -> Quota | None:
    """The ``Quota`` of a demand whose combinations have ``members``: ``entity_of`` gives
    each job's entity, ``caps`` each capped entity's ``max_gpus``; ``running`` lists the
    (members, GPUs) of tasks that hold workers already (a refill: the round in flight),
    whose GPUs come off their members' entities' room (members not in ``entity_of`` hold
    nothing: they ended). None when nothing is capped."""
    if not caps:
        return None
    names = tuple(sorted(caps))
    index = {name: k for k, name in enumerate(names)}
    room = np.array([int(caps[name]) for name in names], dtype=np.int64)
    for task, gpus in running:
        for k in {index.get(entity_of.get(job)) for job in task} - {None}:
            room[k] -= int(gpus)

    def of(job: str) -> int:
        return index.get(entity_of.get(job), -1)

    rows = [(of(m[0]), of(m[1]) if len(m) > 1 else -1) for m in members]
    return Quota(names, np.maximum(room, 0),
                 np.array(rows, dtype=np.int64).reshape(len(rows), 2))


def holding(members: Sequence[tuple[str, ...]], gpus: Sequence[int],
            workers: Sequence[tuple[int, ...]], freed: Iterable[int]) -> list:
    """The (members, GPUs) of the tasks of a round in flight (aligned ``members``, ``gpus``,
    ``workers``, refills after the round's own) that still hold their workers at a refill:
    none of their workers is among those just ``freed`` or was handed on to a later task of
    the round (a task whose job ended, and whose workers were refilled, holds nothing).
    ``entity_quota``'s ``running``."""
    later = set(freed)
    out = []
    for task, n, ids in reversed(list(zip(members, gpus, workers))):
        if later.isdisjoint(ids):
            out.append((task, int(n)))
        later.update(ids)
    return out


def fits(room: list[int], a: int, b: int, gpus: int) -> bool:
    """Whether a task of ``gpus`` GPUs whose members belong to capped entities ``a`` and
    ``b`` (-1: none; equal for a pair of one entity) fits within ``room`` (per entity)."""
    return (a < 0 or room[a] >= gpus) and (b < 0 or room[b] >= gpus)


def take(room: list[int], a: int, b: int, gpus: int) -> None:
    """Charge ``gpus`` GPUs to ``a`` and to ``b`` (-1: none; once when equal) in ``room``."""
    if a >= 0:
        room[a] -= gpus
    if b >= 0 and b != a:
        room[b] -= gpus
