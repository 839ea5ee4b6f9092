"""The daemon's twin: a live scheduler's state replayed in the simulator under the daemon's
own rules (issue #18: ``status --eta``, ``predict``; the benchmarks that compare a real run
with its replay).

``DaemonRules`` (``gavelsched/core/rules.py``, where the daemon builds it too) is the one
statement of those rules: round length, re-solve rule and interval, refills, plan lead and
start-up charging. It yields the core's config (``DaemonRules.core_config``) and the
simulator's (``sim_config``): rounds last exactly ``round_seconds`` (wall-clock rounds), the
next round is planned ``plan_lead_s`` before the last ends, and a run on new workers first
pays its job type's mean start-up, capped by the daemon's lease floor.

The replay (``replay``): each unfinished job of a ``LiveState`` (``simulator/live.py``)
becomes a trace job that arrives now with the steps it has left, its own job type and its
own steps/s (``TraceJob.throughputs``); the cluster is the alive GPUs in service. The round
the daemon has placed is kept (``this_round``): a job that runs now makes its steps on its
type until the round's end (``Status.round_ends_s``), and the simulator starts there, the
jobs that ran keeping their GPUs without a start-up. ``predict`` adds a hypothetical job
(``live.hypothetical``) and replays twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gavelsched.core.rules import DaemonRules
from traces import ThroughputTable, TraceJob

from .config import SimConfig
from .engine import make_policy, simulate
from .live import LiveJob, LiveState

__all__ = ["DaemonRules", "Eta", "Replay", "etas", "predict", "replay", "replay_inputs",
           "sim_config", "this_round"]


def sim_config(rules: DaemonRules, *, arrivals: bool = False, **more) -> SimConfig:
    """The simulator's config under the daemon's rules: fixed rounds, the plan lead, and
    each job type's start-up charged to a run on new workers (capped by the lease floor);
    ``arrivals``: the jobs arrive as they did on the daemon (a whole run replayed), so an
    idle cluster waits the daemon's arrival grace (an ETA's jobs are all there already);
    ``more`` on top (``priors``, ...)."""
    return SimConfig(**{"round_ends_at_last_finish": False,
                        "preemption_overhead_s": rules.startup_charges(),
                        "plan_lead_s": rules.plan_lead_s,
                        "arrival_grace_s": rules.arrival_grace_s if arrivals else 0.0, **more})


@dataclass(frozen=True)
class Eta:
    """Seconds from now (the state's ``now_s``); ``start_s`` None: it has started already
    (or never starts); ``finish_s`` None: the replay never finishes it."""
    start_s: float | None
    finish_s: float | None

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
    ``ids[i]``; ``table`` names the cluster's types (every job carries its own rates)."""
    trace: list[TraceJob]
    table: ThroughputTable
    cluster: dict[str, int]
    gpus_per_server: dict[str, int]
    ids: list[str] = field(default_factory=list)


def _runnable(job: LiveJob, state: LiveState) -> bool:
    return any(r > 0 and state.workers.get(t, 0) >= job.scale_factor
               for t, r in job.steps_per_s.items())


def this_round(state: LiveState) -> tuple[LiveState, float, dict[str, Eta]]:
    """The round the daemon has placed already, kept (thesis §5.5: a round's placement
    stands until its end): each job running now makes its steps on its type until the
    round ends, from the round's start (after its start-up, when its first run began this
    round; its durable count is the round start's). Returns the state at the round's end
    (running jobs with the steps they still need and no start-up, as they keep their
    GPUs when they can), the seconds to it, and the jobs that finish within it.
    Re-planning the placed round from now made running jobs late and queued ones early
    (BENCHMARKS.md, "ETA error against real finishes"). The simulator cannot start from a
    placed round (its first round is planned afresh), so this stays a model of its own."""
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
        start = begin + (state.startup_of(job) if fresh else 0.0)
        finish = start + job.steps_left / rate
        if finish <= ends:
            done[job.id] = Eta(None, max(0.0, finish - state.now_s))
        else:
            left = job.steps_left - int(rate * max(0.0, ends - start))
            jobs.append(replace(job, steps_left=max(1, left), startup_s=0.0))
    return replace(state, now_s=ends, jobs=tuple(jobs)), ends - state.now_s, done


def replay_inputs(state: LiveState, extra: Sequence[LiveJob] = ()) -> Replay:
    """The simulator's inputs for the state (and ``extra`` jobs): each job under its own
    job type with its own steps/s on the alive types and, when it has one, its own
    start-up (capped); jobs that no alive type can run are left out (they never finish)."""
    trace, ids = [], []
    for job in (*state.jobs, *extra):
        if not _runnable(job, state):
            continue
        rates = {t: float(r) for t, r in job.steps_per_s.items() if t in state.workers and r > 0}
        startup = None if job.startup_s is None else state.startup_of(job)
        trace.append(TraceJob(job.job_type, job.scale_factor, job.steps_left, 0.0,
                              priority_weight=job.priority_weight, throughputs=rates,
                              startup_s=startup))
        ids.append(job.id)
    return Replay(trace, ThroughputTable({t: {} for t in state.workers}),
                  dict(state.workers), dict(state.gpus_per_server), ids)


def replay(state: LiveState, extra: Sequence[LiveJob] = ()) -> dict[str, Eta]:
    """Each job's predicted start and finish, in seconds from now: the placed round kept
    (``this_round``), then the simulator from its end, under the state's ``DaemonRules``."""
    out = {j.id: Eta(None, None) for j in (*state.jobs, *extra)}
    later, offset, done = this_round(state)
    out.update(done)
    inputs = replay_inputs(later, extra)
    if not inputs.trace:
        return out
    policy = make_policy(state.policy)
    rules = state.rules
    config = rules.core_config(policy, inputs.table, list(inputs.cluster),
                               rows=[job.throughputs for job in inputs.trace])
    result = simulate(inputs.trace, inputs.table, inputs.cluster, policy, core_config=config,
                      sim=sim_config(rules), gpus_per_server=inputs.gpus_per_server)
    started = {j.id: j.started_s is not None for j in (*state.jobs, *extra)}
    for record in result.jobs:
        job_id = inputs.ids[int(record.id)]
        start = None if started[job_id] or record.started_s is None else offset + record.started_s
        finish = None if record.completion_s is None else offset + record.completion_s
        out[job_id] = Eta(start, finish)
    return out


def etas(state: LiveState) -> dict[str, Eta]:
    """Every unfinished job's predicted start and finish (``status --eta``)."""
    return replay(state)


def predict(state: LiveState, job: LiveJob) -> tuple[dict[str, Eta], dict[str, Eta]]:
    """``predict``: (every job's ETA without ``job``, every job's ETA with it)."""
    return replay(state), replay(state, [job])

