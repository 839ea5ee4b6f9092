"""The heterogeneous split solver (VirtualFlow §5.1.2): how many GPUs of each type a job
uses, the batch per GPU and the virtual nodes per GPU, minimising the step time

    max_i  time_i(b_i, v_i) + comm        subject to   sum_i n_i * b_i = B,

where ``time_i(b, v)`` runs b samples as v virtual nodes one after another on one GPU of
type i (each node's time interpolated from the type's offline profile, §5.1.1), and a pass
never exceeds the largest batch that fits in the type's memory (more virtual nodes fit a
bigger batch). ``comm`` is the largest communication overhead among the types used, and
zero on a single GPU. The solver falls back to one type when mixing does not help.

Method: for each type, the best time of every per-GPU batch 0..B (over the node counts
that put the largest pass at a profiled size or at the memory limit; with affine profiles
the fewest nodes win, so this is exact) is one numpy pass. For a choice of GPU counts, the
smallest feasible time is a bisection over those times (within T a type takes at most
cap_i(T) samples per GPU), and the per-type batches that cover B exactly are found below
the caps: exactly for one or two types, in a window of 64 loads per type beyond that.
GPU counts are enumerated in full for one type and for types with at most 8 GPUs; larger
counts are sampled (powers of two, n, n-1, n/2, 3n/4), at most 4096 combinations per set
of types. Every single-type plan is evaluated, so a mixed plan is never slower than the
best single-type plan. Tests compare with a brute force over all counts, batches and node
counts on small cases.

It is a pure function (profiles + GPUs available -> plan with a predicted step time), so a
policy can call ``effective_throughput`` to price a job on any mix of types. With
``node_batch`` fixed (all virtual nodes of one size), a plan only moves whole nodes: the
job keeps its layout, and so its training trajectory, whatever mix it gets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from .layout import NodeMapping, VirtualLayout, split_evenly

_MAX_COMBINATIONS = 4096
_COVER_WINDOW = 64


class SplitError(ValueError):
    """Bad profiles or request, or no plan can run the batch (the message says why)."""


@dataclass(frozen=True)
class TypeProfile:
    """One GPU type's offline profile: step seconds of one pass per per-GPU batch size."""

    name: str
    memory_gb: float
    step_s: tuple[tuple[int, float], ...]
    comm_s: float = 0.0
    peak_gb: tuple[tuple[int, float], ...] = ()

    @property
    def max_pass(self) -> int:
        """The largest profiled pass that fits in memory (measured peaks, if given)."""
        peaks = dict(self.peak_gb)
        fits = [b for b, _ in self.step_s if peaks.get(b, 0.0) <= self.memory_gb]
        return max(fits, default=0)

    def pass_time(self, batch: np.ndarray) -> np.ndarray:
        """Seconds of one pass of ``batch`` samples (linear between profiled sizes, the
        smallest profiled time below them); zero for an empty pass."""
        sizes = np.array([b for b, _ in self.step_s], dtype=float)
        times = np.array([t for _, t in self.step_s], dtype=float)
        batch = np.asarray(batch, dtype=float)
        return np.where(batch > 0, np.interp(batch, sizes, times), 0.0)

    def gpu_time(self, batch: int, nodes: int) -> float:
        """Seconds for one GPU to run ``batch`` samples as ``nodes`` virtual nodes."""
        return float(self.pass_time(np.array(split_evenly(batch, nodes))).sum())


@dataclass(frozen=True)
class TypePlan:
    gpus: int
    batch_per_gpu: int
    virtual_nodes_per_gpu: int

    def node_sizes(self) -> tuple[int, ...]:
        """Sizes of one GPU's virtual nodes (as even as possible)."""
        return split_evenly(self.batch_per_gpu, self.virtual_nodes_per_gpu)


@dataclass(frozen=True)
class SplitPlan:
    """Per type: GPUs, batch per GPU, virtual nodes per GPU; and the predicted step time."""

    types: Mapping[str, TypePlan]
    step_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", MappingProxyType(dict(self.types)))

    @property
    def batch(self) -> int:
        return sum(p.gpus * p.batch_per_gpu for p in self.types.values())

    @property
    def steps_per_s(self) -> float:
        return 1.0 / self.step_s

    def assignment(self) -> tuple[VirtualLayout, NodeMapping, tuple[str, ...]]:
        """What to launch: the job's node sizes, each rank's nodes and each rank's GPU type
        (ranks ordered by type name, then GPU). With a fixed node batch the layout is the
        same for every plan of the job, so it can move between plans on one trajectory."""
        sizes: list[int] = []
        counts: list[int] = []
        types: list[str] = []
        for name in sorted(self.types):
            part = self.types[name]
            for _ in range(part.gpus):
                sizes.extend(part.node_sizes())
                counts.append(part.virtual_nodes_per_gpu)
                types.append(name)
        return VirtualLayout(tuple(sizes)), NodeMapping.from_counts(tuple(counts)), tuple(types)

    def to_dict(self) -> dict:
        return {"types": {name: {"gpus": p.gpus, "batch_per_gpu": p.batch_per_gpu,
                                 "virtual_nodes_per_gpu": p.virtual_nodes_per_gpu}
                          for name, p in self.types.items()},
                "step_s": self.step_s}


# ----------------------------------------------------------------------------- profiles

def parse_profiles(data: object, source: str = "profile") -> dict[str, TypeProfile]:
    """``{type: {"memory_gb": M, "step_s": {batch: s}, "comm_s": C[, "peak_gb": {..}]}}``."""
    if not isinstance(data, Mapping) or not data:
        raise SplitError(f"{source}: expected a non-empty mapping of GPU types")
    return {str(name): _parse_type(str(name), entry, source) for name, entry in data.items()}


def _parse_type(name: str, entry: object, source: str) -> TypeProfile:
    where = f"{source}: type {name!r}"
    if not isinstance(entry, Mapping):
        raise SplitError(f"{where}: expected a mapping with memory_gb, step_s, comm_s")
    unknown = set(entry) - {"memory_gb", "step_s", "comm_s", "peak_gb"}
    if unknown:
        raise SplitError(f"{where}: unknown key {min(unknown)!r}")
    memory = _number(entry.get("memory_gb"), f"{where} memory_gb", positive=True)
    comm = _number(entry.get("comm_s", 0.0), f"{where} comm_s", positive=False)
    steps = _batch_table(entry.get("step_s"), f"{where} step_s")
    peaks = _batch_table(entry["peak_gb"], f"{where} peak_gb") if "peak_gb" in entry else ()
    profile = TypeProfile(name, memory, steps, comm, peaks)
    if profile.max_pass <= 0:
        raise SplitError(f"{where}: no profiled batch fits in {memory} GB")
    return profile


def _batch_table(table: object, where: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(table, Mapping) or not table:
        raise SplitError(f"{where}: expected a non-empty mapping of batch size -> value")
    rows = []
    for key, value in table.items():
        try:
            batch = int(str(key))
        except ValueError:
            raise SplitError(f"{where}: batch size {key!r} is not an integer") from None
        if batch <= 0:
            raise SplitError(f"{where}: batch size {key!r} must be positive")
        rows.append((batch, _number(value, f"{where}[{key}]", positive=True)))
    return tuple(sorted(rows))


def _number(value: object, where: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SplitError(f"{where}: expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise SplitError(f"{where}: must be {'positive' if positive else 'non-negative'}, "
                         f"got {value!r}")
    return float(value)


# ----------------------------------------------------------------------------- solver

@dataclass(frozen=True)
class _TypeCosts:
    """For one type: best time and node count of every per-GPU load 0..units."""

    time: np.ndarray      # seconds, inf where impossible
    nodes: np.ndarray     # virtual nodes per GPU achieving it
    envelope: np.ndarray  # running maximum of time: monotone, for the bisection


def _costs(profile: TypeProfile, units: int, node_batch: int | None) -> _TypeCosts:
    load = np.arange(units + 1)
    if node_batch is not None:  # a unit is one virtual node of node_batch samples
        if node_batch > profile.max_pass:
            time = np.full(units + 1, np.inf)
            time[0] = 0.0
        else:
            time = load * float(profile.pass_time(np.array([node_batch]))[0])
        nodes = load.copy()
    else:
        limit = profile.max_pass
        candidates = {limit} | {b for b, _ in profile.step_s if b <= limit}
        time, nodes = np.full(units + 1, np.inf), np.zeros(units + 1, dtype=int)
        time[0] = 0.0
        for size in sorted(candidates, reverse=True):  # ties keep the fewest nodes
            v = np.maximum(1, -(-load // size))
            small, extra = load // v, load % v
            t = extra * profile.pass_time(small + 1) + (v - extra) * profile.pass_time(small)
            better = (load > 0) & (t < time * (1 - 1e-9))
            time, nodes = np.where(better, t, time), np.where(better, v, nodes)
    return _TypeCosts(time, nodes, np.maximum.accumulate(time))


def _cover(caps: list[int], counts: list[int], total: int) -> list[int] | None:
    """Loads k_i <= caps[i] with sum counts[i] * k_i == total, the first types loaded as
    much as possible; None if there are none. Exact for one or two types; with more, each
    outer type tries a window of loads below its cap."""
    if len(caps) == 1:
        load, rest = divmod(total, counts[0])
        return [load] if rest == 0 and 0 <= load <= caps[0] else None
    top = min(caps[0], total // counts[0])
    if len(caps) == 2:
        # the loads of the first type that leave a multiple of counts[1] recur with this
        # period; the largest such load leaves the second type its smallest load
        period = counts[1] // math.gcd(counts[0], counts[1])
        for load in range(top, max(-1, top - period), -1):
            rest, remainder = divmod(total - counts[0] * load, counts[1])
            if remainder == 0:
                return [load, rest] if rest <= caps[1] else None
        return None
    room = sum(n * c for n, c in zip(counts[1:], caps[1:]))
    for load in range(top, max(-1, top - _COVER_WINDOW), -1):
        if total - counts[0] * load > room:
            break  # less load here leaves more than the other types can take
        rest = _cover(caps[1:], counts[1:], total - counts[0] * load)
        if rest is not None:
            return [load, *rest]
    return None


def _solve_counts(costs: list[_TypeCosts], counts: list[int], units: int,
                  thresholds: np.ndarray) -> list[int] | None:
    """Loads per GPU minimising the largest per-type time for fixed GPU counts."""
    def caps(limit: float) -> list[int]:
        return [int(np.searchsorted(c.envelope, limit, side="right")) - 1 for c in costs]

    lo, hi = 0, len(thresholds) - 1
    if sum(n * k for n, k in zip(counts, caps(thresholds[hi]))) < units:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(n * k for n, k in zip(counts, caps(thresholds[mid]))) >= units:
            hi = mid
        else:
            lo = mid + 1
    for index in range(lo, min(lo + _COVER_WINDOW, len(thresholds))):
        loads = _cover(caps(thresholds[index]), counts, units)
        if loads is not None:
            return loads
    return None


def _count_options(available: int) -> list[int]:
    if available <= 8:
        return list(range(1, available + 1))
    powers = {2 ** i for i in range(available.bit_length()) if 2 ** i <= available}
    return sorted(powers | {available, available - 1, available // 2, (3 * available) // 4})


def plan_split(profiles: Mapping[str, TypeProfile], batch: int, gpus: Mapping[str, int], *,
               node_batch: int | None = None) -> SplitPlan:
    """The fastest plan for a global ``batch`` on at most ``gpus[type]`` GPUs of each type.

    With ``node_batch``, every virtual node has that many samples (``batch`` must be a
    multiple of it), so plans differ only in how many whole nodes each GPU runs."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise SplitError(f"global batch must be a positive integer, got {batch!r}")
    for name, count in gpus.items():
        if name not in profiles:
            raise SplitError(f"no profile for GPU type {name!r}; profiled: "
                             f"{', '.join(sorted(profiles))}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SplitError(f"GPU count of {name!r} must be a non-negative integer, "
                             f"got {count!r}")
    if node_batch is not None and (node_batch <= 0 or batch % node_batch):
        raise SplitError(f"node batch {node_batch} does not divide the global batch {batch}")
    unit = node_batch or 1
    units = batch // unit
    names = sorted(name for name, count in gpus.items() if count > 0)
    if not names:
        raise SplitError("no GPUs available")
    costs = {name: _costs(profiles[name], units, node_batch) for name in names}
    best: tuple[tuple, SplitPlan] | None = None
    for size in range(1, len(names) + 1):
        for subset in itertools.combinations(names, size):
            for plan in _subset_plans(subset, profiles, costs, gpus, units, unit):
                key = (plan.step_s, sum(p.gpus for p in plan.types.values()),
                       len(plan.types), sorted(plan.types))
                if best is None or key < best[0]:
                    best = (key, plan)
    if best is None:
        raise SplitError(f"no plan runs a batch of {batch} on {dict(gpus)}: the passes that "
                         f"fit in memory cannot cover it")
    return best[1]


def _subset_plans(subset: tuple[str, ...], profiles: Mapping[str, TypeProfile],
                  costs: Mapping[str, _TypeCosts], gpus: Mapping[str, int], units: int,
                  unit: int):
    """Candidate plans using exactly the types in ``subset`` (each at least one GPU)."""
    chosen = [costs[name] for name in subset]
    thresholds = np.unique(np.concatenate([c.envelope[np.isfinite(c.envelope)]
                                           for c in chosen]))
    options = [_count_options(gpus[name]) if len(subset) > 1 else
               list(range(1, gpus[name] + 1)) for name in subset]
    combos = itertools.product(*options)
    for counts in itertools.islice(combos, _MAX_COMBINATIONS):
        loads = _solve_counts(chosen, list(counts), units, thresholds)
        if loads is None or 0 in loads:
            continue  # a type with no load is the smaller subset's plan
        used = [(name, n, k) for name, n, k in zip(subset, counts, loads)]
        total_gpus = sum(n for _, n, _ in used)
        comm = max(profiles[name].comm_s for name, _, _ in used) if total_gpus > 1 else 0.0
        step = max(float(costs[name].time[k]) for name, _, k in used) + comm
        yield SplitPlan({name: TypePlan(n, k * unit, int(costs[name].nodes[k]))
                         for name, n, k in used}, step)


def effective_throughput(profiles: Mapping[str, TypeProfile], batch: int,
                         gpus: Mapping[str, int], *, node_batch: int | None = None) -> float:
    """Steps/s of the best plan: what a mixed-type allocation is worth to a policy."""
    return plan_split(profiles, batch, gpus, node_batch=node_batch).steps_per_s
