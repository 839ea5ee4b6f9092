"""The round recipe, written once for both executors (thesis §5.5; docs/design.md, The flow).

``RoundDriver`` is the only caller of ``SchedulerCore.start_round`` / ``end_round`` /
``add_progress``. An executor decides *when* a boundary comes (the simulator: a jump of
its virtual clock; the daemon: a monotonic deadline less its plan lead) and *how tasks run*
(arithmetic, or gRPC to workers); everything else about a round happens here:

1. ``plan(now, seconds)``: end the round in flight with the time each of its tasks held
   its workers (received time), then admit, re-solve if due and plan the next round (the
   daemon splits it: ``open`` admits and hands it the solve, which it runs on a thread
   of its own while it serves calls, then ``plan`` plans);
   durable steps credited for jobs not admitted yet are applied once they are. A round
   that follows another is planned ``plan_lead_s`` before that one ends (``plan_at``;
   thesis §5.6: a job kept on its workers gets its lease extended before it runs out);
   an idle cluster plans ``arrival_grace_s`` after the arrival that woke it
   (``first_plan_at``), so that jobs submitted together are planned together. Both
   executors admit exactly the jobs that arrived by the plan;
2. ``start(now, ended_since_plan)``: the planned round begins. A task all of whose jobs
   ended since the plan (they finished in the lead, or were cancelled) never starts; its
   workers go to waiting jobs for the round, re-solving first (the plan gave them to jobs
   that were still running; the daemon runs that re-solve off its thread, and refills the
   workers once it has settled). With no lead the two phases are one: ``boundary``;
3. the empty-round rule: when nothing was placed while jobs wait and no arrival is
   expected, the allocation is re-solved at the next boundary whatever the interval
   (Gavel's simulator does this so that a stale X cannot idle the cluster for good); a
   second such round in a row is ``Boundary.stalled``;
4. ``refill(workers, now, round_end_s)``: workers freed mid-round go to waiting jobs for
   the rest of the round (``CoreConfig.refill_freed``); the new tasks join the round;
5. ``credit(keys, steps, now)``: progress, in steps, whenever the executor learns it, the
   same way for both: the simulator credits a round's tasks at its end (``batch.keys``,
   the steps it computed), the daemon a job at each durable checkpoint (``(job_id,)``,
   ``((steps,),)``); it returns the jobs that finished.

SimPy's ``RealtimeEnvironment`` is the model (docs/style.md §4): the loop is written once, and
real time overrides only how the next event is awaited.

``config_for`` and ``spec_of`` are the one way an executor builds the core's config and the
specs of a trace's jobs (the daemon's rows embed the spec its submission door made).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from policies import Policy
from policies.frozen import record
from traces.types import ThroughputTable, TraceJob

from .config import CoreConfig
from .core import CoreError, SchedulerCore
from .records import JobSpec, Round, RoundReport, TaskBatch
from .solving import Solve
from .type_order import fastest_first


def config_for(policy: Policy, table: ThroughputTable, worker_types: Sequence[str],
                **overrides) -> CoreConfig:
    """The core's config for ``policy``: Gavel's rules read from its declared traits
    (``CoreConfig.for_policy``), the worker types served fastest first (thesis §5.5), and
    ``overrides`` on top."""
    overrides.setdefault("type_order", fastest_first(table, tuple(worker_types)))
    return CoreConfig.for_policy(policy, **overrides)


def spec_of(job_id: str, job: TraceJob, restart_s: float = 0.0) -> JobSpec:
    """The core's spec of a trace's job (the one converter from ``traces.TraceJob``);
    ``restart_s``: what a restart costs it (``JobSpec.restart_s``)."""
    return JobSpec(id=job_id, job_type=job.job_type, scale_factor=int(job.scale_factor),
                   total_steps=int(job.total_steps), priority_weight=float(job.priority_weight),
                   slo_s=job.slo_s, entity=job.entity, mixed=job.mixed,
                   min_scale_factor=job.min_scale_factor, restart_s=restart_s)


@record
class Boundary:
    """What a plan did: the round it planned, the jobs that finished on the way (durable
    steps of a job just admitted), whether nothing was placed while jobs wait, and
    ``stalled``: the same after a forced re-solve (nothing can ever be placed)."""

    round: Round
    completed: tuple[str, ...]
    empty: bool
    stalled: bool


@record
class Start:
    """What a round's start did: the round as it runs (``start_s``/``end_s`` now set, the
    refills after its planned tasks), the indices of its planned tasks that never start
    (all their jobs ended since the plan) and the tasks placed on their workers."""

    round: Round
    unstarted: tuple[int, ...]
    refilled: TaskBatch
    solve: Solve | None = None      # (``start``'s ``resolve`` False) the re-solve begun


class RoundDriver:
    """Drives one ``SchedulerCore`` round by round (the module docstring's recipe).
    ``plan_lead_s``: each round after the first of a busy spell is planned this long before
    the last one ends (the daemon's plan lead; 0: at the boundary, as Gavel's simulator).
    ``arrival_grace_s``: an idle cluster plans this long after the arrival that woke it."""

    def __init__(self, core: SchedulerCore, *, plan_lead_s: float = 0.0,
                 arrival_grace_s: float = 0.0) -> None:
        R = core.config.round_seconds
        if not 0.0 <= plan_lead_s < R:
            raise ValueError(f"plan lead must be >= 0 and shorter than a round ({R:g} s), "
                             f"got {plan_lead_s}")
        if not 0.0 <= arrival_grace_s < float("inf"):
            raise ValueError(f"arrival grace must be >= 0 seconds, got {arrival_grace_s}")
        self.core = core
        self.plan_lead_s, self.arrival_grace_s = float(plan_lead_s), float(arrival_grace_s)
        self._in_flight: Round | None = None
        self._started = False                    # the round in flight has started
        self._unapplied: dict[str, float] = {}   # steps of jobs submitted, not admitted
        self._forced = False                     # the last empty round forced a re-solve
        self._empty: TaskBatch | None = None     # no tasks (a batch is a value: one serves)

    @property
    def in_flight(self) -> Round | None:
        """The round planned last and not yet ended (started or not)."""
        return self._in_flight

    @property
    def planned(self) -> Round | None:
        """The round planned and not started yet (None once it starts)."""
        return None if self._started else self._in_flight

    def plan_at(self, round_end_s: float) -> float:
        """When the round that follows one ending at ``round_end_s`` is planned."""
        return round_end_s - self.plan_lead_s

    def first_plan_at(self, arrival_s: float) -> float:
        """When an idle cluster that a job woke at ``arrival_s`` plans its round."""
        return arrival_s + self.arrival_grace_s

    def boundary(self, now: float, seconds: Sequence[float] | np.ndarray | None = None, *,
                 arrivals_pending: bool = False,
                 uncredited: Mapping[str, float] | None = None) -> Boundary:
        """``plan`` and ``start`` at once (no lead): the round starts at ``now``."""
        step = self.plan(now, seconds, arrivals_pending=arrivals_pending,
                         uncredited=uncredited)
        return replace(step, round=self.start(now).round)

    def open(self, now: float, seconds: Sequence[float] | np.ndarray | None = None, *,
             uncredited: Mapping[str, float] | None = None) -> Solve | None:
        """``plan``'s first half, for an executor that solves off its own thread: end the
        round in flight and admit arrivals, beginning a re-solve if one is due
        (``SchedulerCore.open_round``). Its ``Solve`` runs on another thread and goes to
        ``SchedulerCore.settle``; ``plan`` (with the same ``now`` and ``uncredited``) then
        plans the round on the allocation in force: the solve's once it has settled."""
        self.end(now, seconds)
        return self.core.open_round(now, uncredited)

    def plan(self, now: float, seconds: Sequence[float] | np.ndarray | None = None, *,
             arrivals_pending: bool = False,
             uncredited: Mapping[str, float] | None = None) -> Boundary:
        """End the round in flight (``seconds[i]``: the time its task i held its workers;
        None: nothing ran) and plan the next one at ``now``. ``arrivals_pending``: the
        executor knows more jobs will arrive (the simulator's trace), so an empty round
        waits for them instead of forcing a re-solve. ``uncredited``: steps per job the
        executor expects were made by the round's end but has not credited (jobs still
        running at a plan made ``plan_lead_s`` early); a re-solve plans net of them."""
        self.end(now, seconds)
        core = self.core
        rnd = self._in_flight = core.start_round(now, uncredited)
        self._started = False
        completed = self._apply_unapplied(rnd.admitted, now)
        empty = len(rnd.batch) == 0 and bool(core.active_jobs)
        stalled = False
        if len(rnd.batch):
            self._forced = False
        elif empty and not arrivals_pending:
            stalled = self._forced
            core.force_resolve()
            self._forced = True
        return Boundary(rnd, completed, empty, stalled)

    def start(self, now: float, ended_since_plan: Sequence[str] = (), *,
              resolve: bool = True) -> Start:
        """The planned round begins at ``now`` (it ends ``round_seconds`` later). Its tasks
        whose jobs all ended since the plan (the executor has credited or cancelled them
        already) never start; their workers go to waiting jobs for the round
        (``refill``, re-solving a stale allocation first: the plan counted on jobs that
        have left since). ``resolve`` False (an executor that solves off its thread): the
        re-solve is begun, not run (``Start.solve``), and those workers wait for the
        caller to ``refill`` them once it has settled; with none due, they are refilled
        at once, as before."""
        rnd = self._in_flight
        if rnd is None or self._started:
            raise CoreError("start: no round is planned")
        if rnd.start_s != now:      # planned ahead (a lead): the round starts now
            rnd = self._in_flight = replace(rnd, start_s=float(now))
        self._started = True
        ended = set(ended_since_plan)
        unstarted = tuple(i for i, members in enumerate(rnd.batch.members)
                          if ended.issuperset(members)) if ended else ()
        refilled, solve = self._no_tasks(rnd.batch.types), None
        if unstarted and not resolve and self.core.config.refill_freed:
            solve = self.core.begin_resolve(now)
        if unstarted and solve is None:
            workers = sorted(w for i in unstarted for w in rnd.batch.workers[i])
            refilled = self.refill(workers, now, rnd.end_s, resolve=resolve)
        return Start(self._in_flight, unstarted, refilled, solve)

    def _no_tasks(self, types: tuple[str, ...]) -> TaskBatch:
        """An empty batch over ``types`` (built once per types)."""
        if self._empty is None or self._empty.types != types:
            self._empty = TaskBatch.empty(types)
        return self._empty

    def refill(self, workers: Sequence[int], now: float, round_end_s: float, *,
               resolve: bool = False) -> TaskBatch:
        """Workers freed at ``now`` (a job of the round finished or failed) go to waiting
        jobs until ``round_end_s`` (``SchedulerCore.place_freed``; nothing unless
        ``CoreConfig.refill_freed``). The new tasks join the round in flight: ``boundary``'s
        ``seconds`` then cover them too, after the round's own. ``resolve``: re-solve a
        stale allocation first (``SchedulerCore.place_freed``)."""
        rnd = self._in_flight
        if rnd is None:
            return TaskBatch.empty(self.core.worker_types)
        more = self.core.place_freed(workers, now, round_end_s, resolve=resolve)
        if len(more):
            self._in_flight = replace(rnd, batch=rnd.batch.plus(more))
        return more

    def end(self, now: float, seconds: Sequence[float] | np.ndarray | None = None) -> None:
        """End the round in flight, if any, without planning another (an executor going
        idle); ``seconds`` as in ``boundary``."""
        flight, self._in_flight = self._in_flight, None
        self._started = False
        if flight is None:
            return
        held = np.zeros(len(flight.batch)) if seconds is None else seconds
        self.core.end_round(RoundReport(seconds=held), now)

    def credit(self, keys: Sequence[str], steps, now: float) -> tuple[str, ...]:
        """Steps made: ``steps[i][m]`` by member m of ``keys[i]`` (a job id, or a pair
        ``"a+b"``: the shape of a round's ``TaskBatch.keys`` and ``steps``; each job named
        once). Returns the jobs that finished. Steps of a job submitted but not admitted yet
        (a daemon restoring its state) wait for its admission; a key the core does not
        know (a job that ended) is ignored."""
        core = self.core
        try:
            return core.add_progress_many(keys, steps, now).completed
        except CoreError:
            pass                    # a key not admitted: sort them out one by one
        completed: list[str] = []
        pending = set(core.pending_jobs)
        for key, made in zip(keys, np.asarray(steps, dtype=float).reshape(len(keys), -1)):
            if key in pending:
                self._unapplied[key] = self._unapplied.get(key, 0.0) + float(made[0])
                continue
            try:
                completed += core.add_progress_many((key,), (made,), now).completed
            except CoreError:
                continue            # a job (or pair) that has ended
        return tuple(completed)

    def forget(self, job_id: str) -> None:
        """A job left outside the core's own events (cancelled, failed): drop held steps."""
        self._unapplied.pop(job_id, None)

    def _apply_unapplied(self, admitted: Sequence[str], now: float) -> tuple[str, ...]:
        held = [(j, (self._unapplied.pop(j),)) for j in admitted if j in self._unapplied]
        if not held:
            return ()
        keys, steps = zip(*held)
        return self.core.add_progress_many(keys, steps, now).completed
