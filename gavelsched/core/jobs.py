"""The core's per-job record and how a job's row of T follows the cluster (thesis §5.3.1:
T holds each job's throughput on each accelerator type; §5.3.3: measured throughputs
replace the estimator's as jobs run).

``JobState`` is mutable and owned by the core; the modules that build a round's inputs
read it. ``new_job`` makes one on admission; ``apply_measured`` and ``retype`` rewrite a
job's throughputs, and the rates in the core's rows that derive from them, when
measurements arrive or the types change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..mechanism import ClusterView
from .configurations import Configurations, MixedOption
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
            pt = lookups.pair(*(jobs[m].spec.key for m in members))
            if pt is None:
                gone.append(key)
            else:
                rows.rate[row, :n] = pt
    rows.changed()
    rows.drop(gone)
