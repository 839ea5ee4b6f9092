"""The planner is work-conserving (issue #18; thesis §5.5, Algorithm 2): a round's plan never
leaves a GPU idle while a job that can use it waits, except where the configuration says so:

- without ``backfill`` (FIFO's head-of-line blocking, the cost policies: their declared
  traits), an entry of priority 0 never runs;
- a job the allocation does not cover yet (admitted after the last re-solve) holds its
  workers idle with ``hold_unallocated`` (Gavel), or is skipped without it.

"Can use it": the job is not running this round, it may run on the type (throughput > 0),
and its scale factor fits in the type's workers left idle.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.mechanism import ClusterView, Demand, PlannerConfig, plan_round

TYPES = ("a", "b", "c")
# Configuration columns (several types at once, or fewer GPUs of one; VirtualFlow §6.5.2)
CONFIGURATIONS = {"a:1+b:1": {"a": 1, "b": 1}, "b:2+c:2": {"b": 2, "c": 2}, "c:2": {"c": 2}}


@st.composite
def rounds(draw, mixed: bool = False):
    """A cluster (some workers down), jobs of 1-4 GPUs with some pairs, X, received time,
    deficits, runnable and allocated flags, last round's workers, and a planner config;
    ``mixed``: with configuration columns after the types."""
    counts = {t: draw(st.integers(0, 8)) for t in TYPES}
    per_server = draw(st.sampled_from([1, 2, 4]))
    view = ClusterView.build(counts, per_server)
    ids = sorted(view.worker_type_of)
    view = view.without(draw(st.lists(st.sampled_from(ids), unique=True, max_size=3))
                        if ids else [])
    n = draw(st.integers(1, 12))
    sfs = [draw(st.sampled_from([1, 1, 1, 2, 4])) for _ in range(n)]
    keys = [str(i) for i in range(n)]
    members = [(k,) for k in keys]
    sf = list(sfs)
    for a in range(n):
        for b in range(a + 1, n):
            if sfs[a] == sfs[b] and draw(st.integers(0, 7)) == 0:
                keys.append(f"{a}+{b}")
                members.append((str(a), str(b)))
                sf.append(sfs[a])
    columns = TYPES + (tuple(CONFIGURATIONS) if mixed else ())
    c, m = len(keys), len(columns)

    def matrix(elements):
        return np.array(draw(st.lists(st.lists(elements, min_size=m, max_size=m),
                                      min_size=c, max_size=c)))

    X = matrix(st.sampled_from([0.0, 0.0, 0.1, 0.25, 0.5, 1.0]))
    received = matrix(st.sampled_from([0.0, 180.0, 500.0, 3600.0]))
    deficit = matrix(st.sampled_from([-100.0, 0.0, 100.0]))
    runnable = matrix(st.booleans()).astype(bool)
    runnable[[len(ms) > 1 for ms in members], len(TYPES):] = False   # pairs: one type each
    allocated = np.array(draw(st.lists(st.booleans(), min_size=c, max_size=c)))
    previous = {}
    free = list(ids)
    for k, size in zip(keys, sf):
        if draw(st.booleans()) and len(free) >= size:
            previous[k] = tuple(free[:size])
            free = free[size:]
    demand = Demand(keys=tuple(keys), members=tuple(members), types=columns,
                    scale_factor=np.array(sf), allocation=X, received=received,
                    deficit=deficit, runnable=runnable, allocated=allocated,
                    previous=previous,
                    configurations=tuple(CONFIGURATIONS.values()) if mixed else ())
    config = PlannerConfig(type_order=tuple(draw(st.permutations(TYPES))),
                           global_queue=draw(st.booleans()), backfill=draw(st.booleans()),
                           hold_unallocated=draw(st.booleans()))
    return demand, view, config


def idle_workers(demand, view, plan) -> tuple[dict[str, int], set[str]]:
    """Workers of each real type the plan leaves idle, and the jobs it runs (or holds)."""
    busy = {t: 0 for t in TYPES}
    running: set[str] = set()
    for p in plan.placements:
        for w in p.workers:
            busy[view.worker_type_of[w]] += 1
        running.update(p.members)
    for key, t, size in plan.held_idle:              # picked, kept idle: counted as busy
        for real, count in CONFIGURATIONS.get(t, {t: size}).items():
            busy[real] += count
        running.update(demand.members[demand.keys.index(key)])
    return {t: view.count(t) - busy[t] for t in TYPES}, running


def check(demand, view, config) -> None:
    plan = plan_round(demand, view, config)
    idle, running = idle_workers(demand, view, plan)
    assert all(n >= 0 for n in idle.values())
    for i, (key, members) in enumerate(zip(demand.keys, demand.members)):
        if len(members) > 1 or key in running:
            continue
        for j, t in enumerate(demand.types):
            may = demand.runnable[i, j] and (config.hold_unallocated or demand.allocated[i])
            if not config.backfill or t in CONFIGURATIONS:
                # the policy's traits (FIFO, cost), and configurations (only with X > 0)
                may = may and demand.allocated[i] and demand.allocation[i, j] > 0
            if not may:
                continue
            need = CONFIGURATIONS.get(t, {t: int(demand.scale_factor[i])})
            assert any(k > idle[real] for real, k in need.items()), (
                f"job {key} ({need}) waits while {idle} GPUs idle")


@settings(max_examples=400, deadline=None)
@given(rounds())
def test_no_gpu_idles_while_a_job_that_can_use_it_waits(case):
    check(*case)


@settings(max_examples=300, deadline=None)
@given(rounds(mixed=True))
def test_the_same_with_configurations_of_several_types(case):
    check(*case)
