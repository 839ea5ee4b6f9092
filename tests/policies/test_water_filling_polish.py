"""Water filling's polish (policies/water_filling.py: ``WaterFilling._polish``), solved
again at a vertex when Clarabel cannot solve it precisely: by HiGHS's interior point with
crossover first, by its simplex only should that fail too. At production size the simplex
took 137 s where the interior point took 10 s (BENCHMARKS.md, "Water filling with pairs
at production size"); both reach the same optimum."""

from __future__ import annotations

import numpy as np
import pytest

import policies.water_filling as wf
from policies import get_policy
from policies.errors import SolverFailed
from tests.policies.conftest import assert_valid, level_model
from tests.policies.test_water_filling_live import FOUND_LIVE, NAME

# Clarabel reports an inaccurate optimum for this problem's polish (every column kept).
PROBLEM = FOUND_LIVE["FIFO, polish skipped"]


@pytest.fixture
def polishes(monkeypatch):
    """The polish's solves, in order, as (solver, "ok" or the error's type); ``fail``
    holds solvers made to fail as an inaccurate optimum does."""
    calls, fail = [], set()
    real = wf.solve_lp

    def solve_lp(lp, solver, what, precise=False):
        if not what.endswith("(polish)"):
            return real(lp, solver, what, precise=precise)
        try:
            if solver in fail:
                raise SolverFailed(f"{what}: solver {solver} made to fail by the test")
            result = real(lp, solver, what, precise=precise)
        except SolverFailed as err:
            calls.append((solver, type(err).__name__))
            raise
        calls.append((solver, "ok"))
        return result
    monkeypatch.setattr(wf, "solve_lp", solve_lp)
    return calls, fail


def handed_out(allocation) -> tuple[np.ndarray, float]:
    """Each job's level under ``allocation`` and their total (the polish's objective)."""
    cols, U = level_model(PROBLEM)
    levels = U @ cols.z_from(allocation)
    return levels, float(levels.sum())


def test_an_inaccurate_polish_is_solved_again_by_the_interior_point_at_a_vertex(polishes):
    calls, _ = polishes
    policy = get_policy(NAME, prune=False)
    kept = policy._levels(PROBLEM)
    allocation = policy.solve(PROBLEM)
    assert calls == [("CLARABEL", "SolverFailed"), ("HIGHS_IPM", "ok")]
    assert_valid(PROBLEM, allocation)
    levels, total = handed_out(allocation)
    assert (levels >= kept * (1 - wf.POLISH_SLACK) - 1e-9).all(), (levels, kept)
    assert total > kept.sum()     # the polish handed out what the levels left


def test_the_simplex_polishes_when_the_interior_point_fails_too(polishes):
    calls, fail = polishes
    policy = get_policy(NAME, prune=False)
    by_ipm = handed_out(policy.solve(PROBLEM))[1]
    calls.clear()
    fail.add("HIGHS_IPM")
    allocation = policy.solve(PROBLEM)
    assert calls == [("CLARABEL", "SolverFailed"), ("HIGHS_IPM", "SolverFailed"),
                     ("HIGHS", "ok")]
    assert_valid(PROBLEM, allocation)
    assert handed_out(allocation)[1] == pytest.approx(by_ipm, rel=1e-9)   # one optimum


def test_a_polish_no_solver_can_solve_keeps_the_levels_allocation(polishes):
    calls, fail = polishes
    policy = get_policy(NAME, prune=False)
    kept = policy._levels(PROBLEM)
    fail.update({"HIGHS_IPM", "HIGHS"})
    allocation = policy.solve(PROBLEM)
    assert [solver for solver, _ in calls] == ["CLARABEL", "HIGHS_IPM", "HIGHS"]
    assert_valid(PROBLEM, allocation)
    levels, _ = handed_out(allocation)
    assert (levels >= kept * (1 - 1e-6) - 1e-9).all()
