"""Problem / Allocation JSON: round trips and one-line errors naming the bad field."""

from __future__ import annotations

import pytest

from policies import Allocation, Problem, ProblemError, get_policy

GOOD = {
    "cluster": {"v100": 4, "p100": 4, "k80": 4}, "prices": {"v100": 2.48},
    "jobs": [{"id": "0", "throughputs": {"v100": 10.0, "p100": 4.0, "k80": 1.0},
              "scale_factor": 1, "weight": 1.0, "remaining_steps": 10000, "elapsed_s": 0.0,
              "slo_s": None, "entity": "research"},
             {"id": "1", "throughputs": {"v100": 5.0, "p100": 4.0, "k80": 2.0},
              "entity": "research"}],
    "pairs": [{"jobs": ["0", "1"], "throughputs": {"v100": [6.0, 3.0]}}],
    "entities": {"research": {"weight": 1.0, "policy": "fifo"}},
}


def test_problem_round_trip():
    problem = Problem.from_dict(GOOD)
    again = Problem.from_dict(problem.to_dict())
    assert again == problem
    assert problem.pairs[0].key == "0+1"
    assert problem.entities["research"].policy == "fifo"


def test_allocation_round_trip():
    allocation = get_policy("max_min_fairness_packed").solve(Problem.from_dict(GOOD))
    data = allocation.to_dict()
    assert set(data) >= {"policy", "allocation", "objective", "solve_s"}
    assert Allocation.from_dict(data) == allocation


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: d.pop("cluster"), "missing field 'cluster'"),
    (lambda d: d["cluster"].update(v100=-1), "cluster.v100: must be >= 0"),
    (lambda d: d["jobs"][1].pop("throughputs"), "jobs[1]: missing field 'throughputs'"),
    (lambda d: d["jobs"][0].update(scale_factor=0), "jobs[0].scale_factor: must be >= 1"),
    (lambda d: d["jobs"][0].update(scale_factor=1.5), "jobs[0].scale_factor: must be a whole"),
    (lambda d: d["jobs"][0].update(weight="heavy"), "jobs[0].weight: must be a number"),
    (lambda d: d["jobs"][0]["throughputs"].update(h100=3), "unknown worker type 'h100'"),
    (lambda d: d["jobs"][1].update(id="0"), "jobs[1].id: duplicate id '0'"),
    (lambda d: d["pairs"][0].update(jobs=["0", "9"]), "pairs[0].jobs: unknown job id '9'"),
    (lambda d: d["entities"]["research"].update(policy="lottery"), "entities.research.policy"),
    (lambda d: d["jobs"][0].update(entity="sales"), "jobs[0].entity: unknown entity 'sales'"),
    (lambda d: d["jobs"][0].update(remaining_steps=float("nan")), "must be finite"),
])
def test_malformed_problem_names_the_field(mutate, expected):
    import copy
    data = copy.deepcopy(GOOD)
    mutate(data)
    with pytest.raises(ProblemError) as err:
        Problem.from_dict(data)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)
