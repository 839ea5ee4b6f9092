"""The scheduler core: an event-driven state machine (DESIGN.md, The flow).

Events are method calls that carry the time as an argument; the core never reads a clock,
so the simulator (virtual time) and the daemon (wall-clock time) drive the same object:

- ``submit(job, now)``: a job arrives; it is admitted at the next round boundary, and its
  completion time counts from ``now``;
- ``cancel(job_id, now)``, ``add_workers(...)``, ``fail_workers(...)``,
  ``restore_workers(...)``, ``set_prices(...)``: reset events;
- ``start_round(now) -> Round``: a round boundary: admit, re-solve if due, plan;
- ``end_round(reports, now) -> RoundOutcome``: the round's progress reports.

Re-solving follows Gavel: a reset event marks the allocation stale; at the next boundary it
is recomputed if ``min_resolve_interval_s`` has passed since the last re-solve. A re-solve
starts a new allocation period: received times go back to their seed and each
combination's deficit grows by what it was owed (X x period) minus what it got.

State a policy keeps in Gavel is passed in the ``Problem`` instead (policies stay pure):
``previous`` is the whole allocation in force, finished jobs included (FIFO hands a finished
job's type on; Gandiva keeps pairs); ``isolated_elapsed_s`` is Themis t^isolated as Gavel's
finish-time fairness accumulates it (``CoreConfig.isolated_time``). Space-sharing policies
may plan on estimated pair throughputs (``planned_pairs``) until a pair has run on a type.
"""

from __future__ import annotations

import logging
import math
import operator
import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from policies import Allocation, Entity, Job, Pair, Policy, PolicyError, Problem, key_members, pair_key
from policies.columns import equal_split

from ..mechanism import ClusterView, Demand, PlannerConfig, plan_round
from ..mechanism.planner import configuration_matrix
from .config import CoreConfig
from .configurations import Configurations, MixedOption
from .records import JobSpec, Period, Report, Round, RoundOutcome, RoundReport, TaskBatch, ThroughputSource
from .rows import Rows

log = logging.getLogger(__name__)


class CoreError(ValueError):
    """A bad event: unknown job, duplicate id, a report for a task that did not run."""


@dataclass
class _Job:
    """Mutable per-job state, private to the core."""

    spec: JobSpec
    arrival_s: float
    order: int
    T: np.ndarray                      # steps/s per core type (0: cannot run there)
    throughputs: dict[str, float]      # the same, by type name (for Problems)
    isolated_elapsed_s: float = 0.0    # Themis t^isolated (``CoreConfig.isolated_time``)
    isolated_rate: float = 0.0         # throughput(m, X^isolated) at the last re-solve
    left_at_resolve: float | None = None
    measured: dict[str, float] | None = None  # online steps/s by type (daemon, §5.3.3)
    options: tuple[MixedOption, ...] = ()  # configurations: mixes (VirtualFlow), elastic counts


@dataclass
class _RoundInFlight:
    index: int
    start_s: float
    batch: TaskBatch
    rows: np.ndarray       # the row of each task's combination, valid while version holds
    version: int


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
        self.policy = policy
        self.config = config
        self._view = view
        self._source = throughputs
        self._prices = dict(prices or {})
        self._entities = dict(entities or {})
        self._rng = random.Random(config.seed)
        self._types: tuple[str, ...] = view.worker_types
        self._type_index = {t: j for j, t in enumerate(self._types)}
        self._jobs: dict[str, _Job] = {}
        self._pending: list[tuple[JobSpec, float]] = []
        self._restored_steps: dict[str, int] = {}
        self._known: set[str] = set()
        self._order = 0
        self._rows = Rows(len(self._types))
        # Configuration columns (several types at once) follow the types in every row;
        # self._columns names them all (VirtualFlow §6.5.2; none unless the policy mixes).
        self._mixer = Configurations(throughputs) if config.configurations else None
        self._config_gpus: dict[str, dict[str, int]] = {}
        self._columns: tuple[str, ...] = self._types
        self._config_matrices()
        self._last_allocation: Allocation | None = None
        self._assignments: dict[str, tuple[int, ...]] = {}
        self._stale = False
        self._force = False
        self._last_resolve_s = 0.0
        self._rounds = 0
        self._in_flight: _RoundInFlight | None = None
        self._solo_cache: dict[tuple[str, int], np.ndarray] = {}
        self._pair_cache: dict[tuple[tuple[str, int], tuple[str, int]], np.ndarray | None] = {}
        self._planned_source = planned_pairs
        self._planned_cache: dict[tuple[tuple[str, int], tuple[str, int]], np.ndarray | None] = {}
        # Closed periods wait here for take_closed_periods(); bounded for executors that
        # never take them.
        self._closed_periods: deque[Period] = deque(maxlen=64)

    # ---- queries ----------------------------------------------------------------------
    @property
    def view(self) -> ClusterView:
        return self._view

    @property
    def worker_types(self) -> tuple[str, ...]:
        return self._types

    @property
    def active_jobs(self) -> tuple[str, ...]:
        return tuple(self._jobs)

    @property
    def active_ids(self):
        """The admitted jobs' ids as a live set-like view (cheap membership tests)."""
        return self._jobs.keys()

    @property
    def pending_jobs(self) -> tuple[str, ...]:
        return tuple(spec.id for spec, _ in self._pending)

    @property
    def has_jobs(self) -> bool:
        return bool(self._jobs or self._pending)

    @property
    def allocation(self) -> Allocation | None:
        """The allocation in force (None before the first re-solve)."""
        return self._last_allocation

    @property
    def prices(self) -> Mapping[str, float]:
        return dict(self._prices)

    @property
    def last_resolve_s(self) -> float:
        return self._last_resolve_s

    def remaining_steps(self, job_id: str) -> int:
        self._job(job_id)
        return int(self._rows.left[self._rows.index[job_id]])

    def next_resolve_allowed_s(self) -> float:
        """Earliest time a pending reset event may trigger a re-solve."""
        if self._force or self._last_resolve_s == 0.0:
            return -math.inf
        return self._last_resolve_s + self.config.min_resolve_interval_s

    def shares(self, now: float) -> dict[str, tuple[dict[str, float], dict[str, float]]]:
        """Every admitted job's allocation X and the fraction of time it received on each
        type since the last re-solve (thesis §5.5's priorities, as a query for status and
        metrics; pairs are left out). Configuration columns (several types at once) are
        keyed by their names, next to the types."""
        rows, types = self._rows, self._columns
        elapsed = now - self._last_resolve_s
        seed = self.config.seed_seconds
        out = {}
        for job_id in self._jobs:
            i = rows.index[job_id]
            got = ((rows.received[i] - seed) / elapsed if elapsed > 0
                   else np.zeros(len(types)))
            out[job_id] = (dict(zip(types, rows.allocation[i].tolist())),
                           dict(zip(types, np.clip(got, 0.0, None).tolist())))
        return out

    def take_closed_periods(self) -> list[Period]:
        """Allocation periods closed since the last call (for metrics; cleared here)."""
        out = list(self._closed_periods)
        self._closed_periods.clear()
        return out

    # ---- reset events -----------------------------------------------------------------
    def submit(self, job: JobSpec, now: float, steps_done: int = 0) -> None:
        """A job arrives at ``now``; it is admitted at the next round boundary.
        ``steps_done``: durable steps it already made (a daemon restoring its state)."""
        if job.id in self._known:
            raise CoreError(f"job {job.id!r} submitted twice")
        if not 0 <= steps_done < job.total_steps:
            raise CoreError(f"job {job.id!r}: steps_done {steps_done} outside "
                            f"[0, {job.total_steps})")
        self._known.add(job.id)
        self._pending.append((job, float(now)))
        if steps_done:
            self._restored_steps[job.id] = int(steps_done)

    def cancel(self, job_id: str, now: float) -> None:
        for i, (spec, _) in enumerate(self._pending):
            if spec.id == job_id:
                del self._pending[i]
                self._restored_steps.pop(job_id, None)
                return
        self._job(job_id)
        self._remove((job_id,))

    def add_workers(self, worker_type: str, count: int, now: float,
                    gpus_per_server: int = 1) -> ClusterView:
        self._view = self._view.with_workers(worker_type, count, gpus_per_server)
        self._sync_types()
        self._stale = True
        return self._view

    def fail_workers(self, worker_ids: Iterable[int], now: float) -> ClusterView:
        self._view = self._view.without(worker_ids)
        self._stale = True
        return self._view

    def restore_workers(self, worker_ids: Iterable[int], now: float) -> ClusterView:
        self._view = self._view.restored(worker_ids)
        self._stale = True
        return self._view

    def set_prices(self, prices: Mapping[str, float], now: float) -> None:
        new = {**self._prices, **prices}
        if new != self._prices:
            self._prices = new
            self._stale = True

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
        rows = self._rows
        try:
            where = np.array(operator.itemgetter(*keys)(rows.index) if len(keys) != 1
                             else (rows.index[keys[0]],), dtype=int).reshape(-1)
        except KeyError as err:
            raise CoreError(f"unknown job or pair {err.args[0]!r}") from None
        steps = np.asarray(steps, dtype=float).reshape(len(where), -1)
        members = rows.member_rows[where][:, :steps.shape[1]]
        has = members >= 0
        touched = members[has]
        rows.left[touched] -= steps[has]
        finished = np.sort(touched[rows.left[touched] <= 1e-9])
        done = tuple(rows.keys[i] for i in finished.tolist())
        if done:
            self._remove(done)
        return RoundOutcome(completed=done)

    def set_job_throughputs(self, job_id: str, measured: Mapping[str, float],
                            now: float) -> None:
        """Online throughputs (thesis §5.3.3): ``measured`` steps/s of this job by worker
        type replace the source's priors for it; the allocation becomes stale (re-solved
        under the usual ``min_resolve_interval_s`` rule). Types not named keep their value."""
        job = self._job(job_id)
        job.measured = {**(job.measured or {}), **{t: float(v) for t, v in measured.items()}}
        self._apply_measured(job)
        self._rows.changed()
        self._stale = True

    def _apply_measured(self, job: _Job) -> None:
        if not job.measured:
            return
        for t, v in job.measured.items():
            j = self._type_index.get(t)
            if j is not None:
                job.T[j] = max(0.0, v)
        job.throughputs = dict(zip(self._types, job.T.tolist()))
        row = self._rows.index.get(job.spec.id)
        if row is not None:
            self._rows.rate[row, :len(self._types), 0] = job.T

    # ---- rounds -----------------------------------------------------------------------
    def start_round(self, now: float) -> Round:
        """A round boundary at ``now``: admit arrivals, re-solve if due, plan the round."""
        if self._in_flight is not None:
            raise CoreError(f"round {self._in_flight.index} has not ended")
        admitted = self._admit()
        resolved = self._maybe_resolve(now)
        plan = plan_round(self._demand(), self._view, self._planner_config())
        batch = self._batch(plan)
        self._assignments = dict(zip(batch.keys, batch.workers))
        self._in_flight = _RoundInFlight(self._rounds, float(now), batch, plan.combo_index,
                                         self._rows.version)
        self._rounds += 1
        return Round(index=self._in_flight.index, start_s=float(now),
                     round_seconds=self.config.round_seconds, batch=batch,
                     held_idle=plan.held_idle, resolved=resolved,
                     lease_opportunities=plan.lease_opportunities,
                     lease_extensions=plan.lease_extensions, admitted=admitted)

    def end_round(self, reports: RoundReport | Sequence[Report], now: float) -> RoundOutcome:
        """Apply the round's progress (a ``RoundReport`` aligned with ``Round.batch``, or
        one ``Report`` per task that ran); return the jobs that finished."""
        if self._in_flight is None:
            raise CoreError("end_round without start_round")
        flight, self._in_flight = self._in_flight, None
        batch = flight.batch
        if not isinstance(reports, RoundReport):
            reports = self._align(reports, batch, flight.index)
        rows = self._rows
        if len(batch) == 0:
            return RoundOutcome(completed=())
        if flight.version == rows.version:
            where = flight.rows
        else:  # a cancel moved rows mid-round
            index = rows.index
            where = np.array([index.get(k, -1) for k in batch.keys], dtype=int)
        seconds = np.asarray(reports.seconds, dtype=float)
        type_index = batch.type_index
        ok = where >= 0
        if not ok.all():
            where, type_index, seconds = where[ok], type_index[ok], seconds[ok]
        # Each combination and each job runs at most once a round: no repeated indices.
        rows.received[where, type_index] += seconds
        rows.ran[where, type_index] = True
        if reports.steps is None:
            return RoundOutcome(completed=())
        steps = np.asarray(reports.steps, dtype=float)
        if not ok.all():
            steps = steps[ok]
        members = rows.member_rows[where]
        has = members >= 0
        touched = members[has]
        rows.left[touched] -= steps[has]
        finished = np.sort(touched[rows.left[touched] <= 1e-9])
        done = tuple(rows.keys[i] for i in finished.tolist())
        if done:
            self._remove(done)
        return RoundOutcome(completed=done)

    # ---- internals --------------------------------------------------------------------
    def _job(self, job_id: str) -> _Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise CoreError(f"unknown job {job_id!r}") from None

    def _admit(self) -> tuple[str, ...]:
        if not self._pending:
            return ()
        admitted, rows = [], []
        for spec, arrival in self._pending:
            T = self._solo(spec.key).copy()
            job = _Job(spec, arrival, self._order, T, dict(zip(self._types, T.tolist())))
            self._order += 1
            self._jobs[spec.id] = job
            if self._mixer is not None and (spec.mixed or self.config.mixed_jobs == "all"):
                job.options = self._mixer.options(spec.job_type, spec.scale_factor,
                                                  self._view.counts)
            if self._mixer is not None and spec.elastic:
                job.options += self._mixer.elastic(spec.job_type, spec.scale_factor,
                                                   spec.min_scale_factor, self._view.counts)
            if job.options:
                self._add_configurations(job.options)
            rows.append((spec.id, (spec.id,), spec.scale_factor, job))
            admitted.append(spec.id)
        rows = [(key, members, sf, self._rate_row(job)) for key, members, sf, job in rows]
        done = self._restored_steps
        self._rows.add_many(rows, self.config.seed_seconds,
                            left=[self._jobs[j].spec.total_steps - done.pop(j, 0)
                                  for j in admitted])
        if admitted:
            self._stale = True
        self._pending.clear()
        return tuple(admitted)

    def _add_configurations(self, options: Sequence[MixedOption]) -> None:
        """New configuration columns for any of ``options`` not seen yet."""
        new = {o.configuration.name: dict(o.configuration.gpus) for o in options
               if o.configuration.name not in self._config_gpus}
        if not new:
            return
        self._config_gpus.update(new)
        old, self._columns = self._columns, self._types + tuple(self._config_gpus)
        self._rows.widen(old, self._columns, self.config.seed_seconds)
        self._config_matrices()

    def _config_matrices(self) -> None:
        """The configurations as the planner takes them, rebuilt when columns change."""
        self._config_list = tuple(self._config_gpus.values())
        self._config_matrix = (configuration_matrix(self._config_list, self._types)
                               if self._config_list else None)

    def _rate_row(self, job: _Job) -> np.ndarray:
        """A job's steps/s on every column: its types, then its configurations."""
        if not self._config_gpus:
            return job.T
        rate = np.zeros(len(self._columns))
        rate[:len(self._types)] = job.T
        at = {name: j for j, name in enumerate(self._columns)}
        for o in job.options:
            rate[at[o.configuration.name]] = o.configuration.throughput
        return rate

    def _remove(self, job_ids: Sequence[str]) -> None:
        for job_id in job_ids:
            del self._jobs[job_id]
        rows = self._rows
        gone_rows = [rows.index[j] for j in job_ids]
        hit = np.isin(rows.member_rows, gone_rows).any(axis=1)
        dropped = [rows.keys[i] for i in np.flatnonzero(hit).tolist()]
        rows.drop(dropped)
        for key in dropped:  # every combination that ran last round has a row
            self._assignments.pop(key, None)
        self._stale = True

    def _solo(self, key: tuple[str, int]) -> np.ndarray:
        row = self._solo_cache.get(key)
        if row is None:
            job_type, sf = key
            row = np.array([max(0.0, float(self._source.get(t, job_type, sf)))
                            for t in self._types])
            self._solo_cache[key] = row
        return row

    def _pair(self, a: tuple[str, int], b: tuple[str, int], *,
              planned: bool = False) -> np.ndarray | None:
        """(n, 2) co-located steps/s of (a, b), or None when unknown on every type; from the
        planning source when ``planned`` (and there is one)."""
        source, cache = self._source, self._pair_cache
        if planned and self._planned_source is not None:
            source, cache = self._planned_source, self._planned_cache
        if (a, b) not in cache:
            rows = []
            for t in self._types:
                got = source.pair(t, a, b)
                rows.append((0.0, 0.0) if got is None else (float(got[0]), float(got[1])))
            arr = np.array(rows, dtype=float)
            cache[(a, b)] = arr if (arr > 0).all(axis=1).any() else None
        return cache[(a, b)]

    def _sync_types(self) -> None:
        types = self._view.worker_types
        if types == self._types:
            return
        self._types = types
        self._type_index = {t: j for j, t in enumerate(types)}
        old, self._columns = self._columns, types + tuple(self._config_gpus)
        self._rows.widen(old, self._columns, self.config.seed_seconds)
        self._config_matrices()
        self._solo_cache.clear()
        self._pair_cache.clear()
        self._planned_cache.clear()
        for job in self._jobs.values():
            job.T = self._solo(job.spec.key).copy()
            job.throughputs = dict(zip(types, job.T.tolist()))
            if job.measured:
                for t, v in job.measured.items():
                    if t in self._type_index:
                        job.T[self._type_index[t]] = max(0.0, v)
                job.throughputs = dict(zip(types, job.T.tolist()))
        gone = []
        for row, (key, members) in enumerate(zip(self._rows.keys, self._rows.members)):
            n = len(types)
            if len(members) == 1:
                self._rows.rate[row, :n, 0] = self._jobs[key].T
            else:
                pt = self._pair(*(self._jobs[m].spec.key for m in members))
                if pt is None:
                    gone.append(key)
                else:
                    self._rows.rate[row, :n] = pt
        self._rows.changed()
        self._rows.drop(gone)

    # -- re-solving
    def _maybe_resolve(self, now: float) -> Allocation | None:
        cfg = self.config
        periodic = (cfg.resolve_period_s is not None and bool(self._jobs)
                    and now - self._last_resolve_s >= cfg.resolve_period_s)
        allowed = (self._force or self._last_resolve_s == 0.0
                   or now - self._last_resolve_s >= cfg.min_resolve_interval_s)
        if not ((self._stale or periodic) and allowed):
            return None
        self._close_period(now)
        self._force = False
        self._stale = False
        if cfg.isolated_time:
            self._advance_isolated_time()
        problem = self._problem(now)
        try:
            allocation = self.policy.solve(problem)
        except PolicyError as err:
            if cfg.on_solve_error == "raise":
                raise
            log.warning("re-solve at %.0fs failed, keeping the last allocation: %s", now, err)
            self._stale = True
            return None
        self._install(allocation)
        log.debug("re-solved at %.0fs: %d jobs, %.3fs", now, len(problem.jobs),
                  allocation.solve_s)
        return allocation

    def _close_period(self, now: float) -> None:
        """Gavel's reset: deficits absorb the period, received times go back to the seed."""
        elapsed = now - self._last_resolve_s
        seed = self.config.seed_seconds
        rows = self._rows
        got = rows.received - seed
        if not self.config.reset_received_on_resolve:
            self._last_resolve_s = float(now)
            return
        rows.deficit += rows.allocation * elapsed - got
        if elapsed > 0 and rows.allocated.any():
            mask = rows.allocated
            self._closed_periods.append(Period(
                self._last_resolve_s, float(now), self._columns,
                tuple(k for k, ok in zip(rows.keys, mask.tolist()) if ok),
                rows.allocation[mask].copy(), got[mask]))
        rows.received[:] = seed
        self._last_resolve_s = float(now)

    def _problem(self, now: float) -> Problem:
        rows = self._rows
        index = rows.index
        left = rows.left[[index[k] for k in self._jobs]].tolist()
        isolated = self.config.isolated_time
        jobs = [Job(id=job_id, throughputs=job.throughputs,
                    scale_factor=job.spec.scale_factor, weight=job.spec.priority_weight,
                    remaining_steps=steps, elapsed_s=max(0.0, now - job.arrival_s),
                    slo_s=job.spec.slo_s, entity=job.spec.entity,
                    isolated_elapsed_s=job.isolated_elapsed_s if isolated else None,
                    configurations=tuple(o.configuration for o in job.options)
                    if job.options else ())
                for (job_id, job), steps in zip(self._jobs.items(), left)]
        pairs = self._problem_pairs() if self.config.pairs else ()
        # The whole allocation in force, finished jobs included: FIFO hands a finished
        # job's type to the head of its queue (Gavel's FIFOPolicy keeps that state itself).
        last = self._last_allocation
        return Problem(cluster=dict(self._view.counts), jobs=tuple(jobs), prices=self._prices,
                       pairs=pairs, entities=self._entities,
                       previous={} if last is None else last.allocation,
                       policy_state={} if last is None else last.policy_state)

    def _problem_pairs(self) -> tuple[Pair, ...]:
        """Every pair of active jobs with the same scale factor that can share a worker
        somewhere, with the co-located throughputs the policy plans on: the planning
        source's (an estimate), replaced by the measured (oracle) ones on the types where
        the pair has already run (Gavel updates a pair's throughputs once it ran)."""
        ids = list(self._jobs)
        rows = self._rows
        out = []
        for i, a in enumerate(ids):
            ka = self._jobs[a].spec.key
            for b in ids[i + 1:]:
                kb = self._jobs[b].spec.key
                if ka[1] != kb[1]:
                    continue
                pt = self._pair(ka, kb, planned=True)
                row = rows.index.get(pair_key(a, b)) if self._planned_source is not None else None
                n = len(self._types)
                if row is not None and rows.ran[row, :n].any():
                    pt = np.where(rows.ran[row, :n, None], rows.rate[row, :n],
                                  pt if pt is not None else 0.0)
                if pt is None:
                    continue
                thr = {t: (float(pt[j, 0]), float(pt[j, 1]))
                       for j, t in enumerate(self._types) if pt[j, 0] > 0 and pt[j, 1] > 0}
                if thr:
                    out.append(Pair(jobs=(a, b), throughputs=thr))
        return tuple(out)

    def _install(self, allocation: Allocation) -> None:
        """Make ``allocation`` the one in force: rows for the pairs it gives time to,
        X rows for every combination it covers."""
        self._last_allocation = allocation
        rows = self._rows
        types = self._columns
        new_pairs, keys, xs = [], [], []
        for key, row in allocation.allocation.items():
            if key in self._jobs:
                keys.append(key)
                xs.append([row.get(t, 0.0) for t in types])
                continue
            members = key_members(key)
            if len(members) != 2 or not all(m in self._jobs for m in members):
                continue
            x = [row.get(t, 0.0) for t in types]
            if key not in rows:
                if max(x) <= 0:
                    continue
                a, b = (self._jobs[m] for m in members)
                pt = self._pair(a.spec.key, b.spec.key)
                if pt is None:
                    log.warning("allocation gives time to pair %s with no co-located "
                                "throughputs; ignored", key)
                    continue
                new_pairs.append((key, members, a.spec.scale_factor, pt))
            keys.append(key)
            xs.append(x)
        rows.add_many(new_pairs, self.config.seed_seconds)
        rows.allocation[:] = 0.0
        rows.allocated[:] = False
        if keys:
            at = np.array([rows.index[k] for k in keys], dtype=int)
            rows.allocation[at] = np.array(xs, dtype=float).reshape(len(keys), len(types))
            rows.allocated[at] = True

    # -- planning
    def _planner_config(self) -> PlannerConfig:
        cfg = self.config
        order = list(cfg.type_order) + [t for t in self._types if t not in cfg.type_order]
        order = [t for t in order if t in self._types]
        if cfg.shuffle_type_order:
            self._rng.shuffle(order)
        return PlannerConfig(type_order=tuple(order), global_queue=cfg.global_queue,
                             backfill=cfg.backfill, hold_unallocated=cfg.hold_unallocated)

    def _demand(self) -> Demand:
        rows = self._rows
        return Demand(
            keys=tuple(rows.keys), members=tuple(rows.members), types=self._columns,
            scale_factor=rows.scale_factor.copy(), allocation=rows.allocation.copy(),
            received=rows.received.copy(), deficit=rows.deficit.copy(),
            runnable=rows.runnable, allocated=rows.allocated.copy(),
            previous=dict(self._assignments), member_rows=rows.member_rows.copy(),
            configurations=self._config_list, configuration_gpus=self._config_matrix,
        )

    def _batch(self, plan) -> TaskBatch:
        """The round's micro-tasks: lease = floor(rate x round) steps, at least 1, at most
        what is left (Gavel); rate x round when ``whole_step_leases`` is off."""
        rows = self._rows
        r, j = plan.combo_index, plan.type_index
        members = rows.member_rows[r]
        has = members >= 0
        rates = np.where(has, rows.rate[r, j], 0.0)
        remaining = np.where(has, rows.left[np.where(has, members, 0)], 0.0)
        if self.config.whole_step_leases:
            lease = np.maximum(1.0, np.floor(rates * self.config.round_seconds))
            steps = np.where(has, np.minimum(lease, remaining), 0).astype(np.int64)
            remaining = remaining.astype(np.int64)
        else:
            steps = np.where(has, np.minimum(rates * self.config.round_seconds, remaining), 0.0)
        keys, all_members = plan.keys, plan.members
        at = r.tolist()
        size = rows.scale_factor[r].copy()
        task_keys = tuple([keys[i] for i in at])
        configurations, splits = (), ()
        mixed = np.flatnonzero(j >= len(self._types))
        if self._config_gpus:
            configurations = self._config_list
            splits = [None] * len(at)
            for k in mixed.tolist():
                name = self._columns[int(j[k])]
                size[k] = sum(self._config_gpus[name].values())
                job = self._jobs[task_keys[k]]
                splits[k] = next(o.split for o in job.options
                                 if o.configuration.name == name)
            splits = tuple(splits)
        return TaskBatch(
            keys=task_keys,
            members=tuple([all_members[i] for i in at]),
            types=self._columns, type_index=j, workers=plan.workers,
            size=size, extended=plan.extended,
            steps=steps, rates=rates, remaining=remaining,
            n_members=has.sum(axis=1), configurations=configurations, splits=splits)

    def _align(self, reports: Sequence[Report], batch: TaskBatch, index: int) -> RoundReport:
        position = {k: i for i, k in enumerate(batch.keys)}
        steps = np.zeros((len(batch), 2))
        seconds = np.zeros(len(batch))
        for report in reports:
            i = position.get(report.key)
            if i is None:
                raise CoreError(f"report for {report.key!r}, which did not run in round {index}")
            steps[i, :len(report.steps)] = report.steps
            seconds[i] = report.seconds
        return RoundReport(steps=steps, seconds=seconds)

    def _advance_isolated_time(self) -> None:
        """Themis t^isolated (thesis §5.4.2), kept as Gavel's FinishTimeFairness policy
        keeps it: at each re-solve a job's isolated time grows by the steps it made since
        the previous re-solve over its isolated throughput at that re-solve, with 1/n of
        the cluster for each of the n jobs active then. A job admitted since has made no
        steps (unallocated jobs do not run), so it starts at 0."""
        rows = self._rows
        n_active = len(self._jobs)
        for job_id, job in self._jobs.items():
            left = float(rows.left[rows.index[job_id]])
            if job.left_at_resolve is not None and job.isolated_rate > 0:
                job.isolated_elapsed_s += (job.left_at_resolve - left) / job.isolated_rate
            job.left_at_resolve = left
            job.isolated_rate = self._isolated_throughput(job, n_active)

    def _isolated_throughput(self, job: _Job, n_active: int) -> float:
        """throughput(m, X^isolated): 1/n of every type's workers, as time on the job's
        scale_factor workers, capped at 1 (thesis §5.4.2); a type the job cannot use (no
        throughput, or fewer workers than it needs) still takes its share, as in
        ``policies.columns.Columns.isolated_share``."""
        counts = np.array([self._view.count(t) for t in self._types], dtype=float)
        sf = job.spec.scale_factor
        x = equal_split(counts, [sf], n_active)[0]
        return float(np.where(counts >= sf, job.T, 0.0) @ x)
