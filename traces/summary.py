"""A short, human-readable summary of a trace (what ``gavelsched trace show`` prints)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .types import ThroughputTable, TraceJob


@dataclass(frozen=True)
class TraceSummary:
    """Counts and spans of a trace. ``work_gpu_hours`` is the GPU-hours the trace needs on
    the reference worker type (None when some job type is not in the table)."""

    num_jobs: int
    first_arrival_s: float
    last_arrival_s: float
    job_types: Counter
    scale_factors: Counter
    priority_weights: Counter
    num_slos: int
    entities: Counter
    work_gpu_hours: float | None
    reference_worker: str

    @property
    def span_s(self) -> float:
        return self.last_arrival_s - self.first_arrival_s

    def lines(self, top: int = 3, extra: Sequence[tuple[str, str]] = ()) -> list[str]:
        """The summary as aligned ``label  value`` lines, ``extra`` rows last."""
        rows = [("jobs", str(self.num_jobs))]
        if self.num_jobs:
            rows += self._rows(top)
        rows += list(extra)
        width = max(len(label) for label, _ in rows) + 2
        return [f"{label:<{width}}{value}" for label, value in rows]

    def _rows(self, top: int) -> list[tuple[str, str]]:
        n = self.num_jobs
        if self.span_s == 0:
            arrivals = f"all at t = {self.first_arrival_s / 3600:.2f} h (static)"
        else:
            arrivals = (f"{self.first_arrival_s / 3600:.2f} h .. "
                        f"{self.last_arrival_s / 3600:.2f} h (span {self.span_s / 3600:.2f} h, "
                        f"mean gap {self.span_s / (n - 1) / 60:.1f} min)")
        common = ", ".join(f"{t} ({c})" for t, c in self.job_types.most_common(top))
        entities = (f"{len(self.entities)}: " + ", ".join(
            f"{e} ({c})" for e, c in self.entities.most_common(top)) if self.entities
            else "none")
        rows = [
            ("arrivals", arrivals),
            ("job types", f"{len(self.job_types)} distinct; most frequent: {common}"),
            ("scale factors", _shares(self.scale_factors, n)),
            ("priorities", _shares(self.priority_weights, n, prefix="weight ")),
            ("SLOs", f"{self.num_slos} jobs" if self.num_slos else "none"),
            ("entities", entities),
        ]
        if self.work_gpu_hours is not None:
            rows.append(("work", (f"{self.work_gpu_hours:,.1f} {self.reference_worker} "
                         "GPU-hours")))
        return rows


def _shares(counts: Counter, n: int, prefix: str = "") -> str:
    return ", ".join(f"{prefix}{_fmt(k)}: {c} ({100 * c / n:.0f}%)"
                     for k, c in sorted(counts.items()))


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def summarize(jobs: Sequence[TraceJob], table: ThroughputTable | None = None,
              reference_worker: str = "v100") -> TraceSummary:
    """Summarize ``jobs``; with ``table``, also the GPU-hours of work on
    ``reference_worker`` (total_steps / steps/s x scale factor)."""
    arrivals = [job.arrival_s for job in jobs]
    work = None
    if table is not None and jobs:
        rates = [table.get(reference_worker, j.job_type, j.scale_factor) for j in jobs]
        if all(rate > 0 for rate in rates):
            work = sum(j.total_steps / rate * j.scale_factor
                       for j, rate in zip(jobs, rates)) / 3600
    return TraceSummary(
        num_jobs=len(jobs), first_arrival_s=min(arrivals, default=0.0),
        last_arrival_s=max(arrivals, default=0.0),
        job_types=Counter(j.job_type for j in jobs),
        scale_factors=Counter(j.scale_factor for j in jobs),
        priority_weights=Counter(float(j.priority_weight) for j in jobs),
        num_slos=sum(j.slo_s is not None for j in jobs),
        entities=Counter(j.entity for j in jobs if j.entity is not None),
        work_gpu_hours=work, reference_worker=reference_worker)
