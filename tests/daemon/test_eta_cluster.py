"""``status --eta`` (the scheduler's own ETAs, issue #29) and ``predict`` against a real
loopback cluster (issue #18)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from gavelsched.cli import main
from gavelsched.daemon.startups import RESTART_BAND

from .cluster import JOB_TYPE, LOOPBACK_ANY, Cluster, wait_until


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, round_seconds=2.0, heartbeat_seconds=0.3,
                extra={"metrics_listen": LOOPBACK_ANY, "eta": True})
    try:
        yield c
    finally:
        c.stop()


def test_status_eta_and_predict_on_a_live_cluster(cluster, tmp_path, capsys):
    cluster.start_scheduler()
    cluster.start_worker("v100")
    wait_until(lambda: cluster.alive_workers() == 1, 60, "a worker")
    jobs = [cluster.submit(2000), cluster.submit(2000)]
    wait_until(lambda: any(j.state == "running" for j in cluster.jobs().values()), 60,
               "a job to run")
    reply = cluster.status()
    assert reply.resolve == "responsive"
    assert all(j.steps_per_s.get("v100", 0) > 0 for j in reply.jobs)
    # and the rows the core plans on (its priors until a run moved them past noise)
    assert all(j.plan_steps_per_s.get("v100", 0) > 0 for j in reply.jobs)
    # what a restart costs (start-up + save, as the restart rule weighs it: it moves only
    # past a band, gavelsched/daemon/startups.py) reaches the replay too
    reply = wait_until(lambda: (lambda r: r if all(j.startup_s > 0 for j in r.jobs) else None)(
        cluster.status()), 60, "a measured start-up")
    # weighed >= measured / (1 + band) >= start-up / (1 + band)
    assert all(j.restart_s >= j.startup_s / (1 + RESTART_BAND) > 0 for j in reply.jobs)
    # and when a run's count was last reported (its steps since are not in steps_done)
    reply = wait_until(lambda: (lambda r: r if any(j.run_reported_s > 0 for j in r.jobs)
                                else None)(cluster.status()), 60, "a run's commit report")
    assert all(j.run_reported_s <= reply.now_s for j in reply.jobs if j.worker_type)

    # the scheduler's own ETAs (issue #29): computed after the round's plan, off its thread
    def predicted():
        assert main(["status", "--json", "--scheduler", cluster.address]) == 0
        out = json.loads(capsys.readouterr().out)
        active = [j for j in out["jobs"] if j["state"] != "done"]
        if out["eta_computed_s"] is None or not all(j["eta_finish_s"] for j in active):
            return None
        return out
    out = wait_until(predicted, 60, "the scheduler's ETAs")
    assert out["eta_error"] is None
    for job in out["jobs"]:
        if job["state"] != "done":
            assert job["eta_finish_s"] > out["eta_computed_s"]
            assert job["eta_finish_at"].endswith("Z")
    assert main(["status", "--eta", "--scheduler", cluster.address]) == 0
    text = capsys.readouterr().out
    assert "predicted by the scheduler" in text and all(j in text for j in jobs)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics",
                                     timeout=10).read().decode()
    finish = [line for line in metrics.splitlines()
              if line.startswith("gavelsched_job_eta_finish_timestamp_seconds{")]
    assert len(finish) >= 1 and all(float(line.split()[-1]) > 1.7e9 for line in finish)

    # predict replays the allocation period in progress, as the scheduler's forecast does
    from gavelsched.rpc import pb, pb_grpc
    with_period = pb_grpc.ClientToSchedulerStub(cluster.chan).Status(
        pb.StatusRequest(active=True, period=True), timeout=30)
    assert any(j.period_x for j in with_period.jobs) and with_period.period_start_s >= 0
    assert not any(j.period_x for j in cluster.status().jobs)     # only when asked

    spec = tmp_path / "job.yaml"
    spec.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 500\n")
    count = len(cluster.status().jobs)
    assert main(["predict", str(spec), "--json", "--scheduler", cluster.address]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["job"]["finish_in_s"] > 0
    assert set(got["others"]) >= set(j for j in jobs if cluster.jobs()[j].state != "done")
    for other in got["others"].values():      # a delay below zero comes with its reason
        assert (other["why"] is not None) == (other["delay_s"] is not None
                                              and other["delay_s"] < 0)
    assert main(["predict", str(spec), "--scheduler", cluster.address]) == 0
    assert "finish" in capsys.readouterr().out
    assert len(cluster.status().jobs) == count      # predict submitted nothing
