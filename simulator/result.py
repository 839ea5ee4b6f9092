"""The Simulation result (docs/design.md, Simulation result JSON)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class JobRecord:
    id: str
    job_type: str
    scale_factor: int
    arrival_s: float
    completion_s: float | None
    jct_s: float | None
    slo_s: float | None = None
    started_s: float | None = None   # the start of the first round it made steps in

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "job_type": self.job_type, "scale_factor": self.scale_factor,
                "arrival_s": self.arrival_s, "completion_s": self.completion_s,
                "jct_s": self.jct_s}


@dataclass(frozen=True)
class Timeline:
    """Per-round data kept for plots (``SimConfig.record_timeline``)."""

    types: tuple[str, ...]
    capacity: tuple[int, ...]                 # live workers per type (at the end)
    round_start: tuple[float, ...]
    round_end: tuple[float, ...]
    busy: tuple[tuple[int, ...], ...]         # per round: busy workers per type
    allocations: tuple[tuple[float, dict[str, float]], ...]  # (time, job id -> GPUs share)
    # per round, with entities: entity -> GPU-seconds its jobs held
    entity_gpu_s: tuple[dict[str, float], ...] = ()


@dataclass(frozen=True)
class SimulationResult:
    """Everything ``gavelsched simulate --json`` writes, plus what the summary prints.

    ``avg_jct_s`` averages the jobs of ``window`` (all jobs without one) that finished.
    ``utilization`` is busy GPU-seconds over GPU-seconds available from the first arrival
    to the end; ``cost_usd`` charges each micro-task's GPUs at its type's price for the
    time it ran. ``lease_extension_rate`` is extensions over opportunities (Gavel's
    definition); ``allocation_gap`` is the time-weighted mean, over allocation periods and
    combinations, of sum_j |received fraction - X| (0 means the mechanism realised X
    exactly) and ``allocation_shortfall`` the same of sum_j max(0, X - received fraction),
    the time asked for but not given (receiving more than X on an idle cluster is not a
    shortfall).
    """

    policy: str
    avg_jct_s: float | None
    makespan_s: float
    utilization: float
    cost_usd: float
    slo_violations: int
    rounds: int
    wall_s: float
    jobs: tuple[JobRecord, ...]
    window: tuple[int, int] | None = None
    lease_extension_rate: float | None = None
    allocation_gap: float | None = None
    allocation_shortfall: float | None = None
    resolves: int = 0
    solve_s: float = 0.0
    end_s: float = 0.0
    timeline: Timeline | None = field(default=None, compare=False, repr=False)
    entity_gpu_s: Mapping[str, float] = field(default_factory=dict)  # with entities
    # job type -> worker type -> GPU-seconds its jobs held there (``record_type_use``)
    type_gpu_s: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    steps_left: Mapping[str, int] = field(default_factory=dict)  # at ``SimConfig.horizon_s``
    # jobs the policy refused, with why: a core that keeps going past a refusal (a replay of
    # the daemon) drops them (``CoreConfig.on_solve_error``)
    refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def completed(self) -> int:
        return sum(1 for j in self.jobs if j.completion_s is not None)

    @property
    def stopped_early(self) -> bool:
        """The run ended at the window's last finish with jobs outside it unfinished
        (``SimConfig.window``: the simulation stops there)."""
        return self.window is not None and self.completed < len(self.jobs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "avg_jct_s": _num(self.avg_jct_s),
            "makespan_s": self.makespan_s,
            "utilization": self.utilization,
            "cost_usd": self.cost_usd,
            "slo_violations": self.slo_violations,
            "rounds": self.rounds,
            "wall_s": self.wall_s,
            "window": list(self.window) if self.window else None,
            "stopped": ({"at_s": self.end_s, "reason": "the window's jobs had all finished",
                         "unfinished": len(self.jobs) - self.completed}
                        if self.stopped_early else None),
            "lease_extension_rate": _num(self.lease_extension_rate),
            "allocation_gap": _num(self.allocation_gap),
            "allocation_shortfall": _num(self.allocation_shortfall),
            "resolves": self.resolves,
            "solve_s": self.solve_s,
            "jobs": [j.to_dict() for j in self.jobs],
            **({"entity_gpu_hours": {e: s / 3600.0 for e, s in self.entity_gpu_s.items()}}
               if self.entity_gpu_s else {}),
            **({"type_gpu_hours": {kind: {t: s / 3600.0 for t, s in row.items()}
                                   for kind, row in self.type_gpu_s.items()}}
               if self.type_gpu_s else {}),
        }

    def summary(self) -> str:
        """A readable multi-line summary for the terminal."""
        lines = [f"policy              {self.policy}"]
        scope = (f"jobs {self.window[0]}..{self.window[1] - 1}" if self.window
                 else f"{len(self.jobs)} jobs")
        jct = "n/a" if self.avg_jct_s is None else \
            f"{self.avg_jct_s:,.0f} s ({self.avg_jct_s / 3600:.2f} h)"
        lines += [
            f"average JCT         {jct}  [{scope}]",
            f"makespan            {self.makespan_s:,.0f} s ({self.makespan_s / 3600:.2f} h)",
            f"completed           {self.completed}/{len(self.jobs)} jobs" + (
                f" (stopped at {self.end_s / 3600:.2f} h: the window's jobs had all "
                f"finished; {len(self.jobs) - self.completed} others had not)"
                if self.stopped_early else ""),
            f"utilization         {self.utilization:.1%}",
            f"cost                ${self.cost_usd:,.2f}",
            f"SLO violations      {self.slo_violations}",
            (f"rounds              {self.rounds}  (re-solves: {self.resolves}, "
             f"solver {self.solve_s:.2f} s)"),
        ]
        if self.lease_extension_rate is not None:
            lines.append(f"lease extensions    {self.lease_extension_rate:.1%}")
        if self.allocation_gap is not None:
            lines.append(f"allocation gap      {self.allocation_gap:.3f} sum_j |received - X|, "
                         f"shortfall {self.allocation_shortfall:.3f} sum_j max(0, X - received)")
        total = sum(self.entity_gpu_s.values())
        if total > 0:
            lines.append("entity GPU-hours    " + ", ".join(
                f"{e or '-'} {s / 3600:,.2f} ({s / total:.1%})"
                for e, s in sorted(self.entity_gpu_s.items())))
        lines += self.type_use_lines()
        lines.append(f"wall time           {self.wall_s:.2f} s")
        return "\n".join(lines)

    def type_use_lines(self) -> list[str]:
        """Where each job type ran (``type_gpu_s``): the share of its GPU-hours on each
        worker type, one line per job type; none when not recorded."""
        if not self.type_gpu_s:
            return []
        types = sorted({t for row in self.type_gpu_s.values() for t in row})
        width = max(len(kind) for kind in self.type_gpu_s)
        out = ["where jobs ran      each job type's GPU-hours, and their share by type",
               f"  {'job type':<{width}}  {'GPU-hours':>10}" + "".join(f"{t:>8}" for t in types)]
        for kind, row in self.type_gpu_s.items():
            total = sum(row.values())
            cells = "".join(f"{_share(row.get(t, 0.0) / total):>8}" for t in types)
            out.append(f"  {kind:<{width}}  {total / 3600:>10,.1f}" + cells)
        return out


def _share(x: float) -> str:
    return "-" if x <= 0 else "<1%" if x < 0.005 else f"{x:.0%}"


def _num(x: float | None) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x
