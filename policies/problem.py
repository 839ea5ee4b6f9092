"""The data a policy reads (``Problem``) and the data it returns (``Allocation``).

Both mirror the Problem JSON and Allocation JSON of DESIGN.md and round-trip through
``from_dict`` / ``to_dict``. Records are frozen: policies receive values, never shared state
(STYLE.md §1).

Allocations follow thesis §5.3.1: for every job, or co-located pair of jobs, the fraction of
wall-clock time it should spend on each worker type until the next recomputation.
"""

from __future__ import annotations

import copyreg
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .errors import ProblemError

PAIR_SEPARATOR = "+"
ENTITY_POLICIES = ("fairness", "fifo")
# A configuration's name: "type:count" parts joined by "+", sorted by type ("k80:2+v100:1").
CONFIG_SEPARATOR = "+"
COUNT_SEPARATOR = ":"


def pair_key(a: str, b: str) -> str:
    """The allocation key of a co-located pair, e.g. ``"0+1"`` (DESIGN.md, Allocation JSON)."""
    return f"{a}{PAIR_SEPARATOR}{b}"


def key_members(key: str) -> tuple[str, ...]:
    """The job ids an allocation key names: ``"0+1"`` -> ``("0", "1")``, ``"0"`` -> ``("0",)``
    (the inverse of ``pair_key``)."""
    return tuple(key.split(PAIR_SEPARATOR))


def is_pair_key(key: str) -> bool:
    """Whether an allocation key names a co-located pair."""
    return PAIR_SEPARATOR in key


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


def configuration_name(gpus: Mapping[str, int]) -> str:
    """The canonical allocation key of a configuration (a multiset of worker types), e.g.
    ``{"v100": 1, "k80": 2}`` -> ``"k80:2+v100:1"``: ``type:count`` parts sorted by type
    name, joined by ``+`` (docs/architecture.md, Configurations)."""
    return CONFIG_SEPARATOR.join(f"{t}{COUNT_SEPARATOR}{int(gpus[t])}" for t in sorted(gpus))


def parse_configuration_name(name: str) -> dict[str, int]:
    """The inverse of ``configuration_name``; raises ``ProblemError`` naming a bad name."""
    gpus: dict[str, int] = {}
    for part in name.split(CONFIG_SEPARATOR):
        worker_type, sep, count = part.rpartition(COUNT_SEPARATOR)
        if not sep or not worker_type or not count.isdigit() or int(count) < 1 \
                or worker_type in gpus:
            raise ProblemError(f"configuration name {name!r}: expected type:count parts "
                               "joined by '+', e.g. 'k80:2+v100:1'")
        gpus[worker_type] = int(count)
    return gpus


@dataclass(frozen=True)
class Configuration:
    """A way to run a job on several worker types at once with the same global batch
    (VirtualFlow §5, heterogeneous training): ``gpus[type]`` workers of each type, making
    ``throughput`` steps/s together. ``name`` is its allocation key."""

    gpus: Mapping[str, int]
    throughput: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", _frozen({t: int(self.gpus[t]) for t in sorted(self.gpus)}))

    @property
    def name(self) -> str:
        return configuration_name(self.gpus)

    def to_dict(self) -> dict:
        return {"gpus": dict(self.gpus), "throughput": self.throughput}


# Read-only mappings pickle as copies, so problems can be solved in worker processes (POP).
copyreg.pickle(MappingProxyType, lambda proxy: (_frozen, (dict(proxy),)))


@dataclass(frozen=True)
class Job:
    """One job as a policy sees it.

    ``throughputs`` holds steps/s per worker type when the job runs alone on ``scale_factor``
    workers of that type; a missing or zero entry means the job cannot run there.
    ``isolated_elapsed_s`` is Themis's t^isolated (thesis §5.4.2): the time the job would have
    needed so far with a 1/n share of the cluster (the scheduler core accumulates it, as
    Gavel does: steps done over the isolated throughput in force). When None,
    finish-time fairness uses ``elapsed_s`` in its place.
    ``configurations`` are the mixes of worker types the job may also run on at once
    (``Configuration``); only the ``*_mixed`` policies read them (policies/mixed.py).
    """

    id: str
    throughputs: Mapping[str, float]
    scale_factor: int = 1
    weight: float = 1.0
    remaining_steps: float = 0.0
    elapsed_s: float = 0.0
    slo_s: float | None = None
    entity: str | None = None
    isolated_elapsed_s: float | None = None
    configurations: tuple[Configuration, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "throughputs", _frozen(self.throughputs))
        object.__setattr__(self, "configurations", tuple(self.configurations))

    def runs_on(self, worker_type: str) -> bool:
        return self.throughputs.get(worker_type, 0.0) > 0.0


@dataclass(frozen=True)
class Pair:
    """Two jobs space-sharing the same workers (thesis §5.3.1, Space Sharing).

    ``throughputs[type] = (steps/s of jobs[0], steps/s of jobs[1])`` while co-located.
    """

    jobs: tuple[str, str]
    throughputs: Mapping[str, tuple[float, float]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(
            self, "throughputs", _frozen({k: tuple(v) for k, v in self.throughputs.items()})
        )

    @property
    def key(self) -> str:
        return pair_key(*self.jobs)


@dataclass(frozen=True)
class Entity:
    """A tenant of a hierarchical policy (thesis §5.4.3): a weight and an inner policy."""

    name: str
    weight: float = 1.0
    policy: str = "fairness"


@dataclass(frozen=True)
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
    rely on it.
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
        object.__setattr__(self, "cluster", _frozen(self.cluster))
        object.__setattr__(self, "policy_state", _frozen(self.policy_state))
        object.__setattr__(self, "max_scale_factor", _frozen(self.max_scale_factor))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        object.__setattr__(self, "prices", _frozen(self.prices))
        object.__setattr__(self, "pairs", tuple(self.pairs))
        object.__setattr__(self, "entities", _frozen(self.entities))
        object.__setattr__(
            self, "previous", _frozen({k: _frozen(v) for k, v in self.previous.items()})
        )

    @property
    def worker_types(self) -> tuple[str, ...]:
        return tuple(self.cluster)

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(job.id for job in self.jobs)

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
        """Parse and validate the Problem JSON; raise ``ProblemError`` naming the bad field."""
        return _parse_problem(data)

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
                name: {"weight": e.weight, "policy": e.policy} for name, e in self.entities.items()
            }
        if self.previous:
            out["previous"] = {k: dict(v) for k, v in self.previous.items()}
        if self.policy_state:
            out["policy_state"] = dict(self.policy_state)
        return out


def _key_jobs(key: str) -> set[str]:
    return set(key_members(key))


@dataclass(frozen=True)
class Allocation:
    """A policy's answer: time fractions per job (or ``"a+b"`` pair) and worker type."""

    policy: str
    allocation: Mapping[str, Mapping[str, float]]
    objective: float | None = None
    solve_s: float = 0.0
    solver: str | None = None
    policy_state: Mapping[str, Any] = field(default_factory=dict)  # see Problem

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "allocation", _frozen({k: _frozen(v) for k, v in self.allocation.items()})
        )
        object.__setattr__(self, "policy_state", _frozen(self.policy_state))

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


# ---- parsing --------------------------------------------------------------------------

def _number(value: Any, where: str, *, minimum: float | None = None,
            strict: bool = False, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProblemError(f"{where}: must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ProblemError(f"{where}: must be finite, got {value!r}")
    if integer and int(value) != value:
        raise ProblemError(f"{where}: must be a whole number, got {value!r}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        cmp = ">" if strict else ">="
        raise ProblemError(f"{where}: must be {cmp} {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def _mapping(value: Any, where: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise ProblemError(f"{where}: must be an object, got {type(value).__name__}")
    return value


def _parse_problem(data: Any) -> Problem:
    data = _mapping(data, "problem")
    if "cluster" not in data:
        raise ProblemError("problem: missing field 'cluster'")
    cluster = {
        str(t): _number(n, f"cluster.{t}", minimum=0)
        for t, n in _mapping(data["cluster"], "cluster").items()
    }
    prices = {
        str(t): _number(p, f"prices.{t}", minimum=0)
        for t, p in _mapping(data.get("prices") or {}, "prices").items()
    }
    unknown_prices = set(prices) - set(cluster)
    if unknown_prices:
        raise ProblemError(f"prices: unknown worker type {min(unknown_prices)!r}")
    raw_jobs = data.get("jobs", [])
    if not isinstance(raw_jobs, list):
        raise ProblemError("jobs: must be a list")
    jobs = [_parse_job(j, i, cluster) for i, j in enumerate(raw_jobs)]
    seen: set[str] = set()
    for i, job in enumerate(jobs):
        if job.id in seen:
            raise ProblemError(f"jobs[{i}].id: duplicate id {job.id!r}")
        if PAIR_SEPARATOR in job.id:
            raise ProblemError(f"jobs[{i}].id: must not contain {PAIR_SEPARATOR!r}, got {job.id!r}")
        seen.add(job.id)
    by_id = {job.id: job for job in jobs}
    pairs = [_parse_pair(p, i, by_id, cluster) for i, p in enumerate(data.get("pairs") or [])]
    entities = {}
    for name, e in _mapping(data.get("entities") or {}, "entities").items():
        e = _mapping(e, f"entities.{name}")
        policy = e.get("policy", "fairness")
        if policy not in ENTITY_POLICIES:
            raise ProblemError(
                f"entities.{name}.policy: must be one of {', '.join(ENTITY_POLICIES)}, got {policy!r}")
        entities[str(name)] = Entity(
            name=str(name), weight=_number(e.get("weight", 1.0), f"entities.{name}.weight",
                                           minimum=0, strict=True),
            policy=policy)
    for i, job in enumerate(jobs):
        if entities and job.entity is not None and job.entity not in entities:
            raise ProblemError(f"jobs[{i}].entity: unknown entity {job.entity!r}")
    previous = {
        str(k): {str(t): _number(f, f"previous.{k}.{t}", minimum=0) for t, f in
                 _mapping(v, f"previous.{k}").items()}
        for k, v in _mapping(data.get("previous") or {}, "previous").items()
    }
    return Problem(cluster=cluster, jobs=tuple(jobs), prices=prices, pairs=tuple(pairs),
                   entities=entities, previous=previous,
                   policy_state=_mapping(data.get("policy_state") or {}, "policy_state"))


def _parse_job(raw: Any, i: int, cluster: Mapping[str, float]) -> Job:
    where = f"jobs[{i}]"
    raw = _mapping(raw, where)
    for required in ("id", "throughputs"):
        if required not in raw:
            raise ProblemError(f"{where}: missing field {required!r}")
    throughputs = {}
    for t, v in _mapping(raw["throughputs"], f"{where}.throughputs").items():
        if t not in cluster:
            raise ProblemError(f"{where}.throughputs: unknown worker type {t!r}")
        throughputs[str(t)] = 0.0 if v is None else _number(v, f"{where}.throughputs.{t}", minimum=0)
    slo = raw.get("slo_s")
    return Job(
        id=str(raw["id"]),
        throughputs=throughputs,
        scale_factor=_number(raw.get("scale_factor", 1), f"{where}.scale_factor", minimum=1, integer=True),
        weight=_number(raw.get("weight", 1.0), f"{where}.weight", minimum=0, strict=True),
        remaining_steps=_number(raw.get("remaining_steps", 0.0), f"{where}.remaining_steps", minimum=0),
        elapsed_s=_number(raw.get("elapsed_s", 0.0), f"{where}.elapsed_s", minimum=0),
        slo_s=None if slo is None else _number(slo, f"{where}.slo_s", minimum=0, strict=True),
        entity=None if raw.get("entity") is None else str(raw["entity"]),
        isolated_elapsed_s=None if raw.get("isolated_elapsed_s") is None else _number(
            raw["isolated_elapsed_s"], f"{where}.isolated_elapsed_s", minimum=0),
        configurations=_parse_configurations(raw.get("configurations"), where, cluster),
    )


def _parse_configurations(raw: Any, where: str,
                          cluster: Mapping[str, float]) -> tuple[Configuration, ...]:
    """A job's optional ``configurations``: ``[{"gpus": {type: count}, "throughput": s}]``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ProblemError(f"{where}.configurations: must be a list, got {type(raw).__name__}")
    out, seen = [], set()
    for k, entry in enumerate(raw):
        at = f"{where}.configurations[{k}]"
        entry = _mapping(entry, at)
        unknown = set(entry) - {"gpus", "throughput"}
        if unknown:
            raise ProblemError(f"{at}: unknown field {min(unknown)!r}")
        if "gpus" not in entry or "throughput" not in entry:
            raise ProblemError(f"{at}: needs 'gpus' and 'throughput'")
        gpus = {}
        for t, n in _mapping(entry["gpus"], f"{at}.gpus").items():
            if t not in cluster:
                raise ProblemError(f"{at}.gpus: unknown worker type {t!r}")
            if CONFIG_SEPARATOR in t or COUNT_SEPARATOR in t:
                raise ProblemError(f"{at}.gpus: worker type {t!r} contains "
                                   f"{CONFIG_SEPARATOR!r} or {COUNT_SEPARATOR!r}")
            gpus[str(t)] = _number(n, f"{at}.gpus.{t}", minimum=1, integer=True)
        if not gpus:
            raise ProblemError(f"{at}.gpus: must name at least one worker type")
        config = Configuration(gpus, _number(entry["throughput"], f"{at}.throughput",
                                             minimum=0, strict=True))
        if config.name in seen:
            raise ProblemError(f"{at}: configuration {config.name!r} listed twice")
        seen.add(config.name)
        out.append(config)
    return tuple(out)


def _parse_pair(raw: Any, i: int, by_id: Mapping[str, Job], cluster: Mapping[str, float]) -> Pair:
    where = f"pairs[{i}]"
    raw = _mapping(raw, where)
    ids = raw.get("jobs")
    if not isinstance(ids, list) or len(ids) != 2 or ids[0] == ids[1]:
        raise ProblemError(f"{where}.jobs: must list two different job ids, got {ids!r}")
    ids = [str(x) for x in ids]
    for x in ids:
        if x not in by_id:
            raise ProblemError(f"{where}.jobs: unknown job id {x!r}")
    if by_id[ids[0]].scale_factor != by_id[ids[1]].scale_factor:
        raise ProblemError(f"{where}: jobs {ids[0]!r} and {ids[1]!r} have different scale factors")
    throughputs = {}
    for t, v in _mapping(raw.get("throughputs", {}), f"{where}.throughputs").items():
        if t not in cluster:
            raise ProblemError(f"{where}.throughputs: unknown worker type {t!r}")
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ProblemError(f"{where}.throughputs.{t}: must be [first, second], got {v!r}")
        throughputs[str(t)] = tuple(_number(x, f"{where}.throughputs.{t}", minimum=0) for x in v)
    return Pair(jobs=(ids[0], ids[1]), throughputs=throughputs)
