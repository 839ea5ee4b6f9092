"""Workers freed mid-round go to waiting jobs for the rest of it (thesis §5.5, the round's
priorities; ``CoreConfig.refill_freed``): the plan over the freed workers alone, and the
hand-over of their last assignments.

Functions of their inputs; ``SchedulerCore.place_freed`` decides whether a refill is due
and joins its tasks to the round in flight."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from ..mechanism import ClusterView, Demand, holding, plan_round
from .batch import build_batch, planner_config
from .config import CoreConfig
from .jobs import JobState
from .layout import ColumnLayout
from .progress import RoundInFlight
from .records import TaskBatch
from .rows import Rows


def refillable(worker_ids, flight: RoundInFlight, now: float, round_end_s: float,
               view: ClusterView, columns: tuple[str, ...], config: CoreConfig) -> set[int]:
    """Of the workers freed at ``now``, those a refill may place (``SchedulerCore.
    place_freed``): none without ``refill_freed``, after ``refill_until`` of the round, or
    when the round was planned over other columns; only workers up and known."""
    late = round_end_s - now < (1.0 - config.refill_until) * config.round_seconds
    if (not config.refill_freed or round_end_s <= now or late
            or flight.batch.types != columns):
        return set()
    return (set(worker_ids) & set(view.worker_type_of)) - view.down


def plan_refill(flight: RoundInFlight, free: set[int], view: ClusterView, rows: Rows,
                layout: ColumnLayout, jobs: Mapping[str, JobState], config: CoreConfig,
                rng: random.Random, demand_of: Callable[..., Demand],
                seconds: float) -> tuple[TaskBatch, np.ndarray]:
    """The tasks that take the ``free`` workers for ``seconds`` (fresh starts, never an
    extension) and their rows. The jobs of the round stay out; jobs the allocation does
    not cover yet are skipped, not held idle. ``demand_of(running)``: the core's planner
    input, with what ``running`` tasks hold counted against the entities' caps."""
    running = [j for members in flight.batch.members for j in members if j in jobs]
    view = view.without(set(view.worker_type_of) - free)
    demand = demand_of(holding(flight.batch.members, flight.batch.size.tolist(),
                               flight.batch.workers, free))
    taken = np.isin(rows.member_rows, [rows.index[j] for j in running]).any(axis=1)
    # runs are held (``restarts``) at round boundaries; the jobs of the round stay out
    demand = replace(demand, runnable=demand.runnable & ~taken[:, None], pinned=None,
                     preferred=None)
    plan = plan_round(demand, view, replace(planner_config(config, layout.types, rng),
                                            hold_unallocated=False))
    batch = build_batch(plan, rows, layout, jobs, config, seconds=seconds)
    return replace(batch, extended=np.zeros(len(batch), dtype=bool)), plan.combo_index


def hand_over(assignments: dict[str, tuple[int, ...]], batch: TaskBatch) -> None:
    """The workers now belong to ``batch``'s tasks: a job whose run left them (it died, or
    was cancelled) no longer has them to keep (placement: last round's assignments are
    disjoint; a shared worker crashed the planner at 1,024 GPUs with failing workers)."""
    given = {w for ws in batch.workers for w in ws}
    for key in [k for k, ws in assignments.items() if given.intersection(ws)]:
        del assignments[key]
    assignments.update(zip(batch.keys, batch.workers))
