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
configurations, or a problem where mixing cannot help, gets the max-min level of the
``_perf`` policy (and, without configuration columns, its allocation). An allocation row names a configuration by its canonical key
(``configuration_name``: ``"k80:2+v100:1"``) next to the plain types.

Max-min fairness alone leaves GPUs idle that no job at the fair level needed: with elastic
counts (Varuna §4, ``JobSpec.min_scale_factor``) the fair level is often reached on few,
efficient GPUs. Where a problem has configuration columns, ``max_min_fairness_mixed``
then gives the leftover to the jobs that can use it (``fill_leftover``): every job keeps
at least the time max-min gave it on each column, so no one is worse off than at the
max-min optimum, and the total of the normalised throughputs is as large as can be.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ._lazy import sp
from .base import DEFAULT_LP_SOLVER, Solution, no_columns, run
from .columns import Columns, build_columns
from .fairness import MaxMinFairness, base_constraints, fairness_utility, max_min_rows
from .finish_time import FinishTimeFairness
from .lp import LinearProgram, maximise_level, solve_lp
from .problem import Problem
from .traits import Traits


ROOM_TOL = 1e-7     # time or workers left below this count as none (solver tolerance)


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
            z, t, used = level.z, level.t, level.solver
        else:
            import cvxpy as cp

            x = cp.Variable(cols.num_columns, nonneg=True)
            level = cp.Variable()
            program = cp.Problem(cp.Maximize(level), [U @ x >= level,
                                                      *base_constraints(cols, x)])
            t, used = run(program, self.solver, self.name), self.solver
            z = x.value
        if cols.config_names:
            z = fill_leftover(cols, U, z, self.name)
        return Solution(cols.to_rows(z), t, used)


def fill_leftover(cols: Columns, U: sp.spmatrix, z: np.ndarray, what: str) -> np.ndarray:
    """``z`` plus the time ``d >= 0`` that maximises the normalised throughputs' total
    ``sum(U @ d)`` within what ``z`` leaves of each job's time (5.2) and each type's
    workers (5.3) (module docstring). By HiGHS's simplex: the leftover is often
    degenerate (rooms of almost nothing), where an interior point can stall."""
    z = np.maximum(np.asarray(z, dtype=float), 0.0)
    A = sp.vstack([cols.member, cols.usage], format="csr")
    room = np.concatenate([np.ones(cols.num_jobs), cols.workers]) - A @ z
    room[room < ROOM_TOL] = 0.0
    gain = -np.asarray(U.sum(axis=0)).ravel()
    if not (gain < 0).any() or not room.any():
        return z
    d = solve_lp(LinearProgram(gain, A, room, cols.num_columns), "HIGHS", what).x
    return z + np.maximum(d, 0.0)


class FinishTimeFairnessMixed(_Mixed, FinishTimeFairness):
    """``finish_time_fairness_mixed``: Themis's finish-time fairness (thesis §5.4.2) where a
    job may also hold a configuration of several types (VirtualFlow §5)."""

    TRAITS = FinishTimeFairness.TRAITS.but(
        reads=FinishTimeFairness.TRAITS.reads | {"configurations"})
