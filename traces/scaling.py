"""How a job's steps/s on one worker type grows with its GPU count, fitted to the counts
measured (Pollux §3.2, system throughput; Sia §3, throughput models bootstrapped from few
measurements and refined as jobs run). Pure: measured points in, rates out.

The model (fixed global batch, data parallel): a step on n GPUs takes

    t(n) = a/n + s + c (n - 1)/n,     a, s, c >= 0,

a/n the compute that splits over the GPUs (Pollux's T_grad at a per-GPU batch of B/n), s
the part that does not (optimizer step, input pipeline), c (n - 1)/n a ring all-reduce of
the gradients: 0 on one GPU, growing with n towards c (Pollux's T_sync, bandwidth term).
Since (n - 1)/n = 1 - 1/n, the measurements only identify t(n) = p/n + q with p = a - c
and q = s + c, Amdahl's law. Both are kept >= 0: p >= 0 says more GPUs never make a step
slower, q >= 0 that n GPUs never do more than n times one GPU's work; so every rate the
model gives is non-decreasing in n and sub-linear (rate(n)/n non-increasing). Pollux's
latency term, linear in n, is left out: it makes t U-shaped, and a count past the bottom
would only be a slower column no policy picks.

Fit (``ScalingModel.fit``): p and q by non-negative least squares (``scipy.optimize.nnls``)
over the measured points, on relative residuals (each row divided by its t), so a
slow small count does not outweigh a fast large one. The rate at a count n:

- measured: the measurement, exactly;
- between two measured counts m1 < n < m2: the Amdahl curve through both points (t linear
  in 1/n), so the model meets the measurements on both sides; where the two points
  contradict the model (rate falls from m1 to m2: p < 0; super-linear: q < 0) the
  offending part is clipped to 0 and the curve goes through the lower point only;
- below the smallest measured count m: the fitted curve scaled through (m, r(m)); with one
  point only, a pure compute split (p = m t(m), q = 0: rate r(m) n / m, the least any
  sub-linear job makes);
- above the largest measured count M: only with two or more points (one point says
  nothing of communication), the fitted curve scaled through (M, r(M)), up to
  ``EXTRAPOLATION`` x M; beyond that, or with one point, 0 (not covered, never offered).
  It never exceeds r(M) n / M, linear extrapolation from M.

``refit`` adds measurements (a run's steps/s at a count) and fits again; a new
measurement replaces an old one at the same count. ``table_model`` and ``table_rate`` fit
the model to a throughput table's counts: the scheduler prices an elastic job's counts with
them (``gavelsched/core/configurations.py``), and an emulated worker paces a count its table
lacks with the same figure (``workers/daemon/emulation.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# How far past the largest measured count the model is trusted: 2x (one doubling, the
# step between the catalog's counts).
EXTRAPOLATION = 2.0
# A table is asked for its rate at every count up to PROBED (or a job's scale factor, if
# larger) to fit the model.
PROBED = 256

Points = Mapping[int, float] | Iterable[tuple[int, float]]


def _clean(points: Points) -> dict[int, float]:
    """Count -> steps/s, the counts >= 1 with a rate > 0, sorted by count."""
    items = points.items() if isinstance(points, Mapping) else points
    return {int(n): float(r) for n, r in sorted(items) if int(n) >= 1 and float(r) > 0}


def _amdahl(anchor: tuple[int, float], p: float, q: float, n: int) -> float:
    """Steps/s at n of the curve t(n) = k (p/n + q) scaled so that it passes through
    ``anchor`` = (m, r(m))."""
    m, r = anchor
    return r * (p / m + q) / (p / n + q)


def _segment(low: tuple[int, float], high: tuple[int, float], n: int) -> float:
    """Steps/s at n of the Amdahl curve through ``low`` and ``high`` (module docstring:
    clipped where the points contradict the model)."""
    (m1, r1), (m2, r2) = low, high
    t1, t2 = 1.0 / r1, 1.0 / r2
    p = max(0.0, (t1 - t2) / (1.0 / m1 - 1.0 / m2))
    q = max(0.0, (m2 * t2 - m1 * t1) / (m2 - m1))   # not both 0: rates are > 0
    return _amdahl(low, p, q, n)


@dataclass(frozen=True)
class ScalingModel:
    """Steps/s of one job type on n GPUs of one worker type (module docstring):
    ``points`` the measured (count, steps/s), by count; ``parallel`` and ``serial`` the
    fitted p and q of t(n) = p/n + q, in seconds per step."""

    points: tuple[tuple[int, float], ...]
    parallel: float
    serial: float

    @classmethod
    def fit(cls, points: Points) -> ScalingModel:
        """The model of ``points`` (count -> steps/s; counts < 1 and rates <= 0 are
        ignored); with no point left, a model that covers nothing."""
        have = _clean(points)
        if len(have) < 2:
            ((m, r),) = have.items() if have else ((1, 0.0),)
            return cls(tuple(have.items()), m / r if r > 0 else 0.0, 0.0)
        n = np.array(list(have), dtype=float)
        t = 1.0 / np.array(list(have.values()))
        A = np.column_stack([1.0 / n, np.ones_like(n)]) / t[:, None]
        from scipy.optimize import nnls   # 0.2 s to import: only for a fit

        (p, q), _ = nnls(A, np.ones_like(n))   # not both 0: A > 0 and the target is 1
        return cls(tuple(have.items()), float(p), float(q))

    def refit(self, points: Points) -> ScalingModel:
        """This model's points plus ``points`` (a new rate at a count replaces the old),
        fitted again."""
        return ScalingModel.fit({**dict(self.points), **_clean(points)})

    @property
    def largest(self) -> int:
        """The largest count the model gives a rate for (0: none)."""
        if not self.points:
            return 0
        top = self.points[-1][0]
        return int(EXTRAPOLATION * top) if len(self.points) >= 2 else top

    def covers(self, n: int) -> bool:
        return 1 <= n <= self.largest

    def rate(self, n: int) -> float:
        """Steps/s on ``n`` GPUs (module docstring); 0 where the model does not cover n."""
        if not self.covers(n):
            return 0.0
        measured = dict(self.points)
        if n in measured:
            return measured[n]
        below = [pt for pt in self.points if pt[0] < n]
        above = [pt for pt in self.points if pt[0] > n]
        if below and above:
            return _segment(below[-1], above[0], n)
        anchor = above[0] if above else below[-1]
        return _amdahl(anchor, self.parallel, self.serial, n)


class Rates(Protocol):
    """What the table functions read: steps/s of a job type on n GPUs of a worker type, 0
    where unknown (``traces.ThroughputTable``, the core's throughput sources)."""

    def get(self, worker_type: str, job_type: str, scale_factor: int = 1) -> float: ...


def table_model(source: Rates, worker_type: str, job_type: str,
                known: Iterable[int] = range(1, PROBED + 1)) -> ScalingModel:
    """The scaling model of ``job_type`` on ``worker_type`` fitted to the table's rates at
    the ``known`` counts."""
    return ScalingModel.fit((m, float(source.get(worker_type, job_type, m))) for m in known)


def table_rate(source: Rates, worker_type: str, job_type: str, n: int,
               known: Iterable[int] = range(1, PROBED + 1)) -> float:
    """Steps/s of ``job_type`` on ``n`` GPUs of ``worker_type``: the table's where it has
    one, else the scaling model's fitted to the table's ``known`` counts; 0 where the model
    does not cover ``n``."""
    return table_model(source, worker_type, job_type, known).rate(n)
