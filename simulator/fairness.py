"""Per-job finish-time fairness against an isolated run (Themis ρ, thesis §5.4.2, §5.7.3).

ρ_m = JCT of job m under the policy / JCT of job m when every job holds 1/n of the cluster
(the ``isolated`` policy on the same trace). ρ < 1 means the job finished sooner than with
its private share; Figure 5.11 plots the CDF of ρ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .result import SimulationResult


@dataclass(frozen=True)
class FinishTimeFairness:
    per_job: Mapping[str, float]   # ρ of every job that finished in both runs

    @property
    def mean(self) -> float | None:
        return float(np.mean(list(self.per_job.values()))) if self.per_job else None

    @property
    def worst(self) -> float | None:
        return max(self.per_job.values()) if self.per_job else None

    @property
    def unfair_share(self) -> float | None:
        """Fraction of jobs that finished later than with their isolated share (ρ > 1)."""
        if not self.per_job:
            return None
        return sum(rho > 1.0 for rho in self.per_job.values()) / len(self.per_job)

    def to_dict(self) -> dict:
        return {"mean": self.mean, "max": self.worst, "unfair_share": self.unfair_share,
                "per_job": dict(self.per_job)}


def finish_time_fairness(result: SimulationResult, isolated: SimulationResult,
                         window: tuple[int, int] | None = None) -> FinishTimeFairness:
    """ρ of each job of ``window`` (all jobs without one) finished in both runs."""
    alone = {j.id: j.jct_s for j in isolated.jobs if j.jct_s}
    rho = {}
    for job in result.jobs:
        if window is not None and not window[0] <= int(job.id) < window[1]:
            continue
        if job.jct_s is not None and alone.get(job.id):
            rho[job.id] = job.jct_s / alone[job.id]
    return FinishTimeFairness(rho)
