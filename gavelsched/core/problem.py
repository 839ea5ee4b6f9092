"""The policy's ``Problem`` built from the core's state (thesis §5.4: policies are
optimization problems over X given T; §5.3.1: with space sharing, T has rows for pairs of
jobs; §5.4.2: finish-time fairness needs each job's Themis t^isolated).

Functions of their inputs: the core passes its jobs, rows, view and lookups, and keeps
Themis's isolated time in the ``JobState`` records (``advance_isolated_time``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from operator import attrgetter, itemgetter

import numpy as np

from policies import Allocation, Entity, Job, Pair, Problem, pair_key
from policies.columns import equal_split
from policies.packing import partner_pairs
from policies.table import JobTable

from ..mechanism import ClusterView
from .config import CoreConfig
from .jobs import JobState, pair_rates
from .lookups import Lookups
from .records import JobSpec
from .restarts import efficiency
from .rows import Rows


# With partners per job (``CoreConfig.pair_partners``), the most choices of a partner all
# the jobs make together: each job chooses fewer (one at least) when they would make more
# (``chosen_partners``). A max-min plan of 20,000 jobs on 2,048 GPUs took 7 s with 4
# partners each (~52,000 pairs), 16 s with 8 and over ten minutes with 16 (BENCHMARKS.md,
# "Space sharing at production size").
PARTNER_CHOICES = 80_000

# What a re-solve reads of each job's record besides the core's rows (``Rows.planned``
# among them): Themis's isolated time.
_ISOLATED = attrgetter("isolated_elapsed_s")
# What a job's ``Job`` record is made of besides those numbers, kept as it is now: the core
# may replace them before the policy reads the record (the Problem is a frozen value).
_RECORD = attrgetter("spec", "throughputs", "options")
_OPTIONS = itemgetter(2)


def build_problem(now: float, jobs: Mapping[str, JobState], rows: Rows, view: ClusterView,
                  types: tuple[str, ...], lookups: Lookups, config: CoreConfig, *,
                  prices: Mapping[str, float], entities: Mapping[str, Entity],
                  last: Allocation | None,
                  uncredited: Mapping[str, float] | None = None) -> Problem:
    """Every admitted job, in admission order, and (``config.pairs``) the pairs the
    policy may plan on; ``last`` is the allocation in force. ``uncredited``: steps the
    executor expects jobs to have made by now but has not credited yet (a daemon learns
    steps at checkpoints, after it plans); they come off the remaining steps the policy
    sees, never below one step. The jobs go as a ``policies.table.JobTable``: arrays, with
    the ``Job`` records made only if the policy reads them."""
    states = list(jobs.values())
    m = len(states)
    # each job's row (the rows are the jobs, in order, unless pairs have rows too)
    at = (np.arange(m) if rows.keys == list(jobs) else
          np.fromiter(map(rows.index.__getitem__, jobs), dtype=np.intp, count=m))
    left = rows.left[at]
    if uncredited:
        left = np.array([max(steps - uncredited.get(job_id, 0.0), min(steps, 1.0))
                         for job_id, steps in zip(jobs, left.tolist())])
    planned = rows.planned[at]       # weight, restart, SLO, arrival
    elapsed = np.maximum(0.0, now - planned[:, 3])
    alone = (np.fromiter(map(_ISOLATED, states), dtype=float, count=m)
             if config.isolated_time else None)
    numbers = np.empty((m, 6))   # (policies.table.JOB_NUMBERS)
    numbers[:, 0], numbers[:, 1], numbers[:, 2] = rows.scale_factor[at], planned[:, 0], left
    numbers[:, 3], numbers[:, 5] = elapsed, planned[:, 2]
    numbers[:, 4] = elapsed if alone is None else alone
    T = rows.rate[at, :len(types), 0]     # each job's T (``jobs.apply_measured``)
    factors = [1.0] * m
    if config.restart_rule == "tenure" and (planned[:, 1] > 0).any():
        factors = _restart_factors(planned[:, 1].tolist(), config)
        T = T * np.array(factors)[:, None]

    kept = list(map(_RECORD, states))

    def records() -> tuple[Job, ...]:
        isolated = alone.tolist() if alone is not None else [None] * m
        return tuple(_record(*record, steps, since, own, f) for record, steps, since, own, f
                     in zip(kept, left.tolist(), elapsed.tolist(), isolated, factors))

    pairs = (problem_pairs(jobs, rows, types, lookups, config.pair_partners)
             if config.pairs else ())
    # The whole allocation in force, finished jobs included: FIFO hands a finished
    # job's type to the head of its queue (Gavel's FIFOPolicy keeps that state itself).
    table = JobTable(tuple(jobs), types, T, numbers, records,
                     configured=any(map(_OPTIONS, kept)))
    return Problem(cluster=dict(view.counts), jobs=table,
                   prices=prices, pairs=pairs, entities=entities,
                   previous={} if last is None else last.allocation,
                   policy_state={} if last is None else last.policy_state)


def _record(spec: JobSpec, throughputs: Mapping[str, float], options: tuple, steps: float,
            elapsed: float, isolated: float | None, factor: float) -> Job:
    """The policy's ``Job`` of a job: its throughputs and configurations (``options``) net
    of its restarts (``factor``, ``_restart_factors``)."""
    if factor == 1.0:
        configurations = tuple(o.configuration for o in options) if options else ()
    else:
        throughputs = {t: rate * factor for t, rate in throughputs.items()}
        configurations = tuple(replace(o.configuration,
                                       throughput=o.configuration.throughput * factor)
                               for o in options)
    return Job(spec.id, throughputs, spec.scale_factor, spec.priority_weight, steps, elapsed,
               spec.slo_s, spec.entity, isolated, configurations)


def _restart_factors(restart_s: list[float], config: CoreConfig) -> list[float]:
    """The share of a run left for training (``restarts.efficiency``) of each job, by its
    restart's seconds, under the tenure rule; computed once per distinct restart (a few
    kinds of job among up to 100,000)."""
    share = {r: efficiency(r, config.round_seconds, config.restart_share)
             for r in set(restart_s)}
    return [share[r] for r in restart_s]


def problem_pairs(jobs: Mapping[str, JobState], rows: Rows, types: tuple[str, ...],
                  lookups: Lookups, partners: int = 0) -> tuple[Pair, ...]:
    """The pairs of active jobs with the same scale factor that can share a worker
    somewhere, with the co-located throughputs the policy plans on: with a planning source,
    its estimate, replaced by the measured (oracle) ones on the types where the pair has
    already run (Gavel updates a pair's throughputs once it ran); else the source's as the
    online measurements of the pair and its members correct them (``jobs.pair_rates``).
    ``partners`` 0: every pair (Gavel's, n²/2 of them); else each job's ``partners`` best
    (``chosen_partners``). The last problem's records are kept where their rates are
    (``lookups.PairRecords``)."""
    records = lookups.pair_records
    keyed = [(job_id, job, job.spec.key) for job_id, job in jobs.items()]
    later = chosen_partners(keyed, rows, lookups, partners) if partners else None
    out = []
    planned = lookups.has_planned
    for i, (a, job_a, ka) in enumerate(keyed):
        for b, job_b, kb in (keyed[i + 1:] if later is None else later[i]):
            if ka[1] != kb[1]:
                continue
            if not planned:
                pt = pair_rates(job_a, job_b, lookups)
            else:
                pt = lookups.pair(ka, kb, planned=True)
                row = rows.index.get(pair_key(a, b))
                n = len(types)
                if row is not None and rows.ran[row, :n].any():
                    pt = np.where(rows.ran[row, :n, None], rows.rate[row, :n],
                                  pt if pt is not None else 0.0)
            if pt is None:
                continue
            pair = records.record(a, b, pt, types)
            if pair is not None:
                out.append(pair)
    records.done()
    return tuple(out)


def chosen_partners(keyed: list, rows: Rows, lookups: Lookups, partners: int) -> list[list]:
    """Of ``keyed`` (job id, state, key) in admission order, the pairs a space-sharing
    problem lists when every pair is too many (thesis §5.3.1: "in practice we only need to
    consider combinations that actually perform well"): each job's best partners among the
    kinds it gains with (``policies.packing.partner_pairs``, by the kinds' rates the policy
    plans on, ``Lookups.pair_gain``), ``partners`` of them, or fewer (one at least) when
    the jobs would make more than ``PARTNER_CHOICES`` choices, and every pair that already
    has a row (an allocation gave it time: its received time goes on counting). Per job,
    its partners admitted after it, in admission order."""
    partners = max(1, min(partners, PARTNER_CHOICES // max(1, len(keyed))))
    kinds = [key for _, _, key in keyed]
    distinct = list(dict.fromkeys(kinds))
    gains = {}
    for i, a in enumerate(distinct):
        for b in distinct[i:]:
            gain = lookups.pair_gain(a, b) if a[1] == b[1] else 0.0
            if gain > 1.0:
                gains[a, b] = gain
    chosen = set(partner_pairs(kinds, gains, partners))
    at = {job_id: i for i, (job_id, _, _) in enumerate(keyed)}
    for members in rows.members:
        if len(members) == 2 and members[0] in at and members[1] in at:
            i, j = at[members[0]], at[members[1]]
            chosen.add((min(i, j), max(i, j)))
    later: list[list] = [[] for _ in keyed]
    for i, j in sorted(chosen):
        later[i].append(keyed[j])
    return later


def advance_isolated_time(jobs: Mapping[str, JobState], rows: Rows, view: ClusterView,
                          types: tuple[str, ...]) -> None:
    """Themis t^isolated (thesis §5.4.2), kept as Gavel's FinishTimeFairness policy
    keeps it: at each re-solve a job's isolated time grows by the steps it made since
    the previous re-solve over its isolated throughput at that re-solve, with 1/n of
    the cluster for each of the n jobs active then. A job admitted since has made no
    steps (unallocated jobs do not run), so it starts at 0."""
    n_active = len(jobs)
    counts = np.array([view.count(t) for t in types], dtype=float)
    shares: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # by scale factor
    for job_id, job in jobs.items():
        left = float(rows.left[rows.index[job_id]])
        if job.left_at_resolve is not None and job.isolated_rate > 0:
            job.isolated_elapsed_s += (job.left_at_resolve - left) / job.isolated_rate
        job.left_at_resolve = left
        sf = job.spec.scale_factor
        share = shares.get(sf)
        if share is None:
            share = shares[sf] = isolated_share(counts, sf, n_active)
        usable, x = share
        job.isolated_rate = float(np.where(usable, job.T, 0.0) @ x)


def isolated_share(counts: np.ndarray, sf: int, n_active: int) -> tuple[np.ndarray, np.ndarray]:
    """X^isolated of a job of ``sf`` workers (thesis §5.4.2), whose throughput(m, X^isolated)
    is ``T @ x`` over the types it can use: 1/n of every type's workers (``counts``), as time
    on its scale_factor workers, capped at 1; a type the job cannot use (no throughput, or
    fewer workers than it needs) still takes its share, as in
    ``policies.columns.Columns.isolated_share``. Returns (usable types, x)."""
    return counts >= sf, equal_split(counts, [sf], n_active)[0]
