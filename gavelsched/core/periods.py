"""Allocation periods in the core's rows (thesis §5.3.1: X holds the fraction of time each
combination should spend on each type *between* allocation recomputations; §5.5: the
mechanism moves the time received towards X).

``install`` makes a re-solved allocation the one in force, ``close_period`` ends the period
the previous one covered (Gavel's reset), ``shares`` reads X against the time received
so far, and ``hand_on`` / ``take_on`` give a period in progress to another core (a live
cluster's replay). Functions of their inputs; the core keeps the period's start."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from itertools import compress

import numpy as np

from policies import Allocation, key_members
from policies.table import value_rows

from ..mechanism.selection import tie_break
from .jobs import JobState, pair_rates
from .lookups import Lookups
from .records import Period, PeriodState
from .resolving import within_noise
from .rows import Rows

log = logging.getLogger(__name__)


def install(allocation: Allocation, rows: Rows, jobs: Mapping[str, JobState],
            columns: tuple[str, ...], lookups: Lookups, seed: float) -> None:
    """Make ``allocation`` the one in force: rows for the pairs it gives time to,
    X rows for every combination it covers."""
    given = allocation.allocation
    single = given.keys() <= jobs.keys()    # single jobs only (no pair to add a row for)
    matrix = allocation.matrix(columns) if single else None
    if matrix is not None:              # the rows as the policy wrote them: one matrix
        keys, X = matrix
    elif single:
        keys, xs = list(given), list(given.values())
    else:
        keys, xs = _covered(given, rows, jobs, columns, lookups, seed)
    if len(keys) == len(rows) and list(keys) == rows.keys:    # every row, in order
        at = slice(None)
    else:          # one pass over every row (100,000 distinct ones after ``fewer_moves``)
        rows.allocation[:] = 0.0
        rows.allocated[:] = False
        at = np.fromiter(map(rows.index.__getitem__, keys), dtype=int, count=len(keys))
    if keys:
        rows.allocation[at] = X if matrix is not None else value_rows(xs, columns)
        rows.allocated[at] = True
    rows.tie = tie_break(rows.allocation)   # the planner's sort key, made once per X


def _covered(given: Mapping[str, Mapping[str, float]], rows: Rows,
             jobs: Mapping[str, JobState], types: tuple[str, ...], lookups: Lookups,
             seed: float) -> tuple[list[str], list[Mapping[str, float]]]:
    """The keys and rows of ``given`` that ``install`` keeps: every job's, and those of the
    pairs of two jobs in ``jobs`` that have a row or get one now in ``rows`` (time given,
    co-located throughputs known)."""
    new_pairs, keys, xs = [], [], []
    for key, row in given.items():
        if key in jobs:
            keys.append(key)
            xs.append(row)
            continue
        members = key_members(key)
        if len(members) != 2 or not all(m in jobs for m in members):
            continue
        if key not in rows:
            if max(row.get(t, 0.0) for t in types) <= 0:
                continue
            a, b = (jobs[m] for m in members)
            pt = pair_rates(a, b, lookups)
            if pt is None:
                log.warning("allocation gives time to pair %s with no co-located "
                            "throughputs; ignored", key)
                continue
            new_pairs.append((key, members, a.spec.scale_factor, pt))
        keys.append(key)
        xs.append(row)
    rows.add_many(new_pairs, seed)
    return keys, xs


def reset_received(rows: Rows, start_s: float, now: float, columns: tuple[str, ...],
                   seed: float, closed: deque) -> float:
    """Gavel's reset at a re-solve (``close_period``), the period closed appended to
    ``closed``; returns when received times count from now (``now``)."""
    period = close_period(rows, start_s, now, columns, seed)
    if period is not None:
        closed.append(period)
    return float(now)


def close_period(rows: Rows, start_s: float, now: float, columns: tuple[str, ...],
                 seed: float) -> Period | None:
    """Gavel's reset: deficits absorb the period since ``start_s``, received times go back
    to the ``seed``. Returns the period closed, if X gave time."""
    elapsed = now - start_s
    got = rows.received - seed
    rows.deficit += rows.allocation * elapsed - got
    period = None
    if elapsed > 0 and rows.allocated.any():
        mask = rows.allocated
        if mask.all():      # (every row: no mask to apply)
            keys, allocation = tuple(rows.keys), rows.allocation.copy()
        else:
            keys, allocation = tuple(compress(rows.keys, mask.tolist())), rows.allocation[mask]
            got = got[mask]
        period = Period(start_s, float(now), columns, keys, allocation, got)
    rows.received[:] = seed
    return period


def shares(rows: Rows, jobs: Mapping[str, JobState], columns: tuple[str, ...], now: float,
           since_s: float, seed: float) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
    """Each job's X and the fraction of the time it received, by column, of the time since
    it counts: since ``since_s`` (the last reset, when received times went back to the
    ``seed``) or its arrival, whichever is later. A job's time in a co-located pair counts
    as its own (thesis §5.3.1: its X on a type is its time there, alone or shared). A
    round is credited whole at the next plan, up to a plan lead before it ends (thesis
    §5.6), so the time credited can run ahead of the clock: a job has counted at least
    what it was credited (a job received 1.43 of a first round, 10 s credited 7 s in,
    before)."""
    ids = list(jobs)            # all at once: job by job it took 1 s at 100,000 (issue #30)
    at = np.array([rows.index[job_id] for job_id in ids], dtype=int)
    allocation = with_pairs(rows.allocation, rows.member_rows)
    got = with_pairs(rows.received - seed, rows.member_rows)[at]
    arrival = np.array([jobs[job_id].arrival_s for job_id in ids], dtype=float)
    elapsed = np.maximum(now - np.maximum(since_s, arrival), got.sum(axis=1))
    counted = elapsed > 0
    got[counted] /= elapsed[counted, None]
    got[~counted] = 0.0
    x, got = allocation[at].tolist(), np.clip(got, 0.0, None).tolist()
    return {job_id: (dict(zip(columns, xi)), dict(zip(columns, gi)))
            for job_id, xi, gi in zip(ids, x, got)}


def with_pairs(values: np.ndarray, member_rows: np.ndarray) -> np.ndarray:
    """``values`` (one row per combination) with each co-located pair's row added to both
    of its members' rows (``member_rows``, (c, 2): -1 for no second member)."""
    pairs = np.flatnonzero(member_rows[:, 1] >= 0)
    if not pairs.size:
        return values
    out = values.copy()
    for m in (0, 1):
        np.add.at(out, member_rows[pairs, m], values[pairs])
    return out


def hand_on(rows: Rows, columns: tuple[str, ...], start_s: float, stale: bool,
            runs: Mapping[str, tuple[str, float]], isolated: Mapping[str, JobState] | None,
            last: Allocation | None) -> PeriodState:
    """The period in progress since ``start_s`` for another core to go on from: every
    row's X, received seconds, deficits and planned steps/s, co-located pairs' included;
    with ``isolated`` (the jobs, under finish-time fairness), their isolated time; the
    policy's state from the allocation in force (``last``)."""
    return PeriodState(start_s, tuple(columns), tuple(rows.keys), rows.allocation.copy(),
                       rows.received.copy(), rows.deficit.copy(), stale, runs,
                       rows.rate[:, :len(columns)].copy(),
                       None if isolated is None else _isolated(isolated, rows.keys),
                       {} if last is None else last.policy_state)


def _isolated(jobs: Mapping[str, JobState], keys: list[str]) -> np.ndarray:
    """``PeriodState.isolated`` of the rows ``keys``."""
    out = np.zeros((len(keys), 3))
    out[:, 2] = -1.0
    for i, key in enumerate(keys):
        job = jobs.get(key)
        if job is not None:
            out[i] = (job.isolated_elapsed_s, job.isolated_rate,
                      -1.0 if job.left_at_resolve is None else job.left_at_resolve)
    return out


def take_on(period: PeriodState, rows: Rows, jobs: Mapping[str, JobState],
            columns: tuple[str, ...], lookups: Lookups, seed: float,
            policy: str) -> tuple[Allocation | None, bool]:
    """Another core's period into these rows (on the columns both have): the X of the jobs
    and pairs whose members are in ``jobs``, installed (a pair given time gets its row),
    then their received seconds and deficits. Returns the allocation installed (None: none
    to install) and whether it is whole: it covers every job, and every pair it gives time
    got its row (``install`` drops one without co-located throughputs). The jobs take on
    their isolated time too (``PeriodState.isolated``), when it was kept, and the
    allocation carries the policy's state (``PeriodState.policy_state``)."""
    given = [columns.index(t) if t in columns else -1 for t in period.types]
    x = {key: {t: float(period.allocation[i, j]) for j, t in enumerate(period.types)
               if t in columns}
         for i, key in enumerate(period.keys) if all(m in jobs for m in key_members(key))}
    if not x:
        return None, False
    allocation = Allocation(policy, x, policy_state=period.policy_state)
    install(allocation, rows, jobs, columns, lookups, seed)
    for i, key in enumerate(period.keys):
        r = rows.index.get(key)
        if r is None:
            continue
        for j, c in enumerate(given):
            if c >= 0:
                rows.received[r, c] = period.received[i, j]
                rows.deficit[r, c] = period.deficit[i, j]
        if period.isolated is not None and key in jobs:
            job, (elapsed, rate, left) = jobs[key], period.isolated[i].tolist()
            job.isolated_elapsed_s, job.isolated_rate = elapsed, rate
            job.left_at_resolve = None if left < 0 else left
    whole = jobs.keys() <= x.keys() and all(
        key in rows.index for key, row in x.items() if max(row.values(), default=0.0) > 0)
    return allocation, whole


def moved_from(period: PeriodState, rows: Rows, columns: tuple[str, ...]) -> bool:
    """Some job or pair of ``period`` is planned here on steps/s past noise
    (``resolving.within_noise``) from those its X was solved on (``period.rates``; none
    kept: False), on a column both have: that X is stale (thesis §5.3.3, a reset event)."""
    if period.rates is None:
        return False
    both = [(j, columns.index(t)) for j, t in enumerate(period.types) if t in columns]
    held = [(i, rows.index[key]) for i, key in enumerate(period.keys) if key in rows.index]
    if not both or not held:
        return False
    (was, ours), (at, here) = zip(*both), zip(*held)
    return not within_noise(rows.rate[np.ix_(here, ours)].ravel().tolist(),
                            period.rates[np.ix_(at, was)].ravel().tolist())
