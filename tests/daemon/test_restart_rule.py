"""The daemon runs the restart rule of the simulator (``core/restarts.py``, issue #32): on a
real scheduler and worker daemon with 5 s rounds, jobs whose processes take 12 s to start
up (more than two rounds) all finish. The scheduler measures each job type's restart (its
start-up, and the save of a run whose lease ended) and keeps a fresh run on its GPU until
its restart has paid; under Gavel's rule such runs would be preempted before they step."""

from __future__ import annotations

import shlex
import sys

from gavelsched.daemon.local import LocalCluster
from gavelsched.daemon.meta import STARTUP_S
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb

ROUND_S = 5.0
STARTUP_S_EMULATED = 12.0
JOB_TYPE = "ResNet-18 (batch size 16)"     # 20.5 steps/s on an emulated K80


def test_jobs_whose_start_up_outlasts_two_rounds_all_finish(tmp_path):
    cluster = LocalCluster(tmp_path, round_seconds=ROUND_S,
                           config={"min_resolve_interval_s": 0.0, "eta": False})
    command = (f"sleep {STARTUP_S_EMULATED} && exec {shlex.quote(sys.executable)} -m "
               "workers.workloads.steps")
    try:
        cluster.start_scheduler()
        cluster.start_worker("k80", 1, emulation_speed=1.0)
        ids = [cluster.submit(pb.JobRequest(job_type=JOB_TYPE, scale_factor=1,
                                            total_steps=200, command=command))
               for _ in range(3)]
        jobs = cluster.wait_done(ids, timeout=300)
    finally:
        cluster.stop()
    assert all(jobs[i].state == "done" and jobs[i].steps_done == 200 for i in ids), \
        {i: (jobs[i].state, jobs[i].reason) for i in ids}
    measured = float(Store(tmp_path / "state").get_meta(STARTUP_S.key(JOB_TYPE), "0"))
    assert measured >= STARTUP_S_EMULATED
