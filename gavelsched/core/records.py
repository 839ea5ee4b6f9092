"""Records the scheduler core takes and returns. All frozen: executors get values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from policies import Allocation, is_pair_key
from policies.frozen import record


class ThroughputSource(Protocol):
    """Steps/s of a job type on a worker type, alone and co-located.

    ``traces.ThroughputTable`` satisfies this; the daemon plugs in its estimator.
    """

    def get(self, worker_type: str, job_type: str, scale_factor: int = 1) -> float: ...

    def pair(self, worker_type: str, a: tuple[str, int],
             b: tuple[str, int]) -> tuple[float, float] | None: ...


@record
class JobSpec:
    """A job as submitted. ``slo_s`` is a duration from arrival. ``mixed``: the job may run
    on several worker types at once (virtual nodes, VirtualFlow §5), when the policy reads
    configurations (``CoreConfig.mixed_jobs`` can turn this on for every job).
    ``min_scale_factor``: the job is elastic (Varuna §4, morphing): it may also run on
    fewer GPUs of one type, down to this many (``core/configurations.py:elastic_counts``),
    when the policy reads configurations; None: exactly ``scale_factor``.
    ``restart_s``: what a restart costs the job (start-up plus checkpoint, seconds): its
    runs keep their GPUs until it has paid (``core/restarts.py``)."""

    id: str
    job_type: str
    scale_factor: int
    total_steps: int
    priority_weight: float = 1.0
    slo_s: float | None = None
    entity: str | None = None
    mixed: bool = False
    min_scale_factor: int | None = None
    restart_s: float = 0.0

    def __post_init__(self) -> None:
        if is_pair_key(self.id):
            raise ValueError(f"job id must not contain '+', got {self.id!r}")
        if self.scale_factor < 1:
            raise ValueError(f"job {self.id}: scale_factor must be >= 1, got {self.scale_factor}")
        if self.total_steps < 1:
            raise ValueError(f"job {self.id}: total_steps must be >= 1, got {self.total_steps}")
        low = self.min_scale_factor
        if low is not None and not 1 <= low <= self.scale_factor:
            raise ValueError(f"job {self.id}: min_scale_factor must be between 1 and "
                             f"scale_factor ({self.scale_factor}), got {low}")
        if not 0.0 <= self.restart_s < float("inf"):
            raise ValueError(f"job {self.id}: restart_s must be a finite number of seconds "
                             f">= 0, got {self.restart_s}")

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_type, self.scale_factor)

    @property
    def elastic(self) -> bool:
        """It may run on fewer GPUs than its scale factor."""
        return self.min_scale_factor is not None and self.min_scale_factor < self.scale_factor

    @cached_property
    def planned(self) -> tuple[float, float, float]:
        """(priority weight, restart seconds, SLO seconds or 0): what a re-solve's problem
        reads of the spec (``core/problem.py``), once per spec (a changed job gets a new
        one)."""
        return (float(self.priority_weight), float(self.restart_s), float(self.slo_s or 0.0))


@record
class MicroTask:
    """One combination's work for one round (thesis §5.5: a micro-task).

    ``steps[i]`` is the lease of ``job_ids[i]``: floor(throughput x round) steps, capped at
    what it has left (a float when whole-step leases are off); ``throughputs[i]`` the
    steps/s the core expects it to make.
    ``extended``: the same workers as last round, so no checkpoint/restore is needed.

    ``worker_types[r]`` is the type of ``workers[r]``. A task on a configuration of several
    types (VirtualFlow §6.5.2) has ``worker_type`` = ``configuration`` = its name (e.g.
    ``"k80:2+v100:1"``), its workers ordered by type name, and ``split``, the split plan
    its throughput assumes (``gavelsched.virtual.split.SplitPlan.to_dict()``: per type the
    GPUs, batch per GPU and virtual nodes per GPU; ranks in ``SplitPlan.assignment()``
    order, i.e. the order of ``workers``).
    """

    key: str
    job_ids: tuple[str, ...]
    worker_type: str
    workers: tuple[int, ...]
    steps: tuple[int | float, ...]
    throughputs: tuple[float, ...]
    extended: bool
    worker_types: tuple[str, ...] = ()
    configuration: str | None = None
    split: Mapping[str, Any] | None = None

    @property
    def mixed(self) -> bool:
        return self.configuration is not None


@record
class TaskBatch:
    """A round's micro-tasks as aligned arrays (k tasks, up to 2 members each), for
    executors that work on a whole round at once. Column 1 is 0 for single jobs."""

    keys: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    types: tuple[str, ...]          # the core's worker types; type_index points into it
    type_index: np.ndarray          # (k,)
    workers: tuple[tuple[int, ...], ...]
    size: np.ndarray                # (k,) workers held
    extended: np.ndarray            # (k,) bool
    steps: np.ndarray               # (k, 2) lease in steps per member
    rates: np.ndarray               # (k, 2) expected steps/s per member
    remaining: np.ndarray           # (k, 2) steps each member had left before the round
    n_members: np.ndarray           # (k,) 1 or 2
    # The trailing len(configurations) entries of ``types`` are configurations (several
    # types at once): GPUs per real type of each; ``splits[i]`` is task i's split plan
    # (None for a single-type task). Both empty when no configuration ran.
    configurations: tuple[Mapping[str, int], ...] = ()
    splits: tuple[Mapping[str, Any] | None, ...] = ()

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def empty(cls, types: tuple[str, ...]) -> TaskBatch:
        """No task."""
        return cls(keys=(), members=(), types=types, type_index=np.zeros(0, dtype=int),
                   workers=(), size=np.zeros(0, dtype=int), extended=np.zeros(0, dtype=bool),
                   steps=np.zeros((0, 2), dtype=np.int64), rates=np.zeros((0, 2)),
                   remaining=np.zeros((0, 2), dtype=np.int64), n_members=np.zeros(0, dtype=int))

    def plus(self, more: TaskBatch) -> TaskBatch:
        """This batch followed by ``more`` (tasks added mid-round, ``SchedulerCore.place_freed``;
        both over the same ``types``)."""
        if more.types != self.types:
            raise ValueError("TaskBatch.plus: batches over different worker types")
        if not len(more):
            return self
        if not len(self):
            return more
        cat = np.concatenate
        splits = ()
        if self.splits or more.splits:
            splits = (self.splits or (None,) * len(self)) + (more.splits or (None,) * len(more))
        return TaskBatch(
            keys=self.keys + more.keys, members=self.members + more.members, types=self.types,
            type_index=cat([self.type_index, more.type_index]),
            workers=self.workers + more.workers, size=cat([self.size, more.size]),
            extended=cat([self.extended, more.extended]),
            steps=cat([self.steps, more.steps]), rates=cat([self.rates, more.rates]),
            remaining=cat([self.remaining, more.remaining]),
            n_members=cat([self.n_members, more.n_members]),
            configurations=self.configurations or more.configurations, splits=splits)

    @property
    def real_types(self) -> tuple[str, ...]:
        return self.types[:len(self.types) - len(self.configurations)]

    def gpus_by_type(self) -> np.ndarray:
        """(k, real types) workers each task holds of each real type."""
        n = len(self.real_types)
        out = np.zeros((len(self), n))
        single = self.type_index < n
        out[np.flatnonzero(single), self.type_index[single]] = self.size[single]
        for i in np.flatnonzero(~single).tolist():
            gpus = self.configurations[int(self.type_index[i]) - n]
            out[i] = [gpus.get(t, 0) for t in self.real_types]
        return out

    def task(self, i: int) -> MicroTask:
        n = int(self.n_members[i])
        j = int(self.type_index[i])
        name = self.types[j]
        workers = self.workers[i]
        configuration = None
        if j >= len(self.types) - len(self.configurations):
            configuration = name
            gpus = self.configurations[j - len(self.real_types)]
            worker_types = tuple(t for t in sorted(gpus) for _ in range(gpus[t]))
        else:
            worker_types = (name,) * len(workers)
        return MicroTask(key=self.keys[i], job_ids=self.members[i],
                         worker_type=name, workers=workers,
                         steps=tuple(self.steps[i, :n].tolist()),
                         throughputs=tuple(float(x) for x in self.rates[i, :n]),
                         extended=bool(self.extended[i]), worker_types=worker_types,
                         configuration=configuration,
                         split=self.splits[i] if configuration is not None else None)


@record
class Round:
    """What the core decided at a round boundary. ``start_s``: when the round starts (its
    plan's time until ``RoundDriver.start`` sets it); it lasts ``round_seconds``."""

    index: int
    start_s: float
    round_seconds: float
    batch: TaskBatch
    held_idle: tuple[tuple[str, str, int], ...]  # (key, type, workers) picked but unallocated
    resolved: Allocation | None                 # the new allocation if this round re-solved
    lease_opportunities: int
    lease_extensions: int
    admitted: tuple[str, ...]
    # (job, reason): jobs the policy refused by name (a non-finite value, ...); the core
    # dropped them and solved again without them (executors fail them with the reason)
    rejected: tuple[tuple[str, str], ...] = ()

    @property
    def end_s(self) -> float:
        """When the round ends."""
        return self.start_s + self.round_seconds

    @cached_property
    def tasks(self) -> tuple[MicroTask, ...]:
        return tuple(self.batch.task(i) for i in range(len(self.batch)))


@record
class Report:
    """Progress of one micro-task at the end of its round: ``steps[i]`` done by member i,
    and ``seconds`` the combination held its workers (received time)."""

    key: str
    steps: tuple[int, ...]
    seconds: float


@record
class RoundReport:
    """Progress of a whole round, aligned with ``Round.batch``: ``seconds[i]`` the time
    task i held its workers and ``steps[i, m]`` the steps member m of task i made (None:
    no steps; the round driver credits steps on their own, ``RoundDriver.credit``)."""

    seconds: np.ndarray
    steps: np.ndarray | None = None


@record
class Period:
    """A closed allocation period (between two re-solves): for each combination the
    allocation covered, row by row, the X that was in force and the seconds it received
    on each type (seed removed)."""

    start_s: float
    end_s: float
    types: tuple[str, ...]
    keys: tuple[str, ...]
    allocation: np.ndarray   # (k, n)
    received: np.ndarray     # (k, n)

    def row(self, key: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
        i = self.keys.index(key)
        return tuple(self.allocation[i].tolist()), tuple(self.received[i].tolist())


@record
class RoundOutcome:
    completed: tuple[str, ...]


@record
class PeriodState:
    """The allocation period in progress (thesis §5.5: the mechanism moves the time each
    job receives towards X between two re-solves), as one core hands it to another (a live
    cluster's replay, ``simulator/twin.py``; a restarted daemon): its start (when received
    times last went back to the seed: the last re-solve under Gavel's rule,
    ``core/restarts.py``), and per job or co-located pair (§5.3.1; row ``i`` is ``keys[i]``,
    a pair's ``"a+b"``; columns ``types``) the X in force, the seconds received on each type
    since the start (from the seed) and its deficit (§5.5, Gavel's carry-over of past
    periods). ``runs``: the runs going on (the restart rule, ``core/restarts.py``): key ->
    (the column it runs on, the seconds its run has held its workers); a resumed core takes
    each as going on when its next round keeps it on that column. ``rates``: the steps/s
    each member was planned on on each column (§5.3.3: its priors or what was measured of
    it; ``[..., 1]`` a pair's second member, 0 for a job alone), the rates its X was solved
    on; None: not kept (a replay's jobs carry their own). ``isolated``: under finish-time
    fairness (§5.4.2, ``CoreConfig.isolated_time``) each job's Themis t^isolated so far,
    its isolated steps/s at the last re-solve and its steps left then (-1: none yet), as
    Gavel accumulates them (0, 0, -1 for a pair's row); None: not kept. ``policy_state``:
    what the policy handed back with the X in force (``Allocation.policy_state``, JSON data:
    FIFO's and Gandiva's random generator, Gandiva's pairs), read by its next solve."""

    start_s: float
    types: tuple[str, ...]
    keys: tuple[str, ...]
    allocation: np.ndarray   # (k, n)
    received: np.ndarray     # (k, n)
    deficit: np.ndarray      # (k, n)
    stale: bool = False      # an event since made the allocation stale: the next boundary
                             # re-solves if the re-solve rule allows
    runs: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    rates: np.ndarray | None = None   # (k, n, 2)
    isolated: np.ndarray | None = None   # (k, 3)
    policy_state: Mapping[str, Any] = field(default_factory=dict)

