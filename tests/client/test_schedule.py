"""``run_schedule`` (``gavelsched/client/schedule.py``) against a scheduler stand-in that
answers ``submit`` slowly, as a user's budget of calls makes it: the outcome says how far
the submissions fell behind the schedule (``late_s``), so that ``replay`` can say so."""

from __future__ import annotations

import time

from gavelsched.client.schedule import run_schedule
from gavelsched.rpc import pb

SUBMIT_S = 0.3          # each submission's answer comes this late


class SlowScheduler:
    """Jobs end as soon as they are submitted; each ``submit`` takes ``SUBMIT_S``."""

    def __init__(self) -> None:
        self.jobs: list[pb.JobStatus] = []

    def submit(self, request: pb.JobRequest) -> str:
        time.sleep(SUBMIT_S)
        job_id = str(len(self.jobs))
        self.jobs.append(pb.JobStatus(id=job_id, state="done", job_type=request.job_type,
                                      scale_factor=1, total_steps=request.total_steps,
                                      steps_done=request.total_steps, arrival_s=0.0,
                                      completion_s=1.0))
        return job_id

    def status(self) -> pb.StatusResponse:
        return pb.StatusResponse(policy="fifo", jobs=self.jobs, workers=[
            pb.WorkerStatus(id="0", type="v100", gpus=1, alive=True)])


def test_submissions_behind_their_schedule_are_measured() -> None:
    """Three jobs due at once, each submission answered 0.3 s later: the third was
    answered at least 0.9 s after its time."""
    request = pb.JobRequest(job_type="A3C", scale_factor=1, total_steps=10)
    outcome = run_schedule(SlowScheduler(), [(0.0, request)] * 3, prices={},
                           refused=lambda err: None)
    assert len(outcome.result.jobs) == 3
    assert outcome.late_s >= 3 * SUBMIT_S
