"""Records shared by traces, the simulator and the scheduler core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

JobKey = tuple[str, int]  # (job type, scale factor)


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace (docs/design.md, Trace files). ``slo_s`` is a duration from arrival."""

    job_type: str
    scale_factor: int
    total_steps: int
    arrival_s: float
    priority_weight: float = 1.0
    slo_s: float | None = None
    entity: str | None = None
    command: str = ""
    working_dir: str = ""
    num_steps_arg: str = ""
    needs_data_dir: bool = False
    mixed: bool = False  # may run on several GPU types at once (virtual nodes, VirtualFlow §5)
    # elastic: may also run on this many GPUs or more, below scale_factor (Varuna §4)
    min_scale_factor: int | None = None
    # Its own steps/s per worker type at its scale factor, in place of the table's row for
    # its job type (a type not named cannot run it); None: the table's. A measured job (a
    # daemon's, replayed) keeps its type's name and carries its own speeds.
    throughputs: Mapping[str, float] | None = field(default=None, hash=False)
    # The steps/s the scheduler plans it on when they differ from what it makes (a daemon
    # keeps a job's priors until a measurement moves them past noise, core/online.py);
    # None: ``throughputs``. Only with ``throughputs``; a replay's own (not in trace files).
    planned: Mapping[str, float] | None = field(default=None, hash=False)
    # Seconds a run of it on new workers loses to its start-up, in place of its type's
    # preemption overhead (``simulator.SimConfig``); None: its type's.
    startup_s: float | None = None
    # What a restart costs it for the restart rule (``gavelsched/core/restarts.py``):
    # start-up plus save, as a daemon measures them; None: its start-up charge above.
    restart_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("throughputs", "planned"):
            row = getattr(self, name)
            if row is not None:
                object.__setattr__(self, name, MappingProxyType(
                    {str(t): float(v) for t, v in row.items()}))
        if self.planned is not None and self.throughputs is None:
            raise ValueError("a trace job's planned steps/s need its own throughputs")

    def rate_on(self, worker_type: str, table: ThroughputTable) -> float:
        """Its steps/s on ``worker_type``: its own ``throughputs`` if it has them, else the
        table's for its job type and scale factor (0.0: it cannot run there)."""
        if self.throughputs is not None:
            return self.throughputs.get(worker_type, 0.0)
        return table.get(worker_type, self.job_type, self.scale_factor)


@dataclass(frozen=True)
class ThroughputTable:
    """Steps/s of each (job type, scale factor) on each worker type, alone and co-located.

    ``solo[worker_type][(job_type, sf)] = steps/s``;
    ``pairs[worker_type][((type_a, sf), (type_b, sf))] = (steps/s of a, steps/s of b)``;
    ``restart_s[job_type] = seconds`` a restart of that job type costs (start-up plus
    checkpoint; Sia §4, a job's restart penalty), declared by the table; a type not named
    has none declared.
    """

    solo: Mapping[str, Mapping[JobKey, float]]
    pairs: Mapping[str, Mapping[tuple[JobKey, JobKey], tuple[float, float]]] = field(
        default_factory=dict)
    restart_s: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "solo", MappingProxyType(
            {w: MappingProxyType(dict(t)) for w, t in self.solo.items()}))
        object.__setattr__(self, "pairs", MappingProxyType(
            {w: MappingProxyType(dict(t)) for w, t in self.pairs.items()}))
        object.__setattr__(self, "restart_s", MappingProxyType(
            {str(t): float(s) for t, s in self.restart_s.items()}))

    @property
    def worker_types(self) -> tuple[str, ...]:
        return tuple(self.solo)

    @property
    def job_keys(self) -> tuple[JobKey, ...]:
        keys: dict[JobKey, None] = {}
        for table in self.solo.values():
            keys.update(dict.fromkeys(table))
        return tuple(keys)

    @property
    def job_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k[0] for k in self.job_keys))

    def has(self, job_type: str, scale_factor: int = 1) -> bool:
        return any((job_type, scale_factor) in t for t in self.solo.values())

    def get(self, worker_type: str, job_type: str, scale_factor: int = 1) -> float:
        """Steps/s; 0.0 when the job cannot run on that type (or is not in the table)."""
        return self.solo.get(worker_type, {}).get((job_type, scale_factor), 0.0)

    def pair(self, worker_type: str, a: JobKey, b: JobKey) -> tuple[float, float] | None:
        """Co-located steps/s of (a, b) on ``worker_type``, in that order; None if unknown."""
        table = self.pairs.get(worker_type, {})
        if (a, b) in table:
            return table[(a, b)]
        if (b, a) in table:
            ta, tb = table[(b, a)]
            return (tb, ta)
        return None

    def scaled(self, speed: float) -> ThroughputTable:
        """This table with every steps/s, alone and co-located, times ``speed`` (an
        emulated cluster's time dilation: ``local-cluster --emulation-speed``); restart
        costs are kept as declared."""
        return ThroughputTable(
            {w: {k: v * speed for k, v in rows.items()} for w, rows in self.solo.items()},
            {w: {k: (a * speed, b * speed) for k, (a, b) in rows.items()}
             for w, rows in self.pairs.items()},
            self.restart_s)
