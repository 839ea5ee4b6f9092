"""A RunJob at the worker's door (docs/design.md, Safety rules), and the launch it becomes.

``check_run_job`` refuses, in one line (``BadRunJob``), a RunJob whose job id is not a
plain name (its checkpoints and logs would climb out of the work dir: ``logfiles``), whose
GPUs are not this server's, or whose text holds a NUL (no process argument, path or
environment can: the launch failed after the door) or whose environment has a name that
no variable can have. ``launch_spec`` makes the ``LaunchSpec`` the launcher runs."""

from __future__ import annotations

from pathlib import Path

from gavelsched.rpc import pb
from gavelsched.virtual.envspec import LAYOUT_VAR, LayoutEnvError, parse_layout_env
from traces import checks
from traces.checks import BadValue
from traces.workloads import check_workload, workload_for

from . import logfiles
from .emulation import Emulation
from .launcher import LaunchSpec, command_for

# The RunJob fields a launch puts into an argument, a path or the environment.
TEXTS = ("job_type", "workload", "command", "master_addr", "scheduler_address",
         "checkpoint_dir", "colocated_job_id", "colocated_job_type")


class BadRunJob(ValueError):
    """A RunJob refused at the door (one line)."""


def check_run_job(request: pb.RunJobRequest, gpus_here: int) -> None:
    """``BadRunJob`` unless ``request`` can be launched on a server of ``gpus_here`` GPUs."""
    try:
        logfiles.check_job_id(request.job_id)
    except logfiles.BadLogRequest as err:
        raise BadRunJob(f"bad RunJob: {err}") from None
    gpus = tuple(request.gpus)
    if not gpus or len(set(gpus)) != len(gpus) or not all(0 <= g < gpus_here for g in gpus):
        raise BadRunJob(f"bad RunJob for job {request.job_id!r}: gpus {list(gpus)} (this "
                        f"server has {gpus_here})")
    try:
        for name in TEXTS:
            checks.text(getattr(request, name), name, one_line=name != "command")
        for key, value in request.env.items():
            checks.text(key, "env name", empty=False)
            if "=" in key:
                raise BadValue("env name", "must not contain '='", key)
            checks.text(value, f"env {key}", one_line=False)
    except BadValue as err:
        raise BadRunJob(f"bad RunJob for job {request.job_id!r}: {err}") from None


def launch_spec(request: pb.RunJobRequest, work_dir: Path, scheduler: str,
                emulation: Emulation | None, round_seconds: float) -> LaunchSpec:
    """The launch of a RunJob that passed ``check_run_job``: its command (the workload's
    module, or the shell command), its pace where the worker emulates a GPU type (per rank
    for a mixed-type job, virtual nodes), its checkpoint folder (default
    ``work_dir/checkpoints/<job>``) and its lease (default a round, or an hour)."""
    workload = request.workload
    if not request.command:
        workload = check_workload(workload) if workload else workload_for(request.job_type)
    world = int(request.world_size) or len(request.gpus)
    pace, paces = None, ()
    split = parse_layout_env(request.env, world)   # a mixed-type job (virtual nodes)
    ranks = range(int(request.rank), int(request.rank) + len(request.gpus))
    if split is not None and ranks.stop > world:
        raise LayoutEnvError(f"RunJob ranks {ranks.start}..{ranks.stop - 1} are not ranks "
                             f"of {LAYOUT_VAR} ({world} ranks)")
    if emulation is not None:
        pace = emulation.steps_per_s(request.job_type, world, request.expected_steps_per_s,
                                     request.colocated_job_type)
        if split is not None:
            paces = tuple(emulation.split_steps_per_s(
                request.job_type, split, r, request.expected_steps_per_s) for r in ranks)
    directory = request.checkpoint_dir or str(work_dir / "checkpoints" / request.job_id)
    max_seconds = request.lease.max_seconds if request.lease.max_seconds > 0 else \
        (round_seconds or 3600.0)
    return LaunchSpec(
        job_id=request.job_id, round=int(request.round), job_type=request.job_type,
        argv=command_for(workload, request.command), gpus=tuple(request.gpus),
        rank=int(request.rank), world_size=world, master_addr=request.master_addr,
        master_port=int(request.master_port), total_steps=int(request.total_steps),
        steps_done=int(request.steps_done), max_seconds=max_seconds,
        checkpoint_dir=directory, scheduler_address=request.scheduler_address or scheduler,
        env=dict(request.env), emulate_steps_per_s=pace, rank_steps_per_s=paces,
        generation=int(request.generation), partner=request.colocated_job_id)
