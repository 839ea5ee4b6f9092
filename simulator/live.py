"""A live scheduler's state, as its ``Status`` pictures it, for a replay in the simulator
(issue #18; ``simulator/twin.py`` replays it). The door from the wire: ``state_of`` reads
a ``StatusResponse`` and ``hypothetical`` a ``JobRequest`` into the records below.

A ``LiveJob`` holds only what a live job has beyond a trace job: what it has left, its own
steps/s per worker type (``OnlineThroughputs.row``: measured where measured, else the
scaled prior), whether it started and the type it runs on this round. The daemon's rules
(round, re-solve, refills, plan lead, start-ups) are one ``DaemonRules``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from gavelsched.core import PeriodState
from gavelsched.core.online import prior_scale
from gavelsched.core.rules import DaemonRules
from gavelsched.core.waves import machines
from gavelsched.daemon.jobs import FINAL
from policies import key_members, pair_key
from traces import ThroughputTable, checks
from traces.errors import TraceError
from traces.prices import PriceTrace
from traces.throughputs import table_from_dict, table_slice

NEW_ID = "new"
X_MAX = 1.0 + 1e-6      # an X is a fraction of time (the solver's tolerance above 1)


@dataclass(frozen=True)
class LiveJob:
    id: str
    job_type: str
    scale_factor: int
    steps_left: int
    steps_per_s: Mapping[str, float]
    priority_weight: float = 1.0
    startup_s: float | None = None     # its own start-up; None: its type's (DaemonRules)
    started_s: float | None = None     # scheduler clock; None: never started
    entity: str | None = None
    running_on: str | None = None      # the worker type it runs on this round; None: none
    run_began_s: float | None = None   # its run's first round's start (kept runs: earlier)
    run_up_s: float | None = None      # its run's process reached the scheduler; None: not yet
    run_refill: bool = False           # its run was placed on GPUs freed mid-round
    run_reported_s: float | None = None  # its run's last commit report: steps_left is as of
                                         # then (a kept run has stepped since); None: none
    run_lease_left: int | None = None  # the steps its run's lease allows past steps_left's
                                       # count; None: unknown
    restart_s: float = 0.0             # its type's start-up + save, as measured; 0: none yet
    # the steps/s the scheduler plans it on (its priors until a measurement moved them past
    # noise); None: ``steps_per_s``, what it is measured to make
    plan_steps_per_s: Mapping[str, float] | None = None
    shared_with: str | None = None     # the job its run shares its GPUs with; None: none
    slo_left_s: float | None = None    # to its SLO's deadline; None: no SLO, or it passed


@dataclass(frozen=True)
class LiveState:
    now_s: float
    epoch_unix: float
    policy: str
    rules: DaemonRules
    workers: Mapping[str, int]                 # alive GPUs in service per type
    gpus_per_server: Mapping[str, int]
    jobs: tuple[LiveJob, ...]
    round_ends_s: float | None = None          # the placed round's end; None: idle
    period: PeriodState | None = None          # the scheduler's allocation period; None: none
    policy_options: Mapping[str, Any] = field(default_factory=dict)  # its ``made_with``
    # the rates it plans co-located pairs on, on the alive types; None: its policy plans none
    pair_table: ThroughputTable | None = None
    # the co-located pairs it measured: (a, b) -> alive type -> what each makes there
    measured_pairs: Mapping[tuple[str, str], Mapping[str, tuple[float, float]]] = \
        field(default_factory=dict)
    prices: Mapping[str, float] = field(default_factory=dict)   # its policy's $/GPU-hour
    # its price trace's changes to come, on the scheduler's clock; None: no trace
    price_trace: PriceTrace | None = None

    @property
    def next_plan_s(self) -> float | None:
        """When the daemon plans the round after the placed one (a plan lead before its
        end); None: idle."""
        return None if self.round_ends_s is None else \
            self.round_ends_s - self.rules.plan_lead_s

    @property
    def round_seconds(self) -> float:
        return self.rules.round_seconds

    def startup_mean(self, job: LiveJob) -> float:
        """The mean start-up of ``job`` (its own, else its type's), from its round's start
        to its process's first InitJob."""
        return job.startup_s if job.startup_s is not None else \
            self.rules.startup_s.get(job.job_type, 0.0)

    def exit_of(self, job: LiveJob) -> float:
        """Seconds from ``job``'s last step to its run's exit, which a refill of its GPUs
        waits for (its type's mean, ``DaemonRules.exit_s``)."""
        return self.rules.exit_s.get(job.job_type, 0.0)

    @cached_property
    def wave_factor(self) -> float:
        """What this round's launches' start-ups are multiplied by: the processes its start
        launched (``run_began_s`` at it, not refills) over the cluster's machines
        (``DaemonRules.wave_factor``)."""
        if self.rules.startup_wave_slope <= 0 or self.round_ends_s is None:
            return 1.0
        begin = self.round_ends_s - self.rules.round_seconds
        return self.rules.wave_factor(sum(
            j.scale_factor for j in self.jobs if j.run_began_s is not None
            and j.run_began_s >= begin - 1e-6 and not j.run_refill))

    def startup_of(self, job: LiveJob) -> float:
        """The start-up a fresh run of ``job`` is charged (``DaemonRules.startup_charge``)."""
        return self.rules.startup_charge(self.startup_mean(job))


def state_of(reply) -> LiveState:
    """A ``StatusResponse`` (with every unfinished job) as a ``LiveState``: the alive GPUs
    not drained per type (servers as large as the largest alive one), and the rules the
    daemon publishes (``DaemonRules.of_status``, each job's ``startup_s`` its type's, or
    with a launch-wave slope its ``startup_alone_s``, over its workers' machines). A
    job with a run this round runs on its type, started up or not; one whose run is
    ending (its lease not extended into this round) does not, and has made its lease's
    steps."""
    checks.number(reply.round_seconds, "round_seconds", low=checks.MIN_ROUND_SECONDS,
                  high=checks.MAX_SECONDS)     # (as the scheduler's config admits it)
    checks.number(reply.now_s, "now_s", low=0.0, high=checks.MAX_CLOCK_S)
    workers: dict[str, int] = {}
    per: dict[str, int] = {}
    for w in reply.workers:
        if w.alive and not w.drained and w.gpus > 0:
            workers[w.type] = workers.get(w.type, 0) + w.gpus
            per[w.type] = max(per.get(w.type, 0), w.gpus)
    live = [j for j in reply.jobs if j.state not in FINAL and j.total_steps > j.steps_done]
    begin = reply.round_ends_s - reply.round_seconds
    jobs = tuple(
        LiveJob(j.id, j.job_type, j.scale_factor, _steps_left(j),
                dict(j.steps_per_s), _weight(j), None,
                j.started_s if j.started_s >= 0 else None, j.entity or None,
                *_run(j, workers, begin), restart_s=_seconds(j.restart_s),
                plan_steps_per_s=_rates(j.plan_steps_per_s), shared_with=j.shared_with or None,
                slo_left_s=_slo_left(j, reply.now_s))
        for j in live)
    alive = [w.address for w in reply.workers if w.alive and not w.drained and w.gpus > 0]
    rules = DaemonRules.of_status(reply, _type_means(live, "startup_s"),
                                  _type_means(live, "exit_s"), machines(alive))
    if rules.startup_wave_slope > 0:    # (each type's start-up alone, charged by its wave)
        rules = replace(rules, startup_s=_type_means(live, "startup_alone_s"))
    return LiveState(reply.now_s, reply.epoch_unix, reply.policy, rules, workers, per, jobs,
                     reply.round_ends_s if reply.round_ends_s > reply.now_s else None,
                     _period(reply.period_start_s, reply.period_stale, live,
                             reply.period_pairs, reply.period_policy_state),
                     _object(reply.policy_options, "policy_options"),
                     _pair_table(reply.pair_table, workers),
                     _measured_pairs(reply.measured_pairs, {j.id for j in live}, workers),
                     {t: checks.price(v, f"prices.{t}") for t, v in reply.prices.items()},
                     _price_trace(reply.price_changes))


def _price_trace(changes) -> PriceTrace | None:
    """The scheduler's ``price_changes`` as a ``PriceTrace`` (scheduler clock), None when
    empty; ``ValueError`` in one line for a time or price that is not a finite number >= 0,
    a time given twice, or times and prices that do not pair up."""
    if not changes:
        return None
    for worker_type, points in changes.items():
        if len(points.at_s) != len(points.price):
            raise ValueError(f"price_changes: {worker_type}: {len(points.at_s)} times for "
                             f"{len(points.price)} prices")
    return PriceTrace.from_mapping({t: list(zip(p.at_s, p.price)) for t, p in changes.items()},
                                   "price_changes")


def _weight(job) -> float:
    """A job's priority weight (0: 1), in the range the scheduler admits (a subnormal one
    made the replay's solve fail); ``BadValue`` in one line."""
    return checks.number(job.priority_weight or 1.0, f"job {job.id}: priority_weight",
                         low=checks.PRIORITY_WEIGHT_MIN, high=checks.PRIORITY_WEIGHT_MAX)


def _object(text: str, field: str) -> dict[str, Any]:
    """A Status field that holds a JSON object (empty: none): the scheduler's policy
    options (``policy_options``), its policy's carried state (``period_policy_state``);
    ``ValueError`` in one line, naming ``field``, for anything else."""
    got = _json(text, field) if text else {}
    if not isinstance(got, dict):
        raise ValueError(f"{field}: not a JSON object: {text[:80]!r}")
    return got


def _pair_table(text: str, workers: Mapping[str, int]) -> ThroughputTable | None:
    """The scheduler's ``pair_table`` (a native JSON table; empty: none) on the alive
    ``workers``' types; ``ValueError`` in one line for anything else."""
    if not text:
        return None
    try:
        table = table_from_dict(_json(text, "pair_table"), "pair_table")
    except TraceError as err:
        raise ValueError(str(err).splitlines()[0]) from None
    return ThroughputTable({t: table.solo.get(t, {}) for t in workers},
                           {t: table.pairs[t] for t in workers if t in table.pairs})


def _measured_pairs(pairs, live: set[str], workers: Mapping[str, int]
                    ) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
    """The scheduler's ``measured_pairs`` of live jobs on the alive ``workers``' types;
    ``ValueError`` in one line for a rate that is not finite and > 0, a pair of one job, a
    type with one member's rate, or a pair twice."""
    out: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    seen: set[frozenset[str]] = set()
    for p in pairs:
        key = frozenset((p.a, p.b))
        if p.a == p.b or key in seen or p.a_steps_per_s.keys() != p.b_steps_per_s.keys():
            raise ValueError(f"measured_pairs: pair {p.a!r}, {p.b!r}: one job, twice, or "
                             f"a type with one member's rate")
        seen.add(key)
        rates = {t: (float(p.a_steps_per_s[t]), float(p.b_steps_per_s[t]))
                 for t in p.a_steps_per_s}
        if not all(0.0 < v < math.inf for pair in rates.values() for v in pair):
            raise ValueError(f"measured_pairs: pair {p.a!r}, {p.b!r}: a rate that is not "
                             f"finite and > 0")
        rates = {t: r for t, r in rates.items() if t in workers}
        if rates and {p.a, p.b} <= live:
            out[(p.a, p.b)] = rates
    return out


def _json(text: str, field: str) -> Any:
    """``text`` parsed as JSON; ``ValueError`` naming ``field`` in one line (too deep a
    nesting too)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{field}: not JSON: {str(err).splitlines()[0][:200]}") from None


def _period(start_s: float, stale: bool, live, pairs=(),
            policy_state: str = "") -> PeriodState | None:
    """The allocation period a forecast picture carries (``period_*``; a co-located pair's
    row, ``period_pairs``, when both its jobs are live; the policy's carried state), or
    None; ``ValueError`` in one line for a number that is not finite, an X outside [0, 1],
    a received time below 0, a pair twice, or a policy state that is not a JSON object."""
    ids = {j.id for j in live}
    rows = [(j.id, j.period_x, j.period_received_s, j.period_deficit_s)
            for j in live if j.period_x]
    rows += [(pair_key(p.a, p.b), p.x, p.received_s, p.deficit_s) for p in pairs
             if p.x and p.a != p.b and {p.a, p.b} <= ids]
    if not rows:
        return None
    if len({frozenset(key_members(row[0])) for row in rows}) != len(rows):
        raise ValueError("period: a job or pair twice")
    types = tuple(sorted({t for row in rows for t in row[1]}))
    x, received, deficit = (np.array([[row[k].get(t, 0.0) for t in types] for row in rows])
                            for k in (1, 2, 3))
    if not (np.isfinite(x).all() and np.isfinite(received).all()
            and np.isfinite(deficit).all()) or not ((x >= 0) & (x <= X_MAX)).all() or (
            received < 0).any():
        raise ValueError("period: an X, received time or deficit that is not a finite "
                         "number, an X outside [0, 1] or a received time below 0")
    return PeriodState(start_s, types, tuple(row[0] for row in rows), x, received, deficit,
                       stale, isolated=_isolated(live, len(rows)),
                       policy_state=_object(policy_state, "period_policy_state"))


def _isolated(live, rows: int) -> np.ndarray | None:
    """``PeriodState.isolated`` of the period's rows (its jobs', then its pairs' at 0, 0,
    -1) from ``period_isolated``, when its jobs carry it (finish-time fairness); None when
    none does; ``ValueError`` in one line for one that is not 3 finite numbers, the first
    two >= 0 and the last >= -1."""
    given = [list(j.period_isolated) for j in live if j.period_x]
    if not any(given):
        return None
    out = np.tile([0.0, 0.0, -1.0], (rows, 1))
    for i, values in enumerate(given):
        if not (len(values) == 3 and all(math.isfinite(v) for v in values)
                and min(values[:2]) >= 0 and values[2] >= -1):
            raise ValueError(f"period_isolated: 3 finite numbers expected (time and steps/s "
                             f">= 0, steps left >= -1), got {values[:4]}")
        out[i] = values
    return out


def _seconds(value: float) -> float:
    """A measured duration of the picture's: > 0 and at most ``MAX_SECONDS`` (what the
    scheduler's config admits; 1e308 overflowed the restart rule's sums), else 0: none."""
    return value if 0.0 < value <= checks.MAX_SECONDS else 0.0


def _slo_left(job, now_s: float) -> float | None:
    """Seconds from the picture's time to a job's SLO deadline (its arrival plus its
    ``slo_s``, thesis §6.4.3), what a replay that starts then plans it under; None: no SLO
    (or not a duration the scheduler admits), or a deadline already past (the SLO policy
    drops a late SLO in best effort and Gavel's mode, as a replay without it does)."""
    slo = _seconds(job.slo_s)
    left = job.arrival_s + slo - now_s
    return left if slo and math.isfinite(left) and left > 0 else None


def _type_means(live, name: str) -> dict[str, float]:
    """Each job type's mean ``name`` (``startup_s``, ``exit_s``: the Status carries each
    job's type mean; ``_seconds``, else none); a type none of whose runs has been
    measured yet gets the mean over the types that have (a fresh cluster's first rounds:
    charged nothing, its first replays came out early by a round or more)."""
    known = {j.job_type: getattr(j, name) for j in live if _seconds(getattr(j, name))}
    fallback = sum(known.values()) / len(known) if known else 0.0
    return {j.job_type: known.get(j.job_type, fallback) for j in live}


def _run(job, workers, begin: float) -> tuple:
    """``running_on``, ``run_began_s``, ``run_up_s``, ``run_refill``, ``run_reported_s``
    and ``run_lease_left`` of a Status job: its run this round; for a run that is ending, the
    placement that waits for it (a fresh run from the round's start, ``run_next_type``),
    or none."""
    none = (None, None, None, False, None, None)
    if job.run_ending:
        if job.run_next_type in workers:
            return job.run_next_type, begin, None, False, None, None
        return none
    if job.worker_type not in workers:
        return none
    return (job.worker_type, _time(job.run_began_s), _time(job.run_up_s), job.run_refill,
            job.run_reported_s if job.run_reported_s > 0 else None,   # (unset: 0)
            max(0, job.run_lease_steps - job.steps_done) if job.run_lease_steps > 0 else None)


def _steps_left(job) -> int:
    """What a job still needs: past its durable count, and past its lease's end when its
    run is ending (saving the steps it made last round, not reported yet); at least one.
    Its total steps as the scheduler admits them (``checks.MAX_STEPS``), else ``BadValue``
    in one line."""
    total = checks.integer(job.total_steps, f"job {job.id}: total_steps", low=1,
                           high=checks.MAX_STEPS)
    return max(1, total - max(0, job.steps_done, job.run_lease_steps if job.run_ending else 0))


def _rates(row) -> dict[str, float] | None:
    """A wire row of steps/s, or None when empty or not all finite and >= 0."""
    out = dict(row)
    return out if out and all(0.0 <= v < math.inf for v in out.values()) else None


def _time(value: float) -> float | None:
    """A wire time (< 0: none)."""
    return None if value < 0 else value


def pairing(state: LiveState, job: LiveJob, prior=None) -> LiveState:
    """``state`` whose pair table (a space-sharing scheduler's, ``pair_table``) pairs
    ``job``'s kind too: the rows of ``prior`` (the shipped catalog by default) for it, alone
    and with the kinds there, where the scheduler's lacks them (``predict``'s new job, of a
    kind no live job has). The scheduler's rows stay as they are."""
    have = state.pair_table
    if have is None or (job.job_type, job.scale_factor) in have.job_keys:
        return state
    if prior is None:
        from traces.catalog import default_table
        prior = default_table()
    more = table_slice(prior, {*have.job_keys, (job.job_type, job.scale_factor)},
                       list(state.workers))
    merged = ThroughputTable(
        {t: {**more.solo.get(t, {}), **have.solo.get(t, {})} for t in state.workers},
        {t: {**more.pairs.get(t, {}), **have.pairs.get(t, {})} for t in state.workers})
    return replace(state, pair_table=merged)


def hypothetical(request, state: LiveState, prior=None) -> LiveJob:
    """The job of a ``JobRequest`` (``predict``): its steps/s the prior table's (the shipped
    catalog by default) on the state's worker types, scaled by the live jobs' geometric-mean
    ratio of their rates to that table's (``online.prior_scale``, as ``OnlineThroughputs``
    scales a job's unmeasured types, thesis §5.3.3): a cluster whose jobs run at a tenth of
    the catalog's rates (an emulated one, say) predicts the new job at a tenth too."""
    if prior is None:
        from traces.catalog import default_table
        prior = default_table()
    scale = prior_scale((rate, prior.get(t, j.job_type, j.scale_factor))
                        for j in state.jobs for t, rate in j.steps_per_s.items())
    sf = request.scale_factor or 1
    rates = {t: scale * float(prior.get(t, request.job_type, sf)) for t in state.workers}
    return LiveJob(NEW_ID, request.job_type, sf, request.total_steps, rates,
                   request.priority_weight or 1.0, None, None, request.entity or None,
                   slo_left_s=_seconds(request.slo_s or 0.0) or None)
