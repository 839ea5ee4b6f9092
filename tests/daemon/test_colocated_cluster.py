"""Space sharing end to end (thesis §5.3.1): under a space-sharing policy, a real scheduler
and a real emulating worker daemon run the two jobs of a co-located pair on one GPU at once
(both ``running`` together, each paced at the pair's rate) until both are done. Before, the
worker ran one job per GPU: the pair's second member stayed queued while the first ran. The
scheduler learns the pair's rates from those runs (thesis §5.3.3): the worker runs at half
the table's, which the scheduler plans on until then."""

from __future__ import annotations

import pytest

from gavelsched.daemon.local import LocalCluster, wait_until
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb
from policies import pair_key

# about three 3-s rounds each at the pair's emulated rates (66 and 42 steps/s x 0.5)
STEPS = {"ResNet-18 (batch size 16)": 300, "LM (batch size 5)": 200}
PAIR_RATES = (66.0 * 0.5, 42.0 * 0.5)


def test_a_pair_runs_together_on_one_gpu_of_a_real_worker(tmp_path):
    cluster = LocalCluster(tmp_path, policy="max_min_fairness_packed", round_seconds=3.0)
    try:
        cluster.start_scheduler()
        cluster.start_worker("v100", 1, emulation_speed=0.5)
        ids = [cluster.submit(pb.JobRequest(job_type=job_type, scale_factor=1,
                                            total_steps=steps, workload="steps"))
               for job_type, steps in STEPS.items()]

        def together():
            jobs = cluster.jobs()
            return all(jobs[i].state == "running" for i in ids)

        wait_until(together, 90, "both jobs of the pair running at once")
        jobs = cluster.wait_done(ids, timeout=180)
    finally:
        cluster.stop()
    assert [(jobs[i].state, jobs[i].steps_done) for i in ids] == \
        [("done", steps) for steps in STEPS.values()]
    store = Store(tmp_path / "state")
    try:
        learned = store.pair_throughputs()[pair_key(*ids)]["v100"]
    finally:
        store.close()
    assert (learned[ids[0]], learned[ids[1]]) == pytest.approx(PAIR_RATES, rel=0.15)
