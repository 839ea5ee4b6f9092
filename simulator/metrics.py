"""Metrics of a simulation, collected outside the core (docs/style.md §6.6: no reporting in
the core).

``Metrics`` is the simulator's sink: the engine calls ``on_round`` once per executed round
and ``on_complete`` per finished job; ``result()`` turns what it saw into a
``SimulationResult``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

from gavelsched.core import Period, Round
from policies import Allocation, key_members

from .result import JobRecord, SimulationResult, Timeline


@dataclass
class _JobInfo:
    id: str
    job_type: str
    scale_factor: int
    arrival_s: float
    slo_s: float | None
    completion_s: float | None = None
    started_s: float | None = None


@dataclass
class Metrics:
    policy: str
    types: tuple[str, ...]
    record_timeline: bool = False
    tracked: frozenset[str] | None = None   # jobs whose allocation the timeline keeps
    # job -> its entity, with entities (thesis §5.4.3): the GPU-seconds each entity's jobs
    # held are counted (in all, and per round in the timeline); None: not counted
    entity_of: Mapping[str, str] | None = None
    entity_gpu_s: dict[str, float] = field(default_factory=dict)
    # (job type, worker type) -> GPU-seconds its jobs held there (``record_type_use``);
    # None: not counted
    type_gpu_s: dict[tuple[str, str], float] | None = None
    jobs: dict[str, _JobInfo] = field(default_factory=dict)
    rounds: int = 0
    busy_gpu_s: float = 0.0
    cost_usd: float = 0.0
    lease_opportunities: int = 0
    lease_extensions: int = 0
    resolves: int = 0
    solve_s: float = 0.0
    gap_weighted: float = 0.0
    shortfall_weighted: float = 0.0
    gap_weight: float = 0.0
    _starts: list = field(default_factory=list)
    _ends: list = field(default_factory=list)
    _busy: list = field(default_factory=list)
    _allocs: list = field(default_factory=list)
    _entity_rounds: list = field(default_factory=list)
    _waiting: set = field(default_factory=set)   # jobs submitted that made no step yet

    def on_arrival(self, job_id: str, job_type: str, scale_factor: int, arrival_s: float,
                   slo_s: float | None) -> None:
        self.jobs[job_id] = _JobInfo(job_id, job_type, scale_factor, arrival_s, slo_s)

    def on_submit(self, job_id: str) -> None:
        """The job went to the scheduler: from now on it may start (``on_started``)."""
        self._waiting.add(job_id)

    @property
    def waiting(self) -> bool:
        """Some job submitted made no step yet (else ``on_started`` has nothing to do)."""
        return bool(self._waiting)

    @property
    def waiting_jobs(self) -> AbstractSet[str]:
        """The jobs submitted that made no step yet (read, not written)."""
        return self._waiting

    def on_resolve(self, now: float, allocation: Allocation) -> None:
        self.resolves += 1
        self.solve_s += allocation.solve_s
        if self.record_timeline:
            shares: dict[str, float] = {}
            tracked = self.tracked
            for key, row in allocation.allocation.items():
                for job_id in key_members(key):
                    if tracked is not None and job_id not in tracked:
                        continue
                    info = self.jobs.get(job_id)
                    sf = info.scale_factor if info else 1
                    shares[job_id] = shares.get(job_id, 0.0) + sf * sum(row.values())
            self._allocs.append((now, shares))

    def on_round(self, rnd: Round, end_s: float, seconds: np.ndarray,
                 prices: Mapping[str, float]) -> None:
        """A round ran; ``seconds[i]`` is how long task i of ``rnd.batch`` held its workers."""
        self.rounds += 1
        self.lease_opportunities += rnd.lease_opportunities
        self.lease_extensions += rnd.lease_extensions
        batch = rnd.batch
        gpu_s = batch.size * seconds
        self.busy_gpu_s += float(gpu_s.sum())
        if self.entity_of is not None:
            self._count_entities(batch.members, gpu_s.tolist())
        mixed = batch.gpus_by_type() if batch.configurations else None
        if self.type_gpu_s is not None:
            self._count_types(batch, seconds, batch.gpus_by_type() if mixed is None else mixed)
        if prices:
            if mixed is None:
                price = np.array([prices.get(t, 0.0) for t in batch.types])
                self.cost_usd += float((price[batch.type_index] * gpu_s).sum()) / 3600.0
            else:  # tasks on several types at once (VirtualFlow §6.5.2)
                price = np.array([prices.get(t, 0.0) for t in batch.real_types])
                self.cost_usd += float(seconds @ mixed @ price) / 3600.0
        if self.record_timeline:
            if mixed is None:
                busy = np.bincount(batch.type_index, weights=batch.size,
                                   minlength=len(batch.types))
                held = [w for workers in batch.workers for w in workers]
                if len(set(held)) < len(held):   # refills (CoreConfig.refill_freed)
                    busy = _distinct_workers(batch)
            else:
                busy = mixed.sum(axis=0)
            by_type = dict(zip(batch.real_types, busy.tolist()))
            self._starts.append(rnd.start_s)
            self._ends.append(end_s)
            self._busy.append(tuple(int(by_type.get(t, 0)) for t in self.types))

    def _count_entities(self, members, gpu_s: list[float]) -> None:
        """Each task's GPU-seconds to the entity of each of its jobs (a pair's to both)."""
        this: dict[str, float] = {}
        for jobs, held in zip(members, gpu_s):
            for job_id in jobs:
                entity = self.entity_of.get(job_id, "")
                this[entity] = this.get(entity, 0.0) + held
        for entity, held in this.items():
            self.entity_gpu_s[entity] = self.entity_gpu_s.get(entity, 0.0) + held
        if self.record_timeline:
            self._entity_rounds.append(this)

    def _count_types(self, batch, seconds: np.ndarray, gpus: np.ndarray) -> None:
        """Each task's GPU-seconds on each worker type (``gpus``: its GPUs by real type,
        ``TaskBatch.gpus_by_type``) to the job type of each of its jobs (a pair's to both,
        as ``_count_entities``)."""
        held = (seconds[:, None] * gpus).tolist()
        counts, jobs, types = self.type_gpu_s, self.jobs, batch.real_types
        for members, row in zip(batch.members, held):
            for job_id in members:
                kind = jobs[job_id].job_type
                for t, gpu_s in zip(types, row):
                    if gpu_s:
                        counts[kind, t] = counts.get((kind, t), 0.0) + gpu_s

    def on_periods(self, periods: Sequence[Period]) -> None:
        for period in periods:
            length = period.end_s - period.start_s
            if length <= 0 or not period.keys:
                continue
            diff = period.allocation - period.received / length
            self.gap_weighted += float(np.abs(diff).sum()) * length
            self.shortfall_weighted += float(np.maximum(diff, 0.0).sum()) * length
            self.gap_weight += len(period.keys) * length

    def on_started(self, job_ids, at_s: float) -> None:
        """Jobs that made steps in the round that started at ``at_s`` (the first counts;
        each was submitted, ``on_submit``)."""
        for job_id in self._waiting.intersection(job_ids):
            self.jobs[job_id].started_s = at_s
            self._waiting.discard(job_id)

    def on_complete(self, job_id: str, at_s: float) -> None:
        self.jobs[job_id].completion_s = at_s

    def on_sample(self, seconds: float, held: Sequence[tuple[str, int]],
                  prices: Mapping[str, float], capacity: int) -> None:
        """A physical run's sample (thesis §5.7: physical against simulated): for
        ``seconds``, running jobs held ``held`` (worker type, GPUs), at most ``capacity``
        GPUs in all; its busy GPU-seconds and cost, as ``on_round`` counts a round's."""
        self.busy_gpu_s += seconds * min(capacity, sum(n for _, n in held))
        self.cost_usd += seconds / 3600 * sum(prices.get(t, 0.0) * n for t, n in held)

    def on_totals(self, *, rounds: int, resolves: int | None = None,
                  solve_s: float | None = None) -> None:
        """A physical run's counts, read from the daemon at its end: rounds, and the
        policy's re-solves and their total time when known."""
        self.rounds = rounds
        if resolves is not None:
            self.resolves = resolves
        if solve_s is not None:
            self.solve_s = solve_s

    def result(self, *, end_s: float, capacity: Mapping[str, int], wall_s: float,
               window: tuple[int, int] | None, order: Sequence[str]) -> SimulationResult:
        records = []
        for job_id in order:
            info = self.jobs[job_id]
            done = info.completion_s
            records.append(JobRecord(info.id, info.job_type, info.scale_factor, info.arrival_s,
                                     done, None if done is None else done - info.arrival_s,
                                     info.slo_s, info.started_s))
        measured = [r for r in records if _in_window(r.id, window)]
        jcts = [r.jct_s for r in measured if r.jct_s is not None]
        start = min((r.arrival_s for r in records), default=0.0)
        finished = [r.completion_s for r in records if r.completion_s is not None]
        makespan = (max(finished) - start) if finished else 0.0
        span = max(end_s - start, 0.0)
        total_gpus = sum(capacity.values())
        utilization = self.busy_gpu_s / (total_gpus * span) if total_gpus and span > 0 else 0.0
        violations = sum(1 for r in records if r.slo_s is not None and (
            (r.jct_s is not None and r.jct_s > r.slo_s)
            or (r.jct_s is None and end_s - r.arrival_s > r.slo_s)))
        timeline = None
        if self.record_timeline:
            timeline = Timeline(self.types, tuple(capacity.get(t, 0) for t in self.types),
                                tuple(self._starts), tuple(self._ends), tuple(self._busy),
                                tuple(self._allocs), tuple(self._entity_rounds))
        return SimulationResult(
            policy=self.policy,
            avg_jct_s=sum(jcts) / len(jcts) if jcts else None,
            makespan_s=makespan, utilization=utilization, cost_usd=self.cost_usd,
            slo_violations=violations, rounds=self.rounds, wall_s=wall_s,
            jobs=tuple(records), window=window,
            lease_extension_rate=(self.lease_extensions / self.lease_opportunities
                                  if self.lease_opportunities else None),
            allocation_gap=(self.gap_weighted / self.gap_weight if self.gap_weight else None),
            allocation_shortfall=(self.shortfall_weighted / self.gap_weight
                                  if self.gap_weight else None),
            resolves=self.resolves, solve_s=self.solve_s, end_s=end_s, timeline=timeline,
            entity_gpu_s=dict(self.entity_gpu_s),
            type_gpu_s=_nested(self.type_gpu_s) if self.type_gpu_s is not None else {},
        )


def _nested(counts: Mapping[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    """(job type, worker type) -> x as job type -> worker type -> x, sorted."""
    out: dict[str, dict[str, float]] = {}
    for (kind, t), x in sorted(counts.items()):
        out.setdefault(kind, {})[t] = x
    return out


def _in_window(job_id: str, window: tuple[int, int] | None) -> bool:
    if window is None:
        return True
    return window[0] <= int(job_id) < window[1]


def _distinct_workers(batch) -> np.ndarray:
    """Workers of each type that some task of ``batch`` held (a worker freed mid-round and
    refilled counts once)."""
    seen: list[set[int]] = [set() for _ in batch.types]
    for j, workers in zip(batch.type_index.tolist(), batch.workers):
        seen[j].update(workers)
    return np.array([len(s) for s in seen], dtype=float)
