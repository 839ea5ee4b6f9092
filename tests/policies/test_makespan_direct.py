"""The makespan policies' direct path (policies/makespan.py): the rate LP, the short-jobs-first
LP and Gavel's ECOS feasibility program go to their solvers as the data cvxpy's
canonicalisation makes of the cvxpy programs, entry for entry (signs of zero included), so
both backends give the same allocation to the bit and a simulation's results do not move.
Exact search, Gavel's bisection (with phantom columns), a budget, pairs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import get_policy, makespan

from .conftest import problems

SETTINGS = {"max_examples": 40, "deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
CASES = {"exact": ("min_total_duration_perf", {"search": "exact"}, problems()),
         "bisection": ("min_total_duration_perf", {"search": "bisection"}, problems()),
         "budget": ("min_makespan_with_budget", {"budget": 1e4}, problems()),
         "packed": ("min_total_duration_packed", {"search": "exact"},
                    problems(pairs=True, max_jobs=6))}


class Programs:
    """Every cvxpy program the cvxpy backend solves, with its solver, and the makespan
    Gavel's point was asked for."""

    def __init__(self, monkeypatch) -> None:
        self.seen: list = []
        self.makespan_s: float | None = None
        run, point = makespan.run, makespan.MinTotalDuration._gavel_point

        def recorded_run(program, solver, what, **options):
            self.seen.append((program, solver))
            return run(program, solver, what, **options)

        def recorded_point(policy, problem, cols, rows, makespan_s):
            self.makespan_s = makespan_s
            return point(policy, problem, cols, rows, makespan_s)

        monkeypatch.setattr(makespan, "run", recorded_run)
        monkeypatch.setattr(makespan.MinTotalDuration, "_gavel_point", recorded_point)


def same(mine, theirs) -> None:
    (c, A, b), (their_c, their_A, their_b) = mine, theirs
    assert np.array_equal(c, their_c) and np.array_equal(np.signbit(c), np.signbit(their_c))
    assert np.array_equal(b, their_b) and A.shape == their_A.shape
    for got, want in zip(A[:3], (their_A.data, their_A.indices, their_A.indptr)):
        assert np.array_equal(got, want)


@pytest.mark.parametrize("case", sorted(CASES))
@settings(**SETTINGS)
@given(data=st.data())
def test_the_direct_data_is_cvxpys_entry_for_entry_and_so_is_the_answer(case, data):
    name, options, drawn = CASES[case]
    problem = data.draw(drawn)
    if data.draw(st.booleans()):   # some jobs done: they leave the pending rows
        problem = dataclasses.replace(problem, jobs=tuple(
            dataclasses.replace(job, remaining_steps=0.0) if i % 3 == 1 else job
            for i, job in enumerate(problem.jobs)))
    with pytest.MonkeyPatch.context() as patch:
        programs = Programs(patch)
        try:
            reference = get_policy(name, backend="cvxpy", **options).solve(problem)
        except makespan.PolicyError as err:
            with pytest.raises(type(err)):
                get_policy(name, **options).solve(problem)
            return
    direct = get_policy(name, **options).solve(problem)
    assert direct.allocation == reference.allocation
    assert direct.objective == reference.objective and direct.solver == reference.solver

    policy = get_policy(name, **options)
    cols = policy.columns(problem)
    rows = makespan._pending(cols)
    if not programs.seen:
        return
    sigma = float(np.max(cols.remaining[rows] / cols.fastest_throughput[rows]))
    lps = [program for program, solver in programs.seen if solver == "CLARABEL"]
    first = lps[0].get_problem_data("CLARABEL")[0]
    same(makespan.rate_data(cols, rows, sigma, policy.budget),
         (first["c"], first["A"], first["b"]))
    if len(lps) == 2:                 # the short-jobs-first LP, its kept rate the last row
        second = lps[1].get_problem_data("CLARABEL")[0]
        same(makespan.rate_data(cols, rows, sigma, policy.budget, -second["b"][-1]),
             (second["c"], second["A"], second["b"]))
    for program, solver in programs.seen:
        if solver == "ECOS":
            ecos = program.get_problem_data("ECOS")[0]
            phantom = makespan._phantom_columns(problem, cols)
            same(makespan.gavel_data(cols, rows, phantom, programs.makespan_s),
                 (ecos["c"], ecos["G"], ecos["h"]))
