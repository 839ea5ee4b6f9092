"""The core's per-job record and how a job's row of T follows the cluster (thesis §5.3.1:
T holds each job's throughput on each accelerator type; §5.3.3: measured throughputs
replace the estimator's as jobs run).

``JobState`` is mutable and owned by the core; the modules that build a round's inputs
read it. ``new_job`` makes one on admission; ``apply_measured`` and ``retype`` rewrite a
job's throughputs, and the rates in the core's rows that derive from them, when
measurements arrive or the types change; ``pair_rates`` gives a co-located pair's (§5.3.1)
from the throughput source, its members' measurements and its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from policies import key_members

from ..mechanism import ClusterView
from .configurations import Configurations, MixedOption
from .layout import ColumnLayout
from .lookups import Lookups
from .records import JobSpec
from .rows import Rows


@dataclass
class JobState:
    """Mutable per-job state, owned by the core."""

    spec: JobSpec
    arrival_s: float
    order: int
    T: np.ndarray                      # steps/s per core type (0: cannot run there)
    throughputs: Mapping[str, float]   # the same, by type name, read-only (``by_type``)
    isolated_elapsed_s: float = 0.0    # Themis t^isolated (``CoreConfig.isolated_time``)
    isolated_rate: float = 0.0         # throughput(m, X^isolated) at the last re-solve
    left_at_resolve: float | None = None
    measured: dict[str, float] | None = None  # online steps/s by type (daemon, §5.3.3)
    # a co-located pair's own online steps/s, kept on its first member: partner id -> type
    # -> (this job's, the partner's) (``pair_rates``)
    paired: dict[str, dict[str, tuple[float, float]]] | None = None
    options: tuple[MixedOption, ...] = ()  # configurations: mixes (VirtualFlow), elastic counts


def new_job(spec: JobSpec, arrival_s: float, order: int, types: tuple[str, ...],
            lookups: Lookups, mixer: Configurations | None, view: ClusterView,
            mixed_jobs: str) -> JobState:
    """A job's record on admission: its row of T and, with a ``mixer``, the configurations
    it may run in (mixes of types when it asks or ``mixed_jobs`` is "all"; elastic counts)."""
    T = lookups.solo(spec.key).copy()
    job = JobState(spec, arrival_s, order, T, by_type(types, T))
    if mixer is not None and (spec.mixed or mixed_jobs == "all"):
        job.options = mixer.options(spec.job_type, spec.scale_factor, view.counts)
    if mixer is not None and spec.elastic:
        job.options += mixer.elastic(spec.job_type, spec.scale_factor,
                                     spec.min_scale_factor, view.counts)
    return job


def admit(taken, jobs: dict[str, JobState], rows: Rows, layout: ColumnLayout,
          lookups: Lookups, mixer: Configurations | None, view: ClusterView, config,
          order: int) -> tuple[str, ...]:
    """The jobs ``taken`` from the arrivals (``Arrivals.take``) join ``jobs`` and ``rows``,
    numbered in admission order from ``order``; returns their ids."""
    admitted, entries, left, planned = [], [], [], []
    seed = config.seed_seconds
    for spec, arrival, own, steps_done in taken:
        job = new_job(spec, arrival, order + len(admitted), layout.types, lookups, mixer,
                      view, config.mixed_jobs)
        if own is not None:
            job.measured = {t: own.get(t, 0.0) for t in layout.types}
            apply_measured(job, layout.types, layout.type_index, rows)
        jobs[spec.id] = job
        if job.options:
            layout.add_configurations(job.options, rows, seed)
        entries.append((spec.id, (spec.id,), spec.scale_factor, job))
        left.append(spec.total_steps - steps_done)
        planned.append((*spec.planned, arrival))
        admitted.append(spec.id)
    entries = [(key, members, sf, layout.rate_row(job.T, job.options))
               for key, members, sf, job in entries]
    rows.add_many(entries, seed, left=left, planned=planned)
    return tuple(admitted)


def by_type(types: tuple[str, ...], T: np.ndarray) -> Mapping[str, float]:
    """A row of T by type name, read-only: every ``Problem`` of the job shares it (a
    ``policies.Job`` keeps a read-only mapping as it is, without a copy)."""
    return MappingProxyType(dict(zip(types, T.tolist())))


def apply_measured(job: JobState, types: tuple[str, ...], type_index: Mapping[str, int],
                   rows: Rows) -> None:
    """Write ``job.measured`` over its throughputs and its row's rate (types not named
    keep their value); the caller marks the rows changed."""
    if not job.measured:
        return
    for t, v in job.measured.items():
        j = type_index.get(t)
        if j is not None:
            job.T[j] = max(0.0, v)
    job.throughputs = by_type(types, job.T)
    row = rows.index.get(job.spec.id)
    if row is not None:
        rows.rate[row, :len(types), 0] = job.T


def pair_rates(a: JobState, b: JobState, lookups: Lookups) -> np.ndarray | None:
    """(n, 2) co-located steps/s of the pair (``a``, ``b``) on each type, or None when the
    source knows none (thesis §5.3.1). The source's, each member's scaled by what the job is
    known to make alone on the type against the source's solo rate (§5.3.3: a job measured
    at half its prior makes half its prior's pair rate; the pair's slowdown stays the
    source's); on the types where the pair itself ran, its own measured rates (``paired``).
    Without measurements, the source's array itself."""
    pt = lookups.pair(a.spec.key, b.spec.key)
    own = a.paired.get(b.spec.id) if a.paired else None
    if pt is None or not (a.measured or b.measured or own):
        return pt
    out = pt.copy()
    for column, job in enumerate((a, b)):
        if job.measured:
            solo = lookups.solo(job.spec.key)
            out[:, column] *= np.divide(job.T, solo, out=np.ones(len(solo)), where=solo > 0)
    types = lookups.types
    for t, rates in (own or {}).items():
        if t in types:
            out[types.index(t)] = rates
    return out


def measure_job(job: JobState, measured: Mapping[str, float], jobs: Mapping[str, JobState],
                rows: Rows, lookups: Lookups, type_index: Mapping[str, int]) -> None:
    """``measured`` steps/s by type over the job's throughputs, its row's rates and those of
    its pairs (``apply_measured``, ``refresh_pairs``); the caller marks the rows changed."""
    job.measured = {**(job.measured or {}), **{t: float(v) for t, v in measured.items()}}
    apply_measured(job, lookups.types, type_index, rows)
    refresh_pairs((job.spec.id,), jobs, rows, lookups)


def measure_pair(key: str, measured: Mapping[str, tuple[float, float]],
                 jobs: Mapping[str, JobState], rows: Rows, lookups: Lookups) -> bool:
    """A pair's measured steps/s by type (its members', in ``key``'s order) kept on its
    first member (``JobState.paired``) and written into its row if it has one (it gets
    them when it gets one: ``pair_rates``); False (nothing kept) unless ``key`` is two
    admitted jobs. The caller marks the rows changed."""
    members = _admitted_pair(key, jobs)
    if members is None:
        return False
    first, partner = members
    job = jobs[first]
    job.paired = job.paired or {}
    job.paired[partner] = {**job.paired.get(partner, {}),
                           **{t: (float(a), float(b)) for t, (a, b) in measured.items()}}
    if key in rows.index:
        refresh_pairs((first,), jobs, rows, lookups)
    return True


def planned_pair(key: str, jobs: Mapping[str, JobState], rows: Rows,
                 lookups: Lookups) -> dict[str, tuple[float, float]]:
    """What pair ``key`` is planned on by type: its row's rates, or ``pair_rates`` before
    it has a row; empty unless ``key`` is two admitted jobs with co-located rates."""
    members = _admitted_pair(key, jobs)
    if members is None:
        return {}
    row = rows.index.get(key)
    n = len(lookups.types)
    pt = rows.rate[row, :n] if row is not None else pair_rates(*map(jobs.get, members),
                                                               lookups)
    if pt is None:
        return {}
    rates = pt.tolist()
    return {t: (rates[j][0], rates[j][1]) for j, t in enumerate(lookups.types)}


def _admitted_pair(key: str, jobs: Mapping[str, JobState]) -> tuple[str, ...] | None:
    """The two jobs ``key`` names when it is a pair of admitted jobs, else None."""
    members = key_members(key)
    return members if len(members) == 2 and all(m in jobs for m in members) else None


def forget_pairs(jobs: Mapping[str, JobState], keys) -> None:
    """The pairs of ``keys`` are gone (a member left): their measurements too."""
    for key in keys:
        first, *partner = key_members(key)
        if partner and first in jobs and jobs[first].paired:
            jobs[first].paired.pop(partner[0], None)


def planned_rates(job_ids, jobs: Mapping[str, JobState], arrivals,
                  lookups: Lookups) -> dict[str, dict[str, float]]:
    """``SchedulerCore.planned_rates``: an admitted job's throughputs; a waiting one's own
    (``arrivals``), else its priors; a job in neither is left out."""
    types, out = lookups.types, {}
    for job_id in job_ids:
        job, waiting = jobs.get(job_id), arrivals.get(job_id)
        if job is not None:
            out[job_id] = dict(job.throughputs)
        elif waiting is not None:
            own = waiting.own
            out[job_id] = (dict(zip(types, lookups.solo(waiting.spec.key).tolist()))
                           if own is None else {t: own.get(t, 0.0) for t in types})
    return out


def refresh_pairs(job_ids, jobs: Mapping[str, JobState], rows: Rows,
                  lookups: Lookups) -> None:
    """Rewrite the rates of the pair rows with a member among ``job_ids`` (``pair_rates``:
    a member or the pair was measured); the caller marks the rows changed."""
    n = len(lookups.types)
    for key in rows.keys_touching(job_ids):
        row = rows.index[key]
        members = rows.members[row]
        if len(members) == 2:
            pt = pair_rates(jobs[members[0]], jobs[members[1]], lookups)
            rows.rate[row, :n] = 0.0 if pt is None else pt


def retype(jobs: Mapping[str, JobState], rows: Rows, types: tuple[str, ...],
           type_index: Mapping[str, int], lookups: Lookups) -> None:
    """The worker types changed (``rows`` already widened, ``lookups`` already told):
    every job's throughputs and every row's rates again, measurements kept; pairs with no
    co-located throughputs left are dropped."""
    for job in jobs.values():
        job.T = lookups.solo(job.spec.key).copy()
        for t, v in (job.measured or {}).items():
            if t in type_index:
                job.T[type_index[t]] = max(0.0, v)
        job.throughputs = by_type(types, job.T)
    gone = []
    for row, (key, members) in enumerate(zip(rows.keys, rows.members)):
        n = len(types)
        if len(members) == 1:
            rows.rate[row, :n, 0] = jobs[key].T
        else:
            pt = pair_rates(*(jobs[m] for m in members), lookups)
            if pt is None:
                gone.append(key)
            else:
                rows.rate[row, :n] = pt
    rows.changed()
    rows.drop(gone)
