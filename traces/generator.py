"""Synthetic traces generated as in thesis §5.7.1 (Experiment Setup, Traces).

- Job types are drawn uniformly from the throughput table (the 26 types of Table 5.2).
- A job's duration on one V100 is 10^x minutes, with x ~ U[1.5, 3] with probability 0.8
  and x ~ U[3, 4] otherwise; its total steps are that duration times its V100 steps/s at its
  scale factor (as in Gandiva and Gavel).
- Arrivals form a Poisson process of ``rate_per_hour`` jobs an hour: the first job arrives
  at t = 0 (as in Gavel's generator) and the gaps are exponential with mean 3600 / rate
  seconds. A rate of 0 is a static trace: every job arrives at t = 0.
- ``multi_gpu`` ("continuous-multiple"): scale factors 1, 2, 4, 8 with probabilities
  70%, 10%, 15%, 5% (the thesis' 25% "between 2 and 4" split as 10% + 15%).
- ``priorities``: 20% of jobs get priority weight 5, the rest 1.
- ``slos``: an SLO of 1.2x, 2x or 10x the job's V100 duration, uniformly (§5.7.3, Cost).
- ``entities``: each job belongs to one of these entities, uniformly (the hierarchical
  policies of §5.4.3).
- ``mixed_fraction``: this fraction of jobs, at random, may run on several GPU types at
  once (``TraceJob.mixed``; virtual nodes, VirtualFlow §5).
- ``elastic_fraction``: this fraction of multi-GPU jobs, at random, are elastic
  (``TraceJob.min_scale_factor``; Varuna §4, morphing): they may also run on fewer GPUs
  of one type, down to a power of two drawn uniformly from 1 … scale factor / 2.

Randomness comes only from ``numpy.random.default_rng``: the seed is split into one
independent stream per attribute, so a trace is a pure function of its arguments and turning
on e.g. ``priorities`` leaves every other attribute of the trace unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from .types import ThroughputTable, TraceJob

log = logging.getLogger(__name__)

LONG_JOB_PROBABILITY = 0.2
SHORT_LOG10_MINUTES = (1.5, 3.0)
LONG_LOG10_MINUTES = (3.0, 4.0)
SCALE_FACTOR_MIX = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}
HIGH_PRIORITY_PROBABILITY = 0.2
HIGH_PRIORITY_WEIGHT = 5.0
SLO_FACTORS = (1.2, 2.0, 10.0)
REFERENCE_WORKER = "v100"

# The most jobs one generated trace holds (ten times the largest benchmark's; beyond it the
# arrays alone ran out of memory), and the highest arrival rate (jobs per hour: every job
# arrives at once well before it, and a sweep's plot cannot place a rate of 1e308).
MAX_JOBS = 1_000_000
MAX_RATE_PER_HOUR = 1e9

_STREAMS = ("job_type", "duration", "scale_factor", "arrival", "priority", "slo", "entity",
            "mixed", "elastic")


def sample_durations_s(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` V100 durations in seconds: 10^U(1.5, 3) minutes w.p. 0.8, else 10^U(3, 4)."""
    long = rng.random(n) < LONG_JOB_PROBABILITY
    low = np.where(long, LONG_LOG10_MINUTES[0], SHORT_LOG10_MINUTES[0])
    high = np.where(long, LONG_LOG10_MINUTES[1], SHORT_LOG10_MINUTES[1])
    return 60.0 * np.power(10.0, rng.uniform(low, high))


def sample_arrivals_s(rng: np.random.Generator, n: int, rate_per_hour: float) -> np.ndarray:
    """Arrival times: 0, then exponential gaps of mean 3600 / rate; all 0 when rate is 0."""
    if rate_per_hour == 0 or n == 0:
        return np.zeros(n)
    gaps = rng.exponential(3600.0 / rate_per_hour, size=n - 1)
    return np.concatenate(([0.0], np.cumsum(gaps)))


def generate_trace(num_jobs: int, rate_per_hour: float, *,
                   table: ThroughputTable | None = None, seed: int = 0,
                   multi_gpu: bool = False, priorities: bool = False, slos: bool = False,
                   job_types: Sequence[str] | None = None,
                   entities: Sequence[str] = (), mixed_fraction: float = 0.0,
                   elastic_fraction: float = 0.0,
                   reference_worker: str = REFERENCE_WORKER) -> list[TraceJob]:
    """A §5.7.1 trace of ``num_jobs`` jobs, sorted by arrival. ``table`` defaults to the
    catalog; ``job_types`` restricts the uniform draw; durations are measured on
    ``reference_worker``. Raises ``ValueError`` for bad arguments."""
    n = check_arguments(num_jobs, rate_per_hour, mixed_fraction, elastic_fraction)
    if table is None:
        from .catalog import default_table
        table = default_table()
    types = _job_types(table, job_types, reference_worker)
    rng = attribute_streams(seed)

    type_index = rng["job_type"].integers(len(types), size=n)
    durations = sample_durations_s(rng["duration"], n)
    if multi_gpu:
        scale_factors = rng["scale_factor"].choice(
            list(SCALE_FACTOR_MIX), p=list(SCALE_FACTOR_MIX.values()), size=n)
    else:
        scale_factors = np.ones(n, dtype=int)
    arrivals = sample_arrivals_s(rng["arrival"], n, rate_per_hour)
    slo_factors = rng["slo"].choice(SLO_FACTORS, size=n) if slos else None
    weights, entity_of, mixed, elastic = draw_options(
        rng, n, priorities=priorities, entities=entities, mixed_fraction=mixed_fraction,
        elastic_fraction=elastic_fraction)
    floors = rng["elastic"].random(n)     # where in 1 … sf/2 an elastic job's floor falls

    jobs, fallbacks = [], 0
    for i in range(n):
        job_type, sf = types[type_index[i]], int(scale_factors[i])
        if table.get(reference_worker, job_type, sf) <= 0:
            fallbacks, sf = fallbacks + 1, 1
        rate = table.get(reference_worker, job_type, sf)
        lower = [2 ** k for k in range(sf.bit_length()) if 2 ** k < sf]
        floor = lower[int(floors[i] * len(lower))] if elastic[i] and lower else None
        jobs.append(TraceJob(
            job_type=job_type, scale_factor=sf,
            total_steps=max(1, round(float(durations[i]) * rate)),
            arrival_s=float(arrivals[i]), priority_weight=float(weights[i]),
            slo_s=None if slo_factors is None else float(slo_factors[i] * durations[i]),
            entity=entity_of[i],
            mixed=bool(mixed[i]), min_scale_factor=floor))
    if elastic_fraction and not multi_gpu:
        log.warning("elastic_fraction=%g has no effect: every job uses one GPU without "
                    "multi_gpu", elastic_fraction)
    if fallbacks:
        log.info("%d jobs drew a scale factor their job type lacks on %s; they use 1",
                 fallbacks, reference_worker)
    log.debug("generated %d jobs at %g jobs/hour (seed %s)", n, rate_per_hour, seed)
    return jobs


def check_arguments(num_jobs, rate_per_hour: float, mixed_fraction: float,
                    elastic_fraction: float) -> int:
    """``num_jobs`` as an int, once it and the rate and fractions are valid; ``ValueError``
    naming the first that is not."""
    if isinstance(num_jobs, bool) or not isinstance(num_jobs, (int, np.integer)) or not (
            0 <= num_jobs <= MAX_JOBS):
        raise ValueError(f"num_jobs must be an integer in [0, {MAX_JOBS}], got {num_jobs!r}")
    if not 0 <= rate_per_hour <= MAX_RATE_PER_HOUR:
        raise ValueError(f"rate_per_hour must be in [0, {MAX_RATE_PER_HOUR:g}], got "
                         f"{rate_per_hour!r}")
    for name, fraction in (("mixed_fraction", mixed_fraction),
                           ("elastic_fraction", elastic_fraction)):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, got {fraction!r}")
    return int(num_jobs)


def attribute_streams(seed: int) -> dict[str, np.random.Generator]:
    """One independent generator per job attribute (``_STREAMS``), all split from ``seed``."""
    return dict(zip(_STREAMS, (np.random.default_rng(s)
                               for s in np.random.SeedSequence(seed).spawn(len(_STREAMS)))))


def draw_options(rng: dict[str, np.random.Generator], n: int, *, priorities: bool,
                 entities: Sequence[str], mixed_fraction: float, elastic_fraction: float
                 ) -> tuple[np.ndarray, list[str | None], np.ndarray, np.ndarray]:
    """Each job's priority weight, entity (None without ``entities``), mixed flag and
    elastic flag, each from its own stream of ``rng`` (``attribute_streams``)."""
    weights = (np.where(rng["priority"].random(n) < HIGH_PRIORITY_PROBABILITY,
                        HIGH_PRIORITY_WEIGHT, 1.0) if priorities else np.ones(n))
    names = list(dict.fromkeys(entities))
    index = rng["entity"].integers(len(names), size=n) if names else None
    entity_of = [None if index is None else names[index[i]] for i in range(n)]
    mixed = (rng["mixed"].random(n) < mixed_fraction if mixed_fraction > 0
             else np.zeros(n, dtype=bool))
    elastic = rng["elastic"].random(n) < elastic_fraction
    return weights, entity_of, mixed, elastic


def _job_types(table: ThroughputTable, job_types: Sequence[str] | None,
               reference_worker: str) -> list[str]:
    if reference_worker not in table.solo:
        raise ValueError(f"the throughput table has no {reference_worker!r} worker type, "
                         "which job durations are measured on (§5.7.1)")
    if job_types is None:
        types = [t for t in table.job_types if table.get(reference_worker, t, 1) > 0]
    else:
        types = list(dict.fromkeys(job_types))
        bad = [t for t in types if table.get(reference_worker, t, 1) <= 0]
        if bad:
            raise ValueError(f"job type {bad[0]!r} has no throughput on {reference_worker} at "
                             "scale factor 1 in the table")
    if not types:
        raise ValueError(f"no job type runs on {reference_worker} at scale factor 1")
    return types
