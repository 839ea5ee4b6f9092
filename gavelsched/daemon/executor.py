"""``DaemonExecutor``: the scheduler core run on real time (thesis §5.5-5.6).

Threading contract of ``SchedulerCore`` (it has no locks): exactly one thread, the
executor's, ever calls the core, the store and the rooms below (a plan's solve runs apart
over a frozen problem: ``solver``). gRPC handlers and the dispatcher's threads never touch
them; they hand the executor an event with ``post(fn)`` / ``call(fn)`` (``inbox``: run on
the executor thread, in order in each of two lanes) and read only ``snapshot``, republished
after a change (``publish``). Exceptions, under their rooms' locks so that a busy thread
loses no worker or run: a heartbeat (``Health.seen``), a renewal a plan decided (``Renewals``).

The round recipe is the simulator's: ``RoundDriver`` (``gavelsched/core/driver.py``) ends
a round, plans the next, applies the empty-round rule and takes progress in. What is the
daemon's own lives in rooms of one job each, which this class wires together and hands
their collaborators (docs/architecture.md, "Inside gavelsched/daemon/", names each):
*when* boundaries come (``clock``: the next round is planned ``plan_lead`` early, so that
a job kept on its workers gets its lease extended, not restarted), the jobs' states
(``jobs``), *how tasks run* and what a run's exit means (``runs``, ``exits``,
``retries``), freed GPUs (``refills``), durable steps (``progress``), the workers
(``servers``, ``health``, ``priors``), teams, users and job control (``tenancy``) and the
picture that ``snapshot`` and ``metrics`` read (``view``, ``publish``).

The log has one line per round start (``DaemonView.summary``, with ``roundtimes``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from policies import Policy
from policies.moves import preload as preload_moves
from traces.types import ThroughputTable

from ..core import SchedulerCore
from ..mechanism import ClusterView, Server
from ..rpc import pb
from ..rpc.identity import ADMIN, Caller
from .calls import Door, policy_door
from .clock import Origin, RoundClock
from .collector import Collector
from .config import DaemonConfig
from .dispatch import Dispatcher
from .fences import Fences
from .forecast import Forecaster
from .health import Health
from .inbox import Inbox
from .logs import Hosts
from .meta import ROUND
from .metrics import DaemonMetrics
from .priors import Priors
from .period import PERIOD_FILE, resume_period, save_period
from .processes import ProcessCalls
from .picture import Picture
from .progress import Progress, restored_online
from .refills import Refills
from .retention import Retention
from .retired import live, of_jobs
from .retries import Retries
from .room import Room
from .roundtimes import RoundTimes
from .runs import RunTable
from .publish import Publisher
from .settings import ClusterSettings
from .snapshot import Snapshot
from .solver import Solver
from .startups import Startups
from .servers import Servers
from .jobs import HELD, JobRow, Jobs
from .store import Store
from .tenancy import Tenancy
from .view import Shares

log = logging.getLogger(__name__)
LOCAL_ADMIN = Caller("admin", ADMIN)     # who calls ``submit`` and ``cancel`` in-process


class DaemonExecutor:
    """One thread drives ``SchedulerCore`` on real time (see the module docstring)."""

    def __init__(self, config: DaemonConfig, store: Store, policy: Policy, table,
                 dispatcher: Dispatcher, metrics: DaemonMetrics | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 job_env: Callable[[JobRow], Mapping[str, str]] = lambda job: {},
                 collector: Collector | None = None) -> None:
        """``job_env(job)``: what a job's processes get in their environment besides the
        job contract's own (its token). ``collector``: full garbage collections once a
        round, as it starts (``collector.py``); None: CPython's own rule."""
        self.config, self.store = config, store
        self.dispatcher, self.metrics, self.collector = dispatcher, metrics, collector
        self._clock = clock
        self.inbox = inbox = Inbox()
        self.post, self.call, self.stop, self.tell = inbox.post, inbox.call, inbox.stop, inbox.tell
        # ETAs: replayed off this thread at each round start, arrival and end (``forecast``)
        self.forecasts = Forecaster(lambda: self.tell(self._forecast_ready))
        self._forecast_due, self._startups_seen = False, 0
        self.origin = Origin(store, clock)   # ``now``: seconds since the state's first start
        self.epoch_unix, self.now = self.origin.epoch_unix, self.origin.now
        if metrics is not None:
            metrics.watch_forecasts(lambda: self.forecasts.latest, self.epoch_unix)
        self._round_base = int(store.get_meta(ROUND.key(), "0"))
        servers = store.servers()
        self.priors = Priors(table, store)     # before the core: it caches its lookups
        self.priors.restore(s.worker_type for s in servers)
        table = self.priors.table
        self.health = Health(config.heartbeat_seconds, servers)
        view = ClusterView(tuple(Server(s.id, s.worker_type, s.workers) for s in servers),
                           frozenset(w for s in servers for w in s.workers))
        self.core = SchedulerCore(policy, view, self.priors, config.rules.core_config(
            policy, table, table.worker_types, seed=config.seed),
            entities=config.settings.entities, prices=config.settings.policy_prices_at(self.now()))
        self.driver = config.rules.driver(self.core)
        if self.core.config.restart_rule == "tenure" and policy.traits.rearrangeable:
            preload_moves()     # (not at a round's start: its launches would wait)
        self.jobs = Jobs(store, changed=self._changed, ended=self._job_ended,
                         retired=lambda ids: (self.runs.forget(ids), self.tenancy.forget(ids)))
        in_memory = live(self.now(), config.ended_jobs_kept_s)   # (not those ended long ago)
        self.jobs.restore(store.jobs(table, in_memory))
        self.tenancy = Tenancy(config.settings, store, self.jobs, self.core, metrics,
                               self.epoch_unix, now=self.now, post=self.post,
                               cancel=self._cancel_job, fail=self._fail_job,
                               running=lambda j: j in self.runs, woken=self._wake,
                               in_memory=in_memory)
        self.calls = self.tenancy.calls          # what the client handlers call
        self.startups = Startups(store)
        self.retries, self.fences = Retries(store, config.round_seconds), Fences(store)
        self.retention = Retention.configured(config, store)   # (ended jobs: what goes when)
        self.room = Room(config.state_dir, config.state_dir_min_free_mb, clock=clock, changed=self._changed)
        self.hosts = Hosts(store, of_jobs(in_memory))
        self.runs = RunTable(config, self.jobs, self.health, dispatcher, self.startups,
                             self.retries, self.fences, self.hosts, self.core, clock=clock,
                             now=self.now, monotonic=self.origin.monotonic, post=self.post,
                             fail=self._fail_job, allowed=self.tenancy.meter.allowed_s,
                             ended=lambda run: self.tenancy.run_ended(run, self._clock()),
                             job_env=job_env)
        self.roster = Servers(config, self.core, store, self.health, self.runs, self.priors,
                              now=self.now, changed=self._changed, audit=self.tenancy.audit)
        online = restored_online(self.priors, self.core.configurations, store, self.jobs)
        self.progress = Progress(self.jobs, self.runs, self.driver, self.core, online, store,
                                 self.fences, clock=clock)
        self.shares = Shares(self.core)
        self.solver = Solver(self.core, self.tell, self.shares, metrics, planned=self._planned,
                             refill=lambda: self.refills.released(), changed=self._changed,
                             clock=clock)
        self.clock = RoundClock(self.core.config.round_seconds, self.driver.plan_lead_s)
        self._started_index, self._woken = -1, self._clock()   # (woken: an idle one got work)
        self.times = RoundTimes(dispatcher, metrics, clock)   # what each boundary took
        self.refills = Refills(config, self.core, self.driver, self.clock, self.runs,
                               round_base=self._round_base, started=lambda: self._started_index,
                               now=self.now, monotonic=clock, placed=self._refilled,
                               held=lambda: self.solver.refills_held_until)
        self.processes = ProcessCalls(self.jobs, self.runs, self.fences, self.progress,
                                      self.refills, self.driver, self.clock, now=self.now,
                                      round_index=lambda: self.round_index,
                                      started=lambda: self._started_index, fail=self._fail_job)
        self.picture = Picture(config, self.core, self.jobs, self.runs, self.health,
                               self.roster, self.priors, self.hosts, self.shares, self.tenancy,
                               self.retries, self.progress, self.startups, self.forecasts,
                               self.clock, self.solver, self.room, epoch_unix=self.epoch_unix,
                               monotonic=clock, now=self.now, round_index=lambda: self.round_index)
        self.view = self.picture.view           # (the frozen picture at ``now``)
        self.pictures = Publisher(self.view(0.0), lambda: self.view(self.now()), metrics,
                                  jobs=lambda: len(self.jobs), clock=clock)
        self.publish = self.pictures.now      # read your writes (``Publisher.now``)
        # Last: entering a restored job may end it (a dependency that ended before the stop
        # cancels it), which needs every room above.
        self.tenancy.restore()
        resume_period(self.core, config.state_dir / PERIOD_FILE, self.now(), self.progress.admitted)

    @property
    def snapshot(self) -> Snapshot:
        """The latest picture (``publish.Publisher``): what ``Status`` reads."""
        return self.pictures.snapshot

    @property
    def servers(self):
        return self.health.servers

    @property
    def table(self) -> ThroughputTable:
        """The throughput table now: the configured one plus the types learned since."""
        return self.priors.table

    def run(self) -> None:
        """The executor loop: events, heartbeats, round deadlines, snapshots."""
        while not self.inbox.stopped:
            self.refills.in_batch = True    # refills wait for the end of the batch of events
            try:
                if self.inbox.run_pending(self._wait()):
                    self._changed()
            finally:
                self.refills.in_batch = False
            with self.dispatcher.held(), self.store.batched():     # (as at a round's start)
                self.refills.after_batch()
            busy = self.inbox.take_busy_s()    # (beyond a heartbeat: not the servers' silence)
            if busy > self.config.heartbeat_seconds:
                self.health.excuse(busy, self._clock())
            self.tick()
            self.pictures.due(self._clock(), bool(self.runs),
                              min(self.clock.deadlines(), default=None))
            if self.startups.first_measured != self._startups_seen:   # (a guess replaced)
                self._startups_seen, self._forecast_due = self.startups.first_measured, True
            if self._forecast_due and self.config.eta and not self.pictures.dirty:
                self._forecast_due = False
                self.forecasts.offer(self.snapshot, self.core.period_state())
            self.store.flush_estimates(self._clock())
        self.runs.renewals.answer_waiting(stopping=True)
        self.inbox.refuse_pending()
        self.forecasts.close()

    def _changed(self) -> None:
        """Something ``snapshot`` shows changed: it is republished (``Publisher``)."""
        self.pictures.changed()

    def _forecast_ready(self) -> None:
        """A replay answered (``forecast``): the next snapshot carries its ETAs."""
        self._changed()
        if self.metrics is not None and self.forecasts.latest is not None:
            self.metrics.on_forecast(self.forecasts.latest)

    def _job_ended(self, row: JobRow) -> None:
        self.tenancy.job_ended(row)
        self.progress.ended(row.id)
        self.retries.ended(row.id)
        self._forecast_due = True

    def _wait(self) -> float:
        """Seconds to wait for an event: to the next deadline, at most half a heartbeat."""
        deadlines = (self.clock.deadlines() + self.pictures.deadlines(bool(self.runs))
                     + self.refills.deadlines())
        mono = self._clock()
        return min([self.config.heartbeat_seconds / 2, *(max(0.0, d - mono) for d in deadlines)])

    # ---- time-driven ------------------------------------------------------------------
    def tick(self) -> None:
        """What the loop does each time it wakes: failures, suspects, round boundaries, the
        checkpoints of ended jobs past their retention (once a minute), the disk's room."""
        mono = self._clock()
        self.retention.tick(self.jobs, self.now(), self.runs)
        self.room.tick()
        if self.collector is not None:
            self.collector.due()
        if self.roster.fail_silent(mono):
            self._changed()
        for job_id, reason, exit_code in self.health.due(mono):
            failed = self.retries.died(job_id, self.round_index, exit_code, reason, mono)
            if failed is not None:
                self._fail_job(job_id, failed)
            else:
                self.runs.kill(job_id, reason)    # its other ranks cannot go on alone
        if self.clock.idle:      # start as soon as there is work (``_planned``: once planned)
            if (self.core.has_jobs and self.roster.back(mono) and not self.solver.waiting
                    and self.health.alive_gpus() >= max(1, self.config.expected_workers)
                    and mono >= self.driver.first_plan_at(self._woken)):
                self._plan()
            return
        if (self.driver.planned is None and not self.solver.waiting
                and self.clock.plan_due(mono)):
            self._plan()
        if self.clock.start_due(mono):
            self.solver.finish()        # (a solve still out: planned on the allocation in force)
            self._start_round(mono)

    def _plan(self) -> None:
        """Open the next round's plan, ``plan_lead`` before the boundary (``RoundDriver.open``):
        a re-solve due is solved off this thread, and the round planned once it settles, or
        at the boundary on the allocation in force (``solver``)."""
        self._changed()
        self.times.plan_begins()
        now = self.now()
        self.core.set_prices(self.tenancy.settings.policy_prices_at(now), now)   # (a trace moves)
        flight = self.driver.in_flight
        held = None if flight is None else np.array(self.runs.held_s(list(flight.batch.keys)))
        self.core.set_restart_costs({t: self.startups.restart_s(t) for t in
                                     {j.spec.job_type for j in self.jobs.values() if not j.final}})
        uncredited = self.runs.uncredited_steps()
        solve = self.driver.open(now, held, uncredited=uncredited)
        self.times.opened()
        self.solver.open(solve, now, uncredited)

    def _planned(self, now: float, uncredited: Mapping[str, float]) -> None:
        """The round opened at ``now``, planned (``RoundDriver.plan``); idle, it starts."""
        self.times.planning()
        step = self.driver.plan(now, uncredited=uncredited)
        rnd = step.round
        for job_id in step.completed:
            self.jobs.finish(job_id, now)
        for job_id, reason in rnd.rejected:
            self._fail_job(job_id, f"refused by the policy: {reason}")
        self.progress.admitted(rnd.admitted, now)
        self.clock.planned()
        index = self._round_base + rnd.index
        self.store.set_meta({ROUND.key(): index + 1})
        self.origin.mark()
        save_period(self.config.state_dir / PERIOD_FILE, self.core.period_state())
        self.times.planned(index, rnd)
        with self.dispatcher.held(), self.store.batched():         # (as at a round's start)
            self.roster.orphans.at_plan(rnd, index, now)   # (extensions; waiting renewals)
        if self.clock.idle:
            self._start_round(self._clock())

    def _start_round(self, mono: float) -> None:
        """The planned round begins (``RoundDriver.start``): launch its new runs, and give
        the GPUs of jobs that ended since its plan (``plan_lead`` ago) to waiting jobs;
        schedule the next plan."""
        rnd = self.driver.planned
        self._changed()
        due = self.clock.next_start        # (None: the first round after idle, due now)
        self.times.start_begins()
        since = self.clock.start(mono)
        if self.metrics is not None and since is not None:
            self.metrics.on_round(since)
        if rnd is None or (not self.core.has_jobs and len(rnd.batch) == 0):
            self.clock.stop()                              # go idle
            self.runs.begin(None)
            if rnd is not None:
                self._started_index = self._round_base + rnd.index
                self.driver.end(self.now())
            return
        # (a job held since the plan, with no run to go on, is out of the core as these are)
        ended = [j for members in rnd.batch.members for j in members
                 if j in self.jobs and (self.jobs[j].final or (
                     self.jobs[j].state == HELD and j not in self.runs))]
        started = self.driver.start(self.now() - (mono - self.clock.round_start), ended,
                                    resolve=False)      # (a re-solve due: ``solver.begin``)
        index = self._started_index = self._round_base + rnd.index
        self.runs.begin(started.round)
        planned = started.round.tasks[:len(rnd.batch)]
        # the launches' writes in one transaction, then their calls queued together (one
        # at a time, each woke threads whose GIL turns slowed launches tenfold at 2,048 GPUs)
        with self.dispatcher.held(), self.store.batched():
            self.runs.place(tuple(t for i, t in enumerate(planned)
                                  if i not in started.unstarted), index)
            self.refills.place(started.refilled)
            self.solver.begin(started.solve)     # (freed GPUs wait for it: ``refills``)
            self.refills.refill()                          # GPUs idle for other reasons
        self._forecast_due = True
        # written once the launches are on their way: it says when the round began
        log.info("%s; %s", self.picture.round_line().summary(),
                 self.times.started(index, due, mono))
        if self.metrics is not None:
            self.metrics.on_plan()
        if self.collector is not None:    # the round is under way, the next plan far off
            self.collector.collect()

    def _refilled(self) -> None:
        """Tasks were placed on freed GPUs (``refills``): the ETAs are due again."""
        self._changed()
        self._forecast_due = True

    # ---- jobs ending (``jobs.Jobs``: the state) -------------------------------------------
    def _fail_job(self, job_id: str, reason: str) -> None:
        self._end_job(job_id, reason, lambda now: self.jobs.fail(job_id, reason, now))

    def _cancel_job(self, job_id: str, reason: str) -> None:
        self._end_job(job_id, reason, lambda now: self.jobs.cancel(job_id, now, reason))

    def _end_job(self, job_id: str, reason: str, end: Callable[[float], None]) -> None:
        """A job not ended ends before it is done: out of the core, its run killed,
        ``end(now)`` sets its final state; its GPUs go to waiting jobs."""
        job = self.jobs.get(job_id)
        if job is None or job.final:
            return
        if job_id in self.core.active_ids or job_id in self.core.pending_jobs:
            self.core.cancel(job_id, self.now())
        self.driver.forget(job_id)
        self.runs.kill(job_id, reason)
        end(self.now())
        self.refills.soon()

    # ---- events from handlers (run on this thread through ``call``) ---------------------
    def door(self) -> Door:
        """What a submission is checked against now (``calls``)."""
        return Door(self.table, tuple(self.table.worker_types), self.health.gpus_by_type(),
                    self.tenancy.settings.entity_names, self.room, **policy_door(self.core.policy))

    def submit(self, request: pb.JobRequest, caller: Caller = LOCAL_ADMIN) -> str:
        """Submit as ``caller`` (``calls.ClientCalls.submit``); the (first) job's id."""
        return self.calls.submit(caller, request, self.door()).job_id

    def cancel(self, job_id: str, caller: Caller = LOCAL_ADMIN) -> pb.Ack:
        return self.calls.cancel(caller, job_id)

    def _wake(self) -> None:
        """A job arrives: an idle scheduler plans ``arrival_grace_s`` after it."""
        self._forecast_due = True
        if self.clock.idle and not self.core.has_jobs:
            self._woken = self._clock()

    def reload(self, settings: ClusterSettings, policy: Policy) -> None:
        """New entities, policy options and prices, from the next round (``Tenancy``)."""
        self.tenancy.reload(settings, policy)
        self._changed()

    @property
    def round_index(self) -> int:
        """The round running now (or the last one), counted across restarts."""
        return max(self._started_index, self._round_base)
