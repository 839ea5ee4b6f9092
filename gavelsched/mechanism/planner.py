"""The round planner: one round's placements from an allocation (thesis §5.5).

Pure: ``plan_round(demand, view, config)`` reads frozen values and returns a new frozen
``RoundPlan``. It keeps no state between rounds; the scheduler core owns the received
times and deficits and passes them in ``Demand``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from functools import cached_property, lru_cache
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from policies.frozen import record

from .loops import compiled
from .placement import place, place_units
from .priorities import priorities
from .quota import Quota
from .selection import order_entries, order_entries_mixed, select, select_mixed, tie_break
from .shares import interleave
from .view import ClusterView

# A preferred combination's priority counts this many times in its column (a run in its
# tenure, ``Demand.preferred``; ``core/restarts.py``).
PREFERENCE = 2.0


@record
class Demand:
    """Every combination (job or co-located pair) that may run this round.

    Arrays have one row per combination (in admission order, which breaks ties) and one
    column per entry of ``types``:

    - ``allocation``: X^opt, the time fraction the policy asked for;
    - ``received``: seconds received on each type since the last re-solve (seeded);
    - ``deficit``: Gavel's deficit, X * elapsed - received, summed over past periods;
    - ``runnable``: False where a member cannot run on the type (throughput 0).

    ``allocated`` is False for combinations the current allocation does not cover (jobs
    admitted after the last re-solve). ``previous`` maps a combination key to the workers
    it held last round. ``member_rows`` (c, 2) numbers each combination's jobs (-1: no
    second member); derived from ``keys`` and ``members`` when not given.

    ``configurations`` (VirtualFlow §6.5.2) names, for each of the *last*
    ``len(configurations)`` entries of ``types``, the workers of each real type that
    column runs on at once (e.g. ``{"v100": 1, "k80": 2}``); such an entry is a
    configuration's name, not a type (``policies.jobs.configuration_name``).

    ``pinned``: (c,) the column each combination must keep this round, on the workers it
    held last round (a run whose restart has not paid yet, ``core/restarts.py``); -1: none.
    None: no combination is pinned (Gavel). ``preferred``: (c,) the column where each
    combination's priority counts ``PREFERENCE`` times (a run in its tenure);
    -1: none; None: none at all.

    ``tie_break``: (c, n) ``selection.tie_break(allocation)``, the sort's last key, for a
    caller that keeps it while X holds (the core's rows); None: made from ``allocation``.

    ``quota``: per-entity GPU caps (``quota.py``, built by ``entity_quota``); None: none.
    ``entity``: (c,) the entity (numbered 0..E-1) of each combination's first member, whose
    queues are interleaved so that entities share each round as X does (``shares.py``);
    None: no entities.
    """

    keys: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    types: tuple[str, ...]
    scale_factor: np.ndarray
    allocation: np.ndarray
    received: np.ndarray
    deficit: np.ndarray
    runnable: np.ndarray
    allocated: np.ndarray
    previous: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    member_rows: np.ndarray | None = None
    configurations: tuple[Mapping[str, int], ...] = ()
    configuration_gpus: np.ndarray | None = None  # (k, real types), from configurations
    quota: Quota | None = None
    entity: np.ndarray | None = None
    pinned: np.ndarray | None = None
    preferred: np.ndarray | None = None
    tie_break: np.ndarray | None = None

    @property
    def real_types(self) -> tuple[str, ...]:
        """``types`` without the configuration columns."""
        return self.types[:len(self.types) - len(self.configurations)]

    def _check_shapes(self, c: int, n: int) -> None:
        """Raise ``ValueError`` naming the first array whose shape is not its (c, n) or
        (c,)."""
        for name in ("allocation", "received", "deficit", "runnable", "tie_break"):
            arr = getattr(self, name)
            if arr is not None and arr.shape != (c, n):
                raise ValueError(f"demand.{name}: shape {arr.shape}, expected {(c, n)}")
        for name in ("scale_factor", "allocated", "pinned", "preferred"):
            if getattr(self, name) is None:
                continue
            if getattr(self, name).shape != (c,):
                raise ValueError(f"demand.{name}: shape {getattr(self, name).shape}, "
                                 f"expected {(c,)}")

    def __post_init__(self) -> None:
        if self.member_rows is None:
            object.__setattr__(self, "member_rows", _member_rows(self.keys, self.members))
        c, n = len(self.keys), len(self.types)
        table, row = (c, n), (c,)
        tie = table if self.tie_break is None else self.tie_break.shape
        if not (self.allocation.shape == self.received.shape == self.deficit.shape
                == self.runnable.shape == tie == table
                and self.scale_factor.shape == self.allocated.shape == row
                and self.pinned is None and self.preferred is None):
            self._check_shapes(c, n)    # (a round's usual demand is checked at once above)
        if self.configurations and self.configuration_gpus is None:
            object.__setattr__(self, "configuration_gpus",
                               configuration_matrix(self.configurations, self.real_types))
        if self.quota is not None and self.quota.entity_of.shape != (c, 2):
            raise ValueError(f"demand.quota.entity_of: shape {self.quota.entity_of.shape}, "
                             f"expected {(c, 2)}")


@record
class PlannerConfig:
    """How the planner orders and fills queues (defaults: Gavel's mechanism).

    - ``type_order``: the order in which per-type queues are served (types missing from
      it come after, in ``Demand.types`` order); Gavel serves v100, p100, k80.
    - ``global_queue``: one queue sorted across types instead of one per type.
    - ``backfill``: let combinations of priority 0 (X = 0 on a type) use workers nobody
      with priority wants; Gavel's FIFO turns this off.
    - ``hold_unallocated``: combinations not yet covered by the allocation compete with
      priority 0 and, when picked, keep their workers idle for the round (Gavel's
      behaviour); when False they are simply skipped.
    - ``round_seconds``: a round's length, which weighs what entities received before
      against what this round gives (``shares.py``); ``received_seed_s``: the seconds each
      combination's ``received`` starts from at a re-solve (``CoreConfig.seed_seconds``),
      which are not time it had.
    """

    type_order: tuple[str, ...] = ()
    global_queue: bool = False
    backfill: bool = True
    hold_unallocated: bool = True
    round_seconds: float = 1.0
    received_seed_s: float = 0.0


class Placement(NamedTuple):
    """Combination ``key`` runs on ``workers`` of ``worker_type`` this round.

    (A NamedTuple: immutable and cheap, as the planner makes one per task per round.)
    """

    key: str
    members: tuple[str, ...]
    worker_type: str
    workers: tuple[int, ...]
    extended: bool  # same workers as last round: the lease is renewed, no checkpoint


@record
class RoundPlan:
    """The round, as arrays aligned task by task: ``combo_index`` (rows of the demand),
    ``task_keys`` (their keys), ``type_index`` (columns of ``Demand.types``), ``workers``
    and ``extended`` (same workers as last round). ``placements`` gives the same as
    records."""

    keys: tuple[str, ...]
    members: tuple[tuple[str, ...], ...]
    types: tuple[str, ...]
    combo_index: np.ndarray
    task_keys: tuple[str, ...]
    type_index: np.ndarray
    workers: tuple[tuple[int, ...], ...]
    extended: np.ndarray
    held_idle: tuple[tuple[str, str, int], ...]  # (key, type, workers) picked, not placed
    priorities: np.ndarray                     # (c, n), for inspection
    lease_opportunities: int                   # combinations of last round still present
    lease_extensions: int

    @cached_property
    def placements(self) -> tuple[Placement, ...]:
        return tuple(Placement(k, self.members[i], self.types[j], w, bool(e))
                     for k, i, j, w, e in zip(self.task_keys, self.combo_index.tolist(),
                                              self.type_index.tolist(), self.workers,
                                              self.extended.tolist()))

    @property
    def busy_workers(self) -> int:
        return sum(len(w) for w in self.workers)


def plan_round(demand: Demand, view: ClusterView,
               config: PlannerConfig = PlannerConfig()) -> RoundPlan:
    """Priorities, then greedy selection, then placement (thesis §5.5, Algorithm 2); with
    ``demand.quota``, no capped entity gets more GPUs than its room (``quota.py``)."""
    if demand.configurations:
        return _plan_mixed(demand, view, config)
    types, keys = demand.types, demand.keys
    demand, prio, first = _pinned_first(demand)
    order = _type_order(types, config.type_order)
    runnable = _runnable(demand, config)
    if (compiled is not None and demand.entity is None and demand.quota is None
            and not config.global_queue and all(map(view.one_worker_per_server, types))):
        planned = _plan_units(demand, prio, runnable, order, view, config)
        if planned is not None:
            return _round_plan(demand, prio, *planned)
    runs = order_entries(prio, demand.deficit, demand.allocation, order, config.global_queue,
                         demand.tie_break)
    if demand.entity is not None:
        had = np.maximum(demand.received - config.received_seed_s, 0.0) - demand.deficit
        runs = interleave(runs, demand.entity, demand.allocation, demand.scale_factor,
                          had, config.round_seconds)
    combos, type_idx = select(runs, prio, runnable, demand.scale_factor, demand.member_rows,
                              [view.count(t) for t in types], config.backfill, demand.quota)
    combos, type_idx, held = _hold_unallocated(demand, combos, type_idx)
    previous = demand.previous
    at = combos.tolist()
    task_keys = take(keys, at)
    if all(view.one_worker_per_server(t) for t in types) and (
            not at or (demand.scale_factor.take(combos) == 1).all()):
        workers, extended = place_units(task_keys, take(types, type_idx), previous, view)
        workers = tuple(workers)
    else:
        sizes = demand.scale_factor.tolist()
        got = place([(k, types[j], sizes[i], previous.get(k))
                     for k, i, j in zip(task_keys, at, type_idx)], view, first)  # Requests
        chosen = [got[k] for k in task_keys]
        workers, extended = (tuple(x) for x in zip(*chosen)) if chosen else ((), ())
    return _round_plan(demand, prio, combos, task_keys, type_idx, workers, extended, held)


def _plan_units(demand: Demand, prio: np.ndarray, runnable: np.ndarray,
                order: tuple[int, ...], view: ClusterView, config: PlannerConfig):
    """``plan_round``'s selection, held-idle split and placement by the compiled loop
    (``loops.py``), when every combination is a single job on one worker; None otherwise."""
    tie = tie_break(demand.allocation) if demand.tie_break is None else demand.tie_break
    previous = demand.previous
    return compiled.plan_units(   # (it converts what is not of its types)
        prio, demand.deficit, tie, runnable, demand.allocated, demand.member_rows,
        demand.scale_factor, [view.count(t) for t in demand.types],
        order, config.backfill, tuple(demand.keys), tuple(demand.types),
        previous if type(previous) is dict else dict(previous), view.live_type_of,
        view.live_workers)


def _runnable(demand: Demand, config: PlannerConfig) -> np.ndarray:
    """Where each combination may run this round: without ``hold_unallocated``, only the
    combinations the allocation covers."""
    return demand.runnable if config.hold_unallocated else (
        demand.runnable & demand.allocated[:, None])


def _pinned_first(demand: Demand) -> tuple[Demand, np.ndarray, frozenset[str]]:
    """The round's priorities, ``PREFERENCE`` times higher where a combination is
    preferred (``Demand.preferred``), with each pinned combination (``Demand.pinned``)
    first in its column's queue (an infinite priority) and out of every other queue (as
    are the other combinations of its jobs), treated as covered by the allocation (it ran:
    it holds no workers idle). Returns the demand as the selection reads it, the
    priorities and the pinned keys (placed first)."""
    prio = priorities(demand.allocation, demand.received, demand.runnable, demand.allocated)
    preferred = demand.preferred
    if preferred is not None and (preferred >= 0).any():
        rows = np.flatnonzero(preferred >= 0)
        prio[rows, preferred[rows]] *= PREFERENCE
    pinned = demand.pinned
    if pinned is None or not (pinned >= 0).any():
        return demand, prio, frozenset()
    rows = np.flatnonzero(pinned >= 0)
    cols = pinned[rows]
    runnable = demand.runnable.copy()
    members = demand.member_rows
    held = members[rows][members[rows] >= 0]      # their jobs run in no other combination
    runnable[np.isin(members, held).any(axis=1)] = False
    runnable[rows, cols] = True
    prio[rows] = 0.0
    prio[rows, cols] = np.inf
    allocated = demand.allocated.copy()
    allocated[rows] = True
    return (replace(demand, runnable=runnable, allocated=allocated), prio,
            frozenset(demand.keys[i] for i in rows.tolist()))


def _hold_unallocated(demand: Demand, combos: list[int], type_idx: list[int]):
    """Split the selection: combinations the allocation covers run; the others (admitted
    after the last re-solve) hold their workers idle, as Gavel does. Returns (combos as an
    index array, type_idx, held) with ``held`` the (key, type, workers) of the latter."""
    allocated = demand.allocated
    at = np.array(combos, dtype=int)   # once: each index by a list converts it again
    covered = allocated.take(at)
    if covered.all():
        return at, type_idx, ()
    sizes = demand.scale_factor.tolist()
    held = tuple((demand.keys[i], demand.types[j], sizes[i])
                 for i, j, ok in zip(combos, type_idx, covered.tolist()) if not ok)
    return at[covered], [j for j, ok in zip(type_idx, covered.tolist()) if ok], held


def _round_plan(demand: Demand, prio: np.ndarray, combos, task_keys, type_idx, workers,
                extended, held, opportunities: int | None = None) -> RoundPlan:
    """The plan from the selection and placement; ``opportunities``: the combinations of
    last round still present, when the caller counted them."""
    previous = demand.previous
    if opportunities is None:
        opportunities = sum(map(previous.__contains__, demand.keys)) if previous else 0
    extended = np.asarray(extended, dtype=bool)
    return RoundPlan(
        keys=demand.keys, members=demand.members, types=demand.types,
        combo_index=np.asarray(combos, dtype=int), task_keys=task_keys,
        type_index=np.asarray(type_idx, dtype=int),
        workers=tuple(workers), extended=extended, held_idle=held, priorities=prio,
        lease_opportunities=opportunities, lease_extensions=int(np.count_nonzero(extended)),
    )


def _plan_mixed(demand: Demand, view: ClusterView, config: PlannerConfig) -> RoundPlan:
    """``plan_round`` with configuration columns (several worker types at once, VirtualFlow
    §6.5.2): the same priorities per column, selection by ``select_mixed`` and placement
    per real type. A configuration task's workers are listed by type name, then as placed
    (the rank order of ``SplitPlan.assignment``); it keeps last round's workers of a type
    when it had exactly as many there and they are free (its lease is extended when it
    keeps all of them)."""
    types, keys, real = demand.types, demand.keys, demand.real_types
    n_real = len(real)
    demand, prio, first = _pinned_first(demand)
    order = [j for j in _type_order(types, config.type_order) if j < n_real]
    gpus = demand.configuration_gpus
    # Only configurations with time in X can run (priority > 0): the others stay out of
    # the queues altogether. Each joins the queue of its first type in the type order.
    live = np.flatnonzero((prio[:, n_real:] > 0).any(axis=0))
    rank = np.empty(n_real, dtype=int)
    rank[order] = np.arange(n_real)
    primary = np.where(gpus[live] > 0, rank[None, :], n_real).argmin(axis=1)  # a type index
    runs = order_entries_mixed(prio, demand.deficit, demand.allocation, order,
                               n_real + live, primary, config.global_queue, demand.tie_break)
    runnable = _runnable(demand, config)
    combos, type_idx = select_mixed(runs, prio, runnable, demand.scale_factor,
                                    demand.member_rows, [view.count(t) for t in real],
                                    config.backfill, gpus, demand.quota)
    combos, type_idx, held = _hold_unallocated(demand, combos, type_idx)
    combos = combos.tolist()
    sizes = demand.scale_factor.tolist()
    previous = demand.previous
    type_of = view.worker_type_of
    requests = []
    for i, j in zip(combos, type_idx):
        prev = previous.get(keys[i])
        if j < n_real:
            requests.append((keys[i], types[j], sizes[i], prev))
            continue
        for t, count in sorted(demand.configurations[j - n_real].items()):
            mine = None if prev is None else tuple(w for w in prev if type_of.get(w) == t)
            requests.append((f"{keys[i]}{_PART}{t}", t, int(count), mine or None))
    first = frozenset(r[0] for r in requests if r[0].split(_PART)[0] in first)
    got = place(requests, view, first)
    workers, extended = [], []
    for i, j in zip(combos, type_idx):
        if j < n_real:
            ids, ext = got[keys[i]]
        else:
            parts = [got[f"{keys[i]}{_PART}{t}"]
                     for t in sorted(demand.configurations[j - n_real])]
            ids = tuple(w for part, _ in parts for w in part)
            ext = all(e for _, e in parts) and previous.get(keys[i]) is not None \
                and set(previous[keys[i]]) == set(ids)
        workers.append(ids)
        extended.append(ext)
    return _round_plan(demand, prio, combos, take(keys, combos), type_idx, workers, extended,
                       held)


def configuration_matrix(configurations, real_types) -> np.ndarray:
    """(k, real types) workers of each type each configuration uses; raises ``ValueError``
    for a type that is not a real type."""
    unknown = {t for gpus in configurations for t in gpus} - set(real_types)
    if unknown:
        raise ValueError(f"demand.configurations: unknown worker type {min(unknown)!r}")
    return np.array([[gpus.get(t, 0) for t in real_types] for gpus in configurations],
                    dtype=float).reshape(len(configurations), len(real_types))


# Joins a combination key and a type in the placement requests of a configuration task.
_PART = "\x1f"


def take(items: tuple, at: list[int]) -> tuple:
    """``tuple(items[i] for i in at)``, in one call."""
    return itemgetter(*at)(items) if len(at) > 1 else tuple(items[i] for i in at)


def _member_rows(keys, members) -> np.ndarray:
    index = {k: i for i, k in enumerate(keys)}
    extra: dict[str, int] = {}

    def number(m: str) -> int:
        if m in index:
            return index[m]
        return extra.setdefault(m, len(keys) + len(extra))

    rows = [(number(m[0]), number(m[1]) if len(m) > 1 else -1) for m in members]
    return np.array(rows, dtype=int).reshape(-1, 2)


def _type_order(types: tuple[str, ...], preferred: tuple[str, ...]) -> tuple[int, ...]:
    """The column of each type in the order the queues are served (``preferred`` first),
    made once per (types, order): a tuple, as every caller shares it."""
    return _cached_type_order(tuple(types), tuple(preferred))


@lru_cache(maxsize=32)
def _cached_type_order(types: tuple[str, ...], preferred: tuple[str, ...]) -> tuple[int, ...]:
    index = {t: j for j, t in enumerate(types)}
    return (tuple(index[t] for t in preferred if t in index)
            + tuple(j for j, t in enumerate(types) if t not in preferred))
