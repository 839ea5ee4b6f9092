"""Online throughputs (thesis §5.3.3): each job's steps/s on each worker type, learned from
what its rounds really made, replacing the table's priors in the policy's Problem.

Pure bookkeeping, no clock: ``observe`` takes the durable steps a job made and the seconds
it held its workers. A measured type's value is an exponential average of its samples. A
type not yet measured keeps its prior scaled by the job's mean measured/prior ratio (a
geometric mean), so one measurement keeps the types' ratios consistent (an emulated
cluster that runs every type 10x slower than the table still sees the table's ratios).

A co-located pair's run (thesis §5.3.1) measures the pair, not either job alone: each
member's rate there is averaged per pair and type in ``pairs``, and the core gets both once
both were measured and they moved past noise (``set_pair_throughputs``); until then it plans
the pair on the source's rates scaled as its members' (``core.jobs.pair_rates``).

A run of an elastic job on n GPUs of one type (configuration ``"t:n"``) measures the job
type's scaling on t (``traces/scaling.py``; Sia §3: throughput models refined as jobs run):
``learn`` averages it per (job type, t, n) in ``counts`` and hands it to ``scaling``
(the ``Configurations`` that prices elastic counts) when one is set, which refits the
model for the configurations it builds next. Such a sample is not a per-type throughput
of the job, so it does not enter its row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from policies import ProblemError, key_members
from policies.jobs import parse_configuration_name

from .records import ThroughputSource
from .resolving import within_noise

if TYPE_CHECKING:
    from .configurations import Configurations
    from .core import SchedulerCore

SMOOTHING = 0.5      # weight of a new sample in the exponential average


def prior_scale(pairs: Iterable[tuple[float, float]]) -> float:
    """How much faster than their priors jobs run: the geometric mean of measured / prior
    over the (measured, prior) pairs where both are > 0; 1.0 for none."""
    ratios = [math.log(v / p) for v, p in pairs if p > 0 and v > 0]
    return math.exp(sum(ratios) / len(ratios)) if ratios else 1.0


@dataclass
class OnlineThroughputs:
    """Measured steps/s per job and worker type on top of a prior ``ThroughputSource``."""

    prior: ThroughputSource
    measured: dict[str, dict[str, float]] = field(default_factory=dict)
    scaling: Configurations | None = None
    counts: dict[tuple[str, str, int], float] = field(default_factory=dict)
    # co-located pairs' measured steps/s: pair key -> type -> member job id -> average
    pairs: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    _published: dict[str, dict[str, float]] = field(default_factory=dict)
    _restored_pairs: dict[str, list[str]] = field(default_factory=dict)   # job -> its pairs

    def restore(self, measured: Mapping[str, Mapping[str, float]],
                pairs: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None) -> None:
        """What was measured before a restart: of jobs, and of pairs (as ``pairs``)."""
        for job_id, row in measured.items():
            self.measured[job_id] = dict(row)
        for pair, by_type in (pairs or {}).items():
            self.pairs[pair] = {t: dict(by_job) for t, by_job in by_type.items()}
            for member in key_members(pair):
                self._restored_pairs.setdefault(member, []).append(pair)

    def restored_pairs(self, job_id: str) -> list[str]:
        """The restored pairs of ``job_id`` not yet asked for (each member's once: a core
        gets a pair's measurements once both are admitted, ``publish_pair``)."""
        return self._restored_pairs.pop(job_id, [])

    def restore_job(self, job_id: str, measured: Mapping[str, float],
                    planned: Mapping[str, float] | None) -> None:
        """A job as another scheduler knew it: ``measured`` steps/s, and the row its core
        plans on (``changed_row``'s reference; None: its priors)."""
        self.measured[job_id] = dict(measured)
        if planned is not None:
            self._published[job_id] = dict(planned)

    def taken_on(self, job_id: str, job_type: str, scale_factor: int, types: Sequence[str],
                 planned: Mapping[str, float]) -> dict[str, float]:
        """The row to plan a measured job on that a restarted scheduler takes on with its
        allocation period, whose X was solved on ``planned``: ``planned`` itself while
        ``row`` (what was measured, the priors as they are now) is within noise of it, so
        that the plan goes on exactly as before the restart (``changed_row``'s rule), else
        ``row``. It is ``changed_row``'s reference from here."""
        row = self.row(job_id, job_type, scale_factor, types)
        was = {t: float(planned.get(t, 0.0)) for t in types}
        if within_noise([row[t] for t in types], [was[t] for t in types]):
            row = was
        self._published[job_id] = row
        return row

    def restore_counts(self, counts: Mapping[tuple[str, str, int], float]) -> None:
        """What runs on elastic counts measured before a restart (``observe_count``)."""
        for key, rate in counts.items():
            self._keep_count(key, rate)

    def observe(self, job_id: str, worker_type: str, steps: float, seconds: float) -> float | None:
        """Record ``steps`` made in ``seconds`` on ``worker_type``; the new average, or None
        for a sample that carries no information (no time, or no steps)."""
        if seconds <= 0 or steps <= 0:
            return None
        row = self.measured.setdefault(job_id, {})
        row[worker_type] = _averaged(row.get(worker_type), steps / seconds)
        return row[worker_type]

    def observe_count(self, job_type: str, worker_type: str, n: int, steps: float,
                      seconds: float) -> float | None:
        """Record ``steps`` in ``seconds`` of ``job_type`` on ``n`` GPUs of ``worker_type``
        (module docstring); the new average, or None for a sample without information.
        ``scaling``, when set, refits its model with the average."""
        if seconds <= 0 or steps <= 0:
            return None
        key = (job_type, worker_type, int(n))
        return self._keep_count(key, _averaged(self.counts.get(key), steps / seconds))

    def _keep_count(self, key: tuple[str, str, int], rate: float) -> float:
        """(job type, type, n)'s average is ``rate``; ``scaling`` refits with it."""
        self.counts[key] = rate
        if self.scaling is not None:
            job_type, worker_type, n = key
            self.scaling.measure(worker_type, job_type, n, rate)
        return rate

    def priors(self, job_type: str, scale_factor: int,
               types: Sequence[str]) -> dict[str, float]:
        """The prior steps/s of ``job_type`` on each of ``types`` (what the core plans a job
        on until ``changed_row`` gives it another row)."""
        return {t: max(0.0, float(self.prior.get(t, job_type, scale_factor))) for t in types}

    def row(self, job_id: str, job_type: str, scale_factor: int,
            types: Sequence[str]) -> dict[str, float]:
        """The job's steps/s on every type: measured where measured, else the scaled prior."""
        got = self.measured.get(job_id, {})
        priors = self.priors(job_type, scale_factor, types)
        scale = prior_scale((v, priors[t]) for t, v in got.items() if t in priors)
        return {t: got[t] if t in got else priors[t] * scale for t in types}

    def changed_row(self, job_id: str, job_type: str, scale_factor: int,
                    types: Sequence[str]) -> dict[str, float] | None:
        """``row`` when it moved past noise (``resolving.within_noise``) on some type from
        the row the core plans on (the last returned here, else the priors), else None. A
        measurement within noise of the priors leaves them: jobs of one type then keep one
        row, so the allocation's ties between them fall to the rule both executors share
        rather than to a run's jitter (issue #29: identical jobs swapped places in the
        ETAs)."""
        new = self.row(job_id, job_type, scale_factor, types)
        old = self._published.get(job_id)
        if old is None:
            old = self.priors(job_type, scale_factor, types)
        if within_noise([new[t] for t in types], [old.get(t, 0.0) for t in types]):
            return None
        self._published[job_id] = new
        return new

    def learn(self, core: SchedulerCore, job_id: str, worker_type: str, steps: float,
              seconds: float, job_type: str, scale_factor: int, types: Sequence[str],
              now: float, pair: str | None = None) -> float | None:
        """One sample of a run (the recipe both executors follow): ``observe`` it, then, if
        the job plans in ``core``, give the core its row over ``types`` when it moved
        enough to re-solve (``changed_row``). The new average, or None for a sample that
        carries no information. A run on an elastic count (``"t:n"``) goes to
        ``observe_count`` instead; one on a mix of several types (VirtualFlow §6.5.2) is
        no type's throughput and is not recorded (None). A run that shared its GPUs with
        another job (``pair``: the pair's key, thesis §5.3.1) is the pair's, slowed by
        the partner, not the job's alone on the type: it goes to ``observe_pair`` (the
        member's average there)."""
        if pair is not None:
            return self._learn_pair(core, pair, job_id, worker_type, steps, seconds, types,
                                    now)
        count = one_type_count(worker_type, types)
        if count is not None:
            return self.observe_count(job_type, *count, steps, seconds)
        if worker_type not in types:
            return None
        average = self.observe(job_id, worker_type, steps, seconds)
        if average is not None and job_id in core.active_ids:
            row = self.changed_row(job_id, job_type, scale_factor, types)
            if row is not None:
                core.set_job_throughputs(job_id, row, now)
        return average

    def observe_pair(self, pair: str, job_id: str, worker_type: str, steps: float,
                     seconds: float) -> float | None:
        """``observe`` for member ``job_id`` of the co-located ``pair`` (its key): the
        member's average there, kept apart from the job's own (``pairs``)."""
        if seconds <= 0 or steps <= 0:
            return None
        by_job = self.pairs.setdefault(pair, {}).setdefault(worker_type, {})
        by_job[job_id] = _averaged(by_job.get(job_id), steps / seconds)
        return by_job[job_id]

    def changed_pair(self, pair: str, worker_type: str,
                     planned: tuple[float, float]) -> tuple[float, float] | None:
        """The pair's measured (member a's, member b's) on ``worker_type`` when both members
        were measured there and either moved past noise from ``planned`` (what the core
        plans the pair on), else None (``changed_row``'s rule)."""
        by_job = self.pairs.get(pair, {}).get(worker_type, {})
        members = key_members(pair)
        if not all(m in by_job for m in members):
            return None
        new = tuple(by_job[m] for m in members)
        return None if within_noise(new, planned) else new

    def _learn_pair(self, core: SchedulerCore, pair: str, job_id: str, worker_type: str,
                    steps: float, seconds: float, types: Sequence[str],
                    now: float) -> float | None:
        """``learn`` for a co-located run: the member's new average; the pair's rates on
        the type to ``core`` when they moved enough (``publish_pair``)."""
        average = (self.observe_pair(pair, job_id, worker_type, steps, seconds)
                   if worker_type in types else None)
        if average is not None:
            self.publish_pair(core, pair, (worker_type,), now)
        return average

    def publish_restored_pairs(self, core: SchedulerCore, job_id: str,
                               types: Sequence[str], now: float) -> None:
        """``job_id`` was just admitted: its restored pairs (``restored_pairs``) to
        ``core``, on what was measured of them where it moved past noise
        (``publish_pair``)."""
        for pair in self.restored_pairs(job_id):
            self.publish_pair(core, pair, types, now)

    def publish_pair(self, core: SchedulerCore, pair: str, types: Iterable[str],
                     now: float) -> None:
        """The pair's measured rates on those of ``types`` where they moved past noise
        from what ``core`` plans it on (``changed_pair``) to ``core``."""
        planned = core.pair_throughputs(pair)
        moved = {t: rates for t in types if t in planned
                 and (rates := self.changed_pair(pair, t, planned[t])) is not None}
        if moved:
            core.set_pair_throughputs(pair, moved, now)

    def forget(self, job_id: str) -> None:
        """Drop what was measured of ``job_id``, a job that ended (no plan reads it again),
        and of its co-located pairs. Without it the rows of every job a long-lived daemon
        ever ran would stay (issue #30: 100,000 jobs)."""
        self.measured.pop(job_id, None)
        self._published.pop(job_id, None)
        self._restored_pairs.pop(job_id, None)
        for pair in [pair for pair in self.pairs if job_id in key_members(pair)]:
            del self.pairs[pair]


def _averaged(old: float | None, sample: float) -> float:
    """The exponential average after ``sample`` (the first sample alone)."""
    return sample if old is None else (1 - SMOOTHING) * old + SMOOTHING * sample


def one_type_count(name: str, types: Sequence[str]) -> tuple[str, int] | None:
    """(t, n) when ``name`` is the configuration ``"t:n"`` of one of ``types`` (an elastic
    count), else None (a worker type, or a mix of several)."""
    if name in types:
        return None
    try:
        gpus = parse_configuration_name(name)
    except ProblemError:
        return None
    if len(gpus) != 1:
        return None
    ((t, n),) = gpus.items()
    return (t, n) if t in types else None
