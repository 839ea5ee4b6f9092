"""Every policy the simulator runs, the scheduler runs with the same options (issue #28):
the cost policies with their ``prices``, ``min_makespan_with_budget`` with its
``policy_options.budget``, on a real scheduler and a real worker; and a running job keeps
running across a ``reload`` that changes them."""

from __future__ import annotations

import json

import yaml
import pytest

from gavelsched.client import connect

from .cluster import Cluster, running, wait_until

PRICES = {"v100": 2.48, "k80": 0.45}
CASES = [
    ("min_makespan_with_budget", {"budget": 1000.0}),
    ("max_sum_throughput_normalized_by_cost_perf", {}),
    ("max_sum_throughput_normalized_by_cost_perf_SLOs", {}),
]


@pytest.mark.parametrize(("policy", "options"), CASES, ids=[c[0] for c in CASES])
def test_a_cost_policy_runs_jobs_to_the_end_with_its_options_and_prices(tmp_path, policy,
                                                                         options):
    extra = {"prices": PRICES, **({"policy_options": options} if options else {})}
    cluster = Cluster(tmp_path, policy=policy, round_seconds=1.5, extra=extra)
    with running(cluster) as c:
        c.start_worker("v100", gpus=1)
        c.start_worker("k80", gpus=1)
        ids = [c.submit(60, slo_s=3600.0), c.submit(60, slo_s=3600.0)]
        done = c.wait_done(ids, timeout=120)
    assert all(done[j].state == "done" for j in ids), {j: done[j].reason for j in ids}
    log = (tmp_path / "scheduler.log").read_text()
    assert "Traceback" not in log and f"policy {policy}" in log


def test_a_reload_changes_the_budget_and_the_running_job_keeps_running(tmp_path):
    cluster = Cluster(tmp_path, policy="min_makespan_with_budget", round_seconds=1.5,
                      extra={"prices": PRICES, "policy_options": {"budget": 1000.0}})
    with running(cluster) as c:
        c.start_worker("v100", gpus=1)
        job = c.submit(10**6)
        wait_until(lambda: c.jobs()[job].state == "running", 60, "the job to run")
        # the Status says what the policy was made with, so a replay (ETA) runs the same
        assert json.loads(c.status().policy_options) == {"budget": 1000.0}
        data = yaml.safe_load(cluster.config_path.read_text())
        data["policy_options"] = {"budget": 50.0}
        data["prices"] = {"v100": 3.0, "k80": 1.0}
        cluster.config_path.write_text(yaml.safe_dump(data))
        with connect(c.address) as client:
            line = client.reload()
            first = c.status().round
            wait_until(lambda: c.status().round >= first + 2, 30, "two more rounds")
            assert c.jobs()[job].state == "running"
            assert json.loads(c.status().policy_options) == {"budget": 50.0}
            client.cancel(job)
    assert "reloaded by" in line and "'budget': 50.0" in line
