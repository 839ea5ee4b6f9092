"""The scheduler core: an event-driven state machine (docs/design.md, The flow).

Events are method calls that carry the time as an argument; the core never reads a clock,
so the simulator (virtual time) and the daemon (wall-clock time) drive the same object:

- ``submit(job, now)``: a job arrives; it is admitted at the next round boundary, and its
  completion time counts from ``now``;
- ``cancel(job_id, now)``, ``add_workers(...)``, ``fail_workers(...)``,
  ``restore_workers(...)`` (but with ``reset=False``: back after a daemon's restart),
  ``set_prices(...)``: reset events; ``adopt_run(job_id, workers)``: found running there;
- ``start_round(now) -> Round``: a boundary: admit, re-solve if due (``open_round``), plan;
- ``place_freed(workers, now, round_end_s) -> TaskBatch``: workers freed mid-round go to
  waiting jobs for the rest of it (``CoreConfig.refill_freed``);
- ``end_round(reports, now) -> RoundOutcome``: the time each task of the round held its
  workers (and, if reported, the steps it made);
- ``add_progress_many(keys, steps, now) -> RoundOutcome``: steps, whenever learnt.

Executors call the last three through ``driver.RoundDriver``, the round recipe both share.

Re-solving: a reset event marks the allocation stale; it is recomputed at a boundary when
the rule allows (``resolving``), and starts a new allocation period (``periods``).

State a policy keeps in Gavel is passed in the ``Problem`` instead (policies stay pure):
``previous`` is the whole allocation in force, finished jobs included (FIFO hands a finished
job's type on; Gandiva keeps pairs); ``isolated_elapsed_s`` is Themis t^isolated as Gavel's
finish-time fairness accumulates it (``CoreConfig.isolated_time``). Space-sharing policies
may plan on estimated pair throughputs (``planned_pairs``) until a pair has run on a type.

The state lives here; each step of its work is a module of its own: jobs waiting to be
admitted (``arrivals``), throughput lookups (``lookups``), the rows' columns (``layout``),
per-job records (``jobs``), the policy's ``Problem`` (``problem``) and its solve
(``solving``), allocation periods (``periods``), a round's planner inputs and batch
(``batch``), freed workers refilled (``refill``), the progress reported back
(``progress``) and when a stale allocation may be re-solved (``resolving``).
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from policies import Allocation, Entity, Policy, Problem

from ..mechanism import ClusterView, Demand, plan_round
from .arrivals import Arrivals
from .batch import build_batch, demand, planner_config, with_entities
from .config import CoreConfig
from .configurations import Configurations
from .errors import CoreError
from .jobs import (JobState, admit, forget_pairs, measure_job, measure_pair, planned_pair,
                   planned_rates, retype)
from .layout import ColumnLayout
from .lookups import Lookups
from .periods import (hand_on, install, moved_from, reset_received, shares as received_shares,
                      take_on)
from .problem import advance_isolated_time, build_problem
from .progress import RoundInFlight, align, credit_keys, credit_round, credit_rows
from .resolving import due as resolve_due, interval_passed, next_allowed_s
from .records import (JobSpec, Period, PeriodState, Report, Round, RoundOutcome, RoundReport,
                      TaskBatch, ThroughputSource)
from .refill import hand_over, plan_refill, refillable
from .restarts import Runs, reprice
from .rows import Rows
from .solving import Failed, Solve, settle

log = logging.getLogger(__name__)


class SchedulerCore:
    """One policy, one cluster view, one throughput source (see the module docstring)."""

    def __init__(self, policy: Policy, view: ClusterView, throughputs: ThroughputSource,
                 config: CoreConfig | None = None, *, prices: Mapping[str, float] | None = None,
                 entities: Mapping[str, Entity] | None = None,
                 planned_pairs: ThroughputSource | None = None) -> None:
        """``throughputs`` gives the steps/s jobs make (leases, progress). ``planned_pairs``
        gives the co-located throughputs policies see for a pair until it has run on a
        worker type (thesis §5.3.3: estimated, then measured); None: ``throughputs``."""
        config = config or CoreConfig()
        self.policy, self.config = policy, config
        self._view = view
        self._prices, self._entities = dict(prices or {}), dict(entities or {})
        self._rng = random.Random(config.seed)
        self._jobs: dict[str, JobState] = {}
        self._arrivals = Arrivals()     # submitted, admitted at the next boundary
        self._rows = Rows(len(view.worker_types))
        # Configuration columns (several types at once) follow the types in every row
        # (VirtualFlow §6.5.2; none unless the policy mixes).
        self._mixer = Configurations(throughputs) if config.configurations else None
        self._layout = ColumnLayout(view.worker_types)
        self._lookups = Lookups(throughputs, planned_pairs, view.worker_types)
        self._last_allocation: Allocation | None = None
        self._rejected: list[tuple[str, str]] = []   # (job, why) the policy refused
        self._assignments: dict[str, tuple[int, ...]] = {}
        self._runs = Runs()          # runs going on, for the restart rule (``restarts``)
        self._restarts = False       # some job's restart has cost time: the rule has work
        self._stale = self._force = False
        self._rounds, self._order, self._last_resolve_s = 0, 0, 0.0  # (order: of admission)
        self._counted_since_s = 0.0  # received times count from here (the last reset)
        self._last_solve_s: float | None = None     # the last solve's own time (``resolving``)
        self._solving: Solve | None = None          # begun, not settled (``open_round``)
        self._opened = self._resolved = None   # a round opened: its admitted, what settled since
        self._in_flight: RoundInFlight | None = None
        # closed periods until take_closed_periods() (bounded: some executors never take them)
        self._closed_periods: deque[Period] = deque(maxlen=64)

    # ---- queries ----------------------------------------------------------------------
    @property
    def view(self) -> ClusterView:
        return self._view

    @property
    def worker_types(self) -> tuple[str, ...]:
        return self._layout.types

    @property
    def configurations(self) -> Configurations | None:
        """What prices configuration columns and elastic counts (None unless the policy
        mixes): runs on an elastic count refine its scaling model (``OnlineThroughputs``)."""
        return self._mixer

    @property
    def active_jobs(self) -> tuple[str, ...]:
        return tuple(self._jobs)

    @property
    def active_ids(self):
        """The admitted jobs' ids as a live set-like view (cheap membership tests)."""
        return self._jobs.keys()

    @property
    def pending_jobs(self) -> tuple[str, ...]:
        return self._arrivals.ids()

    @property
    def has_jobs(self) -> bool:
        return bool(self._jobs or self._arrivals)

    @property
    def allocation(self) -> Allocation | None:
        """The allocation in force (None before the first re-solve)."""
        return self._last_allocation

    @property
    def last_workers(self) -> Mapping[str, tuple[int, ...]]:
        """Each task's workers as last placed (a plan, then its refills): what the next
        placement keeps where it can (``mechanism.placement``)."""
        return dict(self._assignments)

    @property
    def prices(self) -> Mapping[str, float]:
        return dict(self._prices)

    @property
    def last_resolve_s(self) -> float:
        return self._last_resolve_s

    def remaining_steps(self, job_id: str) -> int:
        self._job(job_id)
        return int(self._rows.left[self._rows.index[job_id]])

    def period_state(self) -> PeriodState:
        """The allocation period in progress, for a replay to go on from (``resume``)."""
        return hand_on(self._rows, self._layout.columns, self._counted_since_s,
                       self._stale or self._force or self._solving is not None,
                       self._runs.state(),
                       self._jobs if self.config.isolated_time else None, self._last_allocation)

    def resume(self, period: PeriodState,
               measured: Callable[[tuple[str, ...]], None] | None = None) -> tuple[str, ...]:
        """Go on with another core's period (a replay, a restarted daemon): admit the jobs
        submitted so far (returned) with what ``period`` gives them and their pairs
        (``periods.take_on``); ``measured`` (called with them) gives them what was measured
        of them. Stale: if it was, left a job out or moved (``periods.moved_from``)."""
        admitted, rows, cols = self._admit(), self._rows, self._layout.columns
        allocation, whole = take_on(period, rows, self._jobs, cols, self._lookups,
                                    self.config.seed_seconds, self.policy.name)
        self._last_allocation = allocation or self._last_allocation
        self._last_resolve_s = self._counted_since_s = float(period.start_s)
        self._runs.resume({key: run for key, run in period.runs.items() if key in rows.index})
        if measured is not None:
            measured(admitted)
        self._stale = period.stale or not whole or moved_from(period, rows, cols)
        return admitted

    def next_resolve_allowed_s(self) -> float:
        """Earliest time a pending reset event may trigger a re-solve."""
        return next_allowed_s(self.config, self._last_resolve_s, self._last_solve_s,
                              self._force)

    def shares(self, now: float) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
        """Every admitted job's X and the fraction of time it received on each type since
        its received time counts (the last reset, or its arrival; thesis §5.5's priorities,
        for status and metrics; a pair's time counts for both its jobs). Configuration
        columns (several types at once) are keyed by their names, next to the types."""
        return received_shares(self._rows, self._jobs, self._layout.columns, now,
                               self._counted_since_s, self.config.seed_seconds)

    @property
    def counted_since_s(self) -> float:
        """When received times last went back to the seed (Gavel's reset, at a re-solve;
        under the restart rule, at the first re-solve after Gavel's interval, ``restarts``)."""
        return self._counted_since_s

    def take_closed_periods(self) -> list[Period]:
        """Allocation periods closed since the last call (for metrics; cleared here)."""
        out = list(self._closed_periods)
        self._closed_periods.clear()
        return out

    def planned_rates(self, job_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        """The steps/s per worker type the core plans each of ``job_ids`` on (its priors, its
        own ``throughputs`` or what was measured of it); a job it does not hold is left out."""
        return planned_rates(job_ids, self._jobs, self._arrivals, self._lookups)

    def pair_throughputs(self, key: str) -> dict[str, tuple[float, float]]:
        """A co-located pair's steps/s by type (its members', in ``key``'s order) as planned
        now (``jobs.planned_pair``); empty unless ``key`` is two admitted jobs."""
        return planned_pair(key, self._jobs, self._rows, self._lookups)

    # ---- reset events -----------------------------------------------------------------
    def submit(self, job: JobSpec, now: float, steps_done: int = 0, *,
               throughputs: Mapping[str, float] | None = None) -> None:
        """A job arrives at ``now``; it is admitted at the next round boundary.
        ``steps_done``: durable steps it already made (a daemon restoring its state).
        ``throughputs``: its own steps/s per worker type in place of the source's (a type
        not named cannot run it; a trace's ``TraceJob.throughputs``)."""
        self._arrivals.submit(job, now, steps_done, throughputs)

    def cancel(self, job_id: str, now: float) -> None:
        if self._arrivals.cancel(job_id):
            return
        self._job(job_id)
        self._remove((job_id,))

    def withdraw(self, job_id: str, now: float) -> None:
        """The job leaves the core but may come back (a daemon's ``hold``): as ``cancel``,
        and a later ``submit`` of it (with the steps it has made) is its return."""
        self.cancel(job_id, now)
        self._arrivals.forget(job_id)

    def update_job(self, job_id: str, now: float, **changes) -> None:
        """Change an admitted or pending job's ``JobSpec`` fields that do not change its
        rows (``priority_weight``, ``entity``); the allocation becomes stale."""
        if self._arrivals.update(job_id, **changes):
            return
        job = self._job(job_id)
        job.spec = replace(job.spec, **changes)
        self._rows.set_planned(job_id, job.spec.planned)
        self._stale = True

    def set_restart_costs(self, restart_s: Mapping[str, float]) -> None:
        """What a restart costs each job of these job types now (seconds, as the daemon
        measures them: ``JobSpec.restart_s``). Not a reset event: runs are pinned by it
        from the next plan on, and the policy sees it at its next re-solve."""
        reprice(restart_s, self._arrivals, self._jobs, self._rows)
        self._restarts |= any(cost > 0 for cost in restart_s.values())

    def add_workers(self, worker_type: str, count: int, now: float,
                    gpus_per_server: int = 1) -> ClusterView:
        return self._new_view(self._view.with_workers(worker_type, count, gpus_per_server))

    def fail_workers(self, worker_ids: Iterable[int], now: float) -> ClusterView:
        return self._new_view(self._view.without(worker_ids))

    def restore_workers(self, worker_ids: Iterable[int], now: float,
                        reset: bool = True) -> ClusterView:
        return self._new_view(self._view.restored(worker_ids), reset)

    def adopt_run(self, job_id: str, worker_ids: Iterable[int]) -> None:   # (module doc)
        self._assignments[job_id] = tuple(worker_ids)

    def order_types(self, order: Sequence[str]) -> None:
        """Serve the types' queues in ``order`` from the next plan on (``type_order``)."""
        self.config = replace(self.config, type_order=tuple(order))

    def set_prices(self, prices: Mapping[str, float], now: float) -> None:
        new = {**self._prices, **prices}
        if new != self._prices:
            self._prices = new
            self._stale = True

    def reconfigure(self, now: float, *, policy: Policy | None = None,
                    entities: Mapping[str, Entity] | None = None,
                    prices: Mapping[str, float] | None = None) -> None:
        """New settings (a daemon's reload): the policy (its options), the entities of a
        hierarchical policy, the prices (replacing the old ones). The next round re-solves
        under them, whatever the re-solve interval (an operator asked for them)."""
        if policy is not None:
            self.policy = policy
        if entities is not None:
            self._entities = dict(entities)
        if prices is not None:
            self._prices = dict(prices)
        self.force_resolve()

    def force_resolve(self) -> None:
        """Re-solve at the next boundary whatever the interval (Gavel does this when
        nothing runs and no job is left to arrive)."""
        self._force = True
        self._stale = True

    def add_progress(self, job_id: str, steps: float, now: float) -> RoundOutcome:
        """``add_progress_many`` for one job."""
        return self.add_progress_many((job_id,), ((steps,),), now)

    def add_progress_many(self, keys: Sequence[str], steps, now: float) -> RoundOutcome:
        """Steps made, whenever the executor learns them: ``steps[i][m]`` by member m of the
        combination ``keys[i]`` (a job id, or a pair ``"a+b"``; each job named once), the
        shape of a round's ``TaskBatch.keys`` and ``steps``. The simulator reports a round's
        tasks at its end; a daemon a job's durable checkpoint, which it learns after it
        planned the next round (thesis §5.6). Returns the jobs that finished, in row order."""
        if not len(keys):
            return RoundOutcome(completed=())
        flight = self._in_flight
        if (flight is not None and keys is flight.batch.keys      # the round's own batch:
                and flight.version == self._rows.version):       # its rows are known
            done = credit_rows(self._rows, flight.rows, steps)
        else:
            done = credit_keys(self._rows, keys, steps)
        if done:
            self._remove(done)
        return RoundOutcome(completed=done)

    def set_job_throughputs(self, job_id: str, measured: Mapping[str, float],
                            now: float) -> None:
        """Online throughputs (thesis §5.3.3): ``measured`` steps/s of this job by worker type
        replace its priors (types not named keep theirs); the allocation becomes stale, to be
        re-solved by the re-solve rule (``resolving``)."""
        measure_job(self._job(job_id), measured, self._jobs, self._rows, self._lookups,
                    self._layout.type_index)
        self._rows.changed()
        self._stale = True

    def set_pair_throughputs(self, key: str, measured: Mapping[str, tuple[float, float]],
                             now: float) -> None:
        """A co-located pair's online steps/s by type (thesis §5.3.3) replace its planned ones
        (``jobs.measure_pair``), as ``set_job_throughputs``; ignored unless both admitted."""
        if measure_pair(key, measured, self._jobs, self._rows, self._lookups):
            self._rows.changed()
            self._stale = True

    # ---- rounds -----------------------------------------------------------------------
    def open_round(self, now: float, uncredited: Mapping[str, float] | None = None
                   ) -> Solve | None:
        """``start_round``'s first half: admit, and begin a re-solve if one is due and none
        is out. Its ``Solve`` may run on any thread while the core serves other events;
        ``start_round`` plans on the allocation in force (the solve's once ``settle``d)."""
        if self._in_flight is not None or self._opened is not None:
            raise CoreError(f"round {self._rounds} opened while the last has not ended")
        self._opened = self._admit()
        return self.begin_resolve(now, uncredited)

    def settle(self, solve: Solve, result) -> Solve | Allocation | None:
        """Install ``solve.run()``'s result: the allocation now in force (a job that left
        meanwhile gets no row); the next solve, when the policy refused a job (dropped);
        None when it failed or its columns changed since (the last allocation stays)."""
        if solve is not self._solving:
            raise CoreError("settle: not the solve in progress")
        self._solving, raises = None, self.config.on_solve_error == "raise"
        outcome = settle(solve, result, drop=self._refused, raise_errors=raises)
        if outcome is None:      # a job refused and dropped: solve again without it
            return self._new_solve(solve.now, solve.uncredited)
        self._last_solve_s = outcome.solve_s    # (a failure's spaces retries as a solve's)
        if isinstance(outcome, Failed) or solve.columns != self._layout.columns:
            self._stale = True
            return None
        self._last_allocation = outcome
        self._resolved = outcome if self._opened is not None else self._resolved
        install(outcome, self._rows, self._jobs, self._layout.columns, self._lookups,
                self.config.seed_seconds)
        return outcome

    def start_round(self, now: float, uncredited: Mapping[str, float] | None = None) -> Round:
        """A round boundary at ``now``: admit arrivals, re-solve if due (here, unless an
        executor opened the round), plan the round. ``uncredited``: steps per job the
        executor expects were made but has not credited yet (``problem.build_problem``):
        a re-solve plans on the remaining steps net of them, and the restart rule's holds
        judge who is near its end by them."""
        if self._opened is None:
            self._resolve_now(self.open_round(now, uncredited))
        admitted, self._opened = self._opened, None
        resolved, self._resolved = self._resolved, None
        rejected, self._rejected = tuple(self._rejected), []
        plan = plan_round(self._demand(uncredited=uncredited), self._view,
                          planner_config(self.config, self._layout.types, self._rng))
        batch = build_batch(plan, self._rows, self._layout, self._jobs, self.config)
        self._assignments = dict(zip(batch.keys, batch.workers))
        self._in_flight = RoundInFlight(self._rounds, float(now), batch, plan.combo_index,
                                        self._rows.version)
        self._rounds += 1
        return Round(index=self._in_flight.index, start_s=float(now),
                     round_seconds=self.config.round_seconds, batch=batch,
                     held_idle=plan.held_idle, resolved=resolved,
                     lease_opportunities=plan.lease_opportunities,
                     lease_extensions=plan.lease_extensions, admitted=admitted,
                     rejected=rejected)

    def place_freed(self, worker_ids: Iterable[int], now: float, round_end_s: float, *,
                    resolve: bool = False) -> TaskBatch:
        """Workers freed mid-round (the executor, which runs the tasks, says which) go to
        waiting jobs for the rest of the round, with ``refill_freed`` and before
        ``refill_until`` of it (``refill``): the new tasks, which join the round in flight
        (their received time is reported with it). The policy's traits hold (FIFO keeps its
        head-of-line blocking, ``backfill``). ``resolve``: first re-solve a stale allocation
        if the re-solve rule allows (a daemon at a round's start, when a job it planned for
        the round ended after the plan: the simulator, which plans at the boundary, knew)."""
        flight = self._in_flight
        if flight is None:
            raise CoreError("place_freed outside a round")
        layout, rows = self._layout, self._rows
        free = refillable(worker_ids, flight, now, round_end_s, self._view, layout.columns,
                          self.config) if self._jobs else set()
        if not free:
            return TaskBatch.empty(layout.columns)
        if resolve and self._stale:
            self._resolve_now(self.begin_resolve(now))
        batch, combo_rows = plan_refill(flight, free, self._view, rows, layout, self._jobs,
                                        self.config, self._rng, self._demand, round_end_s - now)
        if not len(batch):
            return batch
        flight.batch = flight.batch.plus(batch)
        flight.rows = np.concatenate([flight.rows, combo_rows])
        hand_over(self._assignments, batch)
        log.debug("refilled %d freed workers at %.1fs: %s", len(free), now, ", ".join(batch.keys))
        return batch

    def end_round(self, reports: RoundReport | Sequence[Report], now: float) -> RoundOutcome:
        """Apply the round's progress (a ``RoundReport`` aligned with ``Round.batch``, or
        one ``Report`` per task that ran); return the jobs that finished."""
        if self._in_flight is None:
            raise CoreError("end_round without start_round")
        flight, self._in_flight = self._in_flight, None
        if not isinstance(reports, RoundReport):
            reports = align(reports, flight.batch, flight.index)
        if self._restart_aware:
            self._runs.ended_round(flight.batch, np.asarray(reports.seconds, dtype=float))
        done = credit_round(self._rows, flight, reports)
        if done:
            self._remove(done)
        return RoundOutcome(completed=done)

    # ---- internals --------------------------------------------------------------------
    @property
    def _restart_aware(self) -> bool:
        """The restart rule is on and has work: some job's restart costs time
        (``restarts``). Until then jobs are scheduled as under Gavel's rule."""
        return self._restarts and self.config.restart_rule == "tenure"

    def _job(self, job_id: str) -> JobState:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise CoreError(f"unknown job {job_id!r}") from None

    def _admit(self) -> tuple[str, ...]:
        """The jobs waiting since the last boundary join the rows (``arrivals``)."""
        if not self._arrivals:
            return ()
        admitted = admit(self._arrivals.take(), self._jobs, self._rows, self._layout,
                         self._lookups, self._mixer, self._view, self.config, self._order)
        self._order += len(admitted)
        self._restarts |= any(self._jobs[j].spec.restart_s > 0 for j in admitted)
        self._stale = True
        return admitted

    def _remove(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            del self._jobs[job_id]
        dropped = self._rows.keys_touching(job_ids)
        self._rows.drop(dropped)
        for key in dropped:  # every combination that ran last round has a row
            self._assignments.pop(key, None)
            self._runs.drop(key)
        forget_pairs(self._jobs, dropped)
        self._stale = True

    def _new_view(self, view: ClusterView, reset: bool = True) -> ClusterView:
        """The cluster changed (a reset event, unless not ``reset``); a type that came or
        went changes the rows' columns."""
        self._view, self._stale = view, self._stale or reset
        types, layout = view.worker_types, self._layout
        if types != layout.types:
            layout.set_types(types, self._rows, self.config.seed_seconds)
            self._lookups.set_types(types)
            retype(self._jobs, self._rows, types, layout.type_index, self._lookups)
        return view

    # -- re-solving
    def begin_resolve(self, now: float,
                      uncredited: Mapping[str, float] | None = None) -> Solve | None:
        """The ``Solve`` (run on any thread, installed by ``settle``) of a re-solve due now,
        with none out (``resolving``), its allocation period closed first (Gavel's reset;
        ``periods.reset_received``; under the restart rule, once it lasted Gavel's interval)."""
        cfg = self.config
        if self._solving is not None or not resolve_due(
                cfg, now, self._stale, bool(self._jobs), self._last_resolve_s,
                self._last_solve_s, self._force):
            return None
        if cfg.reset_received_on_resolve and (
                not self._restart_aware or interval_passed(cfg, now, self._counted_since_s)):
            self._counted_since_s = reset_received(self._rows, self._counted_since_s, now,
                                                   self._layout.columns, cfg.seed_seconds,
                                                   self._closed_periods)
        self._last_resolve_s, self._force, self._stale = float(now), False, False
        if cfg.isolated_time:
            advance_isolated_time(self._jobs, self._rows, self._view, self._layout.types)
        return self._new_solve(now, uncredited)

    def _new_solve(self, now: float, uncredited: Mapping[str, float] | None) -> Solve:
        self._solving = Solve(self.policy, self._problem(now, uncredited), now,
                              self._runs.columns() if self._restart_aware else None,
                              self._layout.columns, uncredited)
        return self._solving

    def _resolve_now(self, solve: Solve | None) -> None:
        while isinstance(solve, Solve):     # (a refused job dropped: the next solve)
            solve = self.settle(solve, solve.run())

    def _refused(self, job_ids: Sequence[str], why: str) -> list[str]:
        """The policy refused the jobs: out of the core at once, reported with the round."""
        known = [job_id for job_id in job_ids if job_id in self._jobs]
        self._rejected.extend((job_id, why) for job_id in known)
        self._remove(known)
        return known

    def _problem(self, now: float, uncredited: Mapping[str, float] | None = None) -> Problem:
        """The policy's ``Problem`` now (module ``problem``)."""
        return build_problem(now, self._jobs, self._rows, self._view, self._layout.types,
                             self._lookups, self.config, prices=self._prices,
                             entities=self._entities, last=self._last_allocation,
                             uncredited=uncredited)

    def _demand(self, running=(), uncredited: Mapping[str, float] | None = None) -> Demand:
        """The planner's ``Demand`` this round (module ``batch``), with two entities or
        more: each combination's entity (their queues interleaved, ``mechanism/shares.py``)
        and the entities' GPU caps less what ``running`` (members, GPUs) tasks hold
        (``mechanism/quota.py``). ``uncredited``: as in ``start_round``, for the holds."""
        out = demand(self._rows, self._layout, self._assignments)
        if self.config.restart_rule == "tenure" and self._runs:
            pinned, preferred = self._runs.holds(self._rows, out.types, self._jobs,
                                                 self.config, uncredited)
            out = replace(out, pinned=pinned, preferred=preferred)
        return with_entities(out, self._jobs, self._entities, running)
