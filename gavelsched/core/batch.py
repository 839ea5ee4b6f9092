"""A round's inputs and output around the planner (thesis §5.5: each round, priorities
X / received pick the combinations that run, and the work handed to each worker is a
micro-task; §5.6: a micro-task runs for a lease): the planner's ``Demand`` and
``PlannerConfig`` from the core's rows, and the round's ``TaskBatch`` from its plan.

Functions of their inputs; the core calls them once a round."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from policies import Entity

from ..mechanism import Demand, PlannerConfig, RoundPlan, entity_quota
from ..mechanism.loops import compiled_steps
from ..mechanism.planner import take
from .config import CoreConfig
from .jobs import JobState
from .layout import ColumnLayout
from .records import TaskBatch
from .rows import Rows


def planner_config(config: CoreConfig, types: tuple[str, ...],
                   rng: random.Random) -> PlannerConfig:
    """The configured type order (types it does not name last), shuffled with ``rng``
    when ``shuffle_type_order``."""
    fixed = _fixed(config, types)       # (the same every round: made once)
    if not config.shuffle_type_order:
        return fixed
    order = list(fixed.type_order)
    rng.shuffle(order)
    return replace(fixed, type_order=tuple(order))


# The last (config, types, PlannerConfig) made, matched by identity: a core asks with the
# same two objects every round (an ``lru_cache`` hashed the CoreConfig's 24 fields at each
# call: 0.3% of a simulation's time, by py-spy; issue #30). One tuple, replaced whole, so
# that threads read a consistent entry; another core's config only makes it anew.
_last: tuple = (None, None, None)


def _fixed(config: CoreConfig, types: tuple[str, ...]) -> PlannerConfig:
    """``planner_config`` before any shuffle."""
    global _last
    last = _last
    if last[0] is config and last[1] is types:
        return last[2]
    order = list(config.type_order) + [t for t in types if t not in config.type_order]
    fixed = PlannerConfig(type_order=tuple(t for t in order if t in types),
                          global_queue=config.global_queue, backfill=config.backfill,
                          hold_unallocated=config.hold_unallocated,
                          round_seconds=config.round_seconds,
                          received_seed_s=config.seed_seconds)
    _last = (config, types, fixed)
    return fixed


def demand(rows: Rows, layout: ColumnLayout,
           assignments: Mapping[str, tuple[int, ...]]) -> Demand:
    """The rows the planner reads, with last round's workers of each combination: the
    core's own arrays and mapping, not copies. The planner never writes its inputs
    (``tests/core/test_planner.py`` plans on read-only ones), and nothing keeps a demand
    past its plan: the core writes its rows only after (a copy of each, every round, was
    1.2% of a simulation's instructions; issue #30)."""
    return Demand(
        keys=tuple(rows.keys), members=tuple(rows.members), types=layout.columns,
        scale_factor=rows.scale_factor, allocation=rows.allocation,
        received=rows.received, deficit=rows.deficit,
        runnable=rows.runnable, allocated=rows.allocated,
        previous=assignments, member_rows=rows.member_rows,
        configurations=layout.config_list, configuration_gpus=layout.config_matrix,
        tie_break=rows.tie,
    )


def with_entities(out: Demand, jobs: Mapping[str, JobState], entities: Mapping[str, Entity],
                  running=()) -> Demand:
    """``out`` with two entities or more: each combination's entity (their queues
    interleaved, ``mechanism/shares.py``) and the entities' GPU caps less what ``running``
    (members, GPUs) tasks hold (``mechanism/quota.py``). One entity or none: ``out``."""
    if len(entities) < 2:
        return out
    entity_of = {j: state.spec.entity for j, state in jobs.items()}
    number = {name: k for k, name in enumerate(entities)}
    entity = np.array([number.get(entity_of.get(m[0]), len(number)) for m in out.members],
                      dtype=np.int64)
    caps = {n: e.max_gpus for n, e in entities.items() if e.max_gpus is not None}
    return replace(out, entity=entity,
                   quota=entity_quota(out.members, entity_of, caps, running) if caps else None)


def build_batch(plan: RoundPlan, rows: Rows, layout: ColumnLayout, jobs: Mapping[str, JobState],
                config: CoreConfig, seconds: float | None = None) -> TaskBatch:
    """The round's micro-tasks: lease = floor(rate x round) steps, at least 1, at most
    what is left (Gavel); rate x round when ``whole_step_leases`` is off. ``seconds``:
    lease for that long instead of a round (the rest of a round, ``SchedulerCore.place_freed``)."""
    span = config.round_seconds if seconds is None else seconds
    r, j = plan.combo_index, plan.type_index
    rates, steps, remaining, n_members = task_leases(rows.rate, rows.left, rows.member_rows,
                                                     r, j, span, config.whole_step_leases)
    at = r.tolist()
    size = rows.scale_factor.take(r)
    task_keys, task_members = plan.task_keys, take(plan.members, at)
    configurations, splits = (), ()
    if layout.config_gpus:
        configurations = layout.config_list
        splits = [None] * len(at)
        for k in np.flatnonzero(j >= len(layout.types)).tolist():
            name = layout.columns[int(j[k])]
            size[k] = sum(layout.config_gpus[name].values())
            job = jobs[task_keys[k]]
            splits[k] = next(o.split for o in job.options
                             if o.configuration.name == name)
        splits = tuple(splits)
    return TaskBatch(
        keys=task_keys,
        members=task_members,
        types=layout.columns, type_index=j, workers=plan.workers,
        size=size, extended=plan.extended,
        steps=steps, rates=rates, remaining=remaining,
        n_members=n_members, configurations=configurations, splits=splits)


def task_leases(rate: np.ndarray, left: np.ndarray, member_rows: np.ndarray, r: np.ndarray,
                j: np.ndarray, span: float, whole: bool):
    """(rates, steps, remaining, members) of the tasks of combination rows ``r`` on columns
    ``j``: each member's steps/s (``rate``, (c, n, 2)), its lease in steps (floor(rate x span),
    at least 1, at most the steps it has left, ``left``: Gavel; rate x span when not
    ``whole``), the steps it had left (as integers with ``whole``), and each task's number
    of members. Compiled when built (``mechanism/loops.py``), to the same numbers."""
    if compiled_steps is not None:
        return compiled_steps.leases(rate, left, member_rows, r, j, float(span), whole)
    members = member_rows.take(r, axis=0)
    has = members >= 0
    rates = np.where(has, rate[r, j], 0.0)
    # a missing member (-1) reads the last row, masked: it has no steps left, and so its
    # lease below comes out 0
    remaining = np.where(has, left.take(members), 0.0)
    if whole:
        lease = np.maximum(np.floor(rates * span), 1.0)
        steps = np.minimum(lease, remaining).astype(np.int64)
        remaining = remaining.astype(np.int64)
    else:
        steps = np.minimum(rates * span, remaining)
    return rates, steps, remaining, has.sum(axis=1)


# The daemon's lease floor: a fresh run gets at least this fraction of a round after its
# start-up, past its round's end if need be (``gavelsched/daemon/runs.py``, docs/runtime.md).
MIN_LEASE_FRACTION = 0.5


def startup_charge(startup_s: float, round_seconds: float) -> float:
    """What a fresh run's start-up costs its round, on average (a replay charges it as the
    run's preemption overhead, thesis §5.7; ``core/rules.py``). Up to the lease floor, the
    start-up itself: the run steps for the rest of its round. A longer start-up ``s`` still
    gets the floor after it (the daemon runs it past its round's end), so it holds its GPUs
    ``s + F`` seconds (``F`` the floor) for ``F`` of steps, and the run after it on those
    GPUs starts that much later. It is charged the same share of the GPUs' time:
    ``c = R s / (s + F)`` in a round of ``R`` (``(R - c) / R = F / (s + F)``). Always
    under a round, so a replay ends; capped at the floor, runs with start-ups longer than
    half a round came out a quarter early (BENCHMARKS.md, "ETA error against real
    finishes")."""
    s, R = float(startup_s), float(round_seconds)
    floor = MIN_LEASE_FRACTION * R
    if s <= (1.0 - MIN_LEASE_FRACTION) * R:
        return s
    if math.isinf(s):
        return R
    return R * s / (s + floor)


def worth_launching(seconds_left: float, startup_s: float, round_seconds: float,
                    refill: bool = False) -> bool:
    """A fresh run is made only when the time left in its round covers its start-up (or
    the lease floor, which the daemon gives a run after its start-up): one that could not
    start up before its lease ends would only save what it loaded. A refill
    (``SchedulerCore.place_freed``) has no floor: it must start up in the time left. The
    daemon's launches and the simulator's refills decide with this."""
    if refill:
        return seconds_left > startup_s
    return seconds_left >= min(startup_s, MIN_LEASE_FRACTION * round_seconds)
