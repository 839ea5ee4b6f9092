"""Jobs whose start-up outlasts a round (seen on a real GPU: ~7 s to import torch, make the
CUDA context and load, at 6 s rounds) still all get the GPU in turn (thesis §5.5: the
priority of a job is its allocation over the time it *received*).

A run that overran its round holds the GPU past the boundary, so the next round's launch
waits on the worker, and the one after may supersede it before it ever starts. Such a launch
held nothing, and must not be credited the round: it was, and two of five jobs on the H200
then waited 26 rounds while three others rotated. Here: a real scheduler and a real
(emulated) worker daemon, three jobs whose processes sleep longer than a round before they
step, one GPU; under Gavel's rule (``restart_rule: gavel``) every job starts before any
job finishes. Under the default rule (``core/restarts.py``) a run keeps the GPU until its
restart has paid: every job finishes, each run steps, and the jobs take turns of at most a
tenure each."""

from __future__ import annotations

import shlex
import sys

from gavelsched.daemon.local import LocalCluster
from gavelsched.rpc import pb

ROUND_S = 2.0
STARTUP_S = 3.0
JOBS = 3


def test_every_job_gets_the_gpu_when_start_up_outlasts_a_round(tmp_path):
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S, config={"restart_rule": "gavel"})
    command = (f"sleep {STARTUP_S} && exec {shlex.quote(sys.executable)} -m "
               "workers.workloads.steps")
    try:
        cluster.start_scheduler()
        cluster.start_worker("k80", 1, emulation_speed=1.0)
        ids = [cluster.submit(pb.JobRequest(job_type="ResNet-18 (batch size 16)",
                                            scale_factor=1, total_steps=40, command=command))
               for _ in range(JOBS)]
        jobs = cluster.wait_done(ids, timeout=240)
    finally:
        cluster.stop()
    assert all(jobs[i].state == "done" and jobs[i].steps_done == 40 for i in ids), \
        {i: (jobs[i].state, jobs[i].reason) for i in ids}
    first_end = min(jobs[i].ended_s for i in ids)
    starts = {i: jobs[i].started_s for i in ids}
    assert all(0 <= s < first_end for s in starts.values()), (starts, first_end)
