"""Launch waves: the processes a round starts at once on one machine share its CPUs and
disks, so a run's start-up grows with how many start beside it (issue #29). Measured on
a 2-core loopback cluster, the emulated ``steps`` job took 0.15 s to start alone, 0.17 s
two at once and 0.24 s three at once; a forecast charging every restart the mean of
those came out late for the queued jobs, whose restarts fall in the quieter rounds after
the first ones.

The model: a run that starts in a wave of ``w`` processes on its machine takes its job
type's start-up alone times ``1 + slope (w - 1)``; ``slope >= 0`` is one number per
cluster, fitted by ``fit_waves`` on the cluster's own start-ups (the scheduler's
``daemon/startups.py``), and the simulator charges a round's launches by it
(``SimConfig.wave_slope``). A cluster whose start-ups do not grow with the wave fits
``slope = 0``: every run its type's mean, as before. Thesis §5.7 charges a fixed
preemption overhead per job type; this is that overhead, measured per launch wave.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# The slopes a fit chooses among, and the samples it needs (with at least two different
# waves) before it chooses any but 0.
MAX_WAVE_SLOPE = 1.0
SLOPES = np.linspace(0.0, MAX_WAVE_SLOPE, 101)
MIN_SAMPLES = 8


def wave_factor(slope: float, wave: float) -> float:
    """What a start-up alone is multiplied by in a wave of ``wave`` processes (at least 1)."""
    return 1.0 + slope * max(float(wave) - 1.0, 0.0)


def fit_waves(samples: Sequence[tuple[str, float, float]]) -> tuple[float, dict[str, float]]:
    """``(slope, each job type's start-up alone)`` from start-ups ``(job type, wave,
    seconds)``: the slope in ``SLOPES`` that best explains them with one start-up alone per
    type, in logs (a start-up's noise is a share of it), and each type's start-up alone as
    the mean of its samples divided by their wave factors (so that a forecast charging it
    is as often early as late). The slope is 0 below ``MIN_SAMPLES`` samples or when all
    came in one wave size."""
    if not samples:
        return 0.0, {}
    types = sorted({s[0] for s in samples})
    index = {t: k for k, t in enumerate(types)}
    kind = np.array([index[s[0]] for s in samples])
    wave = np.array([max(float(s[1]), 1.0) for s in samples])
    seconds = np.array([max(float(s[2]), 1e-6) for s in samples])
    slope = 0.0
    if len(samples) >= MIN_SAMPLES and np.ptp(wave) > 0:
        logs = np.log(seconds)[None, :] - np.log1p(SLOPES[:, None] * (wave - 1.0)[None, :])
        counts = np.bincount(kind, minlength=len(types))
        sums = np.stack([np.bincount(kind, weights=row, minlength=len(types)) for row in logs])
        misfit = ((logs - (sums / counts)[:, kind]) ** 2).sum(axis=1)
        slope = float(SLOPES[int(np.argmin(misfit))])
    alone = seconds / (1.0 + slope * (wave - 1.0))
    return slope, {t: float(alone[kind == k].mean()) for t, k in index.items()}


def machine_of(address: str) -> str:
    """The machine of a worker's ``host:port`` address (its host; an IPv6 host keeps its
    brackets): the workers of one machine launch their runs' processes side by side."""
    host, sep, port = address.rpartition(":")
    return host if sep and port.isdigit() else address


def machines(addresses: Iterable[str]) -> int:
    """How many machines ``addresses`` (of workers) are on; at least 1."""
    return max(1, len({machine_of(a) for a in addresses}))
