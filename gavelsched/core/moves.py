"""Fewer moves for the same throughputs: a re-solved allocation re-arranged so that runs
keep their columns (issue #32).

A policy's LP has many optimal allocations as a rule: max-min fairness binds only its
worst-off jobs (thesis §5.4.1), and an interior-point solver returns the centre of the
optimal face, which spreads a job over several types and lands elsewhere at every
re-solve. Each type a job is spread over, and each change a re-solve makes, is a move in
Gavel's mechanism (§5.5): a checkpoint and a start-up (§5.6), minutes at Sia's restart
costs. Sia prices restarts into its placement for that reason (SOSP'23 §3.3).

``fewer_moves`` solves one more LP over the same columns: every job keeps at least the
effective throughput the policy gave it (sum over its columns of X times the throughput
there), within its own time (5.2) and the cluster (5.3), and as much time as it can stays
on the column its run holds now. A vertex of that LP (HiGHS's dual simplex) is the
answer: with one time row and one throughput row a job, it spreads few jobs over more
than one column. A policy whose objective reads an allocation only through its jobs'
effective throughputs (``Traits.rearrangeable``: max-min and finish-time fairness,
makespan, throughput, FIFO by throughput, water filling) is served at least as well by it.
The core uses it under the restart rule, once some job's restart costs time
(``restarts``); without it the allocation is the policy's own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from policies import Allocation, Problem

log = logging.getLogger(__name__)

# Each job's effective throughput may come out this much under the policy's (relative):
# the policy's own solve is only this exact.
SLACK = 1e-7
SMALLEST = 1e-9     # a time fraction under this is none


def fewer_moves(problem: Problem, allocation: Allocation,
                current: Mapping[str, str]) -> Allocation:
    """``allocation`` (a policy's answer to ``problem``) re-arranged as the module
    docstring says, ``current`` naming the column each run going on holds (job id ->
    type or configuration name). Rows of jobs the policy gave no time, and any allocation
    with a co-located pair, are returned as they were; so is ``allocation`` when the LP
    fails (logged)."""
    jobs = {job.id: job for job in problem.jobs}
    if any(key not in jobs for key in allocation.allocation):
        return allocation
    types = sorted(problem.cluster)
    type_of = {t: i for i, t in enumerate(types)}
    kept: dict[str, Mapping[str, float]] = {}
    var_job, var_col, var_rate, use_rows, use_cols, use_vals = [], [], [], [], [], []
    names: list[str] = []
    for key, row in allocation.allocation.items():
        columns = _columns(jobs[key], type_of)
        effective = sum(share * columns[c][0] for c, share in row.items() if c in columns)
        if effective <= 0 or any(c not in columns for c in row):
            kept[key] = row
            continue
        at = len(names)
        names.append(key)
        for name, (rate, gpus) in columns.items():
            v = len(var_job)
            var_job.append(at)
            var_col.append(name)
            var_rate.append(rate / effective)
            for t, count in gpus.items():
                use_rows.append(type_of[t])
                use_cols.append(v)
                use_vals.append(float(count))
    if not names:
        return allocation
    n, m, k = len(var_job), len(names), len(types)
    job = np.asarray(var_job)
    free = np.array([float(problem.cluster[t]) for t in types])
    for key, row in kept.items():      # what the rows left alone hold
        columns = _columns(jobs[key], type_of)
        for c, share in row.items():
            for t, count in columns.get(c, (0.0, {}))[1].items():
                free[type_of[t]] -= share * count
    A = sp.vstack([
        sp.csr_matrix((np.ones(n), (job, np.arange(n))), shape=(m, n)),          # (5.2)
        sp.csr_matrix((-np.asarray(var_rate), (job, np.arange(n))), shape=(m, n)),
        sp.csr_matrix((use_vals, (use_rows, use_cols)), shape=(k, n)),            # (5.3)
    ], format="csr")
    b = np.concatenate([np.ones(m), np.full(m, -(1.0 - SLACK)), np.maximum(free, 0.0)])
    stay = np.array([current.get(names[j]) == c for j, c in zip(var_job, var_col)],
                    dtype=float)
    result = linprog(-stay, A_ub=A, b_ub=b, bounds=(0, None), method="highs-ds")
    if result.status != 0:
        log.warning("fewer moves: the LP ended without an answer (%s); the policy's "
                    "allocation stands", result.message)
        return allocation
    out: dict[str, dict[str, float]] = {key: dict(row) for key, row in kept.items()}
    for key in names:
        out[key] = {}
    for j, c, x in zip(var_job, var_col, result.x.tolist()):
        if x > SMALLEST:
            out[names[j]][c] = min(x, 1.0)
    return Allocation(allocation.policy, out, allocation.objective, allocation.solve_s,
                      allocation.solver, allocation.policy_state)


def _columns(job, type_of: Mapping[str, int]) -> dict[str, tuple[float, dict[str, int]]]:
    """A job's columns: name -> (its throughput there, the GPUs of each type it takes)."""
    out = {t: (float(rate), {t: job.scale_factor}) for t, rate in job.throughputs.items()
           if rate > 0 and t in type_of}
    for config in job.configurations:
        if config.throughput > 0 and all(t in type_of for t in config.gpus):
            out[config.name] = (float(config.throughput), dict(config.gpus))
    return out
