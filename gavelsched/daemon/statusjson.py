"""The JSON of a ``StatusResponse`` (issue #18): what ``status --json`` and ``history
--json`` print (``gavelsched/cli/jobviews.py``) and what the dashboard serves
(``dashboard.py``). Pure: a reply in, plain data out.

Times on the wire count seconds on the scheduler's clock (< 0: not yet); a job's
``elapsed`` runs from its first start to its end (or to the scheduler's ``now_s``), its
JCT from its submission to its completion (done jobs only, as in Gavel's simulator).
A job's SLO (thesis §5.7.3: a JCT it must not pass) sets its deadline, its arrival plus
the SLO; ``slo_status`` says where the job stands against it.
"""

from __future__ import annotations

import math
import time

from .jobs import CANCELLED, FAILED

# Where a job stands against its SLO's deadline (``slo_status``), worst first.
MISSED, AT_RISK, UNKNOWN, ON_TRACK, MET = "missed", "at_risk", "unknown", "on_track", "met"
SLO_STATUSES = (MISSED, AT_RISK, UNKNOWN, ON_TRACK, MET)


def seconds(value: float) -> float | None:
    """A wire time (< 0: none) as a number or None."""
    return None if value < 0 else value


def elapsed_s(job, now_s: float) -> float | None:
    started = seconds(job.started_s)
    if started is None:
        return None
    end = seconds(job.ended_s)
    return max(0.0, (now_s if end is None else end) - started)


def jct_s(job) -> float | None:
    done = seconds(job.completion_s)
    return None if done is None else max(0.0, done - job.arrival_s)


def slo_status(state: str, deadline_s: float | None, completed_s: float | None,
               eta_finish_s: float | None, now_s: float) -> str | None:
    """A job's standing against its deadline (its arrival plus its SLO, thesis §5.7.3), as
    the simulator counts a violation (a JCT past the SLO): ``met`` or ``missed`` once it
    completed (``completed_s``), ``missed`` once the deadline has passed unfinished, else
    ``at_risk`` when the scheduler's ETA finishes past it, ``on_track`` when within,
    ``unknown`` without an ETA. None: no SLO, or a job failed or cancelled, which no
    deadline binds any more."""
    if deadline_s is None or state in (FAILED, CANCELLED):
        return None
    if completed_s is not None:
        return MET if completed_s <= deadline_s else MISSED
    if now_s > deadline_s:
        return MISSED
    if eta_finish_s is None:
        return UNKNOWN
    return AT_RISK if eta_finish_s > deadline_s else ON_TRACK


def deadline_s(job) -> float | None:
    """A wire job's deadline on the scheduler's clock (None: no SLO; ``slo_s`` 0)."""
    slo = job.slo_s
    return job.arrival_s + slo if slo > 0 and math.isfinite(slo) else None


def slo_of(job, now_s: float) -> str | None:
    """A wire job's ``slo_status`` at the reply's ``now_s`` (None: no SLO)."""
    deadline = deadline_s(job)
    return None if deadline is None else slo_status(
        job.state, deadline, seconds(job.completion_s), seconds(job.eta_finish_s), now_s)


def iso(epoch_unix: float, value: float) -> str | None:
    """A wire time as ISO 8601 UTC (``2026-11-24T10:01:02Z``), or None."""
    if value < 0:
        return None
    return "%04d-%02d-%02dT%02d:%02d:%02dZ" % time.gmtime(epoch_unix + value)[:6]


def status_dict(reply) -> dict:
    """``status --json`` / ``history --json``: the docs/design.md contract, plus ``gpus`` (held
    this round), ``mixed``, ``min_scale_factor`` (null: not elastic), ``entity``,
    ``allocation`` and ``received`` (per type), the times in the scheduler's seconds
    (``arrival_s``, ``started_s``, ``ended_s``, ``completion_s``, ``elapsed_s``,
    ``jct_s``; null: not yet) and as dates (``submitted_at``, ``started_at``,
    ``ended_at``); who submitted it (``user``), its array (``array_id``, ``array_index``),
    time limit (``max_runtime_s``), dependencies (``after``) and seconds run (``run_s``);
    the scheduler's ETA (``eta_start_s`` of a job not started, ``eta_finish_s``, and
    ``eta_finish_at`` as a date; null: none), computed at ``eta_computed_s`` (``eta_error``:
    why there are none); its SLO (``slo_s``, seconds from submission), ``deadline_s`` and
    ``deadline_at``, and ``slo_status`` (``slo_status()``; null: no SLO); the configured
    ``entities`` with the GPUs and jobs each has now;
    and the policy's re-solve running and the last one's seconds (``solving``)."""
    epoch, now = reply.epoch_unix, reply.now_s
    return {"round": reply.round, "jobs": [job_dict(j, epoch, now) for j in reply.jobs],
            **cluster_dict(reply)}


def job_dict(j, epoch: float, now: float) -> dict:
    """One job's object of ``status_dict`` (``epoch``, ``now``: the reply's)."""
    return {"id": j.id, "state": j.state, "steps_done": j.steps_done,
            "total_steps": j.total_steps, "job_type": j.job_type,
            "scale_factor": j.scale_factor, "worker_type": j.worker_type or None,
            "reason": j.reason or None, "gpus": j.gpus,
            "shared_with": j.shared_with or None, "mixed": j.mixed,
            "min_scale_factor": j.min_scale_factor or None,
            "entity": j.entity or None, "allocation": plain(j.allocation),
            "received": plain(j.received), "arrival_s": j.arrival_s,
            "started_s": seconds(j.started_s), "ended_s": seconds(j.ended_s),
            "completion_s": seconds(j.completion_s),
            "elapsed_s": elapsed_s(j, now), "jct_s": jct_s(j),
            "submitted_at": iso(epoch, j.arrival_s),
            "started_at": iso(epoch, j.started_s),
            "ended_at": iso(epoch, j.ended_s), "user": j.user or None,
            "array_id": j.array_id or None,
            "array_index": j.array_index if j.array_id else None,
            "max_runtime_s": j.max_runtime_s or None, "after": list(j.after),
            "run_s": j.run_s, "eta_start_s": seconds(j.eta_start_s),
            "eta_finish_s": seconds(j.eta_finish_s),
            "eta_finish_at": iso(epoch, j.eta_finish_s), **slo_dict(j, epoch, now)}


def slo_dict(j, epoch: float, now: float) -> dict:
    """A wire job's SLO fields of ``job_dict``: all null for a job without one."""
    deadline = deadline_s(j)
    if deadline is None:
        return {"slo_s": None, "deadline_s": None, "deadline_at": None, "slo_status": None}
    return {"slo_s": j.slo_s, "deadline_s": deadline, "deadline_at": iso(epoch, deadline),
            "slo_status": slo_of(j, now)}


def cluster_dict(reply) -> dict:
    """``status_dict`` but its jobs: the workers, entities, the ETAs' time and error, the
    policy's solves (``solving``) and what an operator should know now (``notices``: one
    line each, such as the submissions refused on a full disk)."""
    return {"solving": solving_dict(reply), "workers": [{"id": w.id, "type": w.type, "gpus": w.gpus, "alive": w.alive,
                         "drained": w.drained, "runs": w.runs}
                        for w in reply.workers],
            "entities": [{"name": e.name, "weight": e.weight, "policy": e.policy,
                          "max_gpus": e.max_gpus or None, "gpus": e.gpus, "jobs": e.jobs}
                         for e in reply.entities],
            "eta_computed_s": seconds(reply.eta_computed_s),
            "eta_error": reply.eta_error or None, "notices": list(reply.notices)}


def solving_dict(reply) -> dict:
    """The policy's re-solve running off the executor: since when on the scheduler's clock
    (``since_s``; null: none running), for how long at the reply's ``now_s`` (``for_s``) and
    for how many ``jobs``; and the seconds the allocation in force took to solve
    (``allocation_solve_s``; null: none yet, or not known). A scheduler from before these
    fields sends zeros: no jobs solving is none running, and no solve takes 0 s."""
    since = seconds(reply.solving_since_s) if reply.solving_jobs > 0 else None
    return {"since_s": since, "for_s": None if since is None else max(0.0, reply.now_s - since),
            "jobs": reply.solving_jobs if since is not None else 0,
            "allocation_solve_s": reply.allocation_solve_s if reply.allocation_solve_s > 0
            else None}


def plain(mapping) -> dict:
    """A protobuf map as a dict (read key by key: ``dict(map)`` goes through the Mapping
    ABC, three times slower, which 10,000 jobs' three maps each feel)."""
    return {k: mapping[k] for k in mapping} if mapping else {}
