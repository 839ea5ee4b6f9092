"""Job control (issue #28, as Slurm's ``scontrol`` and job arrays): which jobs the core
holds, and the calls that change it.

A job is in the core (and so scheduled; thesis §5.5) unless it is *held* (``hold``, until
``release``) or *waits on a dependency*: ``after`` names jobs that must be done first, and
one that fails or is cancelled cancels it, with that reason (and so on down its own
dependants). An *array* is ``count`` copies of one submission, ``A_0 ... A_{n-1}`` with
array id ``A``; ``cancel``, ``hold``, ``release`` and ``update`` take the array's id for
every copy not ended. ``update`` changes a job's priority weight or entity for the next
round (the core re-solves: ``SchedulerCore.update_job``).

The dependency graph is acyclic by construction: a job may only wait for jobs that exist
when it is submitted, and never for itself or its own array (``plan_dependencies``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from traces import checks

from ..core import SchedulerCore
from .jobs import DONE, HELD, JobRow, Jobs

log = logging.getLogger(__name__)

MAX_ARRAY = checks.MAX_ARRAY        # copies in one array


class ControlError(ValueError):
    """A control call that cannot be made (one line; the wire's INVALID_ARGUMENT)."""


def array_ids(first_seq: int, count: int) -> tuple[str, list[str]]:
    """(the array's id, its copies' ids) for ``count`` copies whose array takes the job
    sequence number ``first_seq``: ``"7"`` and ``["7_0", "7_1", ...]``; one job (count 1)
    is ``("", ["7"])``."""
    if count <= 1:
        return "", [str(first_seq)]
    return str(first_seq), [f"{first_seq}_{i}" for i in range(count)]


class JobControl:
    """Holds, releases, updates, dependencies and arrays over the daemon's jobs and core.
    ``cancel(job_id, reason)`` ends a job (the executor's own cancel path)."""

    def __init__(self, jobs: Jobs, core: SchedulerCore, *,
                 cancel: Callable[[str, str], None], running: Callable[[str], bool],
                 retired: Callable[[str], list[JobRow]] = lambda name: []) -> None:
        """``retired(name)``: the store's rows of the jobs ``name`` names that left memory
        (``retired.Retired.rows``)."""
        self.jobs, self.core = jobs, core
        self._cancel, self._running, self._retired = cancel, running, retired
        self._arrays: dict[str, list[str]] = {}       # array id -> its copies
        self._dependants: dict[str, set[str]] = {}    # job -> jobs that wait for it

    # ---- names ----------------------------------------------------------------------------
    def expand(self, job_id: str) -> list[str]:
        """The jobs in memory ``job_id`` names: itself, or every copy of the array it is."""
        if job_id in self.jobs:
            return [job_id]
        return list(self._arrays.get(job_id, ()))

    def rows(self, job_id: str) -> list[JobRow]:
        """The jobs ``job_id`` names (``expand``), or those that left memory (ended long
        ago: read from the store); none for a name of no job."""
        return [self.jobs[one] for one in self.expand(job_id)] or self._retired(job_id)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Jobs that left memory: out of their arrays' copies (an array all of whose
        copies left is then read from the store: ``rows``)."""
        gone = set(job_ids)
        for job_id in gone:
            self._dependants.pop(job_id, None)
        for array_id in {job_id.rpartition("_")[0] for job_id in gone} & self._arrays.keys():
            copies = [one for one in self._arrays[array_id] if one not in gone]
            if copies:
                self._arrays[array_id] = copies
            else:
                del self._arrays[array_id]

    def plan_dependencies(self, after: Sequence[str], new_ids: Iterable[str],
                          array_id: str = "") -> tuple[str, ...]:
        """``after`` as job ids (an array's id becomes its copies), checked: every one
        exists, and none is the new job itself or its array (a cycle). ``ControlError``
        names the first that is neither."""
        own = set(new_ids) | ({array_id} if array_id else set())
        out: list[str] = []
        for dep in after:
            if dep in own:
                raise ControlError(f"after: {dep} is this submission itself: a job cannot "
                                   "wait for itself (a cycle in dependencies)")
            named = [row.id for row in self.rows(dep)]
            if not named:
                raise ControlError(f"after: no job or array {dep!r}")
            out.extend(named)
        return tuple(dict.fromkeys(out))

    # ---- entering the core -----------------------------------------------------------------
    def enter(self, row: JobRow, now: float) -> bool:
        """A job submitted or restored: indexed (its array, what it waits for), and given
        to the core unless it is held or waits. Returns whether the core has it now."""
        if row.array_id:
            self._arrays.setdefault(row.array_id, []).append(row.id)
        for dep in row.after:
            self._dependants.setdefault(dep, set()).add(row.id)
        if row.final or row.state == HELD:
            return False
        failed = self._failed_dependency(row)
        if failed is not None:
            self._cancel(row.id, failed)
            return False
        if self.blocked_by(row):
            return False
        self.core.submit(row.spec, now, steps_done=row.steps_done)
        return True

    def blocked_by(self, row: JobRow) -> list[str]:
        """The jobs ``row`` waits for that are not done yet."""
        return [d for d in row.after if d in self.jobs and self.jobs[d].state != DONE]

    def _failed_dependency(self, row: JobRow) -> str | None:
        for dep in row.after:       # (one that left memory ended long ago: in the store)
            other = self.jobs.get(dep) or next(iter(self._retired(dep)), None)
            if other is not None and other.final and other.state != DONE:
                return f"dependency {dep} {other.state}"
        return None

    def ended(self, row: JobRow, now: float) -> None:
        """``row`` became final: its dependants go to the core (all their dependencies
        done) or are cancelled (this one failed or was cancelled)."""
        for job_id in sorted(self._dependants.pop(row.id, ())):
            job = self.jobs.get(job_id)
            if job is not None and not job.final:
                if row.state != DONE:
                    self._cancel(job_id, f"dependency {row.id} {row.state}")
                elif job.state != HELD and not self.blocked_by(job):
                    self.core.submit(job.spec, now, steps_done=job.steps_done)
                    log.info("job %s: its dependencies are done; it is scheduled", job_id)

    def waiting_reason(self, row: JobRow) -> str | None:
        """Why a job not held is not in the core, or None."""
        blocked = self.blocked_by(row) if not row.final else []
        return f"waiting for {', '.join(blocked)} (after)" if blocked else None

    # ---- calls ---------------------------------------------------------------------------
    def hold(self, job_id: str, reason: str, now: float) -> None:
        """Out of the core (a run it has ends with its lease), held with ``reason``."""
        job = self.jobs[job_id]
        if job.final or job.state == HELD:
            raise ControlError(f"job {job_id} is {job.state}")
        if job_id in self.core.active_ids or job_id in self.core.pending_jobs:
            self.core.withdraw(job_id, now)
        self.jobs.hold(job_id, reason)

    def release(self, job_id: str, now: float) -> None:
        job = self.jobs[job_id]
        if job.state != HELD:
            raise ControlError(f"job {job_id} is {job.state}, not held")
        self.jobs.release(job_id)
        if self._running(job_id):
            self.jobs.start(job_id, now, "its run from before the hold")
        if not self.blocked_by(job):
            self.core.submit(self.jobs[job_id].spec, now, steps_done=job.steps_done)

    def update(self, job_id: str, changes: Mapping[str, object], now: float) -> None:
        """New ``priority_weight`` / ``entity`` for the job, from the next round."""
        job = self.jobs[job_id]
        if job.final:
            raise ControlError(f"job {job_id} is {job.state}")
        self.jobs.update(job_id, **changes)
        if job_id in self.core.active_ids or job_id in self.core.pending_jobs:
            self.core.update_job(job_id, now, **changes)
