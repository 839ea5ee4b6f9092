"""Fewer moves for the same throughputs: an allocation re-arranged so that runs keep their
columns (issue #32).

A policy's LP has many optimal allocations as a rule: max-min fairness binds only its
worst-off jobs (thesis §5.4.1), and an interior-point solver returns the centre of the
optimal face, which spreads a job over several types and lands elsewhere at every
re-solve. Each type a job is spread over, and each change a re-solve makes, is a move in
Gavel's mechanism (§5.5): a checkpoint and a start-up (§5.6), minutes at Sia's restart
costs. Sia prices restarts into its placement for that reason (SOSP'23 §3.3).

``fewer_moves`` solves one more LP over the same columns: every job keeps at least the
effective throughput the policy gave it (the sum over its columns of X times the
throughput there), within its own time (5.2) and the cluster (5.3), and as much time as it
can stays on the column its run holds now. Identical jobs (the same columns, throughputs,
effective throughput and current column) are one row of that LP, as the policies merge
them (``columns.py``), so its size follows the kinds of jobs, not their number. A vertex
of it (HiGHS's dual simplex) spreads few rows over more than one column; a row's time is
then dealt to its jobs one after another, so that most of them hold one column.

A policy whose objective reads an allocation only through its jobs' effective throughputs
(``Traits.rearrangeable``) is served at least as well. The scheduler core uses this under
the restart rule once some job's restart costs time (``gavelsched/core/restarts.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ._lazy import optimize, sp
from .columns import Columns, build_columns, row_classes
from .problem import Allocation, Problem

log = logging.getLogger(__name__)

# A job's effective throughput may come out this much under the policy's (relative): the
# policy's own solve is only this exact.
SLACK = 1e-7
SMALLEST = 1e-9     # a time fraction under this is none


def preload() -> None:
    """Import what ``fewer_moves`` reads (scipy.optimize and scipy.sparse: about half a
    second) now. A scheduler's first re-solve under the restart rule imported them at a
    round's start, and that round's launches waited for it: its refills began 0.3-0.5 s
    late, and every forecast of them was early by as much (issue #29)."""
    optimize.module()
    sp.module()


class _Kind:
    """Identical jobs: their columns (name -> (throughput, GPUs by type)), the effective
    throughput each needs, the column their runs hold (None: none)."""

    def __init__(self, columns: dict, effective: float, current: str | None) -> None:
        self.columns, self.effective, self.current = columns, effective, current
        self.jobs: list[str] = []


def fewer_moves(problem: Problem, allocation: Allocation,
                current: Mapping[str, str]) -> Allocation:
    """``allocation`` (a policy's answer to ``problem``) re-arranged as the module
    docstring says, ``current`` naming the column each run going on holds (job id -> type
    or configuration name). Its ``solve_s`` grows by the time this takes. Rows of jobs the
    policy gave no time, and any allocation with a co-located pair, are returned as they
    were; so is ``allocation`` when the LP fails (logged).

    Reads the jobs as arrays (``problem.table``), not as ``Job`` records, and each distinct
    allocation row once per kind of columns (a class's jobs share one row): job by job it
    took 3 s a re-solve at 100,000 jobs (issue #30)."""
    start = time.perf_counter()
    table = problem.table
    row_of = {job_id: i for i, job_id in enumerate(table.ids)}
    if any(key not in row_of for key in allocation.allocation):
        return allocation
    cols = build_columns(problem, configurations=table.configured)
    types = cols.types
    type_of = {t: i for i, t in enumerate(types)}
    class_of, classes = _columns(cols)
    signatures: dict[tuple, int] = {}      # a kind of columns (name, rate) -> its number
    signature = [signatures.setdefault(tuple((c, rate) for c, (rate, _) in columns.items()),
                                       len(signatures)) for columns in classes]
    scale_factor = table.numbers[:, 0].tolist()
    read: dict[tuple[int, int], tuple] = {}     # (row, class) -> kept, effective, its kind
    kinds: dict[tuple, _Kind] = {}
    kept: dict[str, Mapping[str, float]] = {}
    free = cols.workers.copy()
    for key, row in allocation.allocation.items():
        i = row_of[key]
        klass = class_of[i]
        columns = classes[klass]
        seen = read.get((id(row), klass))
        if seen is None:
            effective = sum(share * columns[c][0] for c, share in row.items() if c in columns)
            seen = read[id(row), klass] = (
                effective <= 0 or any(c not in columns for c in row), effective,
                (signature[klass], float(np.float32(effective))))
        keep, effective, kind_of_row = seen
        if keep:
            kept[key] = row
            for c, share in row.items():
                for t, count in columns.get(c, (0.0, {}))[1].items():
                    free[type_of[t]] -= share * count
            continue
        at = current.get(key)
        same = (kind_of_row, scale_factor[i], at)
        kind = kinds.get(same)
        if kind is None:
            kind = kinds[same] = _Kind(columns, effective, at if at in columns else None)
        kind.effective = min(kind.effective, effective)
        kind.jobs.append(key)
    if not kinds:
        return allocation
    groups = list(kinds.values())
    x = _solve(groups, types, type_of, np.maximum(free, 0.0))
    if x is None:
        return allocation
    out: dict[str, dict[str, float]] = {key: dict(row) for key, row in kept.items()}
    for kind, times in zip(groups, x):
        out.update(zip(kind.jobs, _deal(kind, times)))
    return replace(allocation, allocation=out,
                   solve_s=allocation.solve_s + time.perf_counter() - start)


def _solve(groups: Sequence[_Kind], types: Sequence[str], type_of: Mapping[str, int],
           free: np.ndarray) -> list[dict[str, float]] | None:
    """Each kind's total time on each of its columns (None: the LP failed)."""
    var_kind, var_col, var_rate, use_rows, use_cols, use_vals, stay = [], [], [], [], [], [], []
    for g, kind in enumerate(groups):
        for name, (rate, gpus) in kind.columns.items():
            v = len(var_kind)
            var_kind.append(g)
            var_col.append(name)
            var_rate.append(rate / kind.effective)
            stay.append(1.0 if name == kind.current else 0.0)
            for t, count in gpus.items():
                use_rows.append(type_of[t])
                use_cols.append(v)
                use_vals.append(float(count))
    n, m, k = len(var_kind), len(groups), len(types)
    row, col = np.asarray(var_kind), np.arange(n)
    A = sp.vstack([
        sp.csr_matrix((np.ones(n), (row, col)), shape=(m, n)),                    # (5.2)
        sp.csr_matrix((-np.asarray(var_rate), (row, col)), shape=(m, n)),
        sp.csr_matrix((use_vals, (use_rows, use_cols)), shape=(k, n)),            # (5.3)
    ], format="csr")
    size = np.array([len(kind.jobs) for kind in groups], dtype=float)
    b = np.concatenate([size, -(1.0 - SLACK) * size, free])
    try:
        result = optimize.linprog(-np.asarray(stay), A_ub=A, b_ub=b, bounds=(0, None),
                         method="highs-ds")
    except ValueError as err:       # a value HiGHS refuses: the policy's answer stands
        result = None
        why = str(err)
    else:
        why = result.message
    if result is None or result.status != 0:
        log.warning("fewer moves: the LP ended without an answer (%s); the policy's "
                    "allocation stands", why)
        return None
    x = [dict() for _ in groups]
    for g, c, value in zip(var_kind, var_col, result.x.tolist()):
        if value > SMALLEST:
            x[g][c] = value
    return x


def _deal(kind: _Kind, times: Mapping[str, float]) -> list[dict[str, float]]:
    """A kind's total time on each column, dealt to its jobs so that most hold one column:
    each job in turn needs an equal share of the kind's throughput, and takes it from the
    slowest column left, as much as it can while the fastest left can make up the rest
    within its time. Where the rest cannot be made up after all, every job gets an equal
    share of every column instead (always within its time)."""
    n = len(kind.jobs)
    order = sorted(times, key=lambda c: kind.columns[c][0])          # slowest first
    rate = [kind.columns[c][0] for c in order]
    budget = [times[c] * r for c, r in zip(order, rate)]
    share = sum(budget) / n
    eps = share * SMALLEST
    dealt, lo, hi = [], 0, len(order) - 1
    for _ in range(n):
        need, used, row = share, 0.0, {}
        while need > eps and lo <= hi:
            gap = 1.0 / rate[lo] - 1.0 / rate[hi]   # 0 for rates a bit apart, too
            if gap > 0.0:               # the most of the slow one the fast one can top up
                most = (1.0 - used - need / rate[hi]) / gap
            else:
                most = need
            at = lo if most > eps else hi
            piece = min(need, budget[at], most if at == lo else need)
            row[order[at]] = row.get(order[at], 0.0) + piece / rate[at]
            used += piece / rate[at]
            need -= piece
            budget[at] -= piece
            while lo <= hi and budget[lo] <= eps:
                lo += 1
            while hi >= lo and budget[hi] <= eps:
                hi -= 1
        dealt.append(row)
    if any(sum(row.values()) > 1.0 + 1e-6 for row in dealt):
        even = {c: t / n for c, t in times.items()}
        dealt = [dict(even) for _ in range(n)]
    return [_within_time(row) for row in dealt]


def _within_time(row: Mapping[str, float]) -> dict[str, float]:
    """A job's row without its specks, scaled into its time where the LP's tolerance (a
    part in 10^7) took it over."""
    row = {c: t for c, t in row.items() if t > SMALLEST}
    total = sum(row.values())
    return {c: t / total for c, t in row.items()} if total > 1.0 else row


def _columns(cols: Columns) -> tuple[list[int], list[dict[str, tuple[float, dict]]]]:
    """Each job's columns in the policies' column model (``columns.build_columns``: the
    types big enough for it, the configurations that fit), as column name -> (its
    throughput there, the GPUs of each type it takes). Jobs with the same columns share
    one such dictionary: returns, by job row, its index in the list of them. Found over the
    model's arrays, rows told apart by their bytes (``columns.row_classes``): made job by
    job they cost ~40 us a job, 3-4 s a re-solve at 100,000 jobs (issue #30)."""
    usage = cols.usage_arrays          # (types, columns) CSR: a column's GPUs by type
    gpus = np.zeros((cols.num_columns, len(cols.types)))
    gpus[usage.indices, np.repeat(np.arange(len(cols.types)), np.diff(usage.indptr))] = \
        usage.data
    # a column's kind: its label and its GPUs by type, numbered
    _, pattern = row_classes(np.column_stack([cols.col_type, gpus]) + 0.0)
    rate = cols.throughput_arrays      # (jobs, columns) CSR: a job's steps/s on each
    per_job = np.diff(rate.indptr)
    width = int(per_job.max(initial=0))
    slot = np.arange(rate.indices.size) - np.repeat(rate.indptr[:-1], per_job)
    row = np.repeat(np.arange(cols.num_jobs), per_job)
    signature = np.full((cols.num_jobs, 2 * width), -1.0)      # (pattern, rate) per slot
    signature[row, 2 * slot] = pattern[rate.indices]
    signature[row, 2 * slot + 1] = rate.data
    first, class_index = row_classes(signature + 0.0)
    classes = []
    for i in first.tolist():            # one dictionary per kind, from its first job's row
        columns = {}
        for k in range(rate.indptr[i], rate.indptr[i + 1]):
            c = rate.indices[k]
            uses = {cols.types[t]: float(n) for t, n in enumerate(gpus[c].tolist()) if n}
            columns[cols.labels[cols.col_type[c]]] = (float(rate.data[k]), uses)
        classes.append(columns)
    return class_index.tolist(), classes
