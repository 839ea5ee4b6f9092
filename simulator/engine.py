"""The virtual-clock executor: it owns time and drives the scheduler core round by round.

There are no per-step events. In a round, a micro-task of throughput r and lease s steps
runs for s / r seconds (plus a preemption overhead when its lease was not extended); a
job that finishes mid-round finishes at that exact time and leaves its workers idle until
the round ends (a job in a co-located pair finishes when the pair's micro-task ends, the
later of the two, as in Gavel). Arrivals wait for the next round boundary; their
completion time counts from arrival. This is Gavel's ``Scheduler.simulate`` loop
(stanford-futuredata/gavel, ``scheduler/scheduler.py``), re-expressed over
``gavelsched.core``:

1. at a boundary, apply price changes and submit every job that has arrived by the plan
   (``RoundDriver.plan_at``: ``SimConfig.plan_lead_s`` before the boundary when a round
   ran, as the daemon plans; on an idle cluster ``SimConfig.arrival_grace_s`` after the
   arrival that woke it, ``RoundDriver.first_plan_at``);
2. ``RoundDriver.plan(plan_s, seconds)`` at the plan's time, as the daemon calls it (its
   re-solve rule counts from there): end the last round with the time each task held its
   workers, admit, re-solve if due, plan the round; the steps of jobs that finished after
   the plan, and what the round's runs measured (``SimConfig.priors``: the daemon samples
   a run at its checkpoint, at the round's end), are taken only then, and
   ``RoundDriver.start(now, ended)`` begins the round at the boundary without the tasks
   of jobs that ended (``gavelsched/core/driver.py``, the recipe the daemon shares);
3. if nothing runs: jump to the next arrival (the driver forces a re-solve when none is
   left, and says when nothing can ever be placed);
4. run every micro-task; the round ends at its last finish (or after round_seconds);
5. ``RoundDriver.credit`` the steps each job made; record completions; repeat until done.

This module keeps only what is the simulator's own: *when* the next boundary comes (a
jump of the virtual clock) and *how tasks run* (throughput x time arithmetic).

``benchmarks/gavel_fidelity.py`` checks this loop against Gavel's own simulator (average
JCT and makespan on the same traces, throughputs and cluster).

One Gavel quirk is not reproduced: after a round in which nothing ran, Gavel credits the
next round's micro-tasks with the idle gap as received time (its round start stays at the
end of the last busy round); here received time is the time a task held its workers.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from gavelsched.core import CoreConfig, PeriodState, SchedulerCore
from gavelsched.core.batch import startup_charge, worth_launching
from gavelsched.core.driver import RoundDriver, config_for, spec_of
from gavelsched.core.online import OnlineThroughputs
from gavelsched.core.type_order import fastest_first
from gavelsched.core.waves import wave_factor
from gavelsched.estimator import estimated_table
from gavelsched.mechanism import ClusterView
from policies import Entity, Policy, get_policy, policy_class
from traces import ThroughputTable, TraceJob

from .config import SimConfig
from .knowledge import Knowledge
from .metrics import Metrics
from .prices import PriceTrace
from .result import SimulationResult
from .tasks import Ran, finishes, pauses, run_leases, started_among, startups_of

log = logging.getLogger(__name__)


# Jobs whose allocation over time the timeline keeps for plots (the window's first ones).
PLOTTED_JOBS = 40


class SimulationError(ValueError):
    """The simulation cannot proceed: a job can never run, an empty cluster, ..."""


def make_policy(name: str, seed: int = 0, **options) -> Policy:
    """``get_policy(name, **options)`` as a simulation runs it: ``seed`` goes to the
    policies that declare a ``seed`` option, and the policy's declared
    ``Traits.simulation_defaults`` apply unless ``options`` set them (SLO policies run best
    effort, so that a simulation goes on when an SLO can no longer be met; makespan
    policies search as Gavel's simulator does, ``search="bisection"``: pass
    ``search="exact"`` for the optimum)."""
    if "seed" in policy_class(name).TRAITS.options:
        options.setdefault("seed", seed)
    policy = get_policy(name, **options)
    defaults = {k: v for k, v in policy.traits.simulation_defaults.items() if k not in options}
    return get_policy(name, **options, **defaults) if defaults else policy


def simulate(jobs: Sequence[TraceJob], table: ThroughputTable, cluster: Mapping[str, int],
             policy: str | Policy, *, core_config: CoreConfig | None = None,
             sim: SimConfig | None = None, gpus_per_server: Mapping[str, int] | int | None = None,
             prices: Mapping[str, float] | None = None, price_trace: PriceTrace | None = None,
             entities: Mapping[str, Entity] | None = None,
             seed: int = 0, progress: bool = False,
             running: Mapping[int, str] | None = None,
             ahead: Mapping[int, float] | None = None,
             resume: PeriodState | None = None,
             ending: Mapping[int, int] | None = None,
             measured_pairs: Mapping[str, Mapping[str, tuple[float, float]]] | None = None
             ) -> SimulationResult:
    """Replay ``jobs`` (job ``i`` gets id ``str(i)``) on ``cluster`` under ``policy``. A
    job's own ``throughputs`` (``TraceJob``) replace ``table``'s row for it, and its own
    ``startup_s`` its type's preemption overhead: a measured job keeps its type's name.

    ``core_config`` defaults to ``config_for(policy, ...)`` (Gavel's rules, read from
    the policy's declared traits, with the types served fastest first); ``prices`` are
    $/GPU-hour per type, ``price_trace`` changes them over time; ``entities`` (by name)
    make water-filling policies hierarchical (thesis §5.4.3: jobs name their entity in
    the trace). ``running``: job index -> the worker type it runs on at t = 0 (a live
    cluster's replay, ``twin.py``): in the first round, its task on that type goes on
    without a start-up, as the daemon extends a kept job's lease;
    ``ahead``: job index -> how far such a run is ahead of the round clock then
    (``SimConfig.kept_runs_ahead``).
    ``resume``: the allocation period the jobs arriving at t = 0 go on with (a live
    cluster's, keyed by job index; ``SchedulerCore.resume``) instead of a first re-solve.
    ``ending``: job index -> the steps left to a job of that live round which makes them
    after the first round's plan: that plan places it, its steps are credited at t = 0,
    and the round's start then re-solves and refills its workers (``RoundDriver.start``),
    as the daemon's does.
    ``measured_pairs``: co-located pairs (by key, ``"i+j"`` in job order) -> type -> the
    steps/s each member makes there, measured by a live cluster (``Knowledge``).
    """
    wall_start = time.perf_counter()
    sim = sim or SimConfig()
    if isinstance(policy, str):
        policy = make_policy(policy, seed=seed)
    policy_name = policy.name
    view = ClusterView.build(cluster, gpus_per_server)
    if view.total == 0:
        raise SimulationError("the cluster has no workers")
    if sim.window is not None and sim.window[0] >= len(jobs):
        raise SimulationError(f"window {sim.window[0]}:{sim.window[1]} starts past the last "
                              f"job ({len(jobs)} jobs)")
    own = [job.throughputs for job in jobs if job.throughputs is not None]
    config = core_config or config_for(policy, table, view.worker_types, seed=seed,
                                       type_order=fastest_first(table, view.worker_types, own))
    startups = startups_of(jobs, sim.preemption_overhead_s)
    costs = [job.restart_s if job.restart_s is not None else startups[i] if startups else 0.0
             for i, job in enumerate(jobs)]
    learns = sim.priors is not None     # the daemon learns them too (``Knowledge.started``)
    specs = [spec_of(str(i), job, 0.0 if learns else cost)
             for i, (job, cost) in enumerate(zip(jobs, costs))]
    _check_runnable(jobs, table, view)
    planned = (estimated_table(table, sim.estimator, rng=np.random.default_rng(seed))
               if sim.estimate_pairs and config.pairs else None)
    knowledge = None
    if sim.priors is not None:
        if config.pairs or config.configurations:
            raise SimulationError("priors: not with co-located pairs or mixed-type "
                                  "configurations")
        knowledge = Knowledge(OnlineThroughputs(sim.priors), table, jobs,
                               {job.job_type: cost for job, cost in zip(jobs, costs)})
    elif measured_pairs or any(job.planned is not None for job in jobs):
        knowledge = Knowledge.planned_apart(table, jobs, measured_pairs)
    core = SchedulerCore(policy, view, table if sim.priors is None else sim.priors, config,
                         entities=entities, planned_pairs=planned)
    run = _Run(jobs, specs, core, sim,
               Metrics(policy_name, view.worker_types, sim.record_timeline,
                       frozenset(str(i) for i in _plotted(sim.window, len(jobs))),
                       {s.id: s.entity or "" for s in specs} if entities else None,
                       type_gpu_s={} if sim.record_type_use else None),
               dict(prices or {}), price_trace, knowledge,
               {str(i): t for i, t in (running or {}).items()}, resume,
               {str(i): s for i, s in (ahead or {}).items()},
               {str(i): float(s) for i, s in (ending or {}).items()})
    end = run.loop(_progress_bar(run.targets_left, progress))
    result = run.metrics.result(end_s=end, capacity=run.core.view.counts,
                                wall_s=time.perf_counter() - wall_start, window=sim.window,
                                order=[s.id for s in specs])
    if run.refused:
        result = replace(result, refused=run.refused)
    if sim.horizon_s is not None:      # what the jobs not finished by the horizon still need
        left = {j: run.core.remaining_steps(j) for j in run.core.active_jobs}
        left.update((s.id, s.total_steps) for s in specs if s.id in run.core.pending_jobs)
        result = replace(result, steps_left=left)
    return result


class _Run:
    """One simulation's mutable state; ``loop`` is the round recipe of the module docstring."""

    def __init__(self, jobs, specs, core: SchedulerCore, sim: SimConfig, metrics: Metrics,
                 prices: dict[str, float], price_trace: PriceTrace | None,
                 knowledge: Knowledge | None = None,
                 running: Mapping[str, str] | None = None,
                 resume: PeriodState | None = None,
                 ahead: Mapping[str, float] | None = None,
                 ending: Mapping[str, float] | None = None) -> None:
        self.jobs, self.specs, self.core, self.sim, self.metrics = jobs, specs, core, sim, metrics
        self.knowledge = knowledge
        self.running = dict(running or {})   # job -> its type at t = 0, until a round ends
        self.resume = resume
        # ``SimConfig.kept_runs_ahead``: combination -> seconds its run's last lease ended
        # before its round did (at most the plan lead); if kept, it goes on from then.
        self.ahead = dict(ahead or {}) if sim.kept_runs_ahead else {}
        self.startups = startups_of(jobs, sim.preemption_overhead_s)
        exits = sim.exit_s      # (``SimConfig.exit_s``: each job's, by its type)
        self.exits = [exits.get(job.job_type, 0.0) for job in jobs] if exits else None
        # Under the restart rule (``core/restarts.py``) a start-up longer than a round goes
        # on into the next, where the run's lease is extended: combination -> seconds left.
        self.carry: dict[str, float] = {}
        self.carries = core.config.restart_rule == "tenure"
        self.started: set[str] = set()      # combinations that ran (``first_start_only``)
        self.driver = RoundDriver(core, plan_lead_s=sim.plan_lead_s,
                                  arrival_grace_s=sim.arrival_grace_s)
        self.base_prices, self.price_trace = prices, price_trace
        self.prices = price_trace.at(0.0, prices) if price_trace else prices
        core.set_prices(self.prices, 0.0)
        self.arrivals = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival_s, i))
        self.next = 0                       # index into arrivals of the next job to arrive
        window = sim.window
        self.targets = ({str(i) for i in range(*window) if i < len(jobs)} if window else None)
        self.targets_left = len(self.targets) if self.targets is not None else len(jobs)
        self.late: dict[str, float] = dict(ending or {})   # job -> its last steps, made
        self.ending = frozenset(self.late)                  # after the plan (``simulate``)
        self.samples: tuple | None = None  # the last round's samples, learned after the plan
        self.refused: dict[str, str] = {}   # job -> why the policy refused it (kept going)
        for spec, job in zip(specs, jobs):
            metrics.on_arrival(spec.id, job.job_type, job.scale_factor, job.arrival_s, job.slo_s)

    def loop(self, bar) -> float:
        driver = self.driver
        now = driver.first_plan_at(self.jobs[self.arrivals[0]].arrival_s) if self.jobs else 0.0
        held = None                     # seconds each task of the last round held
        follows = self.resume is not None   # the first round follows the live one (twin.py)
        if follows:                     # a live cluster's period goes on
            self.submit_arrivals(now)
            self.core.resume(self.resume, None if self.knowledge is None else
                             lambda ids: self.knowledge.admitted(self.core, ids, now))
        horizon = math.inf if self.sim.horizon_s is None else self.sim.horizon_s
        while self.targets_left > 0 and now < horizon:
            # A round that follows another is planned plan_lead_s before that one ends, at
            # that time (its arrivals, prices and re-solve rule: as the daemon plans); an
            # idle cluster's round is planned when it starts.
            plan_s = driver.plan_at(now) if held is not None or follows else now
            follows = False
            self.submit_arrivals(plan_s)
            self.update_prices(plan_s)
            late, self.late = self.late, {}
            step = driver.plan(plan_s, held, arrivals_pending=self.next < len(self.arrivals),
                               uncredited=late or None)
            held = None
            self.record_resolve(step.round, plan_s)
            self.learn_samples(now)
            ended = driver.credit(tuple(late), [(s,) for s in late.values()], now) if late else ()
            if self.ending:         # (the live round's: they end now)
                self.record_completions(sorted(self.ending.intersection(ended)), now, bar)
                self.ending = frozenset()
            started = driver.start(now, ended)
            rnd = started.round
            if rnd.rejected:            # (a core that keeps going past a refusal)
                self.refused.update(rnd.rejected)
            if len(rnd.batch) == 0:
                if self.next < len(self.arrivals):
                    now = self.idle_until(now)
                    continue
                if not self.core.active_jobs:
                    break
                if step.stalled:
                    raise SimulationError("jobs " + ", ".join(self.core.active_jobs[:10])
                                          + " can never be placed")
                continue                # the driver forced a re-solve
            now, held = self.execute(rnd, now, bar, started.unstarted)
        if bar is not None:
            bar.close()
        return now

    def submit_arrivals(self, now: float) -> None:
        jobs, arrivals = self.jobs, self.arrivals
        while self.next < len(arrivals) and jobs[arrivals[self.next]].arrival_s <= now:
            i = arrivals[self.next]
            # a job's own rates are what the core plans on, unless it knows only priors
            own = None if self.knowledge is not None and not self.knowledge.plans_own \
                else jobs[i].planned or jobs[i].throughputs
            self.core.submit(self.specs[i], jobs[i].arrival_s, throughputs=own)
            self.metrics.on_submit(self.specs[i].id)
            self.next += 1

    def learn_samples(self, now: float) -> None:
        """The last round's runs measured (``Knowledge.learn``). The daemon samples a run
        at its checkpoint, when its lease ends with the round: after the next round's plan
        when it plans ``plan_lead_s`` early, so that plan does not know them yet."""
        if self.samples is not None:
            batch, steps, seconds, completed = self.samples
            self.samples = None
            self.knowledge.learn(self.core, batch, self.specs, steps, seconds, completed, now)

    def update_prices(self, now: float) -> None:
        if self.price_trace is not None:
            self.prices = self.price_trace.at(now, self.base_prices)
            self.core.set_prices(self.prices, now)

    def record_resolve(self, rnd, now: float) -> None:
        if rnd.resolved is not None:
            self.metrics.on_resolve(now, rnd.resolved)
            self.metrics.on_periods(self.core.take_closed_periods())

    def idle_until(self, now: float) -> float:
        """Nothing runs: the next arrival (Gavel), or an earlier allowed re-solve. A re-solve
        already allowed at this boundary had its chance (with ``resolve="responsive"`` one
        always is): then only an arrival can change the plan."""
        upcoming = self.driver.first_plan_at(self.jobs[self.arrivals[self.next]].arrival_s)
        if not self.sim.idle_jumps_to_arrival and self.core.active_jobs:
            allowed = self.core.next_resolve_allowed_s()
            if allowed > now:
                upcoming = min(upcoming, allowed)
        return max(now, upcoming)

    def execute(self, rnd, now: float, bar, unstarted=()) -> tuple[float, np.ndarray]:
        """Run the round's micro-tasks but the ``unstarted`` ones (``RoundDriver.start``),
        credit their steps, record completions; returns the round's end and the seconds
        each task held its workers."""
        R = rnd.round_seconds
        ran = self.run_tasks(rnd.batch, R, 0.0)
        if self.sim.kept_runs_ahead:
            ran = self.go_on_ahead(ran)
        self.running = {}           # from the second round on, the plan says who is kept
        if unstarted:
            ran = ran.never_started(np.isin(np.arange(len(ran.batch)), unstarted))
        if self.core.config.refill_freed:
            ran = self.refill(ran, now, R)
            rnd = self.driver.in_flight
        batch, seconds, steps = ran.batch, ran.seconds, ran.steps
        ends = ran.start + seconds
        if self.sim.kept_runs_ahead:
            lead = self.sim.plan_lead_s
            self.ahead = dict(zip(batch.keys, np.clip(R - ends, 0.0, lead).tolist()))
        end = now + float(ends.max()) if self.sim.round_ends_at_last_finish else now + R
        self.metrics.on_round(rnd, end, seconds, self.prices)
        if self.metrics.waiting:
            self.metrics.on_started(started_among(self.metrics.waiting_jobs, batch.members,
                                                  steps), now)
        finish, at = finishes(batch, steps, ends, now)
        if finish and self.driver.plan_lead_s:
            steps = self.hold_late(batch, steps, finish, at, end)
        completed = self.driver.credit(batch.keys, steps, end) + tuple(self.late)
        if self.knowledge is not None:   # a sample counts training time, not the start-up
            self.knowledge.started(self.core, batch, self.specs, seconds > ran.pause)
            self.samples = (batch, steps, seconds - ran.pause, completed)
            if not self.driver.plan_lead_s:
                self.learn_samples(end)
        # A job finishes when its micro-task does: for a co-located pair, when the later of
        # the two stops (Gavel's completion time for both members).
        for job_id in completed:
            self.record_completions((job_id,), at[job_id], bar)
        if self.sim.received_whole_round:     # as the daemon credits them (``Runs.held_s``)
            seconds = np.where(seconds > 0, R - np.maximum(ran.start, 0.0), 0.0)
        return end, seconds

    def hold_late(self, batch, steps: np.ndarray, finish, at: Mapping[str, float],
                  end: float) -> np.ndarray:
        """``steps`` less those of the jobs of ``finish`` still running at the next round's
        plan (``at``: when each finishes): those wait in ``late``, credited once it is made."""
        plan_s = self.driver.plan_at(end)
        late = [(i, m) for i, m in finish if at[batch.members[i][m]] > plan_s]
        if not late:
            return steps
        steps = steps.copy()
        for i, m in late:
            self.late[batch.members[i][m]] = float(steps[i, m])
            steps[i, m] = 0
        return steps

    def record_completions(self, job_ids, at: float, bar) -> None:
        """``job_ids`` finished at ``at``: in the metrics, the targets left and the bar."""
        for job_id in job_ids:
            self.metrics.on_complete(job_id, at)
            if self.targets is None or job_id in self.targets:
                self.targets_left -= 1
                if bar is not None:
                    bar.update(1)

    def run_tasks(self, batch, span: float, start: float,
                  wait: np.ndarray | None = None) -> Ran:
        """Run ``batch``'s micro-tasks, started ``start`` seconds into the round, for at
        most ``span`` seconds; ``wait``: seconds each first waits for its workers (a
        refill, for the process of the job that finished on them to exit)."""
        startups = self.startups
        pause = pauses(batch, startups) if startups is not None else np.zeros(len(batch))
        if self.running:
            pause[self.running_on(batch)] = 0.0     # kept on its type at t = 0: no start-up
        if self.sim.first_start_only:
            for i, key in enumerate(batch.keys):
                if key in self.started:
                    pause[i] = 0.0
                self.started.add(key)
        if wait is None and self.sim.wave_slope > 0:
            pause = self.waved(batch, pause)
        if wait is not None:
            pause = pause + wait
        if self.carries and startups is not None:
            pause = self.carried(batch, pause, span)
        true = None if self.knowledge is None else self.knowledge.rates(batch)
        seconds, steps = run_leases(batch, span, None if startups is None and wait is None
                                    else pause, true)
        if self.carries:
            seconds = np.minimum(seconds, span)
        starts = np.zeros(len(batch))
        if start:
            starts += start
        return Ran(batch, seconds, steps, pause, starts)

    def waved(self, batch, pause: np.ndarray) -> np.ndarray:
        """``pause`` with each launch's start-up by its wave (``SimConfig.wave_slope``):
        the processes the round launches at once, over the machines (then capped, as each
        start-up is: ``startup_charge``)."""
        launched = pause > 0
        processes = float(batch.size[launched].sum())
        if processes <= self.sim.machines:
            return pause
        factor = wave_factor(self.sim.wave_slope, processes / self.sim.machines)
        R = self.core.config.round_seconds
        out = pause.copy()
        out[launched] = [startup_charge(p * factor, R) for p in pause[launched].tolist()]
        return out

    def running_on(self, batch) -> np.ndarray:
        """The tasks whose jobs all run on the task's type at t = 0 (``running``)."""
        kept = np.zeros(len(batch), dtype=bool)
        for i, members in enumerate(batch.members if self.running else ()):
            kept[i] = all(self.running.get(m) == batch.types[batch.type_index[i]]
                          for m in members)
        return kept

    def go_on_ahead(self, ran: Ran) -> Ran:
        """``SimConfig.kept_runs_ahead``: a task whose lease was extended (or that goes
        on from t = 0) starts when its run's last lease ended, before the round's start
        (``self.ahead``)."""
        batch = ran.batch
        kept = (batch.extended | self.running_on(batch)).tolist()
        start = np.array([-self.ahead.get(k, 0.0) if go else 0.0
                          for k, go in zip(batch.keys, kept)])
        return ran._replace(start=start)

    def carried(self, batch, pause: np.ndarray, span: float) -> np.ndarray:
        """Each task's start-up this round, under the restart rule: what is left of its
        run's start-up when its lease is extended, else its own; what runs past ``span``
        is carried to the run's next round."""
        carry = self.carry
        pause = np.array([carry.get(k, 0.0) if ext else p
                          for k, ext, p in zip(batch.keys, batch.extended.tolist(),
                                               pause.tolist())])
        for key, p in zip(batch.keys, pause.tolist()):
            if p > span:
                carry[key] = p - span
            else:
                carry.pop(key, None)
        return pause

    def refill(self, ran: Ran, now: float, R: float) -> Ran:
        """``CoreConfig.refill_freed``: the workers of a task whose job finishes before the
        round ends go to waiting jobs for the rest of it (``RoundDriver.refill``), in the
        order they are freed; a refill's own finishes free workers in turn. A refill that
        could not start up in the time left is not made (``worth_launching``, as the
        daemon decides). Returns ``ran`` with the refills after the round's own."""
        freed = ran.freed(R)
        exiting = ran.exiting(self.exits) if self.exits else {}
        while freed:
            at = min(freed)
            more = self.driver.refill(freed.pop(at), now + at, now + R)
            if not len(more):
                continue
            # (each waits for the last process on its workers to exit, SimConfig.exit_s)
            wait = np.array([max([exiting.get(w, 0.0) for w in workers] or [0.0])
                             for workers in more.workers]) if exiting else None
            extra = self.run_tasks(more, R - at, at, wait)
            startup = extra.pause if wait is None else extra.pause - wait
            idle = np.array([not worth_launching(R - at, float(p), R, refill=True)
                             for p in startup], dtype=bool)
            extra = extra.never_started(idle)
            extra = extra._replace(seconds=np.minimum(extra.seconds, R - at))
            for t, workers in extra.freed(R).items():
                freed.setdefault(t, []).extend(workers)
            if self.exits:
                exiting.update(extra.exiting(self.exits))
            ran = ran.plus(extra)
        return ran


def _plotted(window: tuple[int, int] | None, n: int) -> range:
    return (range(*window) if window else range(n))[:PLOTTED_JOBS]


def _check_runnable(jobs: Sequence[TraceJob], table: ThroughputTable,
                    view: ClusterView) -> None:
    """Every job runs on some type of the cluster (by its own throughputs if it has them,
    which name only the table's or the cluster's worker types)."""
    known = set(table.worker_types) | set(view.worker_types)
    kinds: set[tuple[str, int]] = set()  # jobs that run at their type's table rates: once
    for i, job in enumerate(jobs):
        if job.throughputs is None:
            if (job.job_type, job.scale_factor) in kinds:
                continue
            kinds.add((job.job_type, job.scale_factor))
        unknown = sorted(set(job.throughputs or ()) - known)
        if unknown:
            raise SimulationError(f"job {i} ({job.job_type}): its throughputs name worker "
                                  f"type {unknown[0]!r}, not in the table or the cluster")
        if not any(job.rate_on(t, table) > 0 and view.count(t) >= job.scale_factor
                   for t in view.worker_types):
            raise SimulationError(
                f"job {i} ({job.job_type}, scale factor {job.scale_factor}) cannot run "
                f"on any worker type of the cluster {dict(view.counts)}")


def _progress_bar(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="job", file=sys.stderr, desc="simulating", leave=False)
