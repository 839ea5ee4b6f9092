"""The calls clients make that change jobs (issue #28), on the executor's thread: submit
(one job or an array, with its user, time limit and dependencies), cancel, hold, release
and update, each checked against who calls (``rpc.identity.Caller``) and recorded
(``audit``); and what they read that only the store holds: a job's history, the usage.

Who may do what: a user submits to their own entities and acts on their own jobs; an
admin on every job; the worker daemons' token and a job's own token change no job here.
A refusal is ``Denied`` (PERMISSION_DENIED on the wire) and changes nothing; a bad request
is ``SubmissionError`` or ``ControlError`` (INVALID_ARGUMENT); an unknown job
``LookupError`` (NOT_FOUND); a submission past its user's ``max_jobs`` (the users file)
``OverQuota`` (RESOURCE_EXHAUSTED), as is one while the state_dir's disk is below its
reserve (``room.NoRoom``). Every id a call names is checked before any job
changes, so a call on an array changes all its copies or none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from traces import checks
from traces.checks import shown

from ..core import SchedulerCore
from ..rpc import pb
from ..rpc.identity import ADMIN, USER, Caller
from .accounting import BY, usage_report
from .audit import Audit
from .control import MAX_ARRAY, ControlError, JobControl, array_ids
from .jobs import HELD, JobRow, Jobs
from .meter import usage_run
from .retired import Retired
from .room import Room
from .store import Store
from .submissions import SubmissionError, check_submission


class Denied(PermissionError):
    """The caller may not make this call (one line)."""


class OverQuota(Exception):
    """A submission that would give its user more unfinished jobs than their ``max_jobs``
    (one line); nothing of it is submitted."""


@dataclass(frozen=True)
class Door:
    """What a submission is checked against: the throughput table, the worker types it
    knows, the GPUs of each registered type, the configured entities (empty: any
    entity is a label), the room left on the state_dir's disk (``room``; None: not
    checked) and the policy's name where it schedules single-GPU jobs only, and
    where it refuses an SLO beyond reach (``policy_door``)."""

    table: object
    worker_types: tuple[str, ...]
    gpus_by_type: Mapping[str, int]
    entities: tuple[str, ...]
    room: Room | None = None
    single_gpu_policy: str | None = None
    slo_policy: str | None = None


def policy_door(policy) -> dict[str, str | None]:
    """``Door``'s policy fields for ``policy``: its name as ``single_gpu_policy`` when it
    schedules single-GPU jobs only (``Traits.single_gpu``), as ``slo_policy`` when it
    refuses a new job whose SLO is beyond reach (``Traits.refuses_slos_beyond_reach``)."""
    traits = policy.traits
    return {"single_gpu_policy": policy.name if traits.single_gpu else None,
            "slo_policy": policy.name if traits.refuses_slos_beyond_reach else None}


class ClientCalls:
    """See the module docstring. ``end_job(job_id, reason)`` cancels a job (the
    executor's path: out of the core, its run killed); ``woken()`` is told a job arrived."""

    def __init__(self, jobs: Jobs, core: SchedulerCore, control: JobControl, audit: Audit,
                 store: Store, retired: Retired, *, now: Callable[[], float],
                 end_job: Callable[[str, str], None], woken: Callable[[], None]) -> None:
        self.jobs, self.core, self.control, self.audit = jobs, core, control, audit
        self.store, self.retired = store, retired
        self._now, self._end_job, self._woken = now, end_job, woken

    # ---- submit --------------------------------------------------------------------------
    def submit(self, caller: Caller, request: pb.JobRequest, door: Door) -> pb.SubmitResponse:
        if caller.role not in (ADMIN, USER):
            raise Denied(f"{caller.name} may not submit jobs (a user's token does)")
        row = check_submission(request, door.table, door.worker_types, door.gpus_by_type,
                               single_gpu_policy=door.single_gpu_policy,
                               slo_policy=door.slo_policy)
        entity = _entity(caller, row.spec.entity or "", door.entities)
        limit = request.max_runtime_s
        if not (math.isfinite(limit) and limit >= 0):
            raise SubmissionError("max_runtime_s", f"must be a number of seconds >= 0, got "
                                                   f"{limit}")
        count = int(request.count) or 1
        if not 1 <= count <= MAX_ARRAY:
            raise SubmissionError("count", f"must be between 1 and {MAX_ARRAY}, got {count}")
        self._within_quota(caller, count)
        if door.room is not None:
            door.room.check()
        array_id, ids = array_ids(self.store.next_job_id(), count)
        try:
            after = self.control.plan_dependencies(list(request.after), ids, array_id)
        except ControlError as err:
            raise SubmissionError("after", str(err).removeprefix("after: ")) from None
        now = self._now()
        base = row.but(arrival_s=now, user=caller.name, array_id=array_id,
                       max_runtime_s=limit or None, after=after)
        base = base.but(spec=replace(base.spec, entity=entity or None))
        rows = [base.with_id(job_id).but(array_index=i) for i, job_id in enumerate(ids)]
        self._woken()
        self.jobs.submit(rows)
        for r in rows:
            self.control.enter(r, now)
        detail = (f"{row.spec.job_type} x{row.spec.scale_factor}, {row.spec.total_steps} "
                  f"steps" + (f", entity {entity}" if entity else "")
                  + (f", array of {count}" if array_id else ""))
        self.audit.record(caller.name, "submit", ids, detail)
        return pb.SubmitResponse(job_id=ids[0], job_ids=ids, array_id=array_id)

    def _within_quota(self, caller: Caller, count: int) -> None:
        """``OverQuota`` when ``count`` more jobs would pass the caller's ``max_jobs``: an
        array is taken whole or not at all."""
        cap = caller.max_jobs
        have = self.jobs.open_of(caller.name)
        if cap is not None and have + count > cap:
            raise OverQuota(f"{caller.name} has {have} unfinished jobs and may have at most "
                            f"{cap} (max_jobs in the users file): {count} more would make "
                            f"{have + count}; wait for some to end, or cancel some")

    # ---- acting on jobs ------------------------------------------------------------------
    def owned(self, caller: Caller, job_id: str, action: str) -> list[JobRow]:
        """The jobs ``job_id`` names (an array: its copies; one that ended long ago: from
        the store), all of which the caller may act on; else ``LookupError`` or
        ``Denied``."""
        rows = self.control.rows(job_id)
        if not rows:
            raise LookupError(f"unknown job {shown(job_id)}")
        for row in rows:
            if not caller.may_act_on(row.id, row.user) or caller.role not in (ADMIN, USER):
                raise Denied(f"{caller.name} may not {action} job {row.id} (submitted by "
                             f"{row.user or 'no user'})")
        return rows

    def cancel(self, caller: Caller, job_id: str) -> pb.Ack:
        rows = self.owned(caller, job_id, "cancel")
        live = [row.id for row in rows if not row.final]
        if not live:
            return pb.Ack(ok=False, message=f"job {job_id} is already {rows[0].state}")
        self.audit.record(caller.name, "cancel", live)     # (before the end it causes)
        for one in live:
            self._end_job(one, f"cancelled by {caller.name}")
        return pb.Ack(ok=True, message=f"cancelled {len(live)} job{'s' if len(live) > 1 else ''}")

    def hold(self, caller: Caller, job_id: str, reason: str) -> pb.Ack:
        checks.text(reason, "reason")    # (a job's reason is one line, and it is stored)
        ids = self._acting(caller, job_id, "hold", lambda j: j.state != HELD)
        why = reason or f"held by {caller.name}"
        for one in ids:
            self.control.hold(one, why, self._now())
        self.audit.record(caller.name, "hold", ids, why)
        return pb.Ack(ok=True, message=f"held {', '.join(ids)}")

    def release(self, caller: Caller, job_id: str) -> pb.Ack:
        ids = self._acting(caller, job_id, "release", lambda j: j.state == HELD)
        for one in ids:
            self.control.release(one, self._now())
        self.audit.record(caller.name, "release", ids)
        return pb.Ack(ok=True, message=f"released {', '.join(ids)}")

    def update(self, caller: Caller, request: pb.UpdateRequest,
               entities: tuple[str, ...]) -> pb.Ack:
        changes: dict[str, object] = {}
        if request.priority_weight:
            checks.number(request.priority_weight, "priority_weight",
                          low=checks.PRIORITY_WEIGHT_MIN, high=checks.PRIORITY_WEIGHT_MAX)
            changes["priority_weight"] = float(request.priority_weight)
        if request.entity:
            changes["entity"] = _entity(caller, checks.text(request.entity, "entity"),
                                        entities)
        if not changes:
            raise ControlError("update: give a priority weight or an entity")
        ids = self._acting(caller, request.job_id, "update", lambda j: True)
        for one in ids:
            self.control.update(one, changes, self._now())
        detail = ", ".join(f"{k} {v}" for k, v in changes.items())
        self.audit.record(caller.name, "update", ids, detail)
        return pb.Ack(ok=True, message=f"updated {', '.join(ids)}: {detail}")

    def _acting(self, caller: Caller, job_id: str, action: str,
                applies: Callable[[JobRow], bool]) -> list[str]:
        """The jobs ``job_id`` names that ``action`` applies to (not ended), the caller's;
        ``ControlError`` when none is."""
        rows = self.owned(caller, job_id, action)
        ids = [row.id for row in rows if not row.final and applies(row)]
        if not ids:
            raise ControlError(f"cannot {action} job {job_id}: it is {rows[0].state}")
        return ids

    # ---- reading -------------------------------------------------------------------------
    def history(self, caller: Caller, job_id: str) -> pb.HistoryResponse:
        first = self.owned(caller, job_id, "read the history of")[0].id  # (an array: its first)
        return pb.HistoryResponse(events=[
            pb.HistoryEvent(time_unix=e.time_unix, user=e.user, action=e.action,
                            detail=e.detail) for e in self.audit.history(first)])

    def may_read_logs(self, caller: Caller, job_id: str) -> tuple[int, ...] | None:
        """``Denied`` unless the caller may read the job's logs; for a job that left memory
        (ended long ago) the servers that ran it, from the store (None: in memory, or no
        job)."""
        job = self.jobs.get(job_id)
        rows = [job] if job is not None else [
            row for row in self.control.rows(job_id) if row.id == job_id]   # (not an array)
        for row in rows:
            if not caller.may_act_on(row.id, row.user):
                raise Denied(f"{caller.name} may not read the logs of job {row.id} "
                             f"(submitted by {row.user or 'no user'})")
        return self.retired.hosts(job_id) if job is None and rows else None

    def usage(self, request: pb.UsageRequest) -> pb.UsageResponse:
        by = request.by or "user"
        if by not in BY:
            raise ControlError(f"by: must be one of {', '.join(BY)}, got {shown(by)}")
        runs = [usage_run(row) for row in self.store.usage(request.since_unix)]
        return usage_report(runs, by, request.since_unix).to_pb()


def _entity(caller: Caller, entity: str, known: tuple[str, ...]) -> str:
    """The entity a job of ``caller`` goes to: the one named (which must be configured,
    when any are, and the caller's), or the caller's only one when none is named."""
    if not entity and known:
        mine = sorted(caller.entities or ()) if not caller.is_admin else []
        if len(mine) != 1:
            raise SubmissionError("entity", f"name one of the entities: {', '.join(known)}")
        entity = mine[0]
    if known and entity not in known:
        raise SubmissionError("entity", f"unknown entity {shown(entity)} (known: "
                                        f"{', '.join(known)})")
    if not caller.may_submit_to(entity):
        mine = ", ".join(sorted(caller.entities or ())) or "none"
        raise Denied(f"{caller.name} may not submit to entity {shown(entity)} (theirs: {mine})")
    return entity
