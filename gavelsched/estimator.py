"""Throughput estimator for co-located jobs (thesis §5.3.3, §5.6 "Throughput Estimation",
Figure 5.8; evaluated in §5.7.6, Figure 5.16).

Solo throughputs need no estimate: the scheduler measures them on the fly as a job runs on
each worker type (§5.3.3). Co-located (space-sharing) throughputs do: there are too many
pairs to profile. Gavel follows Quasar: a new job is profiled beside a *few* pre-profiled
*reference jobs* on each worker type; low-rank matrix completion fills in the rest of its
row; the completed row is the job's *fingerprint*; the closest reference row names the
reference job whose co-located throughputs become the new job's initial estimate. The
completion itself (regularised ALS) is ``completion.py``.

Over 400 lines: one estimator, Figure 5.8 step by step plus its Figure 5.16 table mode.

This module is pure: data in, data out. It reads no clock, does no I/O and keeps no global
state; the only randomness (which references to profile against, measurement noise) comes
from a ``numpy.random.Generator`` passed in.

Vocabulary
----------
*Kind*: a ``JobKey`` = (job type, scale factor) that appears in a table's co-located pairs.
*Normalised co-located throughput* of ``a`` beside ``b`` on worker type ``w``:
``pair(w, a, b)[0] / get(w, a)``, in [0, 1] for real jobs. A pair the table lacks (the two
jobs do not fit in memory together, Figure 5.4) counts as 0: sharing gives ``a`` nothing.
*Fingerprint matrix*: one row per reference kind, one column per (worker type, reference
partner) in ``ThroughputEstimator.columns`` order; entry = normalised throughput of the row
kind beside the partner. The new job adds one sparse row.

Choice of references
--------------------
``ThroughputEstimator`` takes an explicit reference list and refuses to estimate a kind in
it (its estimate would be trivially exact). ``estimate_all`` / ``estimated_table`` default to
*leave-one-out*: each kind is estimated against every *other* kind. Given an explicit
``references`` list, kinds outside it use that list, and a kind inside it uses the list
minus itself. The reference kinds' co-located throughputs with *every* kind are taken as
pre-profiled (as in Gavel's ``scheduler/throughput_estimator.py``), so the estimate of ``a``
beside ``b`` is the closest reference's normalised throughput beside ``b`` (beside ``a``'s
own kind: the reference beside itself). Under leave-one-out every ``b`` other than ``a`` is a
reference, so an estimate never reads the estimated kind's own oracle pairs.

``estimated_table`` gives each side of a pair its own job's estimate. (Gavel's simulator
instead scales the pair of the two matched references, which replaces *both* partners by
references; on the default catalog its error is 0.027 against 0.019 here, 20% profiled.)

Imports: numpy, ``completion.py`` and ``traces.types`` (the shared ``ThroughputTable`` /
``JobKey`` records, the one part of ``traces`` that every room shares); nothing else of ours.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from traces.types import JobKey, ThroughputTable

from .completion import complete

log = logging.getLogger(__name__)


Measurements = Mapping[str, Mapping[JobKey, float]]
"""``{worker_type: {reference kind: measured normalised throughput of the new job}}``."""

__all__ = [
    "Estimate",
    "EstimatorConfig",
    "Measurements",
    "ThroughputEstimator",
    "estimate_all",
    "estimated_table",
    "normalized_pair_error",
    "pair_kinds",
]


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EstimatorConfig:
    """Knobs of the estimator (thesis §5.3.3, Figure 5.8).

    - ``profiled_fraction``: share of the reference kinds the new job is profiled beside, on
      each worker type; in (0, 1]. The count per worker type is
      ``max(1, round(profiled_fraction * references))``, drawn without replacement,
      independently per worker type.
    - ``rank``: rank of the low-rank completion (>= 1); capped at the matrix's smaller side.
    - ``regularization``: ALS ridge weight on the factors (> 0; keeps every solve regular).
      The defaults (rank 4, 0.1) were picked on the default catalog, leave-one-out over 10
      seeds: at 0.1, ranks 1 to 8 land within about 15% of each other in pair error, while
      a weight of 1e-3 overfits noisy measurements at rank >= 3 (figures measured while
      writing this module; the defaults' own figures are in tests/core/test_estimator.py).
    - ``iterations`` / ``tolerance``: ALS stops after ``iterations`` sweeps or when the
      relative change of the fit on observed entries falls below ``tolerance``.
    - ``noise``: sigma of multiplicative log-normal profiling noise (>= 0): a measurement is
      ``true * exp(noise * N(0, 1))``. Reference rows are exact (profiled offline).
    - ``distance``: how fingerprints are compared: ``"euclidean"`` (default; the size of a
      slow-down matters, not only its shape) or ``"cosine"`` (Gavel's choice).
    """

    profiled_fraction: float = 0.2
    rank: int = 4
    regularization: float = 0.1
    iterations: int = 200
    tolerance: float = 1e-9
    noise: float = 0.0
    distance: Literal["euclidean", "cosine"] = "euclidean"

    def __post_init__(self) -> None:
        f = self.profiled_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 1.0:
            raise ValueError(f"EstimatorConfig.profiled_fraction must be in (0, 1], got {f!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"EstimatorConfig.rank must be an integer >= 1, got {self.rank!r}")
        if not (isinstance(self.regularization, (int, float))
                and math.isfinite(self.regularization) and self.regularization > 0):
            raise ValueError("EstimatorConfig.regularization must be a finite number > 0, "
                             f"got {self.regularization!r}")
        if (isinstance(self.iterations, bool) or not isinstance(self.iterations, int)
                or self.iterations < 1):
            raise ValueError("EstimatorConfig.iterations must be an integer >= 1, "
                             f"got {self.iterations!r}")
        if not (isinstance(self.tolerance, (int, float)) and self.tolerance >= 0):
            raise ValueError(f"EstimatorConfig.tolerance must be >= 0, got {self.tolerance!r}")
        if not (isinstance(self.noise, (int, float)) and math.isfinite(self.noise)
                and self.noise >= 0):
            raise ValueError(f"EstimatorConfig.noise must be a finite number >= 0, "
                             f"got {self.noise!r}")
        if self.distance not in ("euclidean", "cosine"):
            raise ValueError("EstimatorConfig.distance must be 'euclidean' or 'cosine', "
                             f"got {self.distance!r}")


# --------------------------------------------------------------------------------------
# Normalised co-located throughputs
# --------------------------------------------------------------------------------------

def pair_kinds(table: ThroughputTable) -> tuple[JobKey, ...]:
    """Kinds that appear in at least one co-located pair of ``table``, in ``job_keys`` order
    (kinds only in pairs, not in the solo table, follow in first-seen order)."""
    seen: dict[JobKey, None] = {}
    for pairs in table.pairs.values():
        for a, b in pairs:
            seen[a] = None
            seen[b] = None
    ordered = [k for k in table.job_keys if k in seen]
    ordered += [k for k in seen if k not in set(ordered)]
    return tuple(ordered)


def _normalized(table: ThroughputTable, rows: Sequence[JobKey], partners: Sequence[JobKey],
                workers: Sequence[str]) -> np.ndarray:
    """(rows, workers, partners): co-located steps/s of the row kind beside the partner over
    its solo steps/s; 0 where the pair is unknown or the row kind cannot run alone."""
    out = np.zeros((len(rows), len(workers), len(partners)))
    for i, a in enumerate(rows):
        for k, w in enumerate(workers):
            solo = table.get(w, *a)
            if solo <= 0:
                continue
            for j, b in enumerate(partners):
                got = table.pair(w, a, b)
                if got is not None:
                    out[i, k, j] = got[0] / solo
    return out


# --------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Estimate:
    """One job's co-located throughput estimate (§5.3.3: "the throughputs of the closest
    reference job can then be used as the initial performance estimate").

    - ``job``: the kind estimated (None when built from bare measurements).
    - ``reference``: the closest reference kind.
    - ``fingerprint``: the completed row, in ``ThroughputEstimator.columns`` order
      (measured entries as measured, the rest completed and clipped to [0, 1]).
    - ``observed``: which fingerprint entries were measured.
    - ``distances``: fingerprint distance to every reference, in reference order.
    - ``normalized``: ``{worker_type: {partner kind: estimated normalised throughput of
      this job beside the partner}}``: the reference's row (beside the job's own kind, the
      reference beside itself); multiply by the job's solo steps/s on that worker type to
      get steps/s (``steps_per_s``).
    """

    job: JobKey | None
    reference: JobKey
    fingerprint: np.ndarray
    observed: np.ndarray
    distances: tuple[float, ...]
    normalized: Mapping[str, Mapping[JobKey, float]] = field(repr=False)

    def steps_per_s(self, worker_type: str, partner: JobKey, solo_steps_per_s: float) -> float:
        """Estimated steps/s of this job beside ``partner`` on ``worker_type``, given its
        (measured) solo steps/s there. Raises KeyError naming an unknown worker/partner."""
        try:
            row = self.normalized[worker_type]
        except KeyError:
            raise KeyError(f"no estimate on worker type {worker_type!r}; known: "
                           f"{', '.join(self.normalized)}") from None
        try:
            return solo_steps_per_s * row[partner]
        except KeyError:
            raise KeyError(f"no estimate beside {partner!r} on {worker_type!r}") from None


class ThroughputEstimator:
    """Maps new jobs to pre-profiled reference jobs (thesis §5.3.3, Figure 5.8).

    ``table`` holds the reference kinds' solo throughputs and their co-located throughputs
    with each other and with every kind an estimate should cover (the "partners": all kinds
    in ``table``'s pairs). ``references`` lists the reference kinds (default: all partners);
    their order breaks distance ties. Building the estimator only reads ``table``; it is
    immutable afterwards, so one instance can serve many estimates.
    """

    def __init__(self, table: ThroughputTable, references: Sequence[JobKey] | None = None,
                 config: EstimatorConfig = EstimatorConfig()) -> None:
        if not isinstance(config, EstimatorConfig):
            raise TypeError(f"config must be an EstimatorConfig, got {type(config).__name__}")
        self.config = config
        self.partners: tuple[JobKey, ...] = pair_kinds(table)
        if not self.partners:
            raise ValueError("the reference table has no co-located pairs to estimate from")
        refs = tuple(self.partners if references is None else references)
        if not refs:
            raise ValueError("references must name at least one reference kind")
        if len(set(refs)) != len(refs):
            raise ValueError(f"references repeat a kind: {list(refs)}")
        known = set(self.partners)
        for ref in refs:
            if ref not in known:
                raise ValueError(f"reference {ref!r} has no co-located pairs in the table")
        self.references: tuple[JobKey, ...] = refs
        self.worker_types: tuple[str, ...] = tuple(w for w in table.worker_types
                                                   if table.pairs.get(w))
        self.columns: tuple[tuple[str, JobKey], ...] = tuple(
            (w, r) for w in self.worker_types for r in refs)
        self._column_index = {c: i for i, c in enumerate(self.columns)}
        ref_block = _normalized(table, refs, refs, self.worker_types)
        self._reference_rows = _frozen(ref_block.reshape(len(refs), -1))
        self._estimate_rows = _frozen(_normalized(table, refs, self.partners,
                                                  self.worker_types))

    # -- profiling (simulated) --------------------------------------------------------
    def profile(self, job: JobKey, oracle: ThroughputTable,
                rng: np.random.Generator) -> dict[str, dict[JobKey, float]]:
        """Simulate profiling ``job`` beside a random subset of the references on each
        worker type (Figure 5.8, "profiling"): normalised ``oracle`` throughputs, times
        log-normal noise when ``config.noise > 0``. Draws from ``rng`` in a fixed order:
        per worker type (``worker_types`` order) the subset, then the noise."""
        self._check_not_reference(job)
        if not any(oracle.get(w, *job) > 0 for w in self.worker_types):
            raise ValueError(f"job {job!r} has no solo throughput in the oracle on any of "
                             f"{', '.join(self.worker_types)}")
        n = len(self.references)
        count = max(1, round(self.config.profiled_fraction * n))
        truth = _normalized(oracle, [job], self.references, self.worker_types)[0]
        out: dict[str, dict[JobKey, float]] = {}
        for k, w in enumerate(self.worker_types):
            picked = np.sort(rng.choice(n, size=count, replace=False))
            values = truth[k, picked]
            if self.config.noise > 0:
                values = values * np.exp(self.config.noise * rng.standard_normal(count))
            out[w] = {self.references[j]: float(v) for j, v in zip(picked, values)}
        return out

    # -- Figure 5.8, step by step -------------------------------------------------------
    def fingerprint(self, measurements: Measurements) -> np.ndarray:
        """The new job's fingerprint (§5.6, Figure 5.8): complete the matrix [reference rows;
        new row] from ``measurements`` and return the new row in ``columns`` order, with
        the measured entries as measured and the completed ones clipped to [0, 1]."""
        return self._fingerprint(measurements)[0]

    def _fingerprint(self, measurements: Measurements) -> tuple[np.ndarray, np.ndarray]:
        """(fingerprint, which entries were measured)."""
        row = np.zeros(len(self.columns))
        seen = np.zeros(len(self.columns), dtype=bool)
        for w, values in measurements.items():
            for ref, value in values.items():
                idx = self._column_index.get((w, ref))
                if idx is None:
                    raise ValueError(f"measurement beside {ref!r} on {w!r} is not a "
                                     "fingerprint column (unknown worker type or reference)")
                if not math.isfinite(value) or value < 0:
                    raise ValueError(f"measurement beside {ref!r} on {w!r} must be finite and "
                                     f">= 0, got {value!r}")
                row[idx] = value
                seen[idx] = True
        if not seen.any():
            raise ValueError("measurements are empty: profile the job beside at least one "
                             "reference")
        if seen.all():
            return _frozen(row), _frozen(seen)
        matrix = np.vstack([self._reference_rows, row])
        mask = np.vstack([np.ones_like(self._reference_rows, dtype=bool), seen])
        cfg = self.config
        completed = complete(matrix, mask, cfg.rank, regularization=cfg.regularization,
                             iterations=cfg.iterations, tolerance=cfg.tolerance)[-1]
        return _frozen(np.where(seen, row, np.clip(completed, 0.0, 1.0))), _frozen(seen)

    def distances(self, fingerprint: np.ndarray) -> np.ndarray:
        """Distance from ``fingerprint`` to every reference row (``config.distance``)."""
        f = np.asarray(fingerprint, dtype=float)
        if f.shape != (len(self.columns),):
            raise ValueError(f"fingerprint must have {len(self.columns)} entries "
                             f"(one per column), got shape {f.shape}")
        refs = self._reference_rows
        if self.config.distance == "cosine":
            norms = np.linalg.norm(refs, axis=1) * np.linalg.norm(f)
            dots = refs @ f
            return np.where(norms > 0, 1.0 - dots / np.where(norms > 0, norms, 1.0), 1.0)
        return np.linalg.norm(refs - f[None, :], axis=1)

    def closest_reference(self, fingerprint: np.ndarray) -> JobKey:
        """The reference whose row is nearest ``fingerprint``; ties go to the earlier one
        in ``references`` order."""
        return self.references[int(np.argmin(self.distances(fingerprint)))]

    def from_measurements(self, measurements: Measurements,
                          job: JobKey | None = None) -> Estimate:
        """Fingerprint, match and look up (Figure 5.8) from real or simulated measurements."""
        if job is not None:
            self._check_not_reference(job)
        fp, seen = self._fingerprint(measurements)
        dist = self.distances(fp)
        best = int(np.argmin(dist))
        reference = self.references[best]
        rows = self._estimate_rows[best]
        own = self.partners.index(reference)
        # Beside another job of its own kind, the job is estimated as the reference beside
        # itself, so no estimate reads the estimated kind's oracle row.
        normalized = MappingProxyType({
            w: MappingProxyType({p: float(rows[k, own if p == job else j])
                                 for j, p in enumerate(self.partners)})
            for k, w in enumerate(self.worker_types)})
        est = Estimate(job=job, reference=reference, fingerprint=fp,
                       observed=seen, distances=tuple(float(d) for d in dist),
                       normalized=normalized)
        log.debug("estimated %s as reference %s (distance %.4f, %d/%d entries profiled)",
                  job, est.reference, dist[best], int(seen.sum()), seen.size)
        return est

    def estimate(self, job: JobKey, oracle: ThroughputTable,
                 rng: np.random.Generator) -> Estimate:
        """Simulated end to end: ``profile`` ``job`` against ``oracle``, then
        ``from_measurements``. ``job`` must not be a reference (leave it out)."""
        return self.from_measurements(self.profile(job, oracle, rng), job=job)

    def _check_not_reference(self, job: JobKey) -> None:
        if job in self.references:
            raise ValueError(f"job {job!r} is one of the references; its estimate would be "
                             "its own profile (leave it out of references)")


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.setflags(write=False)
    return a


# --------------------------------------------------------------------------------------
# Whole tables (Figure 5.16 mode)
# --------------------------------------------------------------------------------------

def estimate_all(oracle: ThroughputTable, config: EstimatorConfig = EstimatorConfig(), *,
                 rng: np.random.Generator,
                 references: Sequence[JobKey] | None = None) -> dict[JobKey, Estimate]:
    """Estimate every kind with co-located pairs in ``oracle`` (module docstring, "Choice
    of references": leave-one-out by default). Kinds are estimated in ``pair_kinds`` order,
    each drawing from ``rng`` in turn, so a seed fixes the result."""
    kinds = pair_kinds(oracle)
    if references is not None:
        references = tuple(references)
        missing = [r for r in references if r not in set(kinds)]
        if missing:
            raise ValueError(f"references {missing} have no co-located pairs in the oracle")
    cache: dict[tuple[JobKey, ...], ThroughputEstimator] = {}
    out: dict[JobKey, Estimate] = {}
    for kind in kinds:
        pool = kinds if references is None else references
        refs = tuple(r for r in pool if r != kind)
        if not refs:
            raise ValueError(f"no reference left to estimate {kind!r} against")
        if refs not in cache:
            cache[refs] = ThroughputEstimator(oracle, refs, config)
        out[kind] = cache[refs].estimate(kind, oracle, rng)
    return out


def estimated_table(oracle: ThroughputTable, config: EstimatorConfig = EstimatorConfig(), *,
                    rng: np.random.Generator,
                    references: Sequence[JobKey] | None = None) -> ThroughputTable:
    """``oracle`` with its co-located throughputs replaced by estimates (§5.7.6, Figure 5.16:
    the policy plans on estimated pairs while jobs progress at oracle rates).

    Solo throughputs are copied unchanged (§5.3.3: measured on the fly, no estimate needed).
    Every pair the oracle has, and only those, is kept; each side's steps/s is that job's
    oracle solo steps/s times its own estimated normalised throughput beside the other
    (``Estimate.normalized``; module docstring, "Choice of references"). A side can
    come out 0 when the matched reference cannot share that GPU with the partner; the pair
    is then unusable on that worker type."""
    estimates = estimate_all(oracle, config, rng=rng, references=references)
    pairs: dict[str, dict[tuple[JobKey, JobKey], tuple[float, float]]] = {}
    for w, table in oracle.pairs.items():
        out = {}
        for (a, b) in table:
            ea, eb = estimates[a].normalized.get(w), estimates[b].normalized.get(w)
            na = ea[b] if ea is not None else 0.0
            nb = eb[a] if eb is not None else 0.0
            out[(a, b)] = (oracle.get(w, *a) * na, oracle.get(w, *b) * nb)
        pairs[w] = out
    return ThroughputTable(solo={w: dict(t) for w, t in oracle.solo.items()}, pairs=pairs)


def normalized_pair_error(estimated: ThroughputTable, oracle: ThroughputTable) -> float:
    """Mean absolute error of normalised co-located throughputs (each side over its solo
    steps/s in ``oracle``) over every side of every pair ``oracle`` has, on every worker
    type. A pair missing from ``estimated`` counts as 0. The §5.7.6 accuracy figure."""
    errors = []
    for w, table in oracle.pairs.items():
        for (a, b), (ta, tb) in table.items():
            got = estimated.pair(w, a, b) or (0.0, 0.0)
            sa, sb = oracle.get(w, *a), oracle.get(w, *b)
            if sa > 0:
                errors.append(abs(got[0] - ta) / sa)
            if sb > 0:
                errors.append(abs(got[1] - tb) / sb)
    if not errors:
        raise ValueError("the oracle has no co-located pairs to compare")
    return float(np.mean(errors))
