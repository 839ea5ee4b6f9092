"""The daemon's twin: a live scheduler's state replayed in the simulator under the daemon's
own rules (issues #18, #29: the scheduler's own ETAs, computed in ``simulator/forecast.py``;
``predict``; the benchmarks that compare a real run with its replay).

``DaemonRules`` (``gavelsched/core/rules.py``, where the daemon builds it too) is the one
statement of those rules: round length, re-solve rule and interval, refills, plan lead and
start-up charging. It yields the core's config (``DaemonRules.core_config``) and the
simulator's (``sim_config``): rounds last exactly ``round_seconds`` (wall-clock rounds), the
next round is planned ``plan_lead_s`` before the last ends (a kept run goes on into its
next lease from then: ``SimConfig.kept_runs_ahead``), and a run on new workers first pays
its job type's mean start-up (``startup_charge``: past the lease floor, the share of
its GPUs' time it costs).

The replay (``replay``): the round the daemon has placed is kept (``this_round``: each run
steps on its type in its window, ``run_window``) and the simulator starts at its end. Each
unfinished job of a ``LiveState`` (``simulator/live.py``) becomes a trace job that arrives
then with the steps it has left, its own job type and its own steps/s
(``TraceJob.throughputs``); the cluster is the alive GPUs in service. The jobs that run
keep their types without a start-up in the first round (``simulate(running=...)``), and
the replay goes on with the scheduler's allocation period when the state has it
(``resumed``, thesis §5.5). At most ``HORIZON_ROUNDS`` rounds are simulated; a job past
them is ``extrapolated``. ``simulator/whatif.py`` replays a state with a hypothetical
job (``predict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gavelsched.core import CoreConfig, PeriodState, SchedulerCore
from gavelsched.core.driver import spec_of
from gavelsched.core.rules import MIN_LEASE_FRACTION, DaemonRules
from gavelsched.mechanism import ClusterView, Demand, PlannerConfig, plan_round
from policies import Policy, get_policy, is_pair_key, key_members, pair_key
from traces import ThroughputTable, TraceJob
from traces.prices import PriceTrace

from .config import SimConfig
from .engine import simulate
from .live import LiveJob, LiveState

__all__ = ["HORIZON_ROUNDS", "DaemonRules", "Eta", "Replay", "core_of", "daemon_policy",
           "extrapolated", "replay", "replay_inputs", "run_window", "sim_config",
           "this_round"]


def sim_config(rules: DaemonRules, *, arrivals: bool = False, **more) -> SimConfig:
    """The simulator's config under the daemon's rules: fixed rounds, the plan lead, each
    job type's start-up charged to a run on new workers (capped by the lease floor), a
    refill of a finished job's GPUs started up once its process has exited (alone: a
    round's launches by their wave, ``core/waves.py``), and received
    time credited by the round, as the daemon credits it;
    ``arrivals``: the jobs arrive as they did on the daemon (a whole run replayed), so an
    idle cluster waits the daemon's arrival grace (an ETA's jobs are all there already);
    ``more`` on top (``priors``, ...)."""
    return SimConfig(**{"round_ends_at_last_finish": False, "kept_runs_ahead": True,
                        "received_whole_round": True,
                        "preemption_overhead_s": rules.startup_charges(),
                        "plan_lead_s": rules.plan_lead_s, "exit_s": rules.exit_s,
                        "wave_slope": rules.startup_wave_slope, "machines": rules.machines,
                        "arrival_grace_s": rules.arrival_grace_s if arrivals else 0.0, **more})


@dataclass(frozen=True)
class Eta:
    """Seconds from now (the state's ``now_s``); ``start_s`` None: it has started already
    (or never starts); ``finish_s`` None: the replay never finishes it (``refused``: why
    the policy refused it, when it did)."""
    start_s: float | None
    finish_s: float | None
    refused: str | None = None

    def on_clock(self, now_s: float) -> dict[str, float | None]:
        """On the scheduler's clock (``status --eta --json``): ``start_s``, ``finish_s``
        (None: none, or started) and ``finish_in_s`` (seconds from ``now_s``)."""
        def at(v):
            return None if v is None else now_s + v
        return {"start_s": at(self.start_s), "finish_s": at(self.finish_s),
                "finish_in_s": self.finish_s}


@dataclass(frozen=True)
class Replay:
    """The simulator's inputs for a live state: job ``i`` of ``trace`` is live job
    ``ids[i]``; ``table`` names the cluster's types (every job carries its own rates) and
    holds the scheduler's pair rates, if any."""
    trace: list[TraceJob]
    table: ThroughputTable
    cluster: dict[str, int]
    gpus_per_server: dict[str, int]
    ids: list[str] = field(default_factory=list)
    running: dict[int, str] = field(default_factory=dict)   # trace index -> its type now
    # co-located pairs the scheduler measured: "i+j" (trace indices, i < j) -> type -> rates
    pairs: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)


def _runnable(job: LiveJob, state: LiveState) -> bool:
    return any(r > 0 and state.workers.get(t, 0) >= job.scale_factor
               for t, r in job.steps_per_s.items())


def this_round(state: LiveState) -> tuple[LiveState, float, dict[str, Eta], dict[str, float]]:
    """The round the daemon has placed already, kept (thesis §5.5: a round's placement
    stands until its end): each job with a run now makes its steps on its type in its
    run's window (``run_window``), from its durable count as of its last report (a run kept
    across rounds whose lease spans them reports only at its lease's end: it has stepped
    since), or as of its start when it has not reported yet (a refill kept into the next
    round: the forecast at that round's start had it a round late). A run stops at its
    lease's end (``run_lease_left``); if that comes before the round's end, a kept run goes
    on from there (``SimConfig.kept_runs_ahead``). Returns the state at the round's end
    (those jobs with the steps they still need, still ``running_on`` their type: the
    replay keeps them there without a start-up, ``simulate(running=...)``), the seconds to
    it, the jobs that finish within it, and how far ahead of the round's end each run's
    lease ends (at most the plan lead). A job that finishes after the next round's plan
    and that the restart rule keeps (``_pinned_at_plan``) also goes on with its last step:
    that plan places it again, as the daemon's does, and it ends at the round's start
    (``replay`` passes it as ``ending``).
    Re-planning the placed round from now made running jobs late and
    queued ones early (BENCHMARKS.md, "ETA error against real finishes"). The simulator
    cannot start from a placed round (its first round is planned afresh), so this stays a
    model of its own."""
    if state.round_ends_s is None:
        return state, 0.0, {}, {}
    ends = state.round_ends_s
    plan = state.next_plan_s
    jobs, done, ahead = [], {}, {}
    for job in state.jobs:
        rate = job.steps_per_s.get(job.running_on or "", 0.0)
        if rate <= 0:
            jobs.append(job)
            continue
        start, end = run_window(state, job)
        steps_left = job.steps_left
        reported = job.run_reported_s
        if reported is None and job.run_up_s is not None and job.run_up_s < start:
            reported = job.run_up_s     # no report yet: its count is the checkpoint it began at
        if reported is not None:    # its durable count is as of its last report
            steps_left -= rate * max(0.0, start - reported)     # (kept: it stepped since)
            start = max(start, reported)
        finish = start + max(0.0, steps_left) / rate
        if finish <= end:
            done[job.id] = Eta(None, max(0.0, finish - state.now_s))
            if finish > plan and _pinned_at_plan(state, job, finish - plan):
                # still running at the next round's plan, which keeps it on its GPUs; its
                # last step is credited at that round's start, which re-solves and refills
                # them (``simulate(ending=...)``; ``place_freed``'s order, not the plan's:
                # identical jobs swapped places)
                jobs.append(replace(job, steps_left=1, run_reported_s=None,
                                    run_lease_left=None))
            continue
        made = int(rate * max(0.0, end - start))
        if job.run_lease_left is not None:
            lease_left = job.run_lease_left - (job.steps_left - steps_left)
            lease_done = start + max(0.0, lease_left) / rate
            if lease_done <= end:
                made = lease_left
                ahead[job.id] = min(state.rules.plan_lead_s, end - lease_done)
        jobs.append(replace(job, steps_left=max(1, int(steps_left - made)),
                            run_reported_s=None, run_lease_left=None))
    return replace(state, now_s=ends, jobs=tuple(jobs)), ends - state.now_s, done, ahead


def _pinned_at_plan(state: LiveState, job: LiveJob, left_s: float) -> bool:
    """Whether the restart rule keeps ``job``'s run on its GPUs at the next plan, with
    ``left_s`` of it left then: within its finish restarts (``core/restarts.py``)."""
    return (state.rules.restart_rule == "tenure" and job.restart_s > 0
            and left_s <= CoreConfig.finish_restarts * job.restart_s)


def run_window(state: LiveState, job: LiveJob) -> tuple[float, float]:
    """When the run ``job`` has this round makes steps, on the scheduler's clock (thesis
    §5.6: leases are round-aligned, a kept job's lease is extended): a run kept from an
    earlier round (or not known) from the round's start; a fresh one from its process's
    first InitJob (or, still starting up, its job type's mean start-up, by its launch
    wave, after its round's start, and not before now). A fresh run ends with the round,
    but gets at least the lease floor after its start-up (``MIN_LEASE_FRACTION`` of a
    round; a refill gets none)."""
    R, ends = state.round_seconds, state.round_ends_s
    begin = ends - R
    began = job.run_began_s
    if began is None or began < begin - 1e-6:     # (None: a picture without it)
        return begin, ends
    if job.run_up_s is not None:
        start = job.run_up_s
    else:
        start = max(state.now_s, began + state.startup_mean(job)
                    * (1.0 if job.run_refill else state.wave_factor))
    floor = 0.0 if job.run_refill else MIN_LEASE_FRACTION * R
    return start, max(ends, start + floor)


def daemon_policy(state: LiveState) -> Policy:
    """The scheduler's policy as it made it (``Policy.made_with``), not as a simulation
    of a trace makes it (``make_policy``: Gavel's bisection for the makespan policies, for
    one): a forecast replays what the daemon will do."""
    return get_policy(state.policy, **state.policy_options)


def replay_inputs(state: LiveState, extra: Sequence[LiveJob] = ()) -> Replay:
    """The simulator's inputs for the state (and ``extra`` jobs): each job under its own
    job type with its own steps/s on the alive types (and the steps/s the scheduler plans
    it on, when they differ: ``TraceJob.planned``) and, when it has one, its own
    start-up (capped) and restart cost (start-up plus save, as the daemon's restart rule
    weighs it); jobs that no alive type can run are left out (they never finish). The
    table names the types and, when the scheduler pairs jobs, holds the rates it plans
    pairs on (``LiveState.pair_table``): the replay pairs them as it does."""
    trace, ids, running = [], [], {}
    for job in (*state.jobs, *extra):
        if not _runnable(job, state):
            continue
        rates = {t: float(r) for t, r in job.steps_per_s.items() if t in state.workers and r > 0}
        planned = None
        if job.plan_steps_per_s is not None:
            planned = {t: float(job.plan_steps_per_s.get(t, 0.0)) for t in rates}
            planned = None if planned == rates else planned
        startup = None if job.startup_s is None else state.startup_of(job)
        trace.append(TraceJob(job.job_type, job.scale_factor, job.steps_left, 0.0,
                              priority_weight=job.priority_weight, throughputs=rates,
                              planned=planned, startup_s=startup,
                              restart_s=job.restart_s or None, slo_s=job.slo_left_s))
        if job.running_on in rates:
            running[len(ids)] = job.running_on
        ids.append(job.id)
    table = state.pair_table or ThroughputTable({t: {} for t in state.workers})
    return Replay(trace, table, dict(state.workers), dict(state.gpus_per_server), ids, running,
                  _pairs(state, ids))


def _pairs(state: LiveState, ids: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """The scheduler's measured pairs (``LiveState.measured_pairs``) of replayed jobs,
    keyed as the replay's core keys them (the lower trace index first)."""
    index = {job_id: i for i, job_id in enumerate(ids)}
    out = {}
    for (a, b), rates in state.measured_pairs.items():
        if a in index and b in index:
            flip = index[a] > index[b]
            key = pair_key(*map(str, sorted((index[a], index[b]))))
            out[key] = {t: (r[1], r[0]) if flip else r for t, r in rates.items()}
    return out


# A replay simulates at most this many rounds; a job not finished by then is extrapolated at
# the rate it made over them (a job of years would take as many rounds to replay).
HORIZON_ROUNDS = 2000


def replay(state: LiveState, extra: Sequence[LiveJob] = ()) -> dict[str, Eta]:
    """Each job's predicted start and finish, in seconds from now: the placed round kept
    (``this_round``) with its refills (``refills``), then the simulator from its end,
    under the state's ``DaemonRules``, for at most ``HORIZON_ROUNDS`` rounds
    (``extrapolated`` beyond)."""
    out = {j.id: Eta(None, None) for j in (*state.jobs, *extra)}
    later, offset, done, ahead = this_round(state)
    later, refilled = refills(state, later, done, extra)
    out.update(done)
    out.update(refilled)
    placed = _placed_starts(state)
    out.update({job_id: replace(out[job_id], start_s=at) for job_id, at in placed.items()})
    inputs = replay_inputs(later, extra)
    if not inputs.trace:
        return out
    policy = daemon_policy(state)
    rules = state.rules
    config = rules.core_config(policy, inputs.table, list(inputs.cluster),
                               rows=[job.throughputs for job in inputs.trace])
    result = simulate(inputs.trace, inputs.table, inputs.cluster, policy, core_config=config,
                      prices=state.prices, price_trace=_from_replay_start(state, offset),
                      sim=sim_config(rules, horizon_s=HORIZON_ROUNDS * rules.round_seconds),
                      gpus_per_server=inputs.gpus_per_server, running=inputs.running,
                      ahead={i: ahead[j] for i, j in enumerate(inputs.ids) if j in ahead},
                      ending={i: 1 for i, j in enumerate(inputs.ids) if j in done},
                      resume=resumed(state, later, inputs, offset,
                                     _ends_before_plan(state, done)),
                      measured_pairs=inputs.pairs)
    started = {j.id: j.started_s is not None for j in (*state.jobs, *extra)}
    for record in result.jobs:
        i = int(record.id)
        job_id = inputs.ids[i]
        if job_id in done:          # (kept by the next plan: it ends in the placed round)
            continue
        start = None if started[job_id] or record.started_s is None else offset + record.started_s
        if job_id in refilled:      # (it starts in the placed round)
            start = refilled[job_id].start_s
        start = placed.get(job_id, start)
        finish = record.completion_s
        if finish is None and record.id in result.steps_left:
            finish = extrapolated(inputs.trace[i].total_steps, result.steps_left[record.id],
                                  result.end_s)
        out[job_id] = Eta(start, None if finish is None else offset + finish,
                          result.refused.get(record.id))
    return out


def _from_replay_start(state: LiveState, offset: float) -> PriceTrace | None:
    """The scheduler's price changes to come on the replay's clock, which starts ``offset``
    seconds from now (a change before then is in force from its start)."""
    if state.price_trace is None:
        return None
    start = state.now_s + offset
    return PriceTrace({t: tuple((at - start, price) for at, price in points)
                       for t, points in state.price_trace.changes.items()})


def _placed_starts(state: LiveState) -> dict[str, float]:
    """Seconds from now to when each job that has never started steps in the run the
    placed round gave it (``run_window``: a start-up still under way). The replay keeps
    such a run from its first round, so it started it there: a round late."""
    if state.round_ends_s is None:
        return {}
    return {job.id: max(0.0, run_window(state, job)[0] - state.now_s) for job in state.jobs
            if job.started_s is None and job.steps_per_s.get(job.running_on or "", 0.0) > 0}


def refills(state: LiveState, later: LiveState, done: Mapping[str, Eta],
            extra: Sequence[LiveJob] = ()) -> tuple[LiveState, dict[str, Eta]]:
    """The placed round's refills (thesis §5.5; ``CoreConfig.refill_freed``): the GPUs of a
    job that ends within it (or idle now), before the next round's plan and
    ``refill_until`` of it, go to a waiting job for the rest of the round, and that run goes
    on into the replay, starting up once the finished job's process has exited
    (``DaemonRules.exit_s``). The job is the one the scheduler's refill takes
    (``_refill_orders``).
    Without this, a job that the daemon refills was predicted to wait for the rounds ahead:
    the forecasts were late. Returns ``later`` with the refilled runs going on, and each
    refilled job's start (if it had not started) and finish (if within the round)."""
    rules = state.rules
    if not rules.refill_freed or state.round_ends_s is None:
        return later, {}
    ends, R = state.round_ends_s, state.round_seconds
    cutoff = min(ends - R + rules.refill_until * R, state.next_plan_s)
    jobs = {j.id: j for j in state.jobs}
    held: dict[str, int] = {}
    for job in state.jobs:
        if job.running_on is not None:
            held[job.running_on] = held.get(job.running_on, 0) + job.scale_factor
    idle = [(state.now_s, t, n - held.get(t, 0)) for t, n in state.workers.items()
            if n > held.get(t, 0)]        # (a job that ended before the picture)
    # (when, type, GPUs, the seconds a launch on them waits for their last process to exit)
    freed = sorted([*((at, t, n, 0.0) for at, t, n in idle),
                    *((state.now_s + eta.finish_s, jobs[i].running_on, jobs[i].scale_factor,
                       state.exit_of(jobs[i]))
                      for i, eta in done.items() if eta.finish_s is not None)])
    freed = [f for f in freed if f[0] < cutoff]
    if not freed:
        return later, {}
    queues = _refill_orders(state, later, extra, {f[1] for f in freed})
    free: dict[str, int] = {}
    placed: dict[str, tuple[str, float, float]] = {}
    for at, worker_type, gpus, wait in freed:
        free[worker_type] = free.get(worker_type, 0) + gpus
        for job_id in list(queues.get(worker_type, ())):
            job = jobs.get(job_id)
            if job is None or job_id in placed or job.scale_factor > free[worker_type]:
                continue
            queues[worker_type].remove(job_id)
            if ends - at > state.startup_mean(job):    # the daemon's ``worth_launching``
                free[worker_type] -= job.scale_factor
                placed[job_id] = (worker_type, at, wait)
    if not placed:
        return later, {}
    # each refill's run starts up once its GPUs' last process has exited
    ran = replace(later, now_s=state.now_s, round_ends_s=ends, jobs=tuple(
        replace(j, running_on=placed[j.id][0], run_began_s=placed[j.id][1], run_up_s=None,
                run_refill=True, startup_s=state.startup_mean(j) + placed[j.id][2])
        for j in later.jobs if j.id in placed))
    after, _, finished, _ = this_round(ran)
    kept = {j.id: replace(j, startup_s=jobs[j.id].startup_s) for j in after.jobs}
    etas = {}
    for job in ran.jobs:
        start = None if job.started_s is not None else \
            max(0.0, run_window(ran, job)[0] - state.now_s)
        etas[job.id] = Eta(start, finished[job.id].finish_s if job.id in finished else None)
    return replace(later, jobs=tuple(kept.get(j.id, j) for j in later.jobs
                                     if j.id not in finished)), etas


def _refill_orders(state: LiveState, later: LiveState, extra: Sequence[LiveJob],
                   types: set[str]) -> dict[str, list[str]]:
    """Per worker type of ``types``, the jobs not running in the placed round, in the order
    the scheduler's refill takes them for GPUs of that type freed within it
    (``SchedulerCore.place_freed``): the round's priorities on the allocation in force (no
    re-solve, no holds), among the jobs that allocation covers, with the freed type all the
    planner sees. A whole round's plan put the job of highest priority on a faster type,
    and refilled a freed P100 with the next one, where the scheduler gave it to the first
    (issue #29)."""
    inputs = replay_inputs(later, extra)
    if not inputs.trace:
        return {}
    period = resumed(state, later, inputs, later.now_s - state.now_s)
    if period is None:      # (a picture without the scheduler's period: the replay's own)
        core = core_of(state, inputs)
        state.rules.driver(core).plan(0.0)
        period = core.period_state()
    alone = [i for i, key in enumerate(period.keys) if not is_pair_key(key)]   # (jobs' rows)
    period = replace(period, keys=tuple(period.keys[i] for i in alone),
                     allocation=period.allocation[alone], received=period.received[alone],
                     deficit=period.deficit[alone], rates=None, isolated=None)
    rows = [int(key) for key in period.keys]
    jobs = [inputs.trace[i] for i in rows]
    waiting = np.array([i not in inputs.running for i in rows], dtype=bool)
    runnable = np.array([[job.throughputs.get(t, 0.0) > 0 for t in period.types]
                         for job in jobs], dtype=bool).reshape(len(rows), -1)
    sizes = np.array([job.scale_factor for job in jobs], dtype=int)
    demand = Demand(keys=period.keys, members=tuple((key,) for key in period.keys),
                    types=period.types, scale_factor=sizes, allocation=period.allocation,
                    received=period.received, deficit=period.deficit,
                    runnable=runnable & waiting[:, None], allocated=np.ones(len(rows), bool))
    backfill = state.rules.core_config(daemon_policy(state), inputs.table,
                                       list(inputs.cluster),
                                       rows=[job.throughputs for job in inputs.trace]).backfill
    orders = {}
    for worker_type in sorted(types & set(period.types)):
        everyone = ClusterView.build({worker_type: max(1, int(sizes.sum()))})
        plan = plan_round(demand, everyone, PlannerConfig(
            type_order=(worker_type,), backfill=backfill, hold_unallocated=False))
        orders[worker_type] = [inputs.ids[int(key)] for key in plan.task_keys]
    return orders


def _ends_before_plan(state: LiveState, done: Mapping[str, Eta]) -> bool:
    """Whether a job of the scheduler's allocation period ends in the placed round before
    the next round's plan: its end makes the allocation stale, and the daemon re-solves at
    that plan (the replay went on with the old allocation for a round: identical jobs
    then swapped places, issue #29)."""
    if state.period is None or state.round_ends_s is None:
        return False
    covered = set(state.period.keys)
    return any(job_id in covered and eta.finish_s is not None
               and state.now_s + eta.finish_s <= state.next_plan_s
               for job_id, eta in done.items())


def resumed(state: LiveState, later: LiveState, inputs: Replay, offset: float,
            stale: bool = False) -> PeriodState | None:
    """The scheduler's allocation period (``state.period``) for the replay, which starts
    ``offset`` s from now (at the placed round's end): keyed by trace index (its jobs in
    trace order, then its co-located pairs'; so is the policy's state, ``renamed_state``),
    on the replay's clock, with the time the placed round gives its runs on their types
    (thesis §5.5: received time counts the round a task held its workers; a pair's run,
    its pair's row) and the runs going on (a pair's under its key), ``later``'s (at the
    round's end: refills included, which the daemon credits the rest of the round);
    ``stale``: its allocation is stale by the replay's start, though the picture's was not."""
    period = state.period
    if period is None:
        return None
    index = {job_id: i for i, job_id in enumerate(inputs.ids)}
    found = sorted(((tuple(sorted(index[m] for m in key_members(key))), r)
                    for r, key in enumerate(period.keys)
                    if all(m in index for m in key_members(key))),
                   key=lambda entry: (len(entry[0]), entry[0]))    # (jobs, then pairs)
    if not found:
        return None
    keys = tuple(pair_key(*map(str, at)) if len(at) == 2 else str(at[0]) for at, _ in found)
    rows = [r for _, r in found]
    received = period.received[rows].copy()
    jobs = {j.id: j for j in later.jobs}
    if state.round_ends_s is not None and state.now_s < state.next_plan_s:
        # (only before the next round's plan: after it the period has counted this one,
        # and a picture in the plan lead counted it twice, so that its runs looked served)
        begin = state.round_ends_s - state.round_seconds
        row_of = {key: k for k, key in enumerate(keys)}
        credited = set()
        for job_id, i in index.items():
            job = jobs.get(job_id)
            if job is None or job.running_on not in period.types:
                continue
            # (a pair's run: its pair's row, if the period has one; else its own)
            k = row_of.get(_task_key(i, job, index), row_of.get(str(i)))
            if k is None or k in credited:
                continue
            credited.add(k)
            # the round, as the daemon credits a task of its plan (``Runs.held_s``): a
            # run launched milliseconds after the round's start had a round; a refill,
            # from its launch
            since = max(begin, job.run_began_s) if job.run_refill else begin
            received[k, period.types.index(job.running_on)] += state.round_ends_s - since
    return PeriodState(period.start_s - (state.now_s + offset), period.types, keys,
                       period.allocation[rows].copy(), received,
                       period.deficit[rows].copy(), period.stale or stale,
                       _runs(state, jobs, inputs, index), None,
                       None if period.isolated is None else period.isolated[rows].copy(),
                       daemon_policy(state).renamed_state(
                           period.policy_state, {j: str(i) for j, i in index.items()}))


def _runs(state: LiveState, jobs: Mapping[str, LiveJob], inputs: Replay,
          index: Mapping[str, int]) -> dict[str, tuple[str, float]]:
    """The runs going on at the placed round's end, for the restart rule
    (``core/restarts.py``): per job kept on its type (``jobs`` by id, as at that end;
    ``index``: trace index by id), the seconds its run will have held its workers by then
    (from its first round's start, or its refill's launch)."""
    if state.round_ends_s is None:
        return {}
    runs = {}
    for i, column in inputs.running.items():
        job = jobs[inputs.ids[i]]
        began = job.run_began_s
        held = state.round_seconds if began is None else state.round_ends_s - began
        runs[_task_key(i, job, index)] = (column, max(0.0, held))
    return runs


def _task_key(i: int, job: LiveJob, index: Mapping[str, int]) -> str:
    """The replay's key of the task job ``i`` (``job``) runs in: its co-located pair's
    (thesis §5.3.1, ``LiveJob.shared_with``; the lower trace index first, the replay's
    admission order) when its partner is replayed too, else its own."""
    partner = index.get(job.shared_with or "")
    return str(i) if partner is None else pair_key(*map(str, sorted((i, partner))))


def extrapolated(steps: int, left: int, horizon_s: float) -> float | None:
    """When a job that made ``steps - left`` steps in a replay's first ``horizon_s``
    seconds finishes at that rate; None: it made none."""
    made = steps - left
    return None if made <= 0 or horizon_s <= 0 else horizon_s + left * horizon_s / made


def core_of(state: LiveState, inputs: Replay) -> SchedulerCore:
    """A core under the state's policy and rules with the replay's jobs submitted at 0."""
    policy = daemon_policy(state)
    core = SchedulerCore(policy, ClusterView.build(inputs.cluster, inputs.gpus_per_server),
                         inputs.table, state.rules.core_config(
                             policy, inputs.table, list(inputs.cluster),
                             rows=[job.throughputs for job in inputs.trace]),
                         prices=state.prices)
    for i, job in enumerate(inputs.trace):
        core.submit(spec_of(str(i), job), 0.0, throughputs=job.planned or job.throughputs)
    return core
