"""The data a policy reads (``Problem``) and the data it returns (``Allocation``).

Both mirror the Problem JSON and Allocation JSON of docs/design.md and round-trip through
``from_dict`` / ``to_dict``; the Problem JSON's field checks live in ``problem_json.py`` and
the per-job records (``Job``, ``Pair``, ``Entity``, ``Configuration``) in ``jobs.py``.
Records are frozen: policies receive values, never shared state (docs/style.md §1).

Allocations follow thesis §5.3.1: for every job, or co-located pair of jobs, the fraction of
wall-clock time it should spend on each worker type until the next recomputation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from functools import cached_property
from typing import Any

import numpy as np

from .errors import ProblemError
from .frozen import record
from .jobs import Entity, Job, Pair, frozen_mapping, frozen_rows, key_members
from .matrix_rows import MatrixRows
from .problem_json import problem_fields
from .table import JobTable


@record
class Problem:
    """Everything a policy needs: the cluster, its prices, the jobs, pairs and entities.

    ``previous`` is the last allocation in force, for the policies that keep decisions
    between recomputations (FIFO's running jobs stay put, Gandiva keeps pairs that help).
    ``max_scale_factor`` caps the job size each type can host (default: its worker count);
    POP sub-problems keep the whole cluster's caps while holding a fraction of its workers.
    ``policy_state`` is what the policy handed back with that allocation
    (``Allocation.policy_state``, JSON data): a policy that must remember something between
    solves, such as Gavel-compatible FIFO's random generator, gets it back as input and so
    stays a pure function. Jobs are listed in arrival order; order-based policies (FIFO)
    rely on it. ``jobs`` may be a ``JobTable`` (the jobs as arrays, their records made when
    read: what the scheduler core hands over).
    """

    cluster: Mapping[str, float]
    jobs: tuple[Job, ...] = ()
    prices: Mapping[str, float] = field(default_factory=dict)
    pairs: tuple[Pair, ...] = ()
    entities: Mapping[str, Entity] = field(default_factory=dict)
    previous: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    max_scale_factor: Mapping[str, float] = field(default_factory=dict)
    policy_state: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cluster", frozen_mapping(self.cluster))
        object.__setattr__(self, "policy_state", frozen_mapping(self.policy_state))
        object.__setattr__(self, "max_scale_factor", frozen_mapping(self.max_scale_factor))
        if not isinstance(self.jobs, JobTable):
            object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "prices", frozen_mapping(self.prices))
        object.__setattr__(self, "pairs", tuple(self.pairs))
        object.__setattr__(self, "entities", frozen_mapping(self.entities))
        object.__setattr__(self, "previous", frozen_rows(self.previous))

    @property
    def worker_types(self) -> tuple[str, ...]:
        return tuple(self.cluster)

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(job.id for job in self.jobs)

    @cached_property
    def table(self) -> JobTable:
        """The jobs as arrays over ``worker_types`` (what the column model reads)."""
        jobs = self.jobs
        if isinstance(jobs, JobTable) and jobs.types == self.worker_types:
            return jobs
        return JobTable.of(tuple(jobs), self.worker_types)

    def job(self, job_id: str) -> Job:
        for job in self.jobs:
            if job.id == job_id:
                return job
        raise KeyError(job_id)

    def largest_job(self, worker_type: str) -> float:
        """The largest scale factor that can run on ``worker_type``."""
        return self.max_scale_factor.get(worker_type, self.cluster[worker_type])

    def with_jobs(self, jobs, cluster: Mapping[str, float] | None = None) -> Problem:
        """A copy holding only ``jobs`` and the pairs among them, optionally on ``cluster``
        (a share of this one: the largest job each type can host stays the same)."""
        jobs = tuple(jobs)
        ids = {job.id for job in jobs}
        return Problem(
            cluster=self.cluster if cluster is None else cluster, jobs=jobs,
            prices=self.prices,
            pairs=tuple(p for p in self.pairs if p.jobs[0] in ids and p.jobs[1] in ids),
            entities=self.entities,
            previous={k: v for k, v in self.previous.items() if _key_jobs(k) <= ids},
            max_scale_factor={t: self.largest_job(t) for t in self.cluster},
            policy_state=self.policy_state,
        )

    # ---- JSON -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any) -> Problem:
        """Parse and validate the Problem JSON (``problem_json.py``); raise ``ProblemError``
        naming the bad field."""
        return cls(**problem_fields(data))

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"cluster": dict(self.cluster), "jobs": []}
        if self.prices:
            out["prices"] = dict(self.prices)
        for job in self.jobs:
            out["jobs"].append({
                "id": job.id, "throughputs": dict(job.throughputs),
                "scale_factor": job.scale_factor, "weight": job.weight,
                "remaining_steps": job.remaining_steps, "elapsed_s": job.elapsed_s,
                "slo_s": job.slo_s, "entity": job.entity,
            })
            if job.isolated_elapsed_s is not None:
                out["jobs"][-1]["isolated_elapsed_s"] = job.isolated_elapsed_s
            if job.configurations:
                out["jobs"][-1]["configurations"] = [c.to_dict() for c in job.configurations]
        if self.pairs:
            out["pairs"] = [
                {"jobs": list(p.jobs), "throughputs": {k: list(v) for k, v in p.throughputs.items()}}
                for p in self.pairs
            ]
        if self.entities:
            out["entities"] = {
                name: {"weight": e.weight, "policy": e.policy,
                       **({} if e.max_gpus is None else {"max_gpus": e.max_gpus})}
                for name, e in self.entities.items()
            }
        if self.previous:
            out["previous"] = {k: dict(v) for k, v in self.previous.items()}
        if self.policy_state:
            out["policy_state"] = dict(self.policy_state)
        return out


def _key_jobs(key: str) -> set[str]:
    return set(key_members(key))


@record
class Allocation:
    """A policy's answer: time fractions per job (or ``"a+b"`` pair) and worker type."""

    policy: str
    allocation: Mapping[str, Mapping[str, float]]
    objective: float | None = None
    solve_s: float = 0.0
    solver: str | None = None
    policy_state: Mapping[str, Any] = field(default_factory=dict)  # see Problem

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocation", frozen_rows(self.allocation))
        object.__setattr__(self, "policy_state", frozen_mapping(self.policy_state))

    def matrix(self, types: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray] | None:
        """(keys, X): the rows as one read-only matrix over ``types``, when the policy
        wrote them as one over those types (``policies.matrix_rows.MatrixRows``); None
        otherwise (read the rows)."""
        rows = self.allocation
        if type(rows) is not MatrixRows or rows.types != tuple(types):
            return None
        return rows.matrix()

    def share(self, key: str, worker_type: str) -> float:
        return self.allocation.get(key, {}).get(worker_type, 0.0)

    def job_time(self, job_id: str) -> float:
        """Total time fraction job ``job_id`` runs, alone or in any pair."""
        return sum(
            sum(row.values()) for key, row in self.allocation.items()
            if job_id in _key_jobs(key)
        )

    def to_dict(self) -> dict:
        out = {
            "policy": self.policy,
            "allocation": {k: dict(v) for k, v in self.allocation.items()},
            "objective": self.objective,
            "solve_s": self.solve_s,
        }
        if self.solver is not None:
            out["solver"] = self.solver
        if self.policy_state:
            out["policy_state"] = dict(self.policy_state)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Allocation:
        try:
            return cls(
                policy=str(data["policy"]),
                allocation={str(k): {str(t): float(f) for t, f in v.items()}
                            for k, v in data["allocation"].items()},
                objective=None if data.get("objective") is None else float(data["objective"]),
                solve_s=float(data.get("solve_s", 0.0)),
                solver=data.get("solver"),
                policy_state=dict(data.get("policy_state", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ProblemError(f"allocation: malformed ({err!r})") from None
