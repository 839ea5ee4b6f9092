"""Job state (issue #27): the job record ``JobRow``, its states as one transition table, and
``Jobs``, the daemon's rows by id, the only place a job's state is assigned.

A job is ``queued`` until its first process starts (its first ``InitJob``: ``started_s``),
``running`` while a process of it runs, ``preempted`` between its runs, then ``done``,
``failed`` or ``cancelled`` (``ended_s``; thesis §5.5: a job runs in rounds, and between
them waits for its next lease). ``held`` (issue #28, Slurm's ``scontrol hold``) keeps a job
from being scheduled, with its reason; a job held while it runs stays held as its run ends
with its lease (it may still finish then), and ``release`` puts it back where it waits. ``TRANSITIONS`` says which state may follow which; the
final states (none may follow), the active ones and the state a job waits in derive from
it, and a transition it does not allow raises ``IllegalTransition``. A job that ended long
ago leaves memory (``retire``: the store keeps it; ``retired.py``). A restart puts every
job not final back into its waiting state (``Jobs.restore``); the store's door (``rows``)
makes rows in their stored state (``stored``) or refused (``refused``) through here too.

``Jobs`` writes each change through the store in one place and tells its owner (the
executor republishes its view). ``running`` and ``preempted`` alone are not written: a
restart makes every job not final wait again anyway.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, ValuesView
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:       # (a type only: the client imports this module, not the core)
    from ..core import JobSpec

log = logging.getLogger(__name__)

QUEUED, RUNNING, PREEMPTED, HELD = "queued", "running", "preempted", "held"
DONE, FAILED, CANCELLED = "done", "failed", "cancelled"
# state -> the states that may follow it (a job ends from any state not final)
TRANSITIONS: Mapping[str, frozenset[str]] = MappingProxyType({
    QUEUED: frozenset({RUNNING, HELD, DONE, FAILED, CANCELLED}),
    RUNNING: frozenset({PREEMPTED, HELD, DONE, FAILED, CANCELLED}),
    PREEMPTED: frozenset({RUNNING, HELD, DONE, FAILED, CANCELLED}),
    HELD: frozenset({QUEUED, PREEMPTED, DONE, FAILED, CANCELLED}),
    DONE: frozenset(), FAILED: frozenset(), CANCELLED: frozenset()})
STATES: tuple[str, ...] = tuple(TRANSITIONS)
FINAL: frozenset[str] = frozenset(s for s, after in TRANSITIONS.items() if not after)
ACTIVE: tuple[str, ...] = tuple(s for s in STATES if s not in FINAL)
# A job with no process waits: in the first state (``FIRST``) if it never started, else in
# the one state a run's end leads to that is neither final nor held (``BETWEEN_RUNS``).
FIRST: str = STATES[0]
(BETWEEN_RUNS,) = TRANSITIONS[RUNNING] - FINAL - {HELD}
WAITING: tuple[str, ...] = (FIRST, BETWEEN_RUNS)


class IllegalTransition(ValueError):
    """A change of state the transition table does not allow (e.g. done -> running)."""

    def __init__(self, job_id: str, old: str, new: str) -> None:
        after = (", ".join(sorted(TRANSITIONS[old])) or "none, it is final"
                 if old in TRANSITIONS else f"it is not one of {', '.join(STATES)}")
        super().__init__(f"job {job_id}: {old} -> {new} is not a transition (from {old}: "
                         f"{after})")
        self.job_id, self.old, self.new = job_id, old, new


def check(job_id: str, old: str, new: str) -> None:
    """Raise ``IllegalTransition`` unless ``new`` may follow ``old``."""
    if new not in TRANSITIONS.get(old, ()):
        raise IllegalTransition(job_id, old, new)


def is_final(state: str) -> bool:
    return state in FINAL


@dataclass(frozen=True)
class JobRow:
    """One submitted job as stored: the core's ``JobSpec`` (what the scheduler plans with)
    and what only the daemon keeps: ``workload``/``command`` (what the worker runs), who
    submitted it (``user``), the array it is a copy of (``array_id``, ``array_index``), its
    time limit (``max_runtime_s``, None: none) and the jobs it waits for (``after``); the
    state, the *durable* step count and the times: submitted (``arrival_s``), its first
    process's start (``started_s``), done (``completion_s``), ended in any final state
    (``ended_s``); None: not (yet)."""

    spec: JobSpec
    workload: str = ""
    command: str = ""
    user: str = ""
    array_id: str = ""
    array_index: int = 0
    max_runtime_s: float | None = None
    after: tuple[str, ...] = ()
    state: str = FIRST
    steps_done: int = 0
    reason: str | None = None
    arrival_s: float = 0.0
    completion_s: float | None = None
    started_s: float | None = None
    ended_s: float | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def but(self, **changes) -> JobRow:
        return replace(self, **changes)

    def with_id(self, job_id: str) -> JobRow:
        return replace(self, spec=replace(self.spec, id=job_id))

    @property
    def final(self) -> bool:
        return is_final(self.state)

    @property
    def waiting(self) -> str:
        """This job's state while it has no process: ``preempted`` once it has started (in
        a store from before ``started_s`` was kept: once it made durable steps)."""
        return BETWEEN_RUNS if self.started_s is not None or self.steps_done > 0 else FIRST


# ---- rows made at the store's door (``rows``) -----------------------------------------------
def stored(row: JobRow, state: str) -> JobRow:
    """``row`` in the state the store holds for it (the door checked it is one of
    ``STATES``)."""
    return row.but(state=state)


def refused(row: JobRow, reason: str, **changes) -> JobRow:
    """``row`` failed at the door with ``reason`` (never done: no completion time)."""
    return row.but(state=FAILED, reason=reason, completion_s=None, **changes)


class JobStore(Protocol):
    """What ``Jobs`` writes through (``store.Store``)."""

    def add_jobs(self, jobs: list[JobRow]) -> None: ...

    def update_jobs(self, jobs: list[JobRow], db: Any = None) -> None: ...

    def update_spec(self, job: JobRow) -> None: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


class Jobs(Mapping[str, JobRow]):
    """The daemon's job rows by id (read like a mapping). Each method below is a transition
    of the table, checked, written through the store and followed by ``changed()`` (the
    executor republishes its view)."""

    def __init__(self, store: JobStore, changed: Callable[[], None] = lambda: None,
                 ended: Callable[[JobRow], None] = lambda row: None,
                 retired: Callable[[list[str]], None] = lambda job_ids: None) -> None:
        """``changed()`` follows every change; ``ended(row)`` every job that became final
        (its dependants wait on it: ``control``); ``retired(job_ids)`` jobs that left
        memory (``retire``)."""
        self._store, self._changed, self._ended = store, changed, ended
        self._retired = retired
        self._rows: dict[str, JobRow] = {}
        self._open: Counter[str] = Counter()     # user -> their jobs not final

    # ---- reading --------------------------------------------------------------------------
    def __getitem__(self, job_id: str) -> JobRow:
        return self._rows[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._rows

    def get(self, job_id: str, default: Any = None) -> Any:
        return self._rows.get(job_id, default)

    def live(self, job_ids: Iterable[str]) -> bool:
        """Every one of ``job_ids`` (a job's, or a co-located pair's members) is known here
        and has not ended."""
        return all((job := self._rows.get(job_id)) is not None and not job.final
                   for job_id in job_ids)

    def open_of(self, user: str) -> int:
        """How many of ``user``'s jobs have not ended (a users file's ``max_jobs``)."""
        return self._open[user]

    def values(self) -> ValuesView[JobRow]:      # (the dict's own views: fast at 10,000 jobs)
        return self._rows.values()

    def items(self) -> ItemsView[str, JobRow]:
        return self._rows.items()

    # ---- transitions ----------------------------------------------------------------------
    def restore(self, rows: Iterable[JobRow]) -> list[JobRow]:
        """The store's rows at start (before the first picture): each job neither final nor
        held waits again (``JobRow.waiting``), whatever it was doing when the daemon
        stopped. Returns those, for the core."""
        waiting = []
        for row in rows:
            if not row.final and row.state != HELD:
                row = row.but(state=row.waiting)
                waiting.append(row)
            self._rows[row.id] = row
            if not row.final:
                self._open[row.user] += 1
        return waiting

    def submit(self, rows: list[JobRow]) -> None:
        """New jobs (ids and arrival set; several: an array's copies), in the first state,
        written together."""
        for row in rows:
            if row.state != FIRST or row.id in self._rows:
                raise IllegalTransition(row.id, self._rows[row.id].state
                                        if row.id in self._rows else row.state, FIRST)
        self._store.add_jobs(rows)
        self._rows.update((row.id, row) for row in rows)
        for row in rows:
            self._open[row.user] += 1
        self._changed()
        row = rows[0]
        log.info("job %s submitted%s: %s on %d GPU%s, %d steps", row.id,
                 f" (array {row.array_id} of {len(rows)})" if row.array_id else "",
                 row.spec.job_type, row.spec.scale_factor,
                 "s" if row.spec.scale_factor != 1 else "", row.spec.total_steps)

    def start(self, job_id: str, now: float, where: str) -> None:
        """A process of the job has started (on ``where``): it runs; its first start is
        kept."""
        job = self._rows[job_id]
        if job.state == HELD:           # a run launched before the hold: it ends with its lease
            return
        if job.started_s is not None:
            self._move(job, RUNNING, write=False)
            return
        job = self._move(job, RUNNING, started_s=now)
        log.info("job %s started on %s, %.1fs after its submission", job_id, where,
                 now - job.arrival_s)

    def credit(self, job_id: str, steps: int,
               together: Callable[[Any], None] | None = None) -> int:
        """The job's durable count is now ``steps`` (absolute, capped at its total): the
        steps new to it (0: nothing new, nothing written). ``together(db)`` is written in
        the same transaction."""
        job = self._rows[job_id]
        steps = min(int(steps), job.spec.total_steps)
        if job.final or steps <= job.steps_done:
            return 0
        row = self._rows[job_id] = job.but(steps_done=steps)
        with self._store.transaction() as db:
            self._store.update_jobs([row], db)
            if together is not None:
                together(db)
        self._changed()
        return steps - job.steps_done

    def preempt(self, job_id: str) -> None:
        """The job's run has ended: a running job waits for its next one."""
        job = self._rows.get(job_id)
        if job is not None and job.state == RUNNING:
            self._move(job, job.waiting, write=False)

    def hold(self, job_id: str, reason: str) -> None:
        """The job is not scheduled until released; a run it has goes on to its lease's end."""
        self._move(self._rows[job_id], HELD, reason=reason)
        log.info("job %s held: %s", job_id, reason)

    def release(self, job_id: str) -> None:
        """A held job waits again (``JobRow.waiting``)."""
        job = self._rows[job_id]
        self._move(job, job.waiting, reason=None)
        log.info("job %s released", job_id)

    def update(self, job_id: str, **spec_changes) -> JobRow:
        """Change fields of the job's ``JobSpec`` (priority weight, entity), written at once."""
        job = self._rows[job_id]
        row = self._rows[job_id] = job.but(spec=replace(job.spec, **spec_changes))
        self._store.update_spec(row)
        self._changed()
        return row

    def finish(self, job_id: str, now: float) -> None:
        """Every step of the job is durable."""
        job = self._rows[job_id]
        self._move(job, DONE, steps_done=job.spec.total_steps, completion_s=now, ended_s=now)
        log.info("job %s done at %.1fs", job_id, now)

    def fail(self, job_id: str, reason: str, now: float) -> None:
        self._move(self._rows[job_id], FAILED, reason=reason, completion_s=None, ended_s=now)
        log.warning("job %s failed: %s", job_id, reason)

    def cancel(self, job_id: str, now: float, reason: str = "cancelled") -> None:
        self._move(self._rows[job_id], CANCELLED, reason=reason, ended_s=now)
        log.info("job %s cancelled: %s", job_id, reason)

    def retire(self, job_ids: Iterable[str], now: float) -> list[str]:
        """Ended jobs leave memory; the store keeps them (``retired.py``). One with no end
        time (a store from before ``ended_s``) is written ended ``now``, so that a restart
        leaves it out too. Returns the ids that left."""
        gone = [self._rows.pop(job_id) for job_id in job_ids
                if job_id in self._rows and self._rows[job_id].final]
        self._store.update_jobs([row.but(ended_s=now) for row in gone if row.ended_s is None])
        if gone:
            self._retired([row.id for row in gone])
            self._changed()
        return [row.id for row in gone]

    def _move(self, job: JobRow, state: str, *, write: bool = True, **changes) -> JobRow:
        check(job.id, job.state, state)
        row = self._rows[job.id] = job.but(state=state, **changes)
        if write:
            self._store.update_jobs([row])
        self._changed()
        if row.final:
            self._open[row.user] -= 1
            self._ended(row)
        return row
