"""Per-entity GPU caps (``Entity.max_gpus``), held by the round planner whatever the policy
(gavelsched/mechanism/quota.py): a round's plan, and its refills (``place_freed``), never
give an entity's jobs more GPUs at once than its cap; a job whose entity is at its cap is
skipped and the next one in priority order gets the GPUs; without caps nothing changes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.core import CoreConfig, SchedulerCore
from gavelsched.core.driver import RoundDriver
from gavelsched.mechanism import ClusterView, Demand, entity_quota, holding, plan_round
from policies import Entity, get_policy

from .test_core import RATES, R, Table, job
from .test_work_conserving import CONFIGURATIONS, idle_workers, rounds

ENTITIES = ("a", "b", "c")


def gpus_of(t: str, size: int) -> int:
    """Workers a task of column ``t`` holds (a configuration's, or its scale factor)."""
    return sum(CONFIGURATIONS[t].values()) if t in CONFIGURATIONS else size


def entity_use(demand: Demand, plan, entity_of) -> dict[str, int]:
    """GPUs each entity's jobs take in ``plan``, picks held idle included, a pair's GPUs
    counted once for each entity of its members."""
    use: dict[str, int] = {}
    tasks = [(p.members, len(p.workers)) for p in plan.placements]
    tasks += [(demand.members[demand.keys.index(key)], gpus_of(t, size))
              for key, t, size in plan.held_idle]
    for members, gpus in tasks:
        for entity in {entity_of.get(m) for m in members} - {None}:
            use[entity] = use.get(entity, 0) + gpus
    return use


@st.composite
def capped_rounds(draw, mixed: bool = False):
    """``rounds`` (random demands, views and configs) with each job in an entity (or none)
    and some entities capped at 1-6 GPUs."""
    demand, view, config = draw(rounds(mixed))
    jobs = sorted({m for ms in demand.members for m in ms})
    entity_of = {j: draw(st.sampled_from((None,) + ENTITIES)) for j in jobs}
    caps = {e: draw(st.integers(1, 6)) for e in ENTITIES if draw(st.booleans())}
    return demand, view, config, entity_of, caps


@pytest.mark.parametrize("mixed", [False, True])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_plan_never_gives_an_entity_more_than_its_cap(mixed, data):
    """Within the caps; and still work-conserving otherwise: a job that waits while GPUs
    it could use sit idle is one whose entity has no room left for it."""
    demand, view, config, entity_of, caps = data.draw(capped_rounds(mixed))
    demand = replace(demand, quota=entity_quota(demand.members, entity_of, caps))
    plan = plan_round(demand, view, config)
    use = entity_use(demand, plan, entity_of)
    for entity, cap in caps.items():
        assert use.get(entity, 0) <= cap, (entity, use, caps)
    idle, running = idle_workers(demand, view, plan)
    for i, (key, members) in enumerate(zip(demand.keys, demand.members)):
        if len(members) > 1 or key in running:
            continue
        room = caps.get(entity_of[key], np.inf) - use.get(entity_of[key], 0)
        for j, t in enumerate(demand.types):
            may = demand.runnable[i, j] and (config.hold_unallocated or demand.allocated[i])
            if not config.backfill or t in CONFIGURATIONS:
                may = may and demand.allocated[i] and demand.allocation[i, j] > 0
            need = CONFIGURATIONS.get(t, {t: int(demand.scale_factor[i])})
            if may and sum(need.values()) <= room:
                assert any(k > idle[real] for real, k in need.items()), (
                    f"job {key} ({need}) waits while {idle} GPUs idle and its entity has "
                    f"room for {room}")


@pytest.mark.parametrize("mixed", [False, True])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_caps_no_entity_reaches_change_nothing(mixed, data):
    demand, view, config, entity_of, caps = data.draw(capped_rounds(mixed))
    loose = {e: 10_000 for e in caps}
    plain = plan_round(demand, view, config)
    capped = plan_round(replace(demand, quota=entity_quota(demand.members, entity_of, loose)),
                        view, config)
    assert capped.placements == plain.placements
    assert capped.held_idle == plain.held_idle
    assert entity_quota(demand.members, entity_of, {}) is None


def demand_of(sizes, X=None) -> Demand:
    """One type, jobs ``0..n-1`` of ``sizes`` GPUs, priorities in job order (X falls)."""
    n = len(sizes)
    X = np.array(X if X is not None else [[1.0 - 0.1 * i] for i in range(n)])
    keys = tuple(str(i) for i in range(n))
    return Demand(keys=keys, members=tuple((k,) for k in keys), types=("gpu",),
                  scale_factor=np.array(sizes), allocation=X, received=np.zeros((n, 1)),
                  deficit=np.zeros((n, 1)), runnable=np.ones((n, 1), dtype=bool),
                  allocated=np.ones(n, dtype=bool))


@pytest.mark.parametrize("name, sizes, entity_of, caps, gpus, runs", [
    ("the next job in priority order gets the GPUs", [1, 1, 1], {"0": "a", "1": "a", "2": "b"},
     {"a": 1}, 2, {"0", "2"}),
    ("a wide job over its cap is skipped, a narrow one fits", [4, 1, 1],
     {"0": "a", "1": "a", "2": "a"}, {"a": 3}, 8, {"1", "2"}),
    ("another entity is untouched", [2, 2, 2], {"0": "a", "1": "a", "2": "b"}, {"a": 2}, 6,
     {"0", "2"}),
    ("jobs of no entity are never capped", [1, 1, 1], {"0": "a", "1": None, "2": None},
     {"a": 1}, 3, {"0", "1", "2"}),
    ("no cap, no change", [1, 1, 1], {"0": "a", "1": "a", "2": "a"}, {}, 2, {"0", "1"}),
])
def test_cap_table(name, sizes, entity_of, caps, gpus, runs):
    demand = demand_of(sizes)
    demand = replace(demand, quota=entity_quota(demand.members, entity_of, caps))
    plan = plan_round(demand, ClusterView.build({"gpu": gpus}))
    assert {p.key for p in plan.placements} == runs, name


def pair_demand() -> Demand:
    """Jobs 0 and 1 sharing one GPU (the pair "0+1", which the allocation prefers) beside
    job 2, on one type."""
    keys = ("0+1", "0", "1", "2")
    members = (("0", "1"), ("0",), ("1",), ("2",))
    n = len(keys)
    X = np.array([[1.0], [0.0], [0.0], [0.5]])
    return Demand(keys=keys, members=members, types=("gpu",), scale_factor=np.ones(n, int),
                  allocation=X, received=np.zeros((n, 1)), deficit=np.zeros((n, 1)),
                  runnable=np.ones((n, 1), dtype=bool), allocated=np.ones(n, dtype=bool))


@pytest.mark.parametrize("entity_of, caps, runs", [
    ({"0": "a", "1": "a", "2": "b"}, {"a": 1}, {"0+1", "2"}),   # one GPU of a's cap
    ({"0": "a", "1": "a", "2": "a"}, {"a": 1}, {"0+1"}),        # then a is full
    ({"0": "a", "1": "b", "2": "c"}, {"a": 1, "b": 1}, {"0+1", "2"}),   # 1 of each
    ({"0": "a", "1": "b", "2": "b"}, {"b": 1}, {"0+1"}),        # b's job holds it
])
def test_a_pair_counts_its_gpu_once_for_each_entity(entity_of, caps, runs):
    """Two jobs of one entity sharing a GPU hold 1 of its cap, not 2 (as status counts
    the entity's GPUs); jobs of two entities sharing one hold 1 of each cap."""
    demand = pair_demand()
    quota = entity_quota(demand.members, entity_of, caps)
    plan = plan_round(replace(demand, quota=quota), ClusterView.build({"gpu": 2}))
    assert {p.key for p in plan.placements} == runs


def test_a_running_pair_takes_its_gpu_once_from_its_entity():
    """A refill's room: the round in flight's pair of one entity holds 1 GPU of its cap."""
    quota = entity_quota((("2",),), {"0": "a", "1": "a", "2": "a"}, {"a": 3},
                         running=[(("0", "1"), 1)])
    assert quota.room.tolist() == [2]


def test_holding_drops_tasks_whose_workers_were_freed_or_handed_on():
    members = (("0",), ("1",), ("2",), ("3",))
    workers = ((0,), (1,), (2,), (1,))      # task 3 is a refill on job 1's worker
    assert holding(members, [1, 1, 1, 1], workers, freed=[2]) == [(("3",), 1), (("0",), 1)]
    quota = entity_quota((("4",),), {"0": "a", "3": "a", "4": "a"}, {"a": 3},
                         holding(members, [1, 1, 1, 1], workers, freed=[2]))
    assert quota.room.tolist() == [1]


# ---- the core: start_round and place_freed ----------------------------------------------

POLICIES = ["max_min_fairness_perf", "max_min_fairness_water_filling_perf", "fifo",
            "max_sum_throughput_perf"]


@st.composite
def workloads(draw):
    """Jobs of 1, 2 or 4 GPUs in entities a, b (capped at 1-5) or none, a cluster of
    v100s and k80s on servers of 1-4 GPUs, and a policy."""
    n = draw(st.integers(1, 12))
    specs = [job(i, kind=draw(st.sampled_from(sorted(RATES))),
                 steps=draw(st.integers(100, 20_000)), sf=draw(st.sampled_from([1, 1, 2, 4])),
                 entity=draw(st.sampled_from([None, "a", "a", "b"])))
             for i in range(n)]
    entities = {"a": Entity("a", max_gpus=draw(st.integers(1, 5))),
                "b": Entity("b", weight=2.0,
                            max_gpus=draw(st.one_of(st.none(), st.integers(1, 5))))}
    counts = {"v100": draw(st.integers(1, 6)), "k80": draw(st.integers(0, 6))}
    return specs, entities, counts, draw(st.sampled_from([1, 2, 4])), \
        draw(st.sampled_from(POLICIES)), draw(st.randoms(use_true_random=False))


def run_rounds(specs, entities, counts, per_server, policy, rng, check, rounds=4):
    """Drive the core through ``rounds`` rounds with refills (some jobs finish mid-round,
    their workers go to waiting jobs); ``check(holding)`` sees the (members, GPUs) of the
    tasks holding workers after every plan and every refill. Returns each round's and
    refill's task keys."""
    made = get_policy(policy)
    core = SchedulerCore(made, ClusterView.build(counts, per_server), Table(RATES),
                         CoreConfig.for_policy(made, round_seconds=R, refill_freed=True),
                         entities=entities)
    driver = RoundDriver(core)
    for spec in specs:
        core.submit(spec, 0.0)
    seen, now, held = [], 0.0, None
    for _ in range(rounds):
        rnd = driver.boundary(now, held).round
        seen.append(rnd.batch.keys)
        live = {k: (m, int(s), w) for k, m, s, w in zip(rnd.batch.keys, rnd.batch.members,
                                                        rnd.batch.size.tolist(),
                                                        rnd.batch.workers)}
        check([(m, s) for m, s, _ in live.values()])
        for key in [k for k in sorted(live) if rng.random() < 0.4]:
            if key not in core.active_ids:
                continue
            members, _, workers = live.pop(key)
            driver.credit((key,), ((core.remaining_steps(key),),), now + 10.0)
            more = driver.refill(workers, now + 10.0, now + R)
            seen.append(more.keys)
            live.update({k: (m, int(s), w) for k, m, s, w in zip(
                more.keys, more.members, more.size.tolist(), more.workers)})
            check([(m, s) for m, s, _ in live.values()])
        now += R
        held = np.full(len(driver.in_flight.batch), R)
        if not core.has_jobs:
            break
    return seen


@settings(max_examples=40, deadline=None)
@given(workload=workloads())
def test_in_the_core_no_entity_ever_holds_more_than_its_cap(workload):
    specs, entities, counts, per_server, policy, rng = workload
    entity_of = {s.id: s.entity for s in specs}

    def check(tasks):
        use: dict[str, int] = {}
        for members, gpus in tasks:
            for m in members:
                if entity_of[m] is not None:
                    use[entity_of[m]] = use.get(entity_of[m], 0) + gpus
        for name, entity in entities.items():
            if entity.max_gpus is not None:
                assert use.get(name, 0) <= entity.max_gpus, (name, use, entity.max_gpus)

    run_rounds(specs, entities, counts, per_server, policy, rng, check)


@settings(max_examples=25, deadline=None)
@given(workload=workloads())
def test_in_the_core_an_uncapped_run_is_unchanged(workload):
    """Entities without caps, and caps no entity reaches, plan the same rounds."""
    specs, entities, counts, per_server, policy, rng = workload
    state = rng.getstate()
    plain = {n: Entity(n, e.weight, e.policy) for n, e in entities.items()}
    loose = {n: Entity(n, e.weight, e.policy, max_gpus=10_000) for n, e in entities.items()}
    runs = []
    for given_entities in (plain, loose):
        rng.setstate(state)
        runs.append(run_rounds(specs, given_entities, counts, per_server, policy, rng,
                               lambda tasks: None))
    assert runs[0] == runs[1]
