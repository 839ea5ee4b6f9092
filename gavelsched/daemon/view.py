"""A frozen view of the daemon's state, for the rooms that only read it (``snapshot`` for
``Status``, ``metrics`` for Prometheus): built by the executor thread after a change, so
readers never touch live state (docs/style.md §5: rooms read snapshots).

It also keeps the allocation against the received share (thesis §5.5) that both show:
``Shares`` remembers the last closed allocation period, because a period younger than a
round says little. With the throughput table (``table``), it tells which worker types run
a job (for the pending reasons of ``pending``). ``hosts`` says which servers ran each job
(where its logs are), and ``summary`` is the one line the executor logs at a round start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policies import key_members

from ..core import Period, SchedulerCore
from .forecast import Forecast
from .holding import counted_once, held_gpus, runs_per_server, sharing
from .jobs import FINAL, PREEMPTED, QUEUED, RUNNING, JobRow
from .rows import ServerRow, Table, runs_on

ShareRow = tuple[Mapping[str, float], Mapping[str, float]]   # (X, received fraction)


@dataclass(frozen=True)
class RunView:
    worker_type: str      # the type it runs on, or its configuration's name
    gpus: int
    orphan: bool
    began_s: float = -1.0   # its first round's start (scheduler clock; kept runs: earlier)
    up_s: float = -1.0      # its process's first InitJob; < 0: still starting up
    refill: bool = False    # placed on GPUs freed mid-round
    ending: bool = False    # its lease was not extended into this round: it leaves
    lease_steps: int = 0    # the step count its lease ends at
    reported_s: float = -1.0  # its last commit report (scheduler clock); < 0: none yet
    shared_with: str = ""   # the job of its co-located pair it shares its GPUs with now


@dataclass(frozen=True)
class ServerView:
    row: ServerRow
    alive: bool
    drained: bool = False     # out of service (``Servers.drain``)
    runs: int = 0             # runs with processes on it


@dataclass(frozen=True)
class EntityView:
    """A configured entity (``settings``): its weight, inner policy and GPU cap."""

    name: str
    weight: float
    policy: str
    max_gpus: int | None


@dataclass(frozen=True)
class DaemonView:
    round: int
    policy: str
    round_seconds: float
    now_s: float
    jobs: tuple[JobRow, ...]
    runs: Mapping[str, RunView]
    servers: tuple[ServerView, ...]
    shares: Mapping[str, ShareRow]
    table: Table | None = None      # immutable (``traces.ThroughputTable``); None: unknown
    hosts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # job -> servers
    epoch_unix: float = 0.0         # Unix time of the clock's origin (``now_s`` counts from it)
    # For a client-side replay (ETA): each job not finished's steps/s per worker type
    # (``OnlineThroughputs.row``), mean start-up seconds per job type, the re-solve rule.
    rates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # ... and the steps/s the core plans each on (``SchedulerCore.planned_rates``)
    plan_rates: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    startup_s: Mapping[str, float] = field(default_factory=dict)
    restart_s: Mapping[str, float] = field(default_factory=dict)   # start-up + save
    exit_s: Mapping[str, float] = field(default_factory=dict)      # last step to exit
    startup_alone_s: Mapping[str, float] = field(default_factory=dict)  # (``core/waves.py``)
    startup_wave_slope: float = 0.0
    resolve: str = ""
    min_resolve_interval_s: float = 0.0
    round_ends_s: float = 0.0       # when the round running now ends (0: idle)
    refill_until: float = 0.0       # GPUs freed before this fraction of a round are refilled
    plan_lead_s: float = 0.0        # each round is planned this long before the last ends
    # Job control and accounting (issue #28): seconds each job has run (ended runs and the
    # live one), why a job waits on its dependencies, the configured entities.
    run_s: Mapping[str, float] = field(default_factory=dict)
    waiting: Mapping[str, str] = field(default_factory=dict)
    entities: tuple[EntityView, ...] = ()
    forecast: Forecast | None = None     # the scheduler's latest ETAs (``forecast``)
    deferred: Mapping[str, str] = field(default_factory=dict)   # job -> its next run's type
    restart_rule: str = ""          # ``DaemonRules.restart_rule`` (``core/restarts.py``)
    policy_options: Mapping[str, Any] = field(default_factory=dict)  # ``Policy.made_with``
    # what a replay pairs the jobs with, as the core plans pairs (``Picture.pair_table``);
    # None: the policy plans none
    pair_table: Table | None = None
    type_order: tuple[str, ...] = ()   # the core's ``CoreConfig.type_order``
    # the co-located pairs it measured: (a, b) -> type -> each one's steps/s there
    measured_pairs: Mapping[tuple[str, str], Mapping[str, tuple[float, float]]] = \
        field(default_factory=dict)
    pair_partners: int = 0      # ``DaemonRules.pair_partners`` (0: every pair)
    # The re-solve running off the executor (``solver.Solver.running``): since when on the
    # scheduler's clock (< 0: none) and for how many jobs; the seconds the allocation in
    # force took to solve (< 0: none yet).
    solving_since_s: float = -1.0
    solving_jobs: int = 0
    allocation_solve_s: float = -1.0
    prices: Mapping[str, float] = field(default_factory=dict)   # the policy's $/GPU-hour
    # each type's price changes to come: (scheduler clock, $/GPU-hour from then)
    price_changes: Mapping[str, tuple[tuple[float, float], ...]] = \
        field(default_factory=dict)
    notices: tuple[str, ...] = ()      # what an operator should know now (``room``)

    @classmethod
    def of(cls, round_index: int, policy: str, round_seconds: float, now: float,
           jobs: Mapping[str, JobRow], runs: Iterable, servers: Iterable,
           shares: Mapping[str, ShareRow], table: Table | None = None, *,
           hosts: Mapping[str, tuple[int, ...]] | None = None,
           epoch_unix: float = 0.0, rates: Mapping[str, Mapping[str, float]] | None = None,
           plan_rates: Mapping[str, Mapping[str, float]] | None = None,
           startup_s: Mapping[str, float] | None = None,
           restart_s: Mapping[str, float] | None = None,
           exit_s: Mapping[str, float] | None = None,
           startup_alone_s: Mapping[str, float] | None = None,
           startup_wave_slope: float = 0.0, resolve: str = "",
           min_resolve_interval_s: float = 0.0, round_ends_s: float = 0.0,
           refill_until: float = 0.0, plan_lead_s: float = 0.0,
           drained: frozenset[int] = frozenset(), run_s: Mapping[str, float] | None = None,
           waiting: Mapping[str, str] | None = None, clock_offset: float = 0.0,
           entities: Iterable[EntityView] = (),
           forecast: Forecast | None = None,
           deferred: Mapping[str, str] | None = None, restart_rule: str = "",
           policy_options: Mapping[str, Any] | None = None,
           pair_table: Table | None = None,
           type_order: tuple[str, ...] = (),
           measured_pairs: Mapping[tuple[str, str], Mapping[str, tuple[float, float]]]
           | None = None, pair_partners: int = 0, solving_since_s: float = -1.0,
           solving_jobs: int = 0, allocation_solve_s: float = -1.0,
           prices: Mapping[str, float] | None = None,
           price_changes: Mapping[str, tuple[tuple[float, float], ...]] | None = None,
           notices: Iterable[str] = ()) -> DaemonView:
        """A picture of live state: the job rows, the run table's ``Run``s, the servers'
        health (``ServerState``), the ``drained`` servers and the servers that ran each
        job, copied into frozen values. ``clock_offset``: the scheduler's clock less the
        monotonic clock the runs' times are on."""
        runs, servers = tuple(runs), tuple(servers)
        server_of = {w: s.row.id for s in servers for w in s.row.workers}
        held, shared = held_gpus(runs, server_of), sharing(runs, server_of)
        on = runs_per_server(runs)
        return cls(round_index, policy, round_seconds, now, tuple(jobs.values()),
                   {r.job_id: RunView(r.worker_type, held[r.job_id], r.orphan,
                                      r.round_start + clock_offset,
                                      r.init_at + clock_offset if r.started_up else -1.0,
                                      r.refill, r.round < round_index,
                                      int(r.lease.max_steps),
                                      r.reported_at + clock_offset if r.reported_at else -1.0,
                                      shared.get(r.job_id, ""))
                    for r in runs},
                   tuple(ServerView(s.row, s.alive, s.row.id in drained, on[s.row.id])
                         for s in servers), shares, table,
                   dict(hosts or {}), epoch_unix, dict(rates or {}), dict(plan_rates or {}),
                   dict(startup_s or {}),
                   dict(restart_s or {}), dict(exit_s or {}), dict(startup_alone_s or {}),
                   startup_wave_slope, resolve, min_resolve_interval_s, round_ends_s,
                   refill_until, plan_lead_s,
                   dict(run_s or {}), dict(waiting or {}), tuple(entities), forecast,
                   dict(deferred or {}), restart_rule, dict(policy_options or {}),
                   pair_table, tuple(type_order), dict(measured_pairs or {}), pair_partners,
                   solving_since_s, solving_jobs, allocation_solve_s, dict(prices or {}),
                   dict(price_changes or {}), tuple(notices))

    def summary(self) -> str:
        """One line for a round's start: jobs with a run this round, jobs whose last run is
        still saving its checkpoint (its lease was not extended), waiting (queued,
        preempted) and finished, and the GPUs the runs hold of those alive (and how many
        are down)."""
        saving = {job_id for job_id, run in self.runs.items() if run.ending}
        states = Counter(RUNNING if j.id in self.runs else j.state for j in self.jobs
                         if j.id not in saving)
        finished = sum(states[s] for s in FINAL)
        busy = sum(counted_once(job_id, r.gpus, r.shared_with)
                   for job_id, r in self.runs.items())
        total = [sum(counts) for counts in zip(*self.gpus().values())] or [0, 0]
        out = [f"{total[0] - total[1]} down"] if total[0] > total[1] else []
        drained = sum(len(s.row.workers) for s in self.servers if s.drained and s.alive)
        out += [f"{drained} drained"] if drained else []
        down = f" ({', '.join(out)})" if out else ""
        return (f"round {self.round}: {states[RUNNING]} jobs running, "
                + (f"{len(saving)} saving, " if saving else "")
                + f"{states[QUEUED]} queued, {states[PREEMPTED]} preempted, {finished} "
                f"finished; GPUs {busy} busy of {total[1]}{down}")

    def gpus(self) -> dict[str, tuple[int, int]]:
        """Worker type -> (GPUs registered, GPUs alive)."""
        out: dict[str, tuple[int, int]] = {}
        for s in self.servers:
            total, alive = out.get(s.row.worker_type, (0, 0))
            n = len(s.row.workers)
            out[s.row.worker_type] = (total + n, alive + (n if s.alive else 0))
        return out

    def runs_on(self, job_type: str, scale_factor: int) -> tuple[str, ...] | None:
        """The worker types that run the job (``rows.runs_on``); None without a table."""
        return None if self.table is None else runs_on(self.table, job_type, scale_factor)


def control_inputs(jobs: Iterable[JobRow], runs: Iterable, run_s: Mapping[str, float],
                   waiting: Callable[[JobRow], str | None], entities: Iterable,
                   mono: float) -> dict:
    """``DaemonView.of``'s job-control fields (issue #28): each job's seconds run (its
    ended runs' ``run_s`` and its live run's, started up, to ``mono``), why the jobs with
    dependencies wait (``waiting``), and the configured ``entities`` (``policies.Entity``)."""
    seconds = dict(run_s)
    for run in runs:
        if run.started_up:
            seconds[run.job_id] = seconds.get(run.job_id, 0.0) + max(0.0, mono - run.started)
    why = {j.id: reason for j in jobs if j.after and not j.final
           and (reason := waiting(j))}
    return {"run_s": seconds, "waiting": why,
            "entities": [EntityView(e.name, e.weight, e.policy, e.max_gpus) for e in entities]}


class Shares:
    """Each active job's X and the fraction of time it received per type (thesis §5.5):
    since its received time counts (``SchedulerCore.shares``), or over the last closed
    period while the current one is younger than a round."""

    def __init__(self, core: SchedulerCore) -> None:
        self._core = core
        self._last: dict[str, dict[str, float]] = {}

    def closed(self, periods: list[Period]) -> None:
        """The periods a re-solve just closed (``SchedulerCore.take_closed_periods``)."""
        for period in periods:
            span = period.end_s - period.start_s
            if span > 0:
                last: dict[str, np.ndarray] = {}
                for key, got in zip(period.keys, period.received / span):
                    for job_id in key_members(key):    # a pair's time is both members'
                        last[job_id] = last[job_id] + got if job_id in last else got
                self._last = {job_id: dict(zip(period.types, got.tolist()))
                              for job_id, got in last.items()}

    def at(self, now: float) -> dict[str, ShareRow]:
        shares = self._core.shares(now)
        if now - self._core.counted_since_s >= self._core.config.round_seconds:
            return shares
        return {job: (x, self._last.get(job, got)) for job, (x, got) in shares.items()}
