"""What a ``Problem`` says about its jobs: each ``Job`` with the ``Configuration`` mixes it
may run on, co-located ``Pair`` throughputs, the ``Entity`` (tenant) a job belongs to, and
the allocation keys that name jobs, pairs and configurations.

Records are frozen: policies receive values, never shared state (docs/style.md §1). The Problem
JSON that carries them is read in ``problem_json.py``; the ``Problem`` itself is in
``problem.py``. Space sharing is thesis §5.3.1, hierarchical entities §5.4.3.
"""

from __future__ import annotations

import copyreg
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .errors import ProblemError
from .matrix_rows import MatrixRows

PAIR_SEPARATOR = "+"
ENTITY_POLICIES = ("fairness", "fifo")
# A configuration's name: "type:count" parts joined by "+", sorted by type ("k80:2+v100:1").
CONFIG_SEPARATOR = "+"
COUNT_SEPARATOR = ":"


def pair_key(a: str, b: str) -> str:
    """The allocation key of a co-located pair, e.g. ``"0+1"`` (docs/design.md, Allocation JSON)."""
    return f"{a}{PAIR_SEPARATOR}{b}"


def key_members(key: str) -> tuple[str, ...]:
    """The job ids an allocation key names: ``"0+1"`` -> ``("0", "1")``, ``"0"`` -> ``("0",)``
    (the inverse of ``pair_key``)."""
    return tuple(key.split(PAIR_SEPARATOR))


def is_pair_key(key: str) -> bool:
    """Whether an allocation key names a co-located pair."""
    return PAIR_SEPARATOR in key


def frozen_mapping(mapping: Mapping) -> Mapping:
    """A read-only copy of ``mapping`` (records are frozen: docs/style.md §1). A read-only
    mapping is kept as it is: every one here is made over a dict of its own (a record
    handing its rows to the next, an allocation's to the next problem, costs no copy)."""
    if type(mapping) is MappingProxyType:
        return mapping
    return MappingProxyType(dict(mapping))


def frozen_rows(rows: Mapping[str, Mapping]) -> Mapping[str, Mapping]:
    """``rows`` (key -> mapping) read-only, each row too (``frozen_mapping``); rows held
    as one matrix (``matrix_rows.MatrixRows``) are read-only already."""
    if type(rows) is MatrixRows:
        return rows
    if set(map(type, rows.values())) <= {MappingProxyType}:   # (a C loop: one per job)
        return rows if type(rows) is MappingProxyType else MappingProxyType(dict(rows))
    return MappingProxyType({k: frozen_mapping(v) for k, v in rows.items()})


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
        object.__setattr__(self, "gpus",
                           frozen_mapping({t: int(self.gpus[t]) for t in sorted(self.gpus)}))

    @property
    def name(self) -> str:
        return configuration_name(self.gpus)

    def to_dict(self) -> dict:
        return {"gpus": dict(self.gpus), "throughput": self.throughput}


# Read-only mappings pickle as copies, so problems can be solved in worker processes (POP).
copyreg.pickle(MappingProxyType, lambda proxy: (frozen_mapping, (dict(proxy),)))


@dataclass(frozen=True, init=False)
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

    def __init__(self, id: str, throughputs: Mapping[str, float], scale_factor: int = 1,
                 weight: float = 1.0, remaining_steps: float = 0.0, elapsed_s: float = 0.0,
                 slo_s: float | None = None, entity: str | None = None,
                 isolated_elapsed_s: float | None = None,
                 configurations: tuple[Configuration, ...] = ()) -> None:
        # Written out: the generated __init__ of a frozen dataclass sets each field through
        # object.__setattr__, and a scheduler builds every job's record at each re-solve.
        self.__dict__.update(
            id=id, throughputs=frozen_mapping(throughputs), scale_factor=scale_factor,
            weight=weight, remaining_steps=remaining_steps, elapsed_s=elapsed_s, slo_s=slo_s,
            entity=entity, isolated_elapsed_s=isolated_elapsed_s,
            configurations=tuple(configurations))

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
            self, "throughputs", frozen_mapping({k: tuple(v) for k, v in self.throughputs.items()})
        )

    @property
    def key(self) -> str:
        return pair_key(*self.jobs)


@dataclass(frozen=True)
class Entity:
    """A tenant of a hierarchical policy (thesis §5.4.3): a weight and an inner policy
    (``ENTITY_POLICIES``). ``max_gpus`` (>= 1, None: no cap) caps the GPUs the entity's jobs
    hold at once, whatever the policy: the round planner enforces it as a quota
    (``gavelsched/mechanism/quota.py``) and the water-filling policies give what an entity
    cannot use to the others (``policies/water_filling.py``)."""

    name: str
    weight: float = 1.0
    policy: str = "fairness"
    max_gpus: int | None = None
