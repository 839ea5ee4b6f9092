"""The executor's rooms as one frozen ``DaemonView`` (``view.py``): what ``Status``, the
metrics, the dashboard, the round's log line and the scheduler's own forecast read.

Built on the executor thread, which owns every room it reads; ``publish.Publisher``
decides when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from policies import key_members
from traces.throughputs import table_slice
from traces.types import ThroughputTable

from ..core import SchedulerCore
from .clock import RoundClock
from .config import DaemonConfig
from .forecast import Forecaster
from .health import Health
from .jobs import JobRow, Jobs
from .logs import Hosts
from .priors import Priors
from .progress import Progress
from .retries import Retries
from .room import Room
from .runs import RunTable
from .servers import Servers
from .solver import Solver
from .startups import Startups
from .tenancy import Tenancy
from .view import DaemonView, Shares


class Picture:
    """``view(now)``: the whole picture; ``round_line()``: the part the round's log line
    needs. ``monotonic``: the executor's clock; ``round_index``: the round running now."""

    def __init__(self, config: DaemonConfig, core: SchedulerCore, jobs: Jobs, runs: RunTable,
                 health: Health, roster: Servers, priors: Priors, hosts: Hosts,
                 shares: Shares, tenancy: Tenancy, retries: Retries, progress: Progress,
                 startups: Startups, forecasts: Forecaster, clock: RoundClock,
                 solver: Solver, room: Room, *, epoch_unix: float,
                 monotonic: Callable[[], float], now: Callable[[], float],
                 round_index: Callable[[], int]) -> None:
        self.config, self.core, self.jobs, self.runs = config, core, jobs, runs
        self.health, self.roster, self.priors, self.hosts = health, roster, priors, hosts
        self.shares, self.tenancy, self.retries = shares, tenancy, retries
        self.progress, self.startups, self.forecasts = progress, startups, forecasts
        self.clock, self.solver, self.room, self.epoch_unix = clock, solver, room, epoch_unix
        self._monotonic, self._now, self._round_index = monotonic, now, round_index
        self._pair_table: tuple[tuple, ThroughputTable] | None = None

    def view(self, now: float) -> DaemonView:
        """The frozen view ``snapshot`` and ``metrics`` read."""
        ends = self.clock.next_start
        mono = self._monotonic()
        return DaemonView.of(self._round_index(), self.core.policy.name,
                             self.config.round_seconds, now, self.jobs, self.runs.live(),
                             self.health.servers.values(), self.shares.at(now),
                             table=self.priors.table, hosts=self.hosts.by_job,
                             drained=frozenset(self.roster.drained), epoch_unix=self.epoch_unix,
                             clock_offset=now - mono,
                             round_ends_s=0.0 if ends is None else now + ends - mono,
                             **self._replay_inputs(now), **self._control_inputs(),
                             **self._solve_inputs(now - mono),
                             forecast=self.forecasts.latest, deferred=self.runs.deferred(),
                             notices=[*filter(None, [self.room.notice]),
                                      *self.roster.notices()])

    def round_line(self) -> DaemonView:
        """The jobs, runs and servers alone, for the round line: the whole ``view`` took
        1.5 s of the executor thread at 50,000 jobs (the shares, each job's rates)."""
        return DaemonView.of(self._round_index(), self.core.policy.name,
                             self.config.round_seconds, self._now(), self.jobs,
                             self.runs.live(), self.health.servers.values(), {},
                             drained=frozenset(self.roster.drained))

    def _solve_inputs(self, clock_offset: float) -> dict:
        """The re-solve running (``Solver.running``: since when on the scheduler's clock,
        for how many jobs) and the seconds the allocation in force took to solve."""
        running, allocation = self.solver.running, self.core.allocation
        return {"solving_since_s": -1.0 if running is None else running.since + clock_offset,
                "solving_jobs": 0 if running is None else running.jobs,
                "allocation_solve_s": -1.0 if allocation is None else allocation.solve_s}

    def _control_inputs(self) -> dict:
        """Job control and accounting (``Tenancy.view_inputs``), and why a job waits out
        a backoff after its run was killed (``Retries.waiting``)."""
        mono = self._monotonic()
        inputs = self.tenancy.view_inputs(self.runs.live(), mono)
        inputs["waiting"] = {**self.retries.waiting(mono), **inputs["waiting"]}
        return inputs

    def _replay_inputs(self, now: float) -> dict:
        """What a client needs to replay the live state in the simulator (ETA, issue #18):
        each unfinished job's steps/s per worker type (measured, and as the core plans
        it), start-up (alone, and the launch waves' slope) and restart means, the
        daemon's rules (``DaemonRules.published``: re-solve rule, refills, plan lead), the
        options its policy was made with, the rates it plans pairs on (``pair_table``, and
        the pairs it measured, ``measured_pairs``), the order it serves the types in and
        the prices its policy plans with, now and at the price trace's changes to come."""
        types = sorted({s.row.worker_type for s in self.health.servers.values()})
        active = [j for j in self.jobs.values() if not j.final]
        rates = {j.id: self.progress.online.row(j.id, j.spec.job_type, j.spec.scale_factor,
                                                types) for j in active}
        kinds = {j.spec.job_type for j in active}
        planned = self.core.planned_rates(j.id for j in active)
        plan_rates = {i: {t: row[t] for t in types if t in row} for i, row in planned.items()}
        startups = self.startups
        return {"rates": rates, "plan_rates": plan_rates,
                "startup_s": {t: startups.expected_startup(t) for t in kinds},
                "restart_s": {t: startups.restart_s(t) for t in kinds},
                "exit_s": {t: startups.expected_exit(t) for t in kinds},
                "startup_alone_s": {t: startups.expected_alone(t) for t in kinds},
                "startup_wave_slope": startups.wave_slope(),
                "policy_options": self.core.policy.made_with,
                "pair_table": self.pair_table(active, types),
                "measured_pairs": self.measured_pairs(types),
                "type_order": self.core.config.type_order, "prices": self.core.prices,
                "price_changes": self.tenancy.settings.price_changes_after(now),
                **self.config.rules.published()}

    def measured_pairs(self, types: list[str]
                       ) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
        """The co-located pairs of live jobs measured on ``types`` (thesis §5.3.3): (a, b)
        -> type -> the steps/s each makes there (``OnlineThroughputs.pairs``, both members
        measured); none when the policy plans no pairs."""
        if not self.core.config.pairs or not self.progress.online.pairs:
            return {}
        out = {}
        for pair, by_type in self.progress.online.pairs.items():
            members = key_members(pair)
            if len(members) != 2 or not self.jobs.live(members):
                continue
            rates = {t: (by_job[members[0]], by_job[members[1]])
                     for t, by_job in by_type.items()
                     if t in types and all(m in by_job for m in members)}
            if rates:
                out[members] = rates
        return out

    def pair_table(self, jobs: Iterable[JobRow], types: list[str]) -> ThroughputTable | None:
        """The priors' rows for the kinds (job type, scale factor) of ``jobs`` on ``types``,
        alone and in pairs: what a replay pairs the jobs with, as the core plans co-located
        pairs (thesis §5.3.1; ``traces.throughputs.table_slice``). None when the policy plans
        no pairs. Kept while the kinds and types stay (50,000 jobs are of a few kinds)."""
        if not self.core.config.pairs:
            return None
        key = (frozenset((j.spec.job_type, j.spec.scale_factor) for j in jobs), tuple(types))
        if self._pair_table is None or self._pair_table[0] != key:
            self._pair_table = (key, table_slice(self.priors, *key))
        return self._pair_table[1]
