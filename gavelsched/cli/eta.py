"""Predicted start and finish of the scheduler's jobs (issue #18): the live state, as the
scheduler's ``Status`` pictures it, replayed in the simulator in the client's process (the
daemon never imports ``simulator/``; only ``gavelsched/cli/`` may).

The translation is pure (``state_of``, ``replay_inputs``): each unfinished job becomes a
trace job that arrives now with the steps it has left and its own job type
(``<type>@<id>``), so that the table holds *its* steps/s per worker type (measured where
measured, else the scaled prior: ``OnlineThroughputs.row``); the cluster is the alive GPUs
in service (not drained) per type; the policy, round length, re-solve rule, refills and
plan lead are the daemon's (``resolve="responsive"``, ``refill_until``,
``Status.plan_lead_s``: ``SimConfig.plan_lead_s``); rounds last exactly ``round_seconds``
(wall-clock rounds), and a lease that is not extended first pays its job type's mean
start-up (the daemon's ``Startups``), at most half a round (the daemon's lease floor), as
the simulator charges preemption overhead. The round the daemon has placed is kept
(``this_round``): a job that runs now makes its steps on its type until the round's end
(``Status.round_ends_s``), and the replay starts there, the jobs that ran keeping their
GPUs without a start-up.

``predict`` adds a hypothetical job (prior throughputs from the shipped catalog, scaled by
the live jobs' measured/prior ratio) and replays twice: with and without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

FINAL = ("done", "failed", "cancelled")
NEW_ID = "new"


@dataclass(frozen=True)
class LiveJob:
    id: str
    job_type: str
    scale_factor: int
    steps_left: int
    steps_per_s: Mapping[str, float]
    priority_weight: float = 1.0
    startup_s: float = 0.0
    started_s: float | None = None     # scheduler clock; None: never started
    entity: str | None = None
    running_on: str | None = None      # the worker type it runs on this round; None: none


@dataclass(frozen=True)
class LiveState:
    now_s: float
    epoch_unix: float
    policy: str
    round_seconds: float
    workers: Mapping[str, int]                 # alive GPUs per type
    gpus_per_server: Mapping[str, int]
    jobs: tuple[LiveJob, ...]
    resolve: str = "responsive"
    min_resolve_interval_s: float = 0.0
    round_ends_s: float | None = None          # the placed round's end; None: idle
    refill_until: float = 0.0                  # refills in this first part of a round
    plan_lead_s: float = 0.0                   # rounds planned this long before they start


@dataclass(frozen=True)
class Eta:
    """Seconds from now (the state's ``now_s``); ``start_s`` None: it has started already
    (or never starts); ``finish_s`` None: the replay never finishes it."""
    start_s: float | None
    finish_s: float | None


@dataclass(frozen=True)
class Replay:
    trace: list
    table: object
    cluster: dict[str, int]
    gpus_per_server: dict[str, int]
    overheads: dict[str, float]
    ids: list[str] = field(default_factory=list)       # trace index -> live job id


def state_of(reply) -> LiveState:
    """A ``StatusResponse`` (with every unfinished job) as a ``LiveState``."""
    workers: dict[str, int] = {}
    per: dict[str, int] = {}
    for w in reply.workers:
        if w.alive and not w.drained and w.gpus > 0:
            workers[w.type] = workers.get(w.type, 0) + w.gpus
            per[w.type] = max(per.get(w.type, 0), w.gpus)
    jobs = tuple(
        LiveJob(j.id, j.job_type, j.scale_factor, max(0, j.total_steps - j.steps_done),
                dict(j.steps_per_s), j.priority_weight or 1.0, j.startup_s,
                j.started_s if j.started_s >= 0 else None, j.entity or None,
                j.worker_type if j.state == "running" and j.worker_type in workers else None)
        for j in reply.jobs if j.state not in FINAL and j.total_steps > j.steps_done)
    return LiveState(reply.now_s, reply.epoch_unix, reply.policy, reply.round_seconds,
                     workers, per, jobs, reply.resolve or "responsive",
                     reply.min_resolve_interval_s,
                     reply.round_ends_s if reply.round_ends_s > reply.now_s else None,
                     reply.refill_until if 0.0 <= reply.refill_until <= 1.0 else 0.0,
                     reply.plan_lead_s if 0.0 <= reply.plan_lead_s < reply.round_seconds
                     else 0.0)


def hypothetical(request, state: LiveState, prior=None) -> LiveJob:
    """The job of a ``JobRequest`` (``predict``): its steps/s the prior table's (the shipped
    catalog by default) on the state's worker types, scaled by the live jobs' geometric-mean
    ratio of their rates to that table's (``OnlineThroughputs.row``'s rule, thesis §5.3.3):
    a cluster whose jobs run at a tenth of the catalog's rates (an emulated one, say)
    predicts the new job at a tenth too."""
    import math

    if prior is None:
        from traces.catalog import default_table
        prior = default_table()
    logs = [math.log(rate / base) for j in state.jobs for t, rate in j.steps_per_s.items()
            if rate > 0 and (base := prior.get(t, j.job_type, j.scale_factor)) > 0]
    scale = math.exp(sum(logs) / len(logs)) if logs else 1.0
    rates = {t: scale * float(prior.get(t, request.job_type, request.scale_factor or 1))
             for t in state.workers}
    mean = [j.startup_s for j in state.jobs if j.job_type == request.job_type and j.startup_s]
    return LiveJob(NEW_ID, request.job_type, request.scale_factor or 1, request.total_steps,
                   rates, request.priority_weight or 1.0, mean[0] if mean else 0.0,
                   None, request.entity or None)


def _runnable(job: LiveJob, state: LiveState) -> bool:
    return any(r > 0 and state.workers.get(t, 0) >= job.scale_factor
               for t, r in job.steps_per_s.items())


def startup_charge(state: LiveState, job: LiveJob) -> float:
    """The start-up a fresh run of ``job`` loses: its type's mean, at most the rest of the
    round after the daemon's lease floor (a fresh run always gets MIN_LEASE_FRACTION of a
    round after its start-up). Uncapped, a start-up as long as a round let no fresh task
    step, and the replay never ended (``status --eta`` hung)."""
    from ..daemon.leases import MIN_LEASE_FRACTION

    return min(float(job.startup_s), (1.0 - MIN_LEASE_FRACTION) * state.round_seconds)


def this_round(state: LiveState) -> tuple[LiveState, float, dict[str, Eta]]:
    """The round the daemon has placed already, kept (thesis §5.5: a round's placement
    stands until its end): each job running now makes its steps on its type until the
    round ends, from the round's start (after its start-up, when its first run began this
    round; its durable count is the round start's). Returns the state at the round's end
    (running jobs with the steps they still need and no start-up, as they keep their
    GPUs when they can), the seconds to it, and the jobs that finish within it.
    Re-planning the placed round from now made running jobs late and queued ones early
    (BENCHMARKS.md, "ETA error against real finishes")."""
    from dataclasses import replace

    if state.round_ends_s is None:
        return state, 0.0, {}
    ends, begin = state.round_ends_s, state.round_ends_s - state.round_seconds
    jobs, done = [], {}
    for job in state.jobs:
        rate = job.steps_per_s.get(job.running_on or "", 0.0)
        if rate <= 0:
            jobs.append(job)
            continue
        fresh = job.started_s is not None and job.started_s >= begin
        start = begin + (startup_charge(state, job) if fresh else 0.0)
        finish = start + job.steps_left / rate
        if finish <= ends:
            done[job.id] = Eta(None, max(0.0, finish - state.now_s))
        else:
            left = job.steps_left - int(rate * max(0.0, ends - start))
            jobs.append(replace(job, steps_left=max(1, left), startup_s=0.0))
    return replace(state, now_s=ends, jobs=tuple(jobs)), ends - state.now_s, done


def replay_inputs(state: LiveState, extra: Sequence[LiveJob] = ()) -> Replay:
    """The simulator's inputs for the state (and ``extra`` jobs): jobs that no alive type
    can run are left out (they never finish)."""
    from traces import ThroughputTable, TraceJob

    solo: dict[str, dict] = {t: {} for t in state.workers}
    trace, ids, overheads = [], [], {}
    for job in (*state.jobs, *extra):
        if not _runnable(job, state):
            continue
        name = f"{job.job_type}@{job.id}"
        for t, rate in job.steps_per_s.items():
            if t in solo and rate > 0:
                solo[t][(name, job.scale_factor)] = float(rate)
        if job.startup_s > 0:
            overheads[name] = startup_charge(state, job)
        trace.append(TraceJob(name, job.scale_factor, job.steps_left, 0.0,
                              priority_weight=job.priority_weight))
        ids.append(job.id)
    return Replay(trace, ThroughputTable(solo), dict(state.workers),
                  dict(state.gpus_per_server), overheads, ids)


def replay(state: LiveState, extra: Sequence[LiveJob] = ()) -> dict[str, Eta]:
    """Each job's predicted start and finish, in seconds from now: the placed round kept
    (``this_round``), then the simulator from its end."""
    from gavelsched.core.driver import config_for
    from simulator import SimConfig, make_policy, simulate

    out = {j.id: Eta(None, None) for j in (*state.jobs, *extra)}
    later, offset, done = this_round(state)
    out.update(done)
    inputs = replay_inputs(later, extra)
    if not inputs.trace:
        return out
    policy = make_policy(state.policy)
    overrides = {"round_seconds": state.round_seconds, "resolve": state.resolve,
                 "refill_freed": state.refill_until > 0}
    if state.refill_until > 0:
        overrides["refill_until"] = state.refill_until
    if state.min_resolve_interval_s > 0:
        overrides["min_resolve_interval_s"] = state.min_resolve_interval_s
    config = config_for(policy, inputs.table, list(inputs.cluster), **overrides)
    sim = SimConfig(round_ends_at_last_finish=False,
                    preemption_overhead_s=inputs.overheads, plan_lead_s=state.plan_lead_s)
    result = simulate(inputs.trace, inputs.table, inputs.cluster, policy, core_config=config,
                      sim=sim, gpus_per_server=inputs.gpus_per_server)
    started = {j.id: j.started_s is not None for j in (*state.jobs, *extra)}
    for record in result.jobs:
        job_id = inputs.ids[int(record.id)]
        start = None if started[job_id] or record.started_s is None else offset + record.started_s
        finish = None if record.completion_s is None else offset + record.completion_s
        out[job_id] = Eta(start, finish)
    return out


def predict(state: LiveState, job: LiveJob) -> tuple[dict[str, Eta], dict[str, Eta]]:
    """(ETAs without the job, ETAs with it)."""
    return replay(state), replay(state, [job])


def wall(state: LiveState, seconds: float | None) -> str:
    """Seconds from now as a local date and ``+HH:MM:SS``; ``-`` for none."""
    from .jobviews import clock, date
    if seconds is None:
        return "-"
    return f"{date(state.epoch_unix, state.now_s + seconds)} (+{clock(seconds)})"


def eta_lines(state: LiveState, etas: Mapping[str, Eta]) -> list[str]:
    """The table ``status --eta`` prints below the status table."""
    w = max([2, *(len(j.id) for j in state.jobs)])
    lines = [f"predicted (replayed in the simulator, policy {state.policy}):",
             f"{'id':>{w}} {'start':<32} finish"]
    for job in state.jobs:
        eta = etas.get(job.id, Eta(None, None))
        start = "started" if job.started_s is not None else wall(state, eta.start_s)
        lines.append(f"{job.id:>{w}} {start:<32} {wall(state, eta.finish_s)}")
    return lines


def eta_dict(state: LiveState, etas: Mapping[str, Eta]) -> dict[str, dict]:
    """Per job: predicted start and finish on the scheduler's clock (null: none/started)."""
    def on_clock(v):
        return None if v is None else state.now_s + v
    return {job_id: {"start_s": on_clock(e.start_s), "finish_s": on_clock(e.finish_s),
                     "finish_in_s": e.finish_s} for job_id, e in etas.items()}
