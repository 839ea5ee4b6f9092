"""Policies declare their traits as data (policies/traits.py); the core reads them.

- every registered policy's traits drive ``CoreConfig`` to Gavel's per-policy rules
  (a table written out by name below: the reference, not something the code parses);
- every registered policy conforms to ``PolicyProtocol`` and keeps its declaration;
- a field a policy does not declare in ``reads`` never changes its allocation;
- a policy class defined here, registered under no name, gets its core behaviour from its
  declaration alone.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gavelsched.core import CoreConfig, JobSpec, Report, SchedulerCore
from gavelsched.mechanism import ClusterView
from policies import (
    Allocation,
    Entity,
    Job,
    Pair,
    Policy,
    Problem,
    Traits,
    UnknownOption,
    get_policy,
    policy_class,
    policy_names,
    policy_options,
)
from policies.base import Solution
from policies.jobs import Configuration
from policies.traits import OPTIONAL_FIELDS, PolicyProtocol
from simulator import make_policy

# Gavel's rules for its policy names (scheduler/scheduler.py reads class names):
# shuffle the type order unless 'Perf' or 'Packing' is in the class name; no backfill for
# FIFO (and here for the cost policies and shortest job first: queue order and cost
# savings must hold); pairs for space sharing; t^isolated for finish-time fairness.
#            name: (shuffle_type_order, backfill, pairs, isolated_time)
GAVEL_RULES = {
    "max_min_fairness": (True, True, False, False),
    "max_min_fairness_perf": (False, True, False, False),
    "max_min_fairness_packed": (False, True, True, False),
    "max_min_fairness_water_filling": (True, True, False, False),
    "max_min_fairness_water_filling_perf": (False, True, False, False),
    "max_min_fairness_water_filling_packed": (False, True, True, False),
    "finish_time_fairness": (True, True, False, True),
    "finish_time_fairness_perf": (False, True, False, True),
    "finish_time_fairness_packed": (False, True, True, True),
    "max_min_fairness_mixed": (False, True, False, False),  # VirtualFlow §6.5.2 (not Gavel)
    "finish_time_fairness_mixed": (False, True, False, True),
    "min_total_duration": (True, True, False, False),
    "min_total_duration_perf": (False, True, False, False),
    "min_total_duration_packed": (False, True, True, False),
    "min_makespan_with_budget": (False, True, False, False),
    "fifo": (True, False, False, False),
    "fifo_perf": (False, False, False, False),
    "fifo_packed": (False, False, True, False),
    "shortest_job_first_perf": (False, False, False, False),
    "max_sum_throughput_perf": (False, True, False, False),
    "max_sum_throughput_normalized_by_cost_perf": (False, False, False, False),
    "max_sum_throughput_normalized_by_cost_perf_SLOs": (False, False, False, False),
    "isolated": (True, True, False, False),
    "gandiva": (False, True, True, False),
    "allox": (False, True, False, False),
}

# Options a policy cannot be built without.
REQUIRED = {"min_makespan_with_budget": {"budget": 1e6}}


def make(name: str, **options) -> Policy:
    return get_policy(name, **{**REQUIRED.get(name, {}), **options})


def test_the_table_covers_every_registered_policy():
    assert sorted(GAVEL_RULES) == policy_names()


@pytest.mark.parametrize("name", sorted(GAVEL_RULES))
def test_traits_drive_core_config_as_gavel_rules(name):
    shuffle, backfill, pairs, isolated = GAVEL_RULES[name]
    config = CoreConfig.for_policy(make(name), seed=3)
    got = (config.shuffle_type_order, config.backfill, config.pairs, config.isolated_time)
    assert got == (shuffle, backfill, pairs, isolated)
    assert config.seed == 3  # overrides still apply
    assert CoreConfig.for_policy(make(name), backfill=not backfill).backfill is not backfill


def test_fifo_and_shortest_job_first_agree_on_backfill():
    """Both keep their queue order (the inconsistency of issue #7)."""
    assert make("fifo_perf").traits.backfill is make("shortest_job_first_perf").traits.backfill
    assert make("fifo_perf").traits.backfill is False


# ---- conformance -------------------------------------------------------------------------
def small_problem(**changes) -> Problem:
    """Four single-GPU jobs on one worker of each type: oversubscribed (Gandiva pairs),
    with pairs, prices, SLOs, entities, a previous allocation and every optional field."""
    thr = [{"v100": 10.0, "p100": 4.0, "k80": 1.0}, {"v100": 3.0, "p100": 2.5, "k80": 2.0},
           {"v100": 6.0, "p100": 3.0, "k80": 0.5}, {"v100": 8.0, "p100": 7.0, "k80": 3.0}]
    jobs = tuple(Job(str(i), t, weight=1.0 + i % 2, remaining_steps=1e4 * (i + 1),
                     elapsed_s=100.0 * i, slo_s=None, entity="ab"[i % 2],
                     isolated_elapsed_s=50.0 * i) for i, t in enumerate(thr))
    pairs = (Pair(("0", "1"), {t: (0.7 * thr[0][t], 0.6 * thr[1][t]) for t in thr[0]}),
             Pair(("2", "3"), {t: (0.8 * thr[2][t], 0.5 * thr[3][t]) for t in thr[0]}))
    problem = Problem(cluster={"v100": 1, "p100": 1, "k80": 1}, jobs=jobs, pairs=pairs,
                      prices={"v100": 2.48, "p100": 1.46, "k80": 0.45},
                      previous={"0": {"v100": 1.0}, "3": {"k80": 1.0}})
    return replace(problem, **changes)


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_conforms_and_keeps_its_declaration(name):
    policy = make(name)
    assert isinstance(policy, PolicyProtocol)
    traits = policy.traits
    assert isinstance(traits, Traits)
    assert policy.name == name
    assert set(traits.options) == set(policy_class(name).TRAITS.options)
    assert set(traits.options) <= set(policy_options(name))
    assert set(traits.simulation_defaults) <= set(traits.options)
    assert traits.reads <= OPTIONAL_FIELDS
    assert not traits.needs_pairs or "pairs" in traits.reads
    assert not traits.carries_state or "policy_state" in traits.reads
    assert not traits.isolated_time or "isolated_elapsed_s" in traits.reads
    allocation = policy.solve(small_problem())
    assert isinstance(allocation, Allocation) and allocation.policy == name
    assert bool(allocation.policy_state) is traits.carries_state
    # every declared option is accepted by name; an undeclared one is refused by name
    with pytest.raises(UnknownOption, match=f"'colour'; accepted: {', '.join(sorted(policy_options(name)))}"):
        make(name, colour="red")


def test_simulation_defaults_come_from_the_declaration():
    assert make_policy("min_total_duration_perf").search == "bisection"
    assert make_policy("min_total_duration_perf", search="exact").search == "exact"
    assert make_policy("min_makespan_with_budget", budget=10.0).search == "exact"
    slos = "max_sum_throughput_normalized_by_cost_perf_SLOs"
    assert make_policy(slos).slo_mode == "best_effort"
    assert make_policy(slos, slo_mode="strict").slo_mode == "strict"
    assert make_policy("max_sum_throughput_normalized_by_cost_perf").slo_mode == "strict"
    assert make_policy("fifo", seed=7).seed == 7          # fifo declares a seed
    assert make_policy("max_min_fairness_perf", seed=7).name == "max_min_fairness_perf"


def _perturbed(problem: Problem, field: str) -> Problem:
    """``problem`` with ``field`` changed to another valid value."""
    jobs = problem.jobs
    job_changes = {
        "weight": lambda j: replace(j, weight=7.0 - j.weight),
        "remaining_steps": lambda j: replace(j, remaining_steps=5e5 / (1 + int(j.id))),
        "elapsed_s": lambda j: replace(j, elapsed_s=3000.0 - 500 * int(j.id)),
        "slo_s": lambda j: replace(j, slo_s=j.elapsed_s + 1e6),
        "entity": lambda j: replace(j, entity="ba"[int(j.id) % 2] if j.id != "0" else "b"),
        "isolated_elapsed_s": lambda j: replace(j, isolated_elapsed_s=None),
        "configurations": lambda j: replace(j, configurations=(
            Configuration({"v100": 1, "k80": 1}, 50.0),)),
    }
    if field in job_changes:
        return replace(problem, jobs=tuple(job_changes[field](j) for j in jobs))
    problem_changes = {
        "prices": {"v100": 9.0, "p100": 0.2, "k80": 4.0},
        "pairs": (),
        "entities": {"a": Entity("a", weight=4.0, policy="fifo"), "b": Entity("b")},
        "previous": {"1": {"p100": 1.0}, "2": {"v100": 1.0}},
        "policy_state": {"unrelated": [1, 2, 3]},
    }
    return replace(problem, **{field: problem_changes[field]})


@pytest.mark.parametrize("name", policy_names())
def test_fields_not_declared_in_reads_never_change_the_allocation(name):
    policy = make(name)
    base = small_problem()
    expected = policy.solve(base).allocation
    unread = sorted(OPTIONAL_FIELDS - policy.traits.reads)
    for field in unread:
        got = make(name).solve(_perturbed(base, field)).allocation
        assert got.keys() == expected.keys(), field
        for key, row in expected.items():
            assert dict(got[key]) == pytest.approx(dict(row), abs=1e-6), (field, key)


# ---- a policy nobody registered ------------------------------------------------------------
class FirstOnly(Policy):
    """Gives the first job its fastest type, the others no time. Declares its traits."""

    name = "first_only"
    TRAITS = Traits(backfill=True, needs_pairs=True, isolated_time=True, agnostic=True,
                    reads=frozenset({"pairs", "isolated_elapsed_s"}))

    def __init__(self, traits: Traits | None = None) -> None:
        super().__init__()
        self.problems: list[Problem] = []
        self._declared = traits or self.TRAITS

    @property
    def traits(self) -> Traits:
        return self._declared

    def _solve(self, problem: Problem) -> Solution:
        self.problems.append(problem)
        first = problem.jobs[0]
        best = max(first.throughputs, key=first.throughputs.get)
        rows = {job.id: dict.fromkeys(problem.cluster, 0.0) for job in problem.jobs}
        rows[first.id][best] = 1.0
        return Solution(rows, None, None)

    def evaluate(self, problem, allocation):
        return None


class Rates:
    def get(self, worker_type, job_type, scale_factor=1):
        return {"v100": 10.0, "k80": 2.0}[worker_type]

    def pair(self, worker_type, a, b):
        return (6.0, 6.0)


def _first_round(policy: FirstOnly):
    core = SchedulerCore(policy, ClusterView.build({"v100": 1, "k80": 1}), Rates(),
                         CoreConfig.for_policy(policy))
    for i in range(2):
        core.submit(JobSpec(id=str(i), job_type="m", scale_factor=1, total_steps=10**6), 0.0)
    rnd = core.start_round(0.0)
    core.end_round([Report(t.key, t.steps, 360.0) for t in rnd.tasks], 360.0)
    return core, rnd


def test_a_new_policy_gets_its_core_behaviour_from_its_declaration():
    policy = FirstOnly()
    core, rnd = _first_round(policy)
    assert core.config.shuffle_type_order and core.config.isolated_time
    problem = policy.problems[-1]
    assert [p.key for p in problem.pairs] == ["0+1"]           # needs_pairs
    assert problem.job("0").isolated_elapsed_s == 0.0           # isolated_time
    # backfill: job 1 (no time in the allocation) runs on the idle K80
    assert sorted(t.key for t in rnd.tasks) == ["0", "1"]

    # the same declaration but backfill=False: the K80 stays idle
    strict = FirstOnly(FirstOnly.TRAITS.but(backfill=False))
    core, rnd = _first_round(strict)
    assert not core.config.backfill and core.config.pairs
    assert [t.key for t in rnd.tasks] == ["0"]

    plain = FirstOnly(Traits())  # declares nothing: Gavel's defaults for an aware policy
    core, rnd = _first_round(plain)
    assert not core.config.shuffle_type_order and not core.config.isolated_time
    assert plain.problems[-1].pairs == ()
    assert plain.problems[-1].job("0").isolated_elapsed_s is None
    assert sorted(t.key for t in rnd.tasks) == ["0", "1"]
