"""A GPU freed mid-round goes to a waiting job for the rest of the round (issue #18: no GPU
idle while a job waits; ``refill_freed``, ``SchedulerCore.place_freed``). A real scheduler
and a real (emulated) worker daemon, one GPU and long rounds: the first job finishes early
in its round, and the second starts long before the round ends; with ``refill_freed:
false`` (Gavel) it waits for the next round."""

from __future__ import annotations

import shlex
import sys

import pytest

from gavelsched.daemon.dispatch import PLANNED, REFILL
from gavelsched.daemon.local import LocalCluster
from gavelsched.rpc import pb

from .test_round_aligned import Scheduler

ROUND_S = 16.0
COMMAND = f"exec {shlex.quote(sys.executable)} -m workers.workloads.steps"


def short_then_long(tmp_path, refill: bool):
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S,
                           config={"refill_freed": refill})
    try:
        cluster.start_scheduler()
        cluster.start_worker("k80", 1, emulation_speed=1.0)
        ids = [cluster.submit(pb.JobRequest(job_type="ResNet-18 (batch size 16)",
                                            scale_factor=1, total_steps=steps,
                                            command=COMMAND))
               for steps in (5, 20)]
        jobs = cluster.wait_done(ids, timeout=180)
        log = (tmp_path / "scheduler.log").read_text(errors="replace")
    finally:
        cluster.stop()
    assert all(jobs[i].state == "done" for i in ids), {i: jobs[i].state for i in ids}
    return jobs, ids, log


@pytest.mark.parametrize("refill", [True, False])
def test_a_gpu_freed_mid_round_goes_to_the_waiting_job(tmp_path, refill):
    jobs, (short, waiting), log = short_then_long(tmp_path, refill)
    assert jobs[short].started_s < jobs[waiting].started_s
    gap = jobs[waiting].started_s - jobs[short].ended_s
    if refill:
        # it took the GPU for the rest of the short job's round, not at the next boundary
        assert gap < ROUND_S / 2, gap
        assert f"freed GPU to job {waiting}" in log
    else:
        assert gap > ROUND_S / 2, gap
        assert "freed GPU" not in log


def test_a_finished_job_s_gpu_is_refilled_at_its_last_step_not_at_its_exit(tmp_path):
    """Issue #29: a torch process exits half a second after its last step. Refilled only
    at its exit, a GPU whose job finished just before the next round's plan stayed idle
    for that round (and the scheduler's forecast, which refilled it, was a round early).
    The refill is placed when the last step is durable; the worker starts it once the
    finished process has exited."""
    sched = Scheduler(tmp_path)
    first, second = sched.submit(), sched.submit()
    sched.at(1.0)                                   # round 0: one GPU, one job
    (run,) = sched.sent.runs
    other = second if run.job_id == first else first
    sched.t = 2.0
    sched.init(run.job_id)
    sched.t = 5.0                                   # its last step is durable
    assert sched.x.processes.durable_steps(run.job_id, 100_000, sched.gen(run.job_id), seconds=3.0)
    refill = sched.sent.runs[-1]
    assert refill.job_id == other and list(refill.gpus) == list(run.gpus)
    assert sched.sent.kinds == [PLANNED, REFILL]     # (the round's dispatch line counts it)
    assert refill.lease.max_seconds == pytest.approx(1.0 + 10.0 - 5.0)  # the rest of round 0
    sched.t = 5.5                                   # the finished process exits
    sched.exited(run.job_id, 100_000)
    assert [r.job_id for r in sched.sent.runs] == [run.job_id, other]    # placed once
    assert sched.x.startups.expected_exit("A3C") == pytest.approx(0.5)
    sched.t = 6.0                                   # the refill's process is up
    sched.init(other)
    # its start-up counts from when its GPU was free (the wait for the exit is the exit's):
    # 1.0 s for the first run (from its round's start), 0.5 s for the refill
    assert sched.x.startups.mean("A3C") == (pytest.approx(0.75), 2)
    sched.close()
