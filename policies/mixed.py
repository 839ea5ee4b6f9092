"""Policies whose allocation may run a job on several worker types at once (VirtualFlow §5,
§6.5.2: Gavel extended with heterogeneous allocations).

A job's ``Configuration`` (``policies.jobs``) is a multiset of worker types, e.g. one
V100 and two K80s, with the steps/s the job makes on it with its global batch split
across them (VirtualFlow's heterogeneous solver, §5.1.2). The policies here are the
existing LPs over a column set that also holds one column per (job, configuration)
(``build_columns(configurations=True)``): the column counts against the job's time (5.2)
and against *every* type it uses (5.3), and adds its steps/s to the job's effective
throughput (§5.3.1). The normaliser of max-min fairness, throughput(m, X^equal), and
Themis's X^isolated stay the single-type ones (§5.4.1, §5.4.2), so a job without
configurations, or a problem where mixing cannot help, gets exactly the allocation of the
``_perf`` policy. An allocation row names a configuration by its canonical key
(``configuration_name``: ``"k80:2+v100:1"``) next to the plain types.
"""

from __future__ import annotations

from typing import ClassVar

from .base import DEFAULT_LP_SOLVER, Solution, no_columns, run
from .columns import Columns, build_columns
from .fairness import MaxMinFairness, base_constraints, fairness_utility, max_min_rows
from .finish_time import FinishTimeFairness
from .lp import maximise_level
from .problem import Problem
from .traits import Traits


class _Mixed:
    """Adds the configuration columns to a column policy's model."""

    TRAITS: ClassVar[Traits]

    def columns(self, problem: Problem, *, merge: bool = False) -> Columns:
        return build_columns(problem, pairs=False, merge=merge, configurations=True)


class MaxMinFairnessMixed(_Mixed, MaxMinFairness):
    """``max_min_fairness_mixed``: LAS over effective throughput (thesis §5.4.1) where a job
    may also hold a configuration of several types (VirtualFlow §6.5.2). The direct LP of
    ``MaxMinFairness`` over the wider column set; ``backend="cvxpy"`` solves the same LP
    as a plain cvxpy program (the compiled one of ``MaxMinFairness`` assumes one type per
    column)."""

    TRAITS = MaxMinFairness.TRAITS.but(reads=MaxMinFairness.TRAITS.reads | {"configurations"})

    def _solve(self, problem: Problem) -> Solution:
        cols = self.columns(problem, merge=True)
        if cols.num_columns == 0:
            return no_columns(cols)
        _, U = fairness_utility(cols)
        solver = self.direct_solver(DEFAULT_LP_SOLVER)
        if solver is not None:
            A, b, e = max_min_rows(cols, U)
            level = maximise_level(A, b, e, solver, self.name)
            return Solution(cols.to_rows(level.z), level.t, level.solver)
        import cvxpy as cp

        z = cp.Variable(cols.num_columns, nonneg=True)
        t = cp.Variable()
        program = cp.Problem(cp.Maximize(t), [U @ z >= t, *base_constraints(cols, z)])
        value = run(program, self.solver, self.name)
        return Solution(cols.to_rows(z.value), value, self.solver)


class FinishTimeFairnessMixed(_Mixed, FinishTimeFairness):
    """``finish_time_fairness_mixed``: Themis's finish-time fairness (thesis §5.4.2) where a
    job may also hold a configuration of several types (VirtualFlow §5)."""

    TRAITS = FinishTimeFairness.TRAITS.but(
        reads=FinishTimeFairness.TRAITS.reads | {"configurations"})
