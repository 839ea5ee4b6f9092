"""A Sia-like workload: five applications on Sia's 64 GPUs of three generations.

Facts and figures from Sia (SOSP'23) and its artifact (github.com/siasosp23/artifacts,
``sia-simulator``), read once when this module was written; nothing here reads them.

- Cluster (§4.3, the Heterogeneous setting): 6 nodes of 4 T4, 2 nodes of 8 A100 and 3
  nodes of 8 RTX 2080 Ti (``rtx``): ``SIA_CLUSTER``, ``SIA_GPUS_PER_SERVER``.
- Applications (§4.1, Table 2): each job of the Helios (Saturn cluster) trace becomes one
  application by its GPU time: cifar10 (under 1 GPU-hour), deepspeech2 or bert (1-10),
  yolov3 (10-100), imagenet (over 100). ``APPLICATION_JOBS`` counts them over the
  artifact's ten Helios workloads (``workloads/saturn``, 1,600 jobs); a job's application
  is drawn with those weights.
- GPU counts: Sia tunes each job to 50-80% of ideal scaling on its GPUs ("TunedJobs",
  §4.3). ``GPU_COUNT_JOBS`` counts, per application, the GPU counts of those 1,600 jobs; a
  job's count is drawn with those weights.
- Work: a Sia job trains its application for a fixed number of epochs. ``TOTAL_STEPS`` is
  that work in iterations of the batch size ``traces/data/sia.yaml`` fixes per application
  (its ``meta``), the same for every job of the application, as in the artifact.
- Arrivals (§4.1): 160 jobs over the 8 busiest hours of the trace, 20 jobs an hour on
  average. Here a Poisson process of mean rate ``rate_per_hour`` whose rate follows the
  Helios window's half-hour profile (``ARRIVAL_PROFILE``: the arrival times of the
  artifact's ten workloads, pooled), repeated every 8 hours.
- Restart costs (§3.3): the table's ``restart_s`` (cifar10 50 s, deepspeech2 25 s, bert
  120 s, yolov3 80 s, imagenet 250 s); jobs carry no ``startup_s`` of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from .generator import attribute_streams, check_arguments, draw_options
from .types import ThroughputTable, TraceJob

SIA_TABLE_PATH = Path(__file__).with_name("data") / "sia.yaml"
SIA_CLUSTER: Mapping[str, int] = MappingProxyType({"t4": 24, "a100": 16, "rtx": 24})
SIA_GPUS_PER_SERVER: Mapping[str, int] = MappingProxyType({"t4": 4, "a100": 8, "rtx": 8})
SIA_JOBS = 160
SIA_RATE_PER_HOUR = 20.0

APPLICATION_JOBS: Mapping[str, int] = MappingProxyType({
    "cifar10": 1314, "deepspeech2": 100, "bert": 70, "yolov3": 70, "imagenet": 46})
GPU_COUNT_JOBS: Mapping[str, Mapping[int, int]] = MappingProxyType({
    "cifar10": {4: 147, 6: 294, 8: 248, 10: 184, 12: 277, 16: 164},
    "deepspeech2": {6: 27, 8: 39, 12: 34},
    "bert": {6: 14, 8: 17, 12: 17, 16: 22},
    "yolov3": {4: 70},
    "imagenet": {10: 9, 12: 14, 14: 23},
})
TOTAL_STEPS: Mapping[str, int] = MappingProxyType({
    "cifar10": 2143, "deepspeech2": 2275, "bert": 476, "yolov3": 15970, "imagenet": 42850})
# Arrivals in each half hour of the 8-hour window, over the artifact's ten workloads.
ARRIVAL_PROFILE: tuple[int, ...] = (106, 101, 72, 59, 126, 192, 225, 156, 108, 119, 95, 67,
                                    84, 19, 37, 34)
ARRIVAL_BIN_S = 1800.0


@functools.lru_cache(maxsize=1)
def sia_table() -> ThroughputTable:
    """``traces/data/sia.yaml``: steps/s of the five applications on t4, a100 and rtx at the
    GPU counts Sia's profiles have, and their restart costs (read once, then cached)."""
    from .throughputs import load_table
    return load_table(SIA_TABLE_PATH)


def sample_helios_arrivals_s(rng: np.random.Generator, n: int,
                             rate_per_hour: float) -> np.ndarray:
    """``n`` arrival times of a Poisson process of mean ``rate_per_hour`` whose rate in each
    half hour follows ``ARRIVAL_PROFILE`` (period 8 h): a unit-rate process mapped through
    the inverse of the cumulative rate. All 0 when the rate is 0."""
    if rate_per_hour == 0 or n == 0:
        return np.zeros(n)
    profile = np.asarray(ARRIVAL_PROFILE, dtype=float)
    per_bin = profile / profile.mean() * rate_per_hour * ARRIVAL_BIN_S / 3600.0
    edges = np.concatenate(([0.0], np.cumsum(per_bin)))      # expected arrivals by bin edge
    unit = np.cumsum(rng.exponential(1.0, size=n))
    periods, within = np.divmod(unit, edges[-1])
    k = np.minimum(np.searchsorted(edges, within, side="right") - 1, len(profile) - 1)
    offset = (within - edges[k]) / per_bin[k] * ARRIVAL_BIN_S
    return periods * len(profile) * ARRIVAL_BIN_S + k * ARRIVAL_BIN_S + offset


def generate_sia_trace(num_jobs: int = SIA_JOBS, rate_per_hour: float = SIA_RATE_PER_HOUR,
                       *, table: ThroughputTable | None = None, seed: int = 0,
                       priorities: bool = False, entities: Sequence[str] = (),
                       mixed_fraction: float = 0.0,
                       elastic_fraction: float = 0.0) -> list[TraceJob]:
    """A Sia-like trace of ``num_jobs`` jobs, sorted by arrival (module docstring).
    ``elastic_fraction`` of the jobs, at random, are elastic down to one GPU
    (``min_scale_factor: 1``); ``priorities``, ``entities`` and ``mixed_fraction`` as in
    ``generate_trace``, from the same streams. ``table`` (default ``sia_table()``) must
    run every application at each of its GPU counts on some type. Raises ``ValueError``
    for bad arguments."""
    n = check_arguments(num_jobs, rate_per_hour, mixed_fraction, elastic_fraction)
    table = sia_table() if table is None else table
    _check_table(table)
    rng = attribute_streams(seed)
    apps = list(APPLICATION_JOBS)
    weights = np.asarray(list(APPLICATION_JOBS.values()), dtype=float)
    app_index = rng["job_type"].choice(len(apps), p=weights / weights.sum(), size=n)
    draws = rng["scale_factor"].random(n)
    arrivals = sample_helios_arrivals_s(rng["arrival"], n, rate_per_hour)
    priority, entity_of, mixed, elastic = draw_options(
        rng, n, priorities=priorities, entities=entities, mixed_fraction=mixed_fraction,
        elastic_fraction=elastic_fraction)
    jobs = []
    for i in range(n):
        app = apps[app_index[i]]
        sf = _gpu_count(app, float(draws[i]))
        jobs.append(TraceJob(
            job_type=app, scale_factor=sf, total_steps=TOTAL_STEPS[app],
            arrival_s=float(arrivals[i]), priority_weight=float(priority[i]),
            entity=entity_of[i], mixed=bool(mixed[i]),
            min_scale_factor=1 if elastic[i] and sf > 1 else None))
    return jobs


def _gpu_count(app: str, u: float) -> int:
    """The GPU count at quantile ``u`` of ``app``'s ``GPU_COUNT_JOBS`` weights."""
    counts = GPU_COUNT_JOBS[app]
    cumulative = np.cumsum(list(counts.values())) / sum(counts.values())
    return list(counts)[min(int(np.searchsorted(cumulative, u, side="right")),
                            len(counts) - 1)]


def _check_table(table: ThroughputTable) -> None:
    for app, counts in GPU_COUNT_JOBS.items():
        for sf in counts:
            if not any(table.get(w, app, sf) > 0 for w in table.worker_types):
                raise ValueError(f"the throughput table cannot run {app!r} on {sf} GPUs of "
                                 "any type, which the Sia mix needs")
