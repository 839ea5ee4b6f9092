"""One loopback cluster with a token (the real scheduler and two real emulated workers,
``steps`` jobs) shared by the tests of this module: jobs complete with exact step counts,
auth on every service, malformed submissions, the CLI clients, metrics, online
throughputs (thesis §5.3.3, §5.6)."""

from __future__ import annotations

import json
import sqlite3
import urllib.request
from types import SimpleNamespace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from gavelsched.cli import main
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel
from traces import default_table

from .cluster import JOB_TYPE, LOOPBACK_ANY, Cluster, free_port, wait_until

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    c = Cluster(root, token=TOKEN, extra={"metrics_listen": LOOPBACK_ANY})
    try:
        c.start_scheduler()
        c.start_worker("v100")
        c.start_worker("k80")
        wait_until(lambda: c.alive_workers() == 2, 60, "two workers")
        c.first_jobs = [c.submit(40 + 10 * i) for i in range(3)]
        yield c
    finally:
        c.stop()


@pytest.fixture
def cli(capsys):
    """``gavelsched ARGS --scheduler ... [--token-file ...]`` in this process: (exit code,
    stdout, stderr)."""
    def run(cluster, *args, token=True):
        argv = [*args, "--scheduler", cluster.address]
        if token:
            argv += ["--token-file", str(cluster.token_file)]
        code = main(argv)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)
    return run


def test_jobs_run_to_completion_with_exact_steps(cluster):
    jobs = cluster.wait_done(cluster.first_jobs)
    for job_id in cluster.first_jobs:
        job = jobs[job_id]
        assert job.state == "done", job.reason
        assert job.steps_done == job.total_steps
        assert job.completion_s > job.arrival_s


def test_online_throughputs_are_measured_and_stored(cluster):
    cluster.wait_done(cluster.first_jobs)
    db = sqlite3.connect(f"file:{cluster.root / 'state' / 'gavelsched.db'}?mode=ro", uri=True)
    rows = db.execute("SELECT job_id, worker_type, steps_per_s FROM throughputs").fetchall()
    db.close()
    assert rows, "no throughput was measured"
    table = default_table()
    for job_id, worker_type, rate in rows:
        # paced to the table's rate: never faster (startup time makes it slower)
        assert 0 < rate <= 1.05 * table.get(worker_type, JOB_TYPE, 1)


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_every_service_refuses_a_missing_or_wrong_token(cluster, token):
    chan = channel(cluster.address, token=token)
    calls = [
        lambda: pb_grpc.WorkerToSchedulerStub(chan).Heartbeat(
            pb.HeartbeatRequest(server_id=0), timeout=10),
        lambda: pb_grpc.WorkerToSchedulerStub(chan).RegisterWorker(
            pb.RegisterWorkerRequest(worker_type="v100", gpus=1, address="127.0.0.1:1"),
            timeout=10),
        lambda: pb_grpc.IteratorToSchedulerStub(chan).InitJob(
            pb.InitJobRequest(job_id="0"), timeout=10),
        lambda: pb_grpc.IteratorToSchedulerStub(chan).ReportSteps(
            pb.ReportStepsRequest(job_id="0", steps=10**6, checkpointed=True), timeout=10),
        lambda: pb_grpc.ClientToSchedulerStub(chan).Status(pb.StatusRequest(), timeout=10),
        lambda: pb_grpc.ClientToSchedulerStub(chan).Submit(
            pb.JobRequest(job_type=JOB_TYPE, total_steps=5), timeout=10),
        lambda: health_pb2_grpc.HealthStub(chan).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=10),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    chan.close()
    assert len(cluster.status().workers) == 2   # the refused RegisterWorker did nothing


def test_cli_without_token_prints_one_line_and_exits_2(cluster, cli):
    got = cli(cluster, "status", token=False)
    assert got.returncode == 2
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "UNAUTHENTICATED" in lines[0]


def test_cli_unreachable_scheduler_is_one_line(capsys):
    code = main(["status", "--scheduler", f"127.0.0.1:{free_port()}"])
    got = capsys.readouterr()
    assert code == 2
    lines = got.err.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the scheduler" in lines[0]


@pytest.mark.parametrize("request_kw, field", [
    ({"job_type": "NoSuchNet", "total_steps": 10}, "job_type"),
    ({"job_type": JOB_TYPE, "total_steps": 10, "workload": "bogus"}, "workload"),
    ({"job_type": JOB_TYPE, "total_steps": 0}, "total_steps"),
    ({"job_type": JOB_TYPE, "total_steps": -5}, "total_steps"),
    ({"job_type": JOB_TYPE, "total_steps": 10, "scale_factor": 2}, "scale_factor"),
])
def test_malformed_submission_is_refused_naming_the_field(cluster, request_kw, field):
    stub = pb_grpc.ClientToSchedulerStub(cluster.chan)
    with pytest.raises(grpc.RpcError) as err:
        stub.Submit(pb.JobRequest(**request_kw), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith(field)
    assert cluster.healthy()


def test_cli_submit_bad_yaml_and_bad_field(cluster, cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("job_type: [A3C\n")
    got = cli(cluster, "submit", str(bad))
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1
    assert "bad YAML" in got.stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 5\nsteps: 3\n")
    got = cli(cluster, "submit", str(unknown))
    assert got.returncode == 2 and "unknown key 'steps'" in got.stderr
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 5\nworkload: nope\n")
    got = cli(cluster, "submit", str(wrong))
    assert got.returncode == 2 and "workload" in got.stderr
    assert len(got.stderr.strip().splitlines()) == 1
    assert cluster.healthy()


def test_cli_submit_status_json_and_cancel(cluster, cli, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 100000\nworkload: steps\n"
                   "priority_weight: 2\nentity: team-a\n")
    got = cli(cluster, "submit", str(job))
    assert got.returncode == 0, got.stderr
    job_id = got.stdout.strip()
    got = cli(cluster, "status", "--json")
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert set(data) == {"round", "jobs", "workers", "entities", "eta_computed_s",
                         "eta_error", "solving", "notices"}
    assert data["notices"] == []                # (the state_dir's disk has room)
    assert set(data["solving"]) == {"since_s", "for_s", "jobs", "allocation_solve_s"}
    mine = [j for j in data["jobs"] if j["id"] == job_id]
    # docs/design.md's contract, plus the GPUs held this round (and the job of its pair
    # sharing them), the job's flexibility, its entity, allocation against received share,
    # its times, and who submitted it, its array, time limit, dependencies and time run
    # (issue #28)
    assert mine and set(mine[0]) == {"id", "state", "steps_done", "total_steps", "job_type",
                                     "scale_factor", "worker_type", "reason", "gpus",
                                     "shared_with", "mixed",
                                     "min_scale_factor", "entity", "allocation", "received",
                                     "arrival_s", "started_s", "ended_s", "completion_s",
                                     "elapsed_s", "jct_s", "submitted_at", "started_at",
                                     "ended_at", "user", "array_id", "array_index",
                                     "max_runtime_s", "after", "run_s", "eta_start_s",
                                     "eta_finish_s", "eta_finish_at", "slo_s", "deadline_s",
                                     "deadline_at", "slo_status"}
    assert mine[0]["entity"] == "team-a" and mine[0]["submitted_at"].endswith("Z")
    assert mine[0]["mixed"] is False and mine[0]["min_scale_factor"] is None
    assert mine[0]["gpus"] in (0, 1)
    assert mine[0]["state"] in ("queued", "running")
    assert {w["type"] for w in data["workers"]} == {"v100", "k80"}
    # the contract's fields, plus whether a worker is drained and the runs on it
    assert all(set(w) == {"id", "type", "gpus", "alive", "drained", "runs"}
               for w in data["workers"])
    got = cli(cluster, "cancel", job_id)
    assert got.returncode == 0, got.stderr
    assert cluster.jobs()[job_id].state == "cancelled"
    got = cli(cluster, "cancel", job_id)
    assert got.returncode == 2 and "already cancelled" in got.stderr
    table = cli(cluster, "status")              # jobs not finished only, as squeue
    assert table.returncode == 0 and job_id not in [x.split()[0] for x in
                                                    table.stdout.splitlines()[2:] if x]
    table = cli(cluster, "status", "--all")
    assert table.returncode == 0 and job_id in table.stdout and "cancelled" in table.stdout
    row = next(line for line in table.stdout.splitlines() if line.split()[:1] == [job_id])
    assert " 0/1 " in row and "gpus" in table.stdout      # none held of its one GPU


def test_metrics_endpoint_serves_the_gavelsched_series(cluster):
    cluster.wait_done(cluster.first_jobs)
    text = urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics",
                                  timeout=10).read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("gavelsched_jobs", "gavelsched_round_duration_seconds",
                 "gavelsched_policy_solve_seconds", "gavelsched_job_allocation",
                 "gavelsched_job_received_share", "gavelsched_workers", "gavelsched_rounds",
                 "gavelsched_launches_not_made"):
        assert name in families, name
    assert {s.labels["reason"] for s in families["gavelsched_launches_not_made"].samples} == {
        "servers_down", "backing_off", "too_late"}
    done = [s for s in families["gavelsched_jobs"].samples if s.labels.get("state") == "done"]
    assert done and done[0].value >= 3
    solves = [s for s in families["gavelsched_policy_solve_seconds"].samples
              if s.name.endswith("_count")]
    assert solves[0].value >= 1
    # a full garbage collection as each round started (``collector.py``)
    collections = [s for s in families["gavelsched_gc_seconds"].samples
                   if s.name.endswith("_count")]
    assert collections[0].value >= 1


def test_every_series_the_grafana_dashboard_queries_exists(cluster):
    """deploy/grafana/gavelsched.json only charts series a live scheduler serves (with a
    job in the allocation, so the per-job series exist)."""
    import re
    from pathlib import Path

    dashboard = (Path(__file__).resolve().parents[2] / "deploy" / "grafana"
                 / "gavelsched.json").read_text()
    exprs = re.findall(r'"(?:expr|query)": "([^"]*)"', dashboard)
    queried = {name for e in exprs for name in re.findall(r"\bgavelsched_[a-z_]+", e)}
    assert {"gavelsched_jobs", "gavelsched_job_allocation",
            "gavelsched_job_received_share"} <= queried
    job_id = cluster.submit(10**6)

    def served():
        text = urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_port}/metrics",
                                      timeout=10).read().decode()
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples
                 if s.labels.get("job", job_id) == job_id}
        return names if "gavelsched_job_allocation" in names else None

    try:
        names = wait_until(served, 60, f"job {job_id} in the allocation metrics")
    finally:
        pb_grpc.ClientToSchedulerStub(cluster.chan).Cancel(pb.CancelRequest(job_id=job_id),
                                                             timeout=30)
    missing = sorted(queried - names)
    assert not missing, f"the dashboard queries series the scheduler does not serve: {missing}"
