"""A GPU freed mid-round goes to a waiting job for the rest of the round (issue #18: no GPU
idle while a job waits; ``refill_freed``, ``SchedulerCore.place_freed``). A real scheduler
and a real (emulated) worker daemon, one GPU and long rounds: the first job finishes early
in its round, and the second starts long before the round ends; with ``refill_freed:
false`` (Gavel) it waits for the next round."""

from __future__ import annotations

import shlex
import sys

import pytest

from gavelsched.daemon.local import LocalCluster
from gavelsched.rpc import pb

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
