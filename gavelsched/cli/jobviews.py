"""How ``status`` and ``history`` show a ``StatusResponse`` (issue #18): the JSON of
``--json`` (docs/design.md's contract, plus times, entity, and allocation against received
share; ``daemon/statusjson.py``, shared with the dashboard) and two tables: ``status`` shows what
runs and waits now, as Slurm's ``squeue`` does, and ``history`` when each job was
submitted, started and ended, as ``sacct`` does; both name the user who submitted each job
after its type, as ``squeue`` does (``-``: none recorded, a job of an older store). Dates
are shown as Slurm shows them: local time, ``YYYY-MM-DDTHH:MM:SS``.

The tables read the reply itself, with the JSON's own helpers for what they derive
(``elapsed_s``, ``jct_s``): at 10,000 jobs, ``gavelsched.client``'s typed records
(``ClusterStatus``) cost three times the table.
"""

from __future__ import annotations

import time
from collections import Counter

from ..client.status import ClusterStatus
from ..daemon.statusjson import (
    AT_RISK,
    MISSED,
    deadline_s,
    elapsed_s,
    iso,
    jct_s,
    seconds,
    slo_of,
    solving_dict,
    status_dict,
)

__all__ = ["clock", "date", "elapsed_s", "history_table", "iso", "jct_s", "seconds",
           "status_dict", "status_table", "user"]


def clock(value: float | None) -> str:
    """A duration as Slurm writes one: ``[D-]HH:MM:SS``; ``-`` for none."""
    if value is None:
        return "-"
    s = int(value)
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def date(epoch_unix: float, value: float | None) -> str:
    """A time on the scheduler's clock as a local date (``2026-11-24T10:01:02``); ``-`` for
    none (None, or < 0 on the wire)."""
    if value is None or value < 0:
        return "-"
    return "%04d-%02d-%02dT%02d:%02d:%02d" % time.localtime(epoch_unix + value)[:6]


def user(job) -> str:
    """Who submitted the job; ``-`` when its record has none (older data)."""
    return getattr(job, "user", None) or "-"


def status_table(reply) -> list[str]:
    """What runs and waits: who submitted it, progress, GPUs held this round over the scale
    factor (an elastic job's floor after ``≥``), the worker type (or configuration) this
    round, the time since its first start, allocation/received per type, why it waits,
    and a job's SLO missed or at risk (``slo_note``; the header counts them)."""
    jobs, now = reply.jobs, reply.now_s
    slo = {j.id: note for j in jobs if j.slo_s > 0 and (note := slo_note(j, now))}
    w_id, w_type = _width(jobs, "id", lambda j: j.id), _width(jobs, "type", lambda j: j.job_type)
    w_on = _width(jobs, "on", lambda j: j.worker_type or "-")
    w_user = _width(jobs, "user", user)
    lines = [f"round {reply.round}  policy {reply.policy}  rounds of "
             f"{reply.round_seconds:g}s  jobs {len(jobs)}{solve_note(reply)}"
             f"{slo_count(status for status, _ in slo.values())}",
             *(f"note: {notice}" for notice in reply.notices),
             f"{'id':>{w_id}} {'type':<{w_type}} {'user':<{w_user}} {'state':<9} "
             f"{'progress':>20} {'gpus':>7} "
             f"{'on':<{w_on}} {'elapsed':>11} allocation/received"]
    for j in jobs:
        share = " ".join(f"{t} {x:.2f}/{j.received.get(t, 0.0):.2f}"
                         for t, x in sorted(j.allocation.items()) if x > 0 or j.received.get(t))
        progress = f"{j.steps_done}/{j.total_steps} {j.steps_done / j.total_steps:4.0%}"
        gpus = f"{j.gpus}/{j.scale_factor}" + (f"≥{j.min_scale_factor}"
                                                if j.min_scale_factor else "")
        line = (f"{j.id:>{w_id}} {j.job_type:<{w_type}} {user(j):<{w_user}} {j.state:<9} "
                f"{progress:>20} {gpus:>7} {j.worker_type or '-':<{w_on}} "
                f"{clock(elapsed_s(j, now)):>11} {share}").rstrip()
        if j.shared_with:
            line += f"  (shares its GPU{'s' if j.gpus != 1 else ''} with job {j.shared_with})"
        if j.reason:
            line += f"  ({j.reason})"
        if j.id in slo:
            line += f"  ({slo[j.id][1]})"
        lines.append(line)
    lines.append(f"workers: {len(reply.workers)}")
    lines.extend(f"{w.id:>6} {w.type:<8} gpus {w.gpus}  {worker_state(w)}  {w.address}"
                 for w in reply.workers)
    return lines


def slo_note(job, now_s: float) -> tuple[str, str] | None:
    """A wire job's SLO status (``statusjson.slo_status``) and a note saying by how much,
    when missed or at risk; None otherwise."""
    status = slo_of(job, now_s)
    if status not in (AT_RISK, MISSED):
        return None
    deadline, done, eta = deadline_s(job), seconds(job.completion_s), seconds(job.eta_finish_s)
    if status == AT_RISK:
        return status, f"SLO at risk: predicted to finish {clock(eta - deadline)} past its deadline"
    if done is not None:
        return status, f"SLO missed by {clock(done - deadline)}"
    return status, f"SLO missed: its deadline passed {clock(now_s - deadline)} ago"


def slo_count(statuses) -> str:
    """The header's count of the jobs at risk of missing their SLO and of those that
    missed it; "" for none."""
    counted = Counter(statuses)
    parts = [f"{counted[s]} {s.replace('_', ' ')}" for s in (AT_RISK, MISSED) if counted[s]]
    return f"  SLOs: {', '.join(parts)}" if parts else ""


def solve_note(reply) -> str:
    """The header's word on the policy's solves (``statusjson.solving_dict``): what the
    allocation in force took, and a re-solve running off the executor, for how long."""
    solving = solving_dict(reply)
    note = ("" if solving["allocation_solve_s"] is None
            else f"  allocation solved in {solving['allocation_solve_s']:.2f}s")
    if solving["since_s"] is not None:
        note += f"  re-solving for {clock(solving['for_s'])} ({solving['jobs']:,} jobs)"
    return note


def worker_state(worker) -> str:
    """alive or down, and drained (no job on it) or draining (N runs left): ``drain``."""
    state = "alive" if worker.alive else "down"
    if not worker.drained:
        return state
    if worker.runs:
        return f"{state}, draining ({worker.runs} run{'s' if worker.runs != 1 else ''} left)"
    return f"{state}, drained"


def history_table(reply) -> list[str]:
    """Each job's user, entity, state, dates of submission, first start and end, elapsed time
    (first start to end, or now), JCT (done jobs) and steps."""
    jobs, now = reply.jobs, reply.now_s
    w_id, w_type = _width(jobs, "id", lambda j: j.id), _width(jobs, "type", lambda j: j.job_type)
    w_entity = _width(jobs, "entity", lambda j: j.entity or "-")
    w_user = _width(jobs, "user", user)
    epoch = reply.epoch_unix
    lines = [f"{'id':>{w_id}} {'type':<{w_type}} {'user':<{w_user}} {'entity':<{w_entity}} "
             f"{'state':<9} {'submitted':<19} {'started':<19} {'ended':<19} {'elapsed':>11} "
             f"{'jct':>11} steps"]
    lines.extend(
        f"{j.id:>{w_id}} {j.job_type:<{w_type}} {user(j):<{w_user}} "
        f"{j.entity or '-':<{w_entity}} {j.state:<9} "
        f"{date(epoch, j.arrival_s):<19} {date(epoch, j.started_s):<19} "
        f"{date(epoch, j.ended_s):<19} {clock(elapsed_s(j, now)):>11} "
        f"{clock(jct_s(j)):>11} {j.steps_done}/{j.total_steps}" for j in jobs)
    return lines


def _width(jobs, title: str, text) -> int:
    return max([len(title), *map(len, map(text, jobs))])


def event_lines(events) -> list[str]:
    """``history JOB``: one line per event, oldest first (when, who, what, detail)."""
    lines = [f"{'when':<20}  {'user':<16}  {'action':<10}  detail"]
    for e in events:
        when = "%04d-%02d-%02dT%02d:%02d:%02dZ" % time.gmtime(e.time_unix)[:6]
        lines.append(f"{when:<20}  {e.user:<16}  {e.action:<10}  {e.detail}".rstrip())
    return lines


def eta_lines(status: ClusterStatus) -> list[str]:
    """The table ``status --eta`` prints below the status table: the scheduler's own
    predictions (``eta_start_s``, ``eta_finish_s``) and when it made them; with a job's
    SLO, its deadline and where it stands (``slo_status``)."""
    def at(seconds: float | None) -> str:
        if seconds is None:
            return "-"
        return f"{date(status.epoch_unix, seconds)} (+{clock(max(0.0, seconds - status.now_s))})"
    if status.eta_computed_s is None:
        why = status.eta_error or "the scheduler has not replayed its state yet"
        return [f"predicted: none yet ({why})"]
    age = max(0.0, status.now_s - status.eta_computed_s)
    failed = f"; its last replay failed: {status.eta_error}" if status.eta_error else ""
    lines = [f"predicted by the scheduler {clock(age)} ago (its state replayed in the "
             f"simulator, policy {status.policy}){failed}"]
    jobs = [j for j in status.jobs if j.ended_s is None]
    w = max([2, *(len(j.id) for j in jobs)])
    deadlines = any(j.deadline_s is not None for j in jobs)
    lines.append(f"{'id':>{w}} {'start':<32} " + (f"{'finish':<32} deadline (SLO)"
                                                   if deadlines else "finish"))
    for job in jobs:
        start = "started" if job.started_s is not None else at(job.eta_start_s)
        finish = at(job.eta_finish_s)
        if job.deadline_s is None:
            lines.append(f"{job.id:>{w}} {start:<32} {finish}")
        else:
            lines.append(f"{job.id:>{w}} {start:<32} {finish:<32} {at(job.deadline_s)} "
                         f"{job.slo_status.replace('_', ' ')}")
    return lines
