"""One door from a solver's status to the typed errors (policies.errors.check_outcome): the
cvxpy path (policies.base.run) and the direct paths (policies.lp: Clarabel, HiGHS through
scipy, highspy's warm model) raise the same error with the same message for the same LP."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from policies._lazy import cp
from policies.base import run, run_precise
from policies.errors import Infeasible, Outcome, SolverFailed, check_outcome
from policies.lp import DIRECT_SOLVERS, LinearProgram, WarmLevel, solve_lp


@pytest.mark.parametrize("outcome, options, error, message", [
    (Outcome.INFEASIBLE, {}, Infeasible, "toy: the constraints cannot all hold"),
    (Outcome.UNBOUNDED, {}, SolverFailed, "toy: the program is unbounded"),
    (Outcome.INACCURATE, {"precise": True}, SolverFailed,
     "toy: solver S reports an inaccurate optimum"),
    (Outcome.FAILED, {"status": "'user_limit'"}, SolverFailed,
     "toy: solver S ended with status 'user_limit'"),
    (Outcome.FAILED, {"status": "x", "message": "Iteration limit reached."}, SolverFailed,
     "toy: solver S failed: Iteration limit reached."),
    (Outcome.FAILED, {"message": ""}, SolverFailed, "toy: solver S failed: "),
])
def test_outcomes_that_raise(outcome, options, error, message):
    with pytest.raises(error) as err:
        check_outcome(outcome, "toy", "S", **options)
    assert type(err.value) is error and str(err.value) == message


@pytest.mark.parametrize("outcome, inaccurate", [
    (Outcome.OPTIMAL, False), (Outcome.INACCURATE, True),
])
def test_outcomes_that_return(outcome, inaccurate):
    assert check_outcome(outcome, "toy", "S") is inaccurate
    assert check_outcome(Outcome.OPTIMAL, "toy", "S", precise=True) is False


def test_a_solver_exception_is_replaced_not_chained():
    try:
        try:
            raise RuntimeError("inner")
        except RuntimeError as err:
            check_outcome(Outcome.FAILED, "toy", "S", message=str(err))
    except SolverFailed as err:
        assert err.__suppress_context__ and err.__cause__ is None
        assert str(err) == "toy: solver S failed: inner"


def _errors_of_every_path(c, A, b) -> dict[str, tuple[type, str]]:
    """The error each path raises on ``min c @ x s.t. A @ x <= b, x >= 0``."""
    got = {}

    def record(name, solve):
        with pytest.raises(Exception) as err:
            solve()
        got[name] = (type(err.value), str(err.value))

    x = cp.Variable(len(c), nonneg=True)
    for solver in ("CLARABEL", "HIGHS"):
        program = cp.Problem(cp.Minimize(c @ x), [A.toarray() @ x <= b])
        record(f"cvxpy {solver}", lambda: run(program, solver, "toy"))
        record(f"cvxpy {solver} precise", lambda: run_precise(program, solver, "toy"))
    for solver in DIRECT_SOLVERS:
        lp = LinearProgram(np.asarray(c, float), sp.csr_matrix(A), np.asarray(b, float), len(c))
        record(f"direct {solver}", lambda: solve_lp(lp, solver, "toy"))
        record(f"direct {solver} precise", lambda: solve_lp(lp, solver, "toy", precise=True))
    return got


def test_every_path_raises_the_same_error_for_an_infeasible_lp():
    # x >= 0 and x <= -1
    got = _errors_of_every_path(np.array([1.0]), sp.csr_matrix([[1.0]]), np.array([-1.0]))
    # maximise t s.t. z - 0 t <= -1, z >= 0: the same constraints in the warm model
    with pytest.raises(Exception) as err:
        WarmLevel(sp.csc_matrix([[1.0]]), np.array([-1.0]), np.array([0.0])).solve("toy")
    got["warm HIGHS"] = (type(err.value), str(err.value))
    assert set(got.values()) == {(Infeasible, "toy: the constraints cannot all hold")}, got


def test_every_path_raises_the_same_error_for_an_unbounded_lp():
    # minimise -x with x >= 0 and the vacuous 0 x <= 1
    got = _errors_of_every_path(np.array([-1.0]), sp.csr_matrix([[0.0]]), np.array([1.0]))
    assert set(got.values()) == {(SolverFailed, "toy: the program is unbounded")}, got


def test_clarabel_settings_are_made_once_per_precision_and_left_as_made():
    """The direct Clarabel path shares one settings object per precision between solves
    (``policies.lp._clarabel_setup``): a precise solve between two plain ones leaves the
    plain answer as it was, to the bit, and each object keeps its own tolerances."""
    import clarabel

    from policies import lp

    problem = LinearProgram(np.array([-1.0, -2.0]), sp.csr_matrix([[1.0, 1.0], [1.0, 3.0]]),
                            np.array([4.0, 6.0]), 2)
    plain = solve_lp(problem, "CLARABEL", "toy")
    precise = solve_lp(problem, "CLARABEL", "toy", precise=True)
    again = solve_lp(problem, "CLARABEL", "toy")
    assert np.array_equal(plain.x, again.x) and np.array_equal(plain.dual, again.dual)
    assert np.allclose(precise.x, [3.0, 1.0], atol=1e-7)
    assert lp._clarabel_setup(False) is lp._clarabel_setup(False)
    shared, strict = lp._clarabel_setup(False)[0], lp._clarabel_setup(True)[0]
    assert shared.tol_feas == clarabel.DefaultSettings().tol_feas and not shared.verbose
    assert strict.tol_feas == strict.tol_gap_abs == strict.tol_gap_rel == lp.PRECISE_TOL
