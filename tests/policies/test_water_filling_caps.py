"""Water filling with entities' GPU caps (``Entity.max_gpus``, policies/water_filling_caps.py):
an entity never holds more GPUs than its cap on average, and what it cannot use goes to the
others (thesis §5.4.3, with the cap as one more row of every LP)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import Entity, Job, Pair, Problem, get_policy

from .conftest import assert_valid, effective_throughput
from .test_water_filling_live import SETTINGS, assert_levels_of_every_column, hierarchical

NAME = "max_min_fairness_water_filling_perf"
VARIANTS = {"direct, pruned": {}, "direct, every column": {"prune": False},
            "cvxpy": {"backend": "cvxpy"}, "HiGHS": {"solver": "HIGHS"}}


def entity_gpus(problem: Problem, allocation) -> dict[str | None, float]:
    """GPUs each entity's jobs hold on average: scale factor x time, a pair's GPUs counted
    once for each entity of its members (as the round planner's quota counts them)."""
    job = {j.id: j for j in problem.jobs}
    out: dict[str | None, float] = {}
    for key, row in allocation.allocation.items():
        members = key.split("+")
        for entity in {job[m].entity for m in members}:
            gpus = job[members[0]].scale_factor * sum(row.values())
            out[entity] = out.get(entity, 0.0) + gpus
    return out


def two_teams(cap: int | None, gpus: int = 6) -> Problem:
    """Teams a and b of equal weight, four one-GPU jobs each, on ``gpus`` identical GPUs;
    a capped at ``cap``."""
    jobs = [Job(str(i), {"gpu": 1.0}, entity="ab"[i // 4]) for i in range(8)]
    return Problem(cluster={"gpu": gpus}, jobs=jobs,
                   entities={"a": Entity("a", max_gpus=cap), "b": Entity("b")})


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("cap, expected", [(None, {"a": 3.0, "b": 3.0}),
                                           (2, {"a": 2.0, "b": 4.0}),
                                           (1, {"a": 1.0, "b": 4.0}),
                                           (5, {"a": 3.0, "b": 3.0})])
def test_what_a_capped_entity_cannot_use_goes_to_the_other(variant, cap, expected):
    """Six GPUs, two teams of four jobs: 3 each; team a capped at 2 (or 1) leaves b all
    it can use (4, one GPU per job); a cap above the fair share changes nothing."""
    problem = two_teams(cap)
    allocation = get_policy(NAME, **VARIANTS[variant]).solve(problem)
    assert_valid(problem, allocation)
    got = entity_gpus(problem, allocation)
    assert got == {k: pytest.approx(v, abs=1e-5) for k, v in expected.items()}


def test_a_job_wider_than_its_entitys_cap_gets_nothing_and_its_team_mate_the_rest():
    jobs = [Job("0", {"gpu": 1.0}, scale_factor=4, entity="a"),
            Job("1", {"gpu": 1.0}, entity="a"), Job("2", {"gpu": 1.0}, entity="b")]
    problem = Problem(cluster={"gpu": 4}, jobs=jobs,
                      entities={"a": Entity("a", max_gpus=2), "b": Entity("b")})
    allocation = get_policy(NAME).solve(problem)
    assert allocation.job_time("0") == pytest.approx(0.0, abs=1e-6)
    assert allocation.job_time("1") == pytest.approx(1.0, abs=1e-6)
    assert allocation.job_time("2") == pytest.approx(1.0, abs=1e-6)


def test_the_problem_json_carries_the_cap():
    problem = two_teams(2)
    again = Problem.from_dict(problem.to_dict())
    assert again.entities["a"].max_gpus == 2 and again.entities["b"].max_gpus is None


@st.composite
def capped(draw) -> Problem:
    """``hierarchical`` problems with some entities capped at 1-4 GPUs."""
    problem = draw(hierarchical())
    entities = {name: Entity(name, e.weight, e.policy,
                             max_gpus=draw(st.one_of(st.none(), st.integers(1, 4))))
                for name, e in problem.entities.items()}
    return Problem(cluster=problem.cluster, jobs=problem.jobs, entities=entities)


@settings(**SETTINGS)
@given(problem=capped())
def test_caps_hold_and_the_pruned_lps_give_the_levels_of_every_column(problem):
    """On random capped problems: each capped entity within its cap (to the solver's
    tolerance), and the pruned LPs, whose rows now include the caps, still give the
    levels of the method with every column."""
    allocation = get_policy(NAME).solve(problem)
    assert_valid(problem, allocation)
    for name, gpus in entity_gpus(problem, allocation).items():
        cap = problem.entities[name].max_gpus if name in problem.entities else None
        if cap is not None:
            assert gpus <= cap * (1 + 1e-6) + 1e-6, (name, gpus, cap)
    assert_levels_of_every_column(problem)


def test_a_pair_of_one_team_holds_its_gpu_once_against_the_cap():
    """Team a (capped at 1 GPU) has two jobs that gain from sharing a GPU: the pair holds
    1 GPU of a's cap, so both run co-located all the time (counted once per member, the
    pair could run half the time only)."""
    jobs = [Job(str(i), {"v100": 10.0}, entity="aabb"[i]) for i in range(4)]
    pairs = [Pair((str(a), str(b)), {"v100": (7.5, 7.5)}) for a in range(4)
             for b in range(a + 1, 4)]
    problem = Problem(cluster={"v100": 2}, jobs=jobs, pairs=pairs,
                      entities={"a": Entity("a", max_gpus=1), "b": Entity("b")})
    allocation = get_policy("max_min_fairness_water_filling_packed").solve(problem)
    assert_valid(problem, allocation)
    assert entity_gpus(problem, allocation)["a"] <= 1 + 1e-6
    got = effective_throughput(problem, allocation)
    assert got["0"] == pytest.approx(7.5, rel=1e-3)
    assert got["1"] == pytest.approx(7.5, rel=1e-3)
