"""``status --eta`` and ``predict`` against a real loopback cluster (issue #18)."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main

from .cluster import JOB_TYPE, Cluster, wait_until


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, round_seconds=2.0, heartbeat_seconds=0.3)
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

    assert main(["status", "--eta", "--json", "--scheduler", cluster.address]) == 0
    out = json.loads(capsys.readouterr().out)
    for job in out["jobs"]:
        assert job["eta"]["finish_s"] is not None and job["eta"]["finish_s"] > out_now(reply)
    assert main(["status", "--eta", "--scheduler", cluster.address]) == 0
    text = capsys.readouterr().out
    assert "predicted" in text and all(j in text for j in jobs)

    spec = tmp_path / "job.yaml"
    spec.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 500\n")
    count = len(cluster.status().jobs)
    assert main(["predict", str(spec), "--json", "--scheduler", cluster.address]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["job"]["finish_in_s"] > 0
    assert set(got["others"]) >= set(j for j in jobs if cluster.jobs()[j].state != "done")
    assert main(["predict", str(spec), "--scheduler", cluster.address]) == 0
    assert "finish" in capsys.readouterr().out
    assert len(cluster.status().jobs) == count      # predict submitted nothing


def out_now(reply) -> float:
    return reply.now_s - 1.0
