"""What ``Status`` answers: an immutable picture of the scheduler the executor thread
republishes after each change, so that gRPC handlers never read live state (the core's
threading contract, ``executor``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..rpc import pb

if TYPE_CHECKING:
    from .executor import DaemonExecutor


@dataclass(frozen=True)
class Snapshot:
    round: int
    policy: str
    round_seconds: float
    now_s: float
    response: pb.StatusResponse      # built once per change; handlers copy it out

    def status(self) -> pb.StatusResponse:
        return self.response


def build_snapshot(executor: DaemonExecutor, now: float) -> Snapshot:
    """Jobs (with allocation vs received share, thesis §5.5) and workers, as a Status."""
    shares = executor.shares(now)
    jobs = []
    for job in executor.jobs.values():
        run = executor._runs.get(job.id)
        x, got = shares.get(job.id, ({}, {}))
        jobs.append(pb.JobStatus(
            id=job.id, state=job.state, steps_done=job.steps_done,
            total_steps=job.total_steps, job_type=job.job_type,
            scale_factor=job.scale_factor, worker_type=run.worker_type if run else "",
            reason=job.reason or "", allocation=x, received=got, arrival_s=job.arrival_s,
            completion_s=job.completion_s if job.completion_s is not None else -1.0,
            mixed=job.mixed, min_scale_factor=job.min_scale_factor,
            gpus=len(run.workers) if run else 0))
    workers = [pb.WorkerStatus(id=str(s.row.id), type=s.row.worker_type,
                               gpus=len(s.row.workers), alive=s.alive, address=s.row.address)
               for s in executor.servers.values()]
    response = pb.StatusResponse(round=executor.round_index, jobs=jobs, workers=workers,
                                 policy=executor.core.policy.name,
                                 round_seconds=executor.config.round_seconds)
    return Snapshot(executor.round_index, executor.core.policy.name,
                    executor.config.round_seconds, now, response)
