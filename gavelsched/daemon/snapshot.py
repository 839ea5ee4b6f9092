"""What ``Status`` answers: an immutable picture of the scheduler, built from the daemon's
frozen view (``view.DaemonView``) after each change, so that gRPC handlers never read live
state (the core's threading contract, ``executor``). A job that is not final, has no run
and no reason of its own shows why it waits (``pending``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..rpc import pb
from .pending import pending_reason
from .store import JobRow
from .view import DaemonView


@dataclass(frozen=True)
class Snapshot:
    round: int
    policy: str
    round_seconds: float
    now_s: float
    response: pb.StatusResponse      # built once per change; handlers copy it out

    def status(self) -> pb.StatusResponse:
        return self.response


def build_snapshot(view: DaemonView) -> Snapshot:
    """Jobs (with allocation vs received share, thesis §5.5) and workers, as a Status."""
    jobs = []
    reasons = _Reasons(view)
    for job in view.jobs:
        spec, run = job.spec, view.runs.get(job.id)
        x, got = view.shares.get(job.id, ({}, {}))
        jobs.append(pb.JobStatus(
            id=job.id, state=job.state, steps_done=job.steps_done,
            total_steps=spec.total_steps, job_type=spec.job_type,
            scale_factor=spec.scale_factor, worker_type=run.worker_type if run else "",
            reason=job.reason or ("" if run else reasons.of(job)), allocation=x,
            received=got, arrival_s=job.arrival_s,
            completion_s=job.completion_s if job.completion_s is not None else -1.0,
            mixed=spec.mixed, min_scale_factor=spec.min_scale_factor,
            gpus=run.gpus if run else 0))
    workers = [pb.WorkerStatus(id=str(s.row.id), type=s.row.worker_type,
                               gpus=len(s.row.workers), alive=s.alive, address=s.row.address)
               for s in view.servers]
    response = pb.StatusResponse(round=view.round, jobs=jobs, workers=workers,
                                 policy=view.policy, round_seconds=view.round_seconds)
    return Snapshot(view.round, view.policy, view.round_seconds, view.now_s, response)


class _Reasons:
    """``pending_reason`` for the jobs of one view: the GPUs per type counted once, the
    table asked once per (job type, scale factor)."""

    def __init__(self, view: DaemonView) -> None:
        self._view, self._gpus = view, view.gpus()
        self._runs_on: dict[tuple[str, int], tuple[str, ...] | None] = {}

    def of(self, job: JobRow) -> str:
        if job.final:
            return ""
        key = (job.spec.job_type, job.spec.scale_factor)
        if key not in self._runs_on:
            self._runs_on[key] = self._view.runs_on(*key)
        share = self._view.shares.get(job.id)
        return pending_reason(*key, self._gpus, self._runs_on[key],
                              None if share is None else share[0])
