"""The environment contract of a job split across GPU types with virtual nodes (VirtualFlow
§4.1, §5.1.2: the split solver's plan, launched; docs/runtime.md, "Mixed-type jobs
(virtual nodes)").

The scheduler puts one map into the ``env`` of every RunJob of the job (the same map for
every rank); the worker passes it to the job's processes unchanged:

- ``GAVEL_VN_LAYOUT``: compact JSON ``{"sizes": [...], "ranks": [[...], ...], "types":
  [...]}``: the batch of every virtual node (node j has ``sizes[j]`` samples), the virtual
  nodes each rank runs (global rank order, as ``SplitPlan.assignment`` deals them) and
  each rank's GPU type;
- ``GAVEL_VN_NODES``: the total number of virtual nodes V (``len(sizes)``);
- ``GAVEL_VN_BATCH``: the global batch B (``sum(sizes)``).

The layout (V and the node sizes) fixes the training trajectory; ``ranks`` and ``types``
are only the mapping, which may change from one run of the job to the next. Nothing here
imports torch: the worker daemon validates the map before it launches anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .layout import LayoutError, NodeMapping, VirtualLayout, split_proportionally

if TYPE_CHECKING:
    from .split import SplitPlan

LAYOUT_VAR = "GAVEL_VN_LAYOUT"
NODES_VAR = "GAVEL_VN_NODES"
BATCH_VAR = "GAVEL_VN_BATCH"
VARIABLES = (LAYOUT_VAR, NODES_VAR, BATCH_VAR)


class LayoutEnvError(LayoutError):
    """A malformed or inconsistent virtual-node environment (one line naming the variable)."""


@dataclass(frozen=True)
class JobLayout:
    """A split job's virtual nodes, their mapping onto ranks and each rank's GPU type."""

    layout: VirtualLayout
    mapping: NodeMapping
    types: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.mapping.nodes != self.layout.nodes:
            raise LayoutError(f"mapping {self.mapping.ranks} does not hold the layout's "
                              f"{self.layout.nodes} virtual nodes")
        if len(self.types) != self.mapping.processes:
            raise LayoutError(f"{len(self.types)} GPU types for {self.mapping.processes} ranks")

    @classmethod
    def from_plan(cls, plan: SplitPlan, global_batch: int | None = None) -> JobLayout:
        """The plan's assignment; with ``global_batch`` (the job's batch, when the plan was
        solved in other units, e.g. the catalog's) the node sizes are scaled to it."""
        layout, mapping, types = plan.assignment()
        if global_batch is not None and global_batch != layout.batch:
            sizes = split_proportionally(global_batch, layout.sizes)
            if min(sizes) <= 0:
                raise LayoutError(f"global batch {global_batch} is too small for "
                                  f"{layout.nodes} virtual nodes")
            layout = VirtualLayout(sizes)
        return cls(layout, mapping, types)

    def nodes_of(self, rank: int) -> tuple[int, ...]:
        return self.mapping.ranks[rank]

    def samples_of(self, rank: int) -> int:
        """Samples rank ``rank`` runs in a full step."""
        return sum(self.layout.sizes[n] for n in self.mapping.ranks[rank])

    def share(self, rank: int) -> float:
        """The rank's fraction of the global batch."""
        return self.samples_of(rank) / self.layout.batch

    def to_env(self) -> dict[str, str]:
        """The map every RunJob of the job carries (this module's docstring)."""
        body = {"sizes": list(self.layout.sizes), "ranks": [list(r) for r in self.mapping.ranks],
                "types": list(self.types)}
        return {LAYOUT_VAR: json.dumps(body, separators=(",", ":")),
                NODES_VAR: str(self.layout.nodes), BATCH_VAR: str(self.layout.batch)}


@dataclass(frozen=True)
class RankLayout:
    """What one process of a split job runs: its rank's virtual nodes of the job's layout."""

    job: JobLayout
    rank: int

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.job.nodes_of(self.rank)

    @property
    def worker_type(self) -> str:
        return self.job.types[self.rank]

    @property
    def share(self) -> float:
        return self.job.share(self.rank)


def layout_env(plan: SplitPlan, global_batch: int | None = None) -> dict[str, str]:
    """What the scheduler puts in ``RunJobRequest.env`` for a job launched on ``plan``
    (ranks in ``SplitPlan.assignment`` order: by type name, then GPU)."""
    return JobLayout.from_plan(plan, global_batch).to_env()


def parse_layout_env(env: Mapping[str, str], world_size: int) -> JobLayout | None:
    """The job's layout from ``env``; None when it has none. Raises LayoutEnvError when a
    variable is malformed, the three disagree, or the ranks are not ``world_size``."""
    raw = env.get(LAYOUT_VAR)
    if raw is None:
        stray = [name for name in (NODES_VAR, BATCH_VAR) if name in env]
        if stray:
            raise LayoutEnvError(f"{stray[0]} is set but {LAYOUT_VAR} is missing")
        return None
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise LayoutEnvError(f"{LAYOUT_VAR} is not JSON ({err}): {raw[:80]!r}") from None
    if not isinstance(body, dict) or set(body) - {"sizes", "ranks", "types"} or \
            not {"sizes", "ranks"} <= set(body):
        raise LayoutEnvError(f'{LAYOUT_VAR} must be {{"sizes": [...], "ranks": [[...]], '
                             f'"types": [...]}}, got {raw[:80]!r}')
    sizes, ranks = body["sizes"], body["ranks"]
    types = body.get("types", [""] * len(ranks) if isinstance(ranks, list) else None)
    if not _int_list(sizes):
        raise LayoutEnvError(f"{LAYOUT_VAR} sizes must be a list of integers, got {sizes!r}")
    if not isinstance(ranks, list) or not all(_int_list(r) for r in ranks):
        raise LayoutEnvError(f"{LAYOUT_VAR} ranks must be a list of lists of node indices, "
                             f"got {ranks!r}")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise LayoutEnvError(f"{LAYOUT_VAR} types must be a list of GPU type names, "
                             f"got {types!r}")
    try:
        job = JobLayout(VirtualLayout(tuple(sizes)),
                        NodeMapping(tuple(tuple(r) for r in ranks)), tuple(types))
    except LayoutError as err:
        raise LayoutEnvError(f"{LAYOUT_VAR}: {err}") from None
    for name, value in ((NODES_VAR, job.layout.nodes), (BATCH_VAR, job.layout.batch)):
        given = env.get(name)
        if given is None:
            raise LayoutEnvError(f"{name} is missing (it must come with {LAYOUT_VAR})")
        if given.strip() != str(value):
            raise LayoutEnvError(f"{name}={given!r} disagrees with {LAYOUT_VAR} ({value})")
    if world_size != job.mapping.processes:
        raise LayoutEnvError(f"{LAYOUT_VAR} has {job.mapping.processes} ranks but "
                             f"WORLD_SIZE={world_size}")
    return job


def layout_from_env(env: Mapping[str, str], rank: int, world_size: int) -> RankLayout | None:
    """This process's part of a split job (``RANK``, ``WORLD_SIZE``); None without
    ``GAVEL_VN_LAYOUT``. Raises LayoutEnvError naming the bad variable."""
    job = parse_layout_env(env, world_size)
    if job is None:
        return None
    if not 0 <= rank < world_size:
        raise LayoutEnvError(f"RANK={rank} is not a rank of {LAYOUT_VAR} "
                             f"({world_size} ranks)")
    return RankLayout(job, rank)


def _int_list(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value)
