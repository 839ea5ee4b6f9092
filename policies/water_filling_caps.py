"""Entities' GPU caps in water filling's LPs (thesis §5.4.3 with ``Entity.max_gpus``).

An entity may cap the GPUs its jobs hold at once (``Entity.max_gpus``). The round planner
holds that cap for every policy (``gavelsched/mechanism/quota.py``); water filling also
plans with it, so that what a capped entity cannot use goes to the others instead of being
given to it and left idle. Each cap is one more row of every LP,

    sum over the entity's jobs m, columns c of m:  gpus_c z_c  <=  max_gpus,

where ``gpus_c`` is the workers column c holds (a job's scale factor; a co-located pair's
column counts once for each entity of its members, as the planner counts it). Every
schedule the planner's per-round cap allows meets this row in time average; the converse
is a relaxation (two 2-GPU jobs under a cap of 3 may share 3 GPUs on average here, but run
one at a time). A column wider than its entity's cap never runs in a round, so one more
row holds all such columns at 0; a cap at least the GPUs of all its entity's jobs cannot
bind and has no row. The rows are nonnegative ``<=`` rows like (5.2) and (5.3), so every
part of water filling that reads the LP's rows (the pruned LPs, the dead-column LP, the
polish) takes them as they are, and ``shrink`` takes a solver's tolerance off them as
``within_capacity`` does off (5.2) and (5.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._lazy import sp
from .columns import Columns
from .problem import Problem


@dataclass(frozen=True)
class EntityCaps:
    """``rows @ z <= gpus``: one row per capped entity with jobs in the columns, and a
    last row ``sum z_c <= 0`` over the columns wider than their entity's cap, if any."""

    rows: sp.csr_matrix    # (E, c)
    gpus: np.ndarray       # (E,)


def entity_caps(problem: Problem, cols: Columns) -> EntityCaps | None:
    """The cap rows of ``problem``'s capped entities over ``cols`` (one row per job, as
    water filling builds them with entities); None when no entity is capped."""
    caps = {name: e.max_gpus for name, e in problem.entities.items() if e.max_gpus is not None}
    if not caps or cols.num_columns == 0:
        return None
    # A cap at least the GPUs of all its entity's jobs cannot bind (each job's time is at
    # most 1, (5.2)): no row, so the LP is the one without it.
    widest: dict[str, int] = {}
    for job in problem.jobs:
        if job.entity in caps:
            widest[job.entity] = widest.get(job.entity, 0) + job.scale_factor
    caps = {name: cap for name, cap in caps.items() if cap < widest.get(name, 0)}
    if not caps:
        return None
    names = sorted(caps)
    index = {name: k for k, name in enumerate(names)}
    entity_of = {job.id: job.entity for job in problem.jobs}
    row = np.array([index.get(entity_of.get(j), -1) for j in cols.job_ids], dtype=int)
    mine = np.flatnonzero(row >= 0)
    if mine.size == 0:
        return None
    of = sp.csr_matrix((np.ones(mine.size), (row[mine], mine)),
                       shape=(len(names), cols.num_jobs))
    gpus = np.asarray(cols.usage.sum(axis=0)).ravel()   # workers each column holds
    held = sp.csr_matrix(of @ cols.member)   # the entity's members in each column
    held.data = np.minimum(held.data, 1.0)    # a pair of one entity: its GPUs once
    rows = sp.csr_matrix(held @ sp.diags(gpus))
    bound = np.array([float(caps[n]) for n in names])
    wide = np.asarray((sp.diags(1.0 / bound) @ rows).max(axis=0).todense()).ravel() > 1.0
    if wide.any():   # columns that never fit their entity's cap: held at 0
        rows = sp.vstack([rows, sp.csr_matrix(wide.astype(float))], format="csr")
        bound = np.concatenate([bound, [0.0]])
    return EntityCaps(rows, bound)


def with_caps(A: sp.spmatrix, b: np.ndarray, e: np.ndarray, caps: EntityCaps | None):
    """The LP ``A @ z + e t <= b`` (``policies.lp.maximise_level``) with the cap rows
    after its own rows (so the rows before them keep their indices and duals)."""
    if caps is None:
        return A, b, e
    return (sp.vstack([A, caps.rows], format="csr"), np.concatenate([b, caps.gpus]),
            np.concatenate([e, np.zeros(caps.gpus.size)]))


def cap_constraints(caps: EntityCaps | None, z) -> list:
    """The cap rows as cvxpy constraints on the variable ``z`` (none without caps)."""
    return [] if caps is None else [caps.rows @ z <= caps.gpus]


def shrink(z: np.ndarray, caps: EntityCaps | None) -> np.ndarray:
    """``z`` (nonnegative) with each column shrunk by the largest overload of a cap row it
    is in: what a solver's tolerance left beyond the caps."""
    if caps is None:
        return z
    load = caps.rows @ z
    over = load > caps.gpus
    if not over.any():
        return z
    factor = np.where(over, caps.gpus / np.maximum(load, 1e-300), 1.0)
    out = np.ones_like(z)
    entries = caps.rows.tocoo()
    np.minimum.at(out, entries.col, factor[entries.row])
    return z * out
