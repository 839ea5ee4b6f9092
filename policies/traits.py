"""What a policy declares about itself, as data (docs/design.md, Conventions; docs/style.md §3).

The scheduler core, the simulator and the CLI read a policy's ``Traits`` and never parse
its name (Gavel's ``_compute_allocation`` dispatches on ``policy.name.startswith(...)``;
docs/style.md §6.3). ``Policy.traits`` is the one way to read them; a policy class
declares them at its top, deriving the ones that depend on its constructor flags
(``agnostic``, ``packed``, ...). ``gavelsched.core.CoreConfig.for_policy`` turns them into
the mechanism's per-policy rules of thesis §5.5 as Gavel applies them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .problem import Allocation, Problem

# Problem fields every policy reads: they define the columns (policies/columns.py).
ALWAYS_READ = frozenset({"cluster", "max_scale_factor", "throughputs", "scale_factor"})
# Problem and Job fields a policy may or may not read; ``Traits.reads`` names a subset.
OPTIONAL_FIELDS = frozenset({
    "prices", "pairs", "entities", "previous", "policy_state",  # Problem
    "weight", "remaining_steps", "elapsed_s", "slo_s", "entity", "isolated_elapsed_s",  # Job
    "configurations",  # Job: mixes of worker types (policies/mixed.py)
})


@dataclass(frozen=True)
class Traits:
    """A policy's declaration.

    - ``needs_pairs``: its Problem must list co-located pairs (``Problem.pairs``): space
      sharing (thesis §5.3.1).
    - ``agnostic``: heterogeneity-agnostic (it sees every type as equally fast).
    - ``shuffle_type_order``: the mechanism serves the per-type queues in an order shuffled
      every round (Gavel does so for agnostic policies); None means "same as ``agnostic``".
    - ``backfill``: workers that no job with priority wants go to priority-0 jobs (Gavel's
      mechanism). False when that would break what the policy exists for: a queue order
      (FIFO, shortest job first) or a cost saving (chapter 6).
    - ``carries_state``: it returns ``Allocation.policy_state`` and reads it back from
      ``Problem.policy_state`` (a random generator, Gandiva's pairs).
    - ``isolated_time``: it needs Themis t^isolated tracked by the core
      (``Job.isolated_elapsed_s``, finish-time fairness, thesis §5.4.2).
    - ``rearrangeable``: its objective reads an allocation only through each job's
      effective throughput (steps/s over its columns), so another allocation that gives
      every job at least as much, within the cluster, serves it as well: the core may
      re-arrange it to spare restarts (``policies/moves.py``). False for what
      prices, pairs or an agnostic view decide.
    - ``single_gpu``: it schedules single-GPU jobs only (AlloX's matching of jobs to
      GPUs); the daemon refuses a larger job at submission.
    - ``refuses_slos_beyond_reach``: it refuses a new job whose SLO no allocation meets
      (strict SLO admission, ``admission``); the daemon refuses one at submission when
      the job alone on its fastest type could not meet it (thesis §6.4.3).
    - ``reads``: the optional Problem/Job fields it reads (``OPTIONAL_FIELDS``); the ones in
      ``ALWAYS_READ`` are read by every policy. Changing any other field never changes its
      allocation (``tests/policies/test_traits.py`` checks this).
    - ``options``: option name -> one-line meaning, the keyword arguments
      ``policies.get_policy(name, **options)`` accepts.
    - ``simulation_defaults``: option values a simulation uses unless the caller sets them
      (e.g. ``slo_mode="best_effort"``: a simulation keeps going when an SLO is lost).
    """

    needs_pairs: bool = False
    agnostic: bool = False
    shuffle_type_order: bool | None = None
    backfill: bool = True
    carries_state: bool = False
    isolated_time: bool = False
    rearrangeable: bool = False
    single_gpu: bool = False
    refuses_slos_beyond_reach: bool = False
    reads: frozenset[str] = frozenset()
    options: Mapping[str, str] = field(default_factory=dict)
    simulation_defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        reads = frozenset(self.reads)
        unknown = sorted(reads - OPTIONAL_FIELDS - ALWAYS_READ)
        if unknown:
            raise ValueError(f"Traits.reads: unknown field {unknown[0]!r}; known: "
                             f"{', '.join(sorted(OPTIONAL_FIELDS))}")
        object.__setattr__(self, "reads", reads)
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        object.__setattr__(self, "simulation_defaults",
                           MappingProxyType(dict(self.simulation_defaults)))
        missing = sorted(set(self.simulation_defaults) - set(self.options))
        if missing:
            raise ValueError(f"Traits.simulation_defaults: {missing[0]!r} is not a declared "
                             "option")

    def but(self, **changes: Any) -> Traits:
        """A copy with ``changes``; ``options`` given here are added to the declared ones."""
        if "options" in changes:
            changes["options"] = {**self.options, **changes["options"]}
        return replace(self, **changes)

    @property
    def shuffles_type_order(self) -> bool:
        """``shuffle_type_order``, or ``agnostic`` when that is None."""
        return self.agnostic if self.shuffle_type_order is None else self.shuffle_type_order

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``gavelsched solve --traits``)."""
        return {"needs_pairs": self.needs_pairs, "agnostic": self.agnostic,
                "shuffle_type_order": self.shuffles_type_order, "backfill": self.backfill,
                "carries_state": self.carries_state, "isolated_time": self.isolated_time,
                "rearrangeable": self.rearrangeable, "single_gpu": self.single_gpu,
                "refuses_slos_beyond_reach": self.refuses_slos_beyond_reach,
                "reads": sorted(self.reads), "options": dict(self.options),
                "simulation_defaults": dict(self.simulation_defaults)}


@runtime_checkable
class PolicyProtocol(Protocol):
    """What the core, the simulator and the daemon need of a policy (docs/style.md §3: one
    Protocol per extension point); ``policies.base.Policy`` implements it."""

    name: str

    @property
    def traits(self) -> Traits: ...

    def solve(self, problem: Problem) -> Allocation: ...

    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None: ...
