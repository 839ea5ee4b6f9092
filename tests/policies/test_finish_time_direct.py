"""Finish-time fairness's direct path (policies/finish_time.py, ``cone_program``): the data it
hands Clarabel is the data cvxpy's canonicalisation makes of the cvxpy program, entry for
entry, so both give the same allocation to the bit, and a simulation's results do not move
(benchmarks/same_results.py's "ftf-300"). Every variant: per type, agnostic, with pairs,
with configurations; jobs done, of weight 0, or that can run nowhere."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import Job, Problem, get_policy
from policies.base import run
from policies.finish_time import cone_program, finish_time_program

from .conftest import problems
from .test_mixed import mixed_problems

SETTINGS = {"max_examples": 40, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
VARIANTS = {"finish_time_fairness_perf": problems(),
            "finish_time_fairness": problems(),
            "finish_time_fairness_packed": problems(pairs=True, max_jobs=6),
            "finish_time_fairness_mixed": mixed_problems()}


@st.composite
def with_idle_jobs(draw, problems):
    """``problems`` where some jobs have no steps left or weigh nothing (their ρ is a
    constant: the program's extra row) and some can run nowhere (not in its rows)."""
    problem = draw(problems)
    jobs = list(problem.jobs)
    for i, job in enumerate(jobs):
        change = draw(st.sampled_from(["none", "none", "done", "weightless", "nowhere"]))
        if change == "done":
            jobs[i] = dataclasses.replace(job, remaining_steps=0.0)
        elif change == "weightless":
            jobs[i] = dataclasses.replace(job, weight=0.0)
        elif change == "nowhere" and not problem.pairs and not job.configurations:
            jobs[i] = dataclasses.replace(job, throughputs=dict.fromkeys(job.throughputs, 0.0))
    return dataclasses.replace(problem, jobs=tuple(jobs))


@pytest.mark.parametrize("name", sorted(VARIANTS))
@settings(**SETTINGS)
@given(data=st.data())
def test_the_direct_data_is_cvxpys_entry_for_entry_and_so_is_the_answer(name, data):
    problem = data.draw(with_idle_jobs(VARIANTS[name]))
    policy = get_policy(name)
    cols = policy.columns(problem)
    if cols.num_columns == 0:
        return
    program, z = finish_time_program(cols)
    theirs = program.get_problem_data("CLARABEL")[0]
    c, A, b, zero, cones = cone_program(cols)
    dims = theirs["dims"]
    assert (dims.zero, dims.nonneg, list(dims.soc)) == (zero, b.size - zero - sum(cones),
                                                         list(cones))
    assert dims.exp == 0 and not dims.psd and not dims.p3d
    assert np.array_equal(c, theirs["c"]) and np.array_equal(b, theirs["b"])
    assert A.shape == theirs["A"].shape
    for mine, cvxpys in zip(A[:3], (theirs["A"].data, theirs["A"].indices, theirs["A"].indptr)):
        assert np.array_equal(mine, cvxpys)

    value = run(program, "CLARABEL", name)
    direct = policy.solve(problem)
    assert direct.objective == value
    assert direct.allocation == cols.to_rows(z.value)
    reference = get_policy(name, backend="cvxpy").solve(problem)
    assert reference.allocation == direct.allocation


def test_other_solvers_and_the_cvxpy_backend_solve_the_cvxpy_program(monkeypatch):
    problem = Problem(cluster={"v100": 1, "k80": 2}, jobs=(
        Job("a", {"v100": 4.0, "k80": 1.0}, remaining_steps=100.0, elapsed_s=10.0),
        Job("b", {"v100": 2.0, "k80": 1.5}, remaining_steps=50.0)))
    monkeypatch.setattr("policies.finish_time.cone_program",
                        lambda cols: pytest.fail("the direct path was taken"))
    assert get_policy("finish_time_fairness_perf", backend="cvxpy").solve(problem).solver \
        == "CLARABEL"
    assert get_policy("finish_time_fairness_perf", solver="ECOS").solve(problem).solver \
        == "ECOS"
