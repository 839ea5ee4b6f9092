"""What ``Client.status`` returns: typed, frozen records of a ``StatusResponse``.

``ClusterStatus.to_dict()`` is ``status --json`` (the contract of docs/architecture.md),
exactly as ``gavelsched.daemon.statusjson.status_dict`` writes it for the dashboard: the
records are built from that JSON, so the two never differ, and a field the JSON gains
must be added here (``from_pb`` fails on a key it does not know). Fields marked
``json=False`` are read by the tables and the ETA but are no part of the JSON. Times are
seconds on the scheduler's clock (``epoch_unix`` is its origin); None: not yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ..daemon.statusjson import cluster_dict, job_dict, plain

__all__ = ["ClusterStatus", "JobStatus", "SolveStatus", "WorkerStatus"]

EXTRA = {"json": False}     # a field no part of the ``status --json`` contract


def _frozen(value: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(value) if type(value) is dict else plain(value))


def _json(record) -> dict[str, Any]:
    out = {}
    for f in fields(record):
        if f.metadata.get("json", True):
            value = getattr(record, f.name)
            out[f.name] = dict(value) if isinstance(value, Mapping) else value
    return out


@dataclass(frozen=True)
class JobStatus:
    """One job: its state (queued, running, preempted, held, done, failed, cancelled), progress,
    where it runs this round (``worker_type``: a type or a configuration such as
    ``k80:1+v100:1``; None: nowhere), why it waits (``reason``), its allocation against
    the share it received per type (thesis §5.5), its times, and where it stands against
    its SLO's deadline (``slo_status``: ``gavelsched.daemon.statusjson.slo_status``)."""

    id: str
    state: str
    steps_done: int
    total_steps: int
    job_type: str
    scale_factor: int
    worker_type: str | None
    reason: str | None
    gpus: int
    shared_with: str | None     # the job of its co-located pair sharing its GPUs now
    mixed: bool
    min_scale_factor: int | None
    entity: str | None
    allocation: Mapping[str, float]
    received: Mapping[str, float]
    arrival_s: float
    started_s: float | None
    ended_s: float | None
    completion_s: float | None
    elapsed_s: float | None
    jct_s: float | None
    submitted_at: str | None
    started_at: str | None
    ended_at: str | None
    user: str | None = None
    array_id: str | None = None
    array_index: int | None = None
    max_runtime_s: float | None = None
    after: tuple[str, ...] = ()
    run_s: float = 0.0
    eta_start_s: float | None = None
    eta_finish_s: float | None = None
    eta_finish_at: str | None = None
    slo_s: float | None = None          # its SLO (seconds from submission); None: none
    deadline_s: float | None = None     # its arrival plus its SLO
    deadline_at: str | None = None
    slo_status: str | None = None       # met, missed, at_risk, on_track, unknown
    steps_per_s: Mapping[str, float] = field(default_factory=dict, metadata=EXTRA)
    priority_weight: float = field(default=1.0, metadata=EXTRA)
    startup_s: float = field(default=0.0, metadata=EXTRA)

    def __post_init__(self) -> None:
        for name in ("allocation", "received", "steps_per_s"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "after", tuple(self.after))

    def to_dict(self) -> dict[str, Any]:
        """The job's object of ``status --json``."""
        out = _json(self)
        out["after"] = list(self.after)
        return out


@dataclass(frozen=True)
class WorkerStatus:
    """One worker server: its type, GPUs, whether it is alive, drained (``drain``) and
    how many job runs it holds now."""

    id: str
    type: str
    gpus: int
    alive: bool
    drained: bool
    runs: int
    address: str = field(default="", metadata=EXTRA)

    def to_dict(self) -> dict[str, Any]:
        return _json(self)


@dataclass(frozen=True)
class EntityStatus:
    """A configured entity (cluster.yaml ``entities``): its weight, inner policy, GPU cap
    (None: none), and the GPUs and jobs not ended it has now."""

    name: str
    weight: float
    policy: str
    max_gpus: int | None
    gpus: int
    jobs: int

    def to_dict(self) -> dict[str, Any]:
        return _json(self)


@dataclass(frozen=True)
class SolveStatus:
    """The policy's re-solve running off the scheduler's executor: since when (``since_s``;
    None: none running), for how long when answered (``for_s``) and for how many ``jobs``;
    and the seconds the allocation in force took to solve (``allocation_solve_s``; None:
    none yet, or not known). A solve running much longer than a round is what an operator
    looks for."""

    since_s: float | None
    for_s: float | None
    jobs: int
    allocation_solve_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return _json(self)


_NOT_SOLVING = SolveStatus(None, None, 0, None)


@dataclass(frozen=True)
class ClusterStatus:
    """The scheduler's answer to ``status``: the round, the jobs asked for, every worker,
    and the daemon's rules that the ETA replays (policy, round length, re-solve rule)."""

    round: int
    jobs: tuple[JobStatus, ...]
    workers: tuple[WorkerStatus, ...]
    policy: str = field(default="", metadata=EXTRA)
    round_seconds: float = field(default=0.0, metadata=EXTRA)
    now_s: float = field(default=0.0, metadata=EXTRA)
    epoch_unix: float = field(default=0.0, metadata=EXTRA)
    entities: tuple[EntityStatus, ...] = ()
    eta_computed_s: float | None = None
    eta_error: str | None = None
    solving: SolveStatus = _NOT_SOLVING
    notices: tuple[str, ...] = ()     # what an operator should know now, one line each

    @classmethod
    def from_pb(cls, reply) -> ClusterStatus:
        """The records of a ``pb.StatusResponse`` (through ``statusjson``'s ``job_dict``
        and ``cluster_dict``, the JSON's one writer; a job's dict at a time)."""
        epoch, now = reply.epoch_unix, reply.now_s
        jobs = tuple(JobStatus(**job_dict(p, epoch, now), steps_per_s=p.steps_per_s,
                               priority_weight=p.priority_weight or 1.0,
                               startup_s=p.startup_s)
                     for p in reply.jobs)
        data = cluster_dict(reply)
        workers = tuple(WorkerStatus(**w, address=p.address)
                        for w, p in zip(data["workers"], reply.workers))
        return cls(reply.round, jobs, workers, reply.policy, reply.round_seconds,
                   reply.now_s, reply.epoch_unix,
                   tuple(EntityStatus(**e) for e in data["entities"]),
                   data["eta_computed_s"], data["eta_error"], SolveStatus(**data["solving"]),
                   tuple(data["notices"]))

    def to_dict(self) -> dict[str, Any]:
        """``status --json``: ``{"round", "jobs": [...], "solving": {...}, "workers": [...],
        "entities": [...], "eta_computed_s", "eta_error", "notices": [...]}``."""
        return {"round": self.round, "jobs": [j.to_dict() for j in self.jobs],
                "solving": self.solving.to_dict(),
                "workers": [w.to_dict() for w in self.workers],
                "entities": [e.to_dict() for e in self.entities],
                "eta_computed_s": self.eta_computed_s, "eta_error": self.eta_error,
                "notices": list(self.notices)}

    def job(self, job_id: str) -> JobStatus | None:
        """The job of that id among those asked for, or None."""
        return next((j for j in self.jobs if j.id == job_id), None)
