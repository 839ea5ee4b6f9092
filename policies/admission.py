"""Which job a policy refuses when the jobs' own demands cannot all be met together (SLOs,
thesis §6.4.3; a budget, §6.4.2): the newest of the jobs the last allocation did not plan,
as a deadline scheduler's admission control refuses the job that arrived last. The jobs
planned before keep theirs; a scheduler core that keeps going drops the job named
(``Infeasible.job_id``) and solves again, so one job's demand never leaves every other job
without an allocation."""

from __future__ import annotations

import numpy as np

from .columns import Columns
from .problem import Problem


def new_rows(cols: Columns, rows: np.ndarray, problem: Problem) -> np.ndarray:
    """Those of ``rows`` whose jobs the last allocation did not plan
    (``Problem.previous``): the ones a policy may refuse."""
    previous = problem.previous
    return np.array([i for i in rows.tolist() if cols.job_ids[i] not in previous], dtype=int)


def newest(cols: Columns, rows: np.ndarray) -> str:
    """The job of ``rows`` (not empty) submitted last: the least ``elapsed_s``; of equals,
    the last row (a problem lists its jobs in arrival order)."""
    elapsed = cols.elapsed[rows]
    return cols.job_ids[rows[np.flatnonzero(elapsed == elapsed.min())[-1]]]
