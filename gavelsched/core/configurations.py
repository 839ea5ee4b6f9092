"""A job's configurations: mixes of worker types it can run on at once, with their steps/s
(VirtualFlow §5.1, heterogeneous training; §6.5.2, Gavel with heterogeneous allocations).

The throughput table only knows a job on one type. To price a mix, each type gets a
``TypeProfile`` for the job derived from the table (the model; VirtualFlow §5.1.1-§5.1.2):

- compute: one GPU of type t processes samples at r_t(1) x B per second, where r_t(1) is
  the job type's steps/s on one GPU of t and B its global batch, so a pass of b samples
  takes b / (r_t(1) B) seconds (linear in b; B cancels out of every ratio);
- communication: VirtualFlow estimates it as the distributed step time minus the
  single-GPU one; from the table, comm_t = 1/r_t(s) - 1/(s r_t(1)) for the job's scale
  factor s (s = 2 for one-GPU jobs), floored at 0. A job type without a multi-GPU entry
  gets no configurations (its communication cost is unknown).

With these profiles the split solver's step time on s GPUs of t alone is exactly the
table's 1/r_t(s). ``gavelsched/virtual/split.py:plan_split`` then gives the best split of the
batch over each candidate mix, and its steps/s is the configuration's throughput.

Candidates (kept small, as VirtualFlow's simulation does): for each ordered pair of types
(a, b), the job's scale factor s on a plus k GPUs of b for k in ``extra_counts(s)`` (at most
s: VirtualFlow's example is a job on 16 K80s that also gets 5 P100s), and s split evenly
over a and b (s >= 2). So a configuration holds at most 2s GPUs: the gain measured is
from adding a second type, not from growing a job without bound.
A candidate holds what the solver's plan uses (it may use fewer GPUs than offered); plans
on one type are dropped (they are not mixes), and no mix uses more GPUs of a type than the
cluster has.

Elastic jobs (``JobSpec.min_scale_factor``; Varuna §4, morphing) get single-type
configurations too: ``{t: n}`` (name ``"t:n"``) for each count n in ``elastic_counts``
(from the minimum up to, not including, the scale factor: every count up to 8, then the
multiples of 4 up to 32, then the powers of two, so a job has at most about 14 + log2(s)
counts per type) that the cluster has on t and the scaling model covers. Steps/s is the
table's r_t(n) where it has one; elsewhere the model of ``traces/scaling.py`` fitted to the
counts the table has for (job type, t) (every count up to ``PROBED``, or the scale factor
if larger): a compute/communication split in the spirit of Pollux §3.2, never linear
extrapolation, and nothing more than 2x past the largest count measured. A rate a run
measured at a count (``Configurations.measure``) joins the table's points and refits the
model; configurations built after it use the refit. They are ordinary configuration
columns: the same policies, planner and launch path.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from policies.jobs import Configuration
from traces.scaling import PROBED, ScalingModel, table_model

from .records import ThroughputSource

log = logging.getLogger(__name__)

# Global batch, in samples, the split solver works with (the model is linear in it, so
# only the granularity of a split, 1/BATCH, depends on it).
BATCH = 512

# Elastic counts (``elastic_counts``): all of them up to DENSE_UP_TO, then multiples of 4
# up to FOURS_UP_TO, then powers of two. The table is asked for every count up to PROBED
# (or the job's scale factor, if larger) to fit the scaling model (``traces/scaling.py``).
DENSE_UP_TO = 8
FOURS_UP_TO = 32


def extra_counts(scale_factor: int) -> tuple[int, ...]:
    """GPUs of a second type offered on top of a job's ``scale_factor`` GPUs of a first:
    a quarter, a half and all of it (at least one)."""
    return tuple(sorted({max(1, scale_factor // 4), max(1, scale_factor // 2), scale_factor}))


def elastic_counts(scale_factor: int, min_scale_factor: int) -> tuple[int, ...]:
    """The GPU counts below ``scale_factor`` an elastic job may run on: from
    ``min_scale_factor`` on, every count up to ``DENSE_UP_TO``, the multiples of 4 up to
    ``FOURS_UP_TO``, then the powers of two (module docstring: a bounded number of
    columns)."""
    dense = range(1, DENSE_UP_TO + 1)
    fours = range(4, FOURS_UP_TO + 1, 4)
    powers = (1 << k for k in range(scale_factor.bit_length()))
    return tuple(sorted({n for n in (*dense, *fours, *powers, min_scale_factor)
                         if min_scale_factor <= n < scale_factor}))


@dataclass(frozen=True)
class MixedOption:
    """One configuration of a job and the split plan that achieves its throughput
    (``SplitPlan.to_dict()``: per type GPUs, batch per GPU, virtual nodes per GPU); None
    for an elastic job's single-type configuration."""

    configuration: Configuration
    split: Mapping | None


class Configurations:
    """Configurations of job types on a cluster, built once per (job type, scale factor,
    worker counts) from a throughput source (see the module docstring); elastic ones also
    from the rates runs measured (``measure``)."""

    def __init__(self, source: ThroughputSource) -> None:
        self._source = source
        self._cache: dict[tuple, tuple[MixedOption, ...]] = {}
        self._models: dict[tuple[str, str, int], ScalingModel] = {}
        self._runs: dict[tuple[str, str], dict[int, float]] = {}

    def options(self, job_type: str, scale_factor: int,
                counts: Mapping[str, int]) -> tuple[MixedOption, ...]:
        """The mixed configurations of ``job_type`` at ``scale_factor`` on a cluster with
        ``counts`` workers per type, best throughput first."""
        key = (job_type, scale_factor, tuple(sorted(counts.items())))
        if key not in self._cache:
            self._cache[key] = self._build(job_type, scale_factor, counts)
        return self._cache[key]

    def elastic(self, job_type: str, scale_factor: int, min_scale_factor: int,
                counts: Mapping[str, int]) -> tuple[MixedOption, ...]:
        """The single-type configurations of an elastic job (module docstring): ``{t: n}``
        for each of its ``elastic_counts`` that ``counts`` has on t and the scaling model
        covers; ``split`` is None (one type, even ranks)."""
        key = ("elastic", job_type, scale_factor, min_scale_factor, tuple(sorted(counts.items())))
        if key not in self._cache:
            out = []
            for t in sorted(counts):
                model = self.model(t, job_type, scale_factor)
                for n in elastic_counts(scale_factor, min_scale_factor):
                    rate = model.rate(n) if n <= counts[t] else 0.0
                    if rate > 0:
                        out.append(MixedOption(Configuration({t: n}, rate), None))
            self._cache[key] = tuple(sorted(out, key=lambda o: -o.configuration.throughput))
        return self._cache[key]

    def model(self, worker_type: str, job_type: str, scale_factor: int = 1) -> ScalingModel:
        """The scaling model of ``job_type`` on ``worker_type``: the table's counts up to
        ``PROBED`` (or ``scale_factor``), refit with what runs measured (``measure``)."""
        known = max(PROBED, scale_factor)
        key = (job_type, worker_type, known)
        if key not in self._models:
            model = table_model(self._source, worker_type, job_type, range(1, known + 1))
            runs = self._runs.get((job_type, worker_type))
            self._models[key] = model.refit(runs) if runs else model
        return self._models[key]

    def measure(self, worker_type: str, job_type: str, n: int, rate: float) -> None:
        """A run of ``job_type`` on ``n`` GPUs of ``worker_type`` made ``rate`` steps/s:
        it replaces the table's rate at ``n`` (if any) and refits the model; the elastic
        configurations built from now on use it (those already handed out are kept)."""
        if n < 1 or rate <= 0:
            return
        self._runs.setdefault((job_type, worker_type), {})[int(n)] = float(rate)
        for key in [k for k in self._models if k[:2] == (job_type, worker_type)]:
            del self._models[key]
        for key in [k for k in self._cache if k[:2] == ("elastic", job_type)]:
            del self._cache[key]

    def _build(self, job_type: str, sf: int, counts: Mapping[str, int]) -> tuple[MixedOption, ...]:
        # (imported here: a cluster without mixed jobs never loads the split solver)
        from ..virtual.split import SplitError, plan_split

        profiles = {t: p for t in counts if counts[t] > 0
                    for p in [self.profile(t, job_type, sf)] if p is not None}
        out: dict[str, MixedOption] = {}
        for a, b in itertools.permutations(sorted(profiles), 2):
            offers = [{a: sf, b: k} for k in extra_counts(sf)]
            if sf >= 2 and a < b:
                offers.append({a: sf - sf // 2, b: sf // 2})
            for offer in offers:
                if any(n > counts[t] for t, n in offer.items()):
                    continue
                try:
                    plan = plan_split({t: profiles[t] for t in offer}, BATCH, offer)
                except SplitError as err:  # cannot happen with these profiles; be loud
                    log.warning("no split of %s on %s: %s", job_type, offer, err)
                    continue
                if len(plan.types) < 2:
                    continue  # one type is not a mix
                config = Configuration({t: p.gpus for t, p in plan.types.items()},
                                       plan.steps_per_s)
                out.setdefault(config.name, MixedOption(config, plan.to_dict()))
        return tuple(sorted(out.values(), key=lambda o: -o.configuration.throughput))

    def profile(self, worker_type: str, job_type: str, sf: int):
        """The job's ``TypeProfile`` on ``worker_type`` (module docstring), or None when the
        table has no single-GPU or no multi-GPU throughput for it."""
        from ..virtual.split import TypeProfile

        one = float(self._source.get(worker_type, job_type, 1))
        wide = max(sf, 2)
        many = float(self._source.get(worker_type, job_type, wide))
        if one <= 0 or many <= 0:
            return None
        comm = max(0.0, 1.0 / many - 1.0 / (wide * one))
        rate = one * BATCH  # samples per second on one GPU
        return TypeProfile(worker_type, memory_gb=1.0,
                           step_s=((1, 1.0 / rate), (BATCH, BATCH / rate)), comm_s=comm)
