"""Jobs on several worker types at once in the mechanism and the core (VirtualFlow §6.5.2):
configurations from the split solver, selection and placement per real type, and the
micro-task a launcher needs (per-worker types, split plan)."""

from __future__ import annotations

import numpy as np
import pytest

from gavelsched.core import CoreConfig, JobSpec, RoundReport, SchedulerCore
from gavelsched.core.configurations import Configurations, extra_counts
from gavelsched.mechanism import ClusterView, Demand, PlannerConfig, plan_round
from policies import get_policy
from traces import ThroughputTable
from gavelsched.virtual.split import SplitPlan, TypePlan, plan_split

# steps/s of one job type at scale factors 1, 2, 4: a V100 is 4x a K80; communication costs
# the V100s 10% at 2 GPUs (1/14.4 - 1/16 = 6.9 ms), the K80s less in time (1.6 ms)
TABLE = ThroughputTable(solo={
    "v100": {("net", 1): 8.0, ("net", 2): 14.4, ("net", 4): 25.0},
    "k80": {("net", 1): 2.0, ("net", 2): 3.9, ("net", 4): 7.6},
})


def test_profiles_reproduce_the_table():
    """The derived profiles give the table's own steps/s on one type (module docstring)."""
    mixer = Configurations(TABLE)
    for sf in (2, 4):
        for t in ("v100", "k80"):
            profile = mixer.profile(t, "net", sf)
            plan = plan_split({t: profile}, 512, {t: sf})
            assert plan.types[t].gpus == sf
            assert plan.steps_per_s == pytest.approx(TABLE.get(t, "net", sf), rel=1e-3)


def test_candidates_are_mixes_of_at_most_twice_the_scale_factor():
    options = Configurations(TABLE).options("net", 2, {"v100": 4, "k80": 4})
    assert options
    best_single = max(TABLE.get(t, "net", 2) for t in ("v100", "k80"))
    for option in options:
        gpus = option.configuration.gpus
        assert len(gpus) == 2 and sum(gpus.values()) <= 4
        assert {t: p["gpus"] for t, p in option.split["types"].items()} == dict(gpus)
        assert sum(p["gpus"] * p["batch_per_gpu"] for p in option.split["types"].values()) == 512
        assert option.configuration.throughput == pytest.approx(1 / option.split["step_s"])
    # 2 V100 + 2 K80 beat 2 V100 alone: each K80 takes a tenth of the batch, and the step
    # is 50 ms of compute + 6.9 ms of communication (17.6 steps/s) against 69 ms
    assert options[0].configuration.gpus == {"k80": 2, "v100": 2}
    assert options[0].configuration.throughput == pytest.approx(1 / (0.05 + 1 / 14.4 - 1 / 16),
                                                                rel=1e-2)
    assert options[0].configuration.throughput > best_single
    assert extra_counts(1) == (1,) and extra_counts(8) == (2, 4, 8)


def test_a_job_type_without_multi_gpu_rates_gets_no_configurations():
    table = ThroughputTable(solo={"v100": {("solo", 1): 8.0}, "k80": {("solo", 1): 2.0}})
    assert Configurations(table).options("solo", 1, {"v100": 2, "k80": 2}) == ()


def _demand(allocation, configurations, received=None, previous=None):
    keys = ("a", "b")
    types = ("v100", "k80") + tuple("+".join(f"{t}:{n}" for t, n in sorted(c.items()))
                                    for c in configurations)
    allocation = np.array(allocation, dtype=float)
    return Demand(keys=keys, members=(("a",), ("b",)), types=types,
                  scale_factor=np.array([1, 1]), allocation=allocation,
                  received=np.full(allocation.shape, 180.0) if received is None else received,
                  deficit=np.zeros(allocation.shape), runnable=np.ones(allocation.shape, bool),
                  allocated=np.ones(2, bool), previous=previous or {},
                  configurations=tuple(configurations))


def test_planner_places_a_configuration_on_each_of_its_types():
    view = ClusterView.build({"v100": 1, "k80": 3}, {"v100": 1, "k80": 3})
    demand = _demand([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [{"v100": 1, "k80": 2}])
    plan = plan_round(demand, view, PlannerConfig(type_order=("v100", "k80")))
    placed = {p.key: p for p in plan.placements}
    assert placed["a"].worker_type == "k80:2+v100:1"
    kinds = [view.worker_type_of[w] for w in placed["a"].workers]
    assert kinds == ["k80", "k80", "v100"]  # by type name, as SplitPlan.assignment ranks
    assert view.worker_type_of[placed["b"].workers[0]] == "k80"
    used = [w for p in plan.placements for w in p.workers]
    assert len(used) == len(set(used)) == 4
    # next round it keeps the same workers: the lease is extended
    again = plan_round(_demand(demand.allocation, demand.configurations,
                               previous={p.key: p.workers for p in plan.placements}),
                       view, PlannerConfig(type_order=("v100", "k80")))
    assert {p.key: p.workers for p in again.placements} == \
        {p.key: p.workers for p in plan.placements}
    assert again.extended.all()


def test_configurations_never_oversubscribe_and_never_backfill():
    view = ClusterView.build({"v100": 1, "k80": 2})
    # both want the configuration; it fits once (1 V100). b gets nothing on a type it
    # has no time on... unless backfill gives it the idle K80s, which it does (single type)
    demand = _demand([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], [{"v100": 1, "k80": 1}])
    plan = plan_round(demand, view, PlannerConfig(type_order=("v100", "k80")))
    configs = [p for p in plan.placements if "+" in p.worker_type]
    assert len(configs) == 1
    assert all(p.worker_type == "k80" for p in plan.placements if p not in configs)
    # a configuration the policy gave no time never runs
    idle = _demand([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [{"v100": 1, "k80": 2}])
    plan = plan_round(idle, view, PlannerConfig(type_order=("v100", "k80")))
    assert all("+" not in p.worker_type for p in plan.placements)


def _core(mixed_jobs="all"):
    policy = get_policy("max_min_fairness_mixed")
    view = ClusterView.build({"v100": 2, "k80": 4})
    config = CoreConfig.for_policy(policy, mixed_jobs=mixed_jobs, type_order=("v100", "k80"))
    return SchedulerCore(policy, view, TABLE, config)


def test_core_hands_out_mixed_micro_tasks_a_launcher_can_run():
    core = _core()
    core.submit(JobSpec("0", "net", 2, 100_000), 0.0)
    rnd = core.start_round(0.0)
    (task,) = rnd.tasks
    assert task.mixed and task.configuration == task.worker_type
    assert len(task.worker_types) == len(task.workers)
    types = core.view.worker_type_of
    assert tuple(types[w] for w in task.workers) == task.worker_types
    split = SplitPlan({t: TypePlan(**p) for t, p in task.split["types"].items()},
                      task.split["step_s"])
    _, mapping, rank_types = split.assignment()
    assert rank_types == task.worker_types and mapping.processes == len(task.workers)
    assert task.throughputs[0] == pytest.approx(split.steps_per_s)
    # the job runs at the configuration's rate and its received time lands on that column
    done = core.end_round(RoundReport(steps=rnd.batch.steps, seconds=np.array([360.0])), 360.0)
    assert done.completed == ()
    assert core.remaining_steps("0") == 100_000 - int(rnd.batch.steps[0, 0])
    assert np.array_equal(rnd.batch.gpus_by_type().sum(axis=0) > 0, [True, True])


def test_unflagged_jobs_get_no_configurations():
    core = _core(mixed_jobs="flagged")
    core.submit(JobSpec("0", "net", 2, 1000), 0.0)
    core.submit(JobSpec("1", "net", 2, 1000, mixed=True), 0.0)
    rnd = core.start_round(0.0)
    rows = rnd.resolved.allocation
    assert set(rows["0"]) == {"v100", "k80"}
    assert set(rows["1"]) - {"v100", "k80"}  # a configuration got time
    assert all(not t.mixed for t in rnd.tasks if t.key == "0")
