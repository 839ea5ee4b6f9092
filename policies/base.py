"""What every policy is, and the one place that calls a solver.

A policy is a pure function from ``Problem`` to ``Allocation`` (docs/design.md, The flow): no
clock, no I/O, no state kept between calls. ``evaluate`` scores any allocation by the
policy's own objective, so a caller (or a test) can compare allocations made elsewhere,
e.g. the isolated one for the sharing-incentive property of thesis §5.4.4.
"""

from __future__ import annotations

import logging
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ._lazy import cp
from .columns import Columns, build_columns
from .errors import Outcome, PolicyError, ProblemError, SolverFailed, check_outcome
from .frozen import record
from .lp import DIRECT_SOLVERS
from .problem import Allocation, Problem
from .traits import Traits

log = logging.getLogger(__name__)

# Clarabel (interior point) solves our LPs several times faster than HiGHS's simplex at
# 2,048+ jobs (see BENCHMARKS.md), and its duals are strictly complementary, which water
# filling relies on. HiGHS stays the choice for mixed-integer programs.
DEFAULT_LP_SOLVER = "CLARABEL"
MILP_SOLVER = "HIGHS"
SOLVER_OPTION = "cvxpy solver name (default CLARABEL; HIGHS also solves LPs)"
# How a policy with a direct path solves: "direct" hands its program (an LP; finish-time
# fairness's cone program) to the solver as sparse matrices (policies/lp.py), "cvxpy"
# solves its cvxpy program (the readable reference).
BACKENDS = ("direct", "cvxpy")
BACKEND_OPTION = ("'direct' (default: the same program as sparse matrices, straight to the "
                  "solver) or 'cvxpy' (the reference cvxpy program)")


@record
class Solution:
    """What a policy's ``_solve`` hands back to ``Policy.solve``."""

    rows: Mapping[str, Mapping[str, float]]
    objective: float | None
    solver: str | None
    state: Mapping | None = None  # Allocation.policy_state: see Problem.policy_state


class Policy(ABC):
    """Base of every policy. Subclasses implement ``_solve`` and ``evaluate``, and declare
    ``TRAITS`` (policies/traits.py); one whose traits depend on its constructor flags
    refines them in the ``traits`` property. ``TRAITS.options`` are the options
    ``get_policy`` accepts."""

    name: str = "policy"
    TRAITS: ClassVar[Traits] = Traits()
    # the options ``get_policy`` made it with: ``get_policy(name, **made_with)`` makes the
    # same policy again (the daemon's twin replays the scheduler's: ``simulator/twin.py``)
    made_with: Mapping = MappingProxyType({})

    @property
    def traits(self) -> Traits:
        """What this policy declares: the one way the core and the simulator learn it."""
        return self.TRAITS

    def __init__(self, name: str | None = None, *, solver: str | None = None) -> None:
        if name is not None:
            self.name = name
        if solver is not None and not isinstance(solver, str):
            raise TypeError(f"solver must be a solver's name, got {solver!r}")
        self.solver = (solver or DEFAULT_LP_SOLVER).upper()
        self.solver_given = solver is not None  # else a policy may pick its measured best

    def solve(self, problem: Problem) -> Allocation:
        """Compute the allocation; raises ``Infeasible`` or ``SolverFailed``, never returns {}
        for a failed solve. A problem with no jobs gets an empty allocation."""
        start = time.perf_counter()
        if not problem.jobs:
            return Allocation(policy=self.name, allocation={}, objective=None,
                              solve_s=time.perf_counter() - start)
        try:
            solution = self._solve(problem)
        except PolicyError as err:
            err.solve_s = time.perf_counter() - start
            raise
        elapsed = time.perf_counter() - start
        log.debug("%s: %d jobs solved in %.3fs", self.name, len(problem.jobs), elapsed)
        return Allocation(policy=self.name, allocation=solution.rows,
                          objective=solution.objective, solve_s=elapsed,
                          solver=solution.solver, policy_state=solution.state or {})

    def check_state(self, state: Mapping) -> None:
        """``ProblemError`` (one line) if this policy's next solve could not read ``state``
        as its ``Problem.policy_state`` (one saved with a period: a restart's, a forecast's).
        A policy that carries no state reads none."""

    def renamed_state(self, state: Mapping, names: Mapping[str, str]) -> Mapping:
        """``state`` for a core that names the jobs by ``names`` (job id -> its name there:
        a replay's trace indices), what it says of other jobs left out; a policy whose
        state names no jobs hands it on as it is."""
        return state

    @abstractmethod
    def _solve(self, problem: Problem) -> Solution:
        """Solve a problem with at least one job."""

    @abstractmethod
    def evaluate(self, problem: Problem, allocation: Allocation) -> float | None:
        """This policy's objective value for ``allocation`` (None if undefined)."""

    def __repr__(self) -> str:
        return f"<policy {self.name} solver={self.solver}>"


class ColumnPolicy(Policy):
    """A policy over the column model (policies/columns.py). ``agnostic`` hides the
    differences between types, ``packed`` adds co-located pairs, ``max_partners`` caps them."""

    TRAITS: ClassVar[Traits] = Traits(options={
        "solver": SOLVER_OPTION,
        "max_partners": "space sharing: at most this many partners per job (default: all)"})

    @property
    def traits(self) -> Traits:
        return replace(self.TRAITS, agnostic=self.agnostic, needs_pairs=self.packed,
                       reads=self.TRAITS.reads | ({"pairs"} if self.packed else set()),
                       rearrangeable=(self.TRAITS.rearrangeable and not self.agnostic
                                      and not self.packed))

    def __init__(self, name: str | None = None, *, agnostic: bool = False, packed: bool = False,
                 max_partners: int | None = None, backend: str = "direct", **kwargs) -> None:
        super().__init__(name, **kwargs)
        if backend not in BACKENDS:
            raise ProblemError(f"{self.name}: backend must be one of {', '.join(BACKENDS)}, "
                               f"not {backend!r}")
        self.agnostic, self.packed, self.max_partners = agnostic, packed, max_partners
        self.backend = backend

    def direct_solver(self, preferred: str = DEFAULT_LP_SOLVER) -> str | None:
        """The solver of the direct LP path (policies/lp.py): the one asked for, else
        ``preferred`` (the policy's measured best, BENCHMARKS.md). None means "solve the cvxpy
        program": ``backend="cvxpy"`` was asked for, or the solver has no direct path."""
        if self.backend == "cvxpy":
            return None
        solver = self.solver if self.solver_given else preferred
        return solver if solver in DIRECT_SOLVERS else None

    def columns(self, problem: Problem, *, merge: bool = False) -> Columns:
        """The column model; ``merge`` gives identical jobs one row (only for policies that
        treat identical jobs alike, and never with pairs)."""
        return build_columns(problem, agnostic=self.agnostic, pairs=self.packed,
                             max_partners=self.max_partners, merge=merge and not self.packed)


# Tolerances for solves whose duals must be accurate (water filling's bottleneck test).
PRECISE = {"CLARABEL": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9}}


_warned_inaccurate: set[str] = set()


def run(program: cp.Problem, solver: str, what: str, *, precise: bool = False) -> float:
    """Solve ``program`` and return its value, or raise a typed error saying why not."""
    options = PRECISE.get(solver, {}) if precise else {}
    try:
        with warnings.catch_warnings():  # cvxpy warns of inaccuracy; the status says it too
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            # No warm start: Clarabel would reuse the last solve's solver object, whose
            # scaling was set by other data, and the answer would depend on the history.
            program.solve(solver=solver, warm_start=False, **options)
    except cp.SolverError as err:
        check_outcome(Outcome.FAILED, what, solver, message=str(err))  # raises SolverFailed
    status = program.status
    if check_outcome(_cvxpy_outcome(status), what, solver, precise=precise,
                     status=repr(status)):
        # Once per policy at warning level: a long simulation re-solves thousands of times.
        level = logging.DEBUG if what in _warned_inaccurate else logging.WARNING
        _warned_inaccurate.add(what)
        log.log(level, "%s: solver %s reports an inaccurate optimum (used as is; further "
                "ones are logged at debug level)", what, solver)
    return float(program.value)


def _cvxpy_outcome(status: str) -> Outcome:
    """cvxpy's status of a solved program, in the words of ``check_outcome``."""
    return {cp.OPTIMAL: Outcome.OPTIMAL, cp.OPTIMAL_INACCURATE: Outcome.INACCURATE,
            cp.INFEASIBLE: Outcome.INFEASIBLE, cp.INFEASIBLE_INACCURATE: Outcome.INFEASIBLE,
            cp.UNBOUNDED: Outcome.UNBOUNDED, cp.UNBOUNDED_INACCURATE: Outcome.UNBOUNDED,
            }.get(status, Outcome.FAILED)


def run_precise(program: cp.Problem, solver: str, what: str) -> float:
    """``run`` for solves whose duals or exact optimum matter: tight tolerances, and an
    inaccurate interior-point answer is solved again by simplex (HiGHS)."""
    try:
        return run(program, solver, what, precise=True)
    except SolverFailed as err:
        if solver == MILP_SOLVER:
            raise
        log.debug("%s; solving again with %s", err, MILP_SOLVER)
        return run(program, MILP_SOLVER, what, precise=True)


def no_columns(cols: Columns) -> Solution:
    """The answer when no job can run anywhere: everyone gets nothing."""
    return Solution(rows=cols.to_rows(np.zeros(cols.num_columns)), objective=None, solver=None)
