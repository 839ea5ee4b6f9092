"""What the worker daemons' and the iterators' calls are checked for at the door
(docs/design.md, Safety rules: validate once, at the door; the clients' calls have theirs
in ``submissions`` and ``calls``). A registration that fails is refused in one line
(``registration``); a report that cannot be true is ignored (``bad_report``); a
heartbeat's run that names no job is dropped from it (``listed_runs``)."""

from __future__ import annotations

import logging

from traces import checks
from traces.checks import MAX_GPUS_PER_SERVER, BadValue, shown
from traces.profiles import MAX_JOB_TYPES, SCHEMA, Profile, profile_from_dict

from ..rpc import pb

log = logging.getLogger(__name__)

# The longest a run can have been going, in a report (about 31 years): beyond it ``seconds``
# is a lie, and a throughput measured from it would be absurdly small.
MAX_REPORT_SECONDS = 1e9


def registration(request: pb.RegisterWorkerRequest) -> Profile | None:
    """A worker server's registration checked (its type, size, addresses, the runs it lists
    and its profile: ``worker_profile``); ``ValueError`` in one line."""
    checks.text(request.worker_type, "worker_type", empty=False)
    checks.integer(request.gpus, "gpus", low=1, high=MAX_GPUS_PER_SERVER)
    checks.text(request.address, "address")
    checks.text(request.hostname, "hostname")
    for run in request.running:     # (what a restarted scheduler adopts: ``orphans``)
        checks.text(run.job_id, "running.job_id", empty=False)
        checks.integer(len(run.gpus), "running.gpus (how many)", high=request.gpus)
    return worker_profile(request)


def bad_report(request, *, unknown_steps: bool = False) -> str | None:
    """Why a report's ``steps`` and ``seconds`` cannot be used, or None (docs/design.md, Safety
    rules: checked once, at the door). ``steps`` is an absolute count >= 0 (``-1``:
    unknown, where ``unknown_steps``); ``seconds`` a finite duration in
    ``[0, MAX_REPORT_SECONDS]`` (NaN would become a NaN throughput, and every re-solve
    would fail); ``job_id`` names a job (not empty, no control character). A bad report
    is logged in one line and never applied (``service._ignored``)."""
    try:
        checks.text(request.job_id, "job_id", empty=False)
    except BadValue as err:
        return str(err)
    low = -1 if unknown_steps else 0
    if request.steps < low:
        return f"steps: must be >= {low}, got {request.steps}"
    try:
        checks.number(request.seconds, "seconds", low=0.0, high=MAX_REPORT_SECONDS)
    except BadValue as err:
        return str(err)
    began = getattr(request, "lease_start_s", 0.0)
    if began and not 0.0 <= began <= request.seconds:
        return f"lease_start_s: must be in [0, seconds = {request.seconds:g}], got {began}"
    return None


def worker_profile(request: pb.RegisterWorkerRequest) -> Profile | None:
    """The profile a registering worker brought, checked at the door as a profile file is
    (``traces.profiles``: precision, job types, finite rates > 0), or None when it brought
    none; ``ValueError`` in one line. At most ``MAX_JOB_TYPES`` rates, each job type once."""
    if not request.HasField("profile"):
        return None
    wire = request.profile
    if len(wire.rates) > MAX_JOB_TYPES:
        raise ValueError(f"profile: at most {MAX_JOB_TYPES} rates, got {len(wire.rates)}")
    rates: dict[str, float] = {}
    for rate in wire.rates:
        if rate.job_type in rates:
            raise ValueError(f"profile: job type {shown(rate.job_type)} is listed twice")
        rates[rate.job_type] = rate.steps_per_s
    return profile_from_dict({"schema": SCHEMA, "worker_type": request.worker_type,
                              "precision": wire.precision, "device": wire.device,
                              "reduced": wire.reduced, "torch": wire.torch,
                              "steps_per_s": rates}, "profile")


def listed_runs(request: pb.HeartbeatRequest) -> list[pb.RunningJob]:
    """The runs a heartbeat lists whose job ids can name a job (not empty, no control
    character: the door's rule for a registration's runs); each other is logged in one
    line and ignored, and the heartbeat still counts."""
    runs = []
    for run in request.running:
        try:
            checks.text(run.job_id, "running.job_id", empty=False)
        except BadValue as err:
            log.warning("Heartbeat of server %d: a run ignored: %s", request.server_id, err)
            continue
        runs.append(run)
    return runs


# The longest reason a heartbeat may give for taking no new run (the worker's is a line).
MAX_SHORT_OF_ROOM = 500


def short_of_room(request: pb.HeartbeatRequest) -> str:
    """Why a heartbeat's worker takes no new run (``workers/daemon/room.py``): one line of text,
    at most ``MAX_SHORT_OF_ROOM`` characters; one that is not is shown escaped and cut, so
    that the worker is still drained (it said it has no room)."""
    why = request.short_of_room
    try:
        checks.text(why, "short_of_room")
    except BadValue:
        why = shown(why)
    return why if len(why) <= MAX_SHORT_OF_ROOM else why[:MAX_SHORT_OF_ROOM - 3] + "..."
