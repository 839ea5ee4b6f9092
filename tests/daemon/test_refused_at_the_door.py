"""Refused at the door (issue #17), on a real scheduler daemon over gRPC with in-test workers
on loopback: the job with ``priority_weight: .nan`` that once stalled the whole cluster is
refused with one INVALID_ARGUMENT line naming the field, and the jobs submitted before and
after it all run to done; a report whose steps or seconds cannot be true is ignored, not
applied; a worker registration with an impossible size or name is refused."""

from __future__ import annotations

import math

import grpc
import pytest

from gavelsched.rpc import pb, pb_grpc

from .cluster import JOB_TYPE, Cluster, running
from .fake_worker import FakeWorker


@pytest.fixture
def cluster(tmp_path):
    with running(Cluster(tmp_path, round_seconds=1.5, heartbeat_seconds=0.3)) as c:
        c.fakes.append(FakeWorker(c.address, "v100"))
        c.fakes.append(FakeWorker(c.address, "k80"))
        yield c


def refused(call) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = err.value.details()
    assert "\n" not in details
    return details


BAD = [("priority_weight", math.nan), ("priority_weight", math.inf),
       ("priority_weight", -1.0), ("slo_s", math.nan), ("slo_s", math.inf),
       ("slo_s", -5.0)]    # (issue #29: a negative SLO over gRPC was taken as none)


def test_nan_job_is_refused_and_the_others_run_to_done(cluster):
    clients = pb_grpc.ClientToSchedulerStub(cluster.chan)
    before = [cluster.submit(40), cluster.submit(30, priority_weight=2.0)]
    for field, value in BAD:
        details = refused(lambda: clients.Submit(pb.JobRequest(
            job_type=JOB_TYPE, total_steps=30, workload="steps", **{field: value}),
            timeout=10))
        assert details.startswith(f"{field}: ") and str(value) in details
    after = [cluster.submit(30), cluster.submit(20, priority_weight=0.5)]
    done = cluster.wait_done(before + after)
    for job_id in before + after:
        assert done[job_id].state == "done", done[job_id].reason
        assert done[job_id].steps_done == done[job_id].total_steps
    assert sorted(cluster.jobs()) == sorted(before + after)   # no bad job got an id


def test_a_report_that_cannot_be_true_is_ignored(cluster):
    iterator = pb_grpc.IteratorToSchedulerStub(cluster.chan)
    workers = pb_grpc.WorkerToSchedulerStub(cluster.chan)
    job = cluster.submit(10**6)
    for seconds in (math.nan, math.inf, -1.0, 1e12):
        ack = iterator.ReportSteps(pb.ReportStepsRequest(
            job_id=job, steps=10**6 - 1, seconds=seconds, checkpointed=True), timeout=10)
        assert not ack.ok and ack.message.startswith(f"ReportSteps for job '{job}' ignored: "
                                                     "seconds: ")
    ack = iterator.ReportSteps(pb.ReportStepsRequest(
        job_id=job, steps=-3, seconds=1.0, checkpointed=True), timeout=10)
    assert not ack.ok and "steps: must be >= 0, got -3" in ack.message
    for began in (math.nan, -1.0, 2.0):      # a lease that began after the report, or never
        ack = iterator.ReportSteps(pb.ReportStepsRequest(
            job_id=job, steps=10**6 - 1, seconds=1.0, checkpointed=True, lease_start_s=began),
            timeout=10)
        assert not ack.ok and "lease_start_s: must be in [0, seconds = 1]" in ack.message
    ack = workers.ReportRound(pb.RoundReportRequest(
        server_id=cluster.fakes[0].server_id, job_id=job, steps=10**6 - 1, seconds=math.nan,
        failed=True, reason="lie"), timeout=10)
    assert not ack.ok and "seconds" in ack.message
    details = refused(lambda: iterator.RenewLease(pb.RenewLeaseRequest(
        job_id=job, steps=-5, seconds=1.0), timeout=10))
    assert "steps: must be >= 0, got -5" in details
    for kw, words in [({"gpus": 10**6}, "gpus: must be <= 4096"),
                      ({"gpus": 0}, "gpus: must be >= 1"),
                      ({"worker_type": "v\n100"}, "worker_type: must not contain control"),
                      ({"running": [pb.RunningJob(job_id="", generation=1, gpus=[0])]},
                       "running.job_id: must not be empty"),
                      ({"running": [pb.RunningJob(job_id="0", generation=1, gpus=[0, 1])]},
                       "running.gpus (how many): must be <= 1")]:
        details = refused(lambda: workers.RegisterWorker(pb.RegisterWorkerRequest(**{
            "worker_type": "v100", "gpus": 1, "address": "127.0.0.1:1",
            "previous_server_id": -1, **kw}), timeout=10))
        assert details.startswith(words), details
    for job_id, words in [("", "job_id: must not be empty"),
                          ("a\nb", "job_id: must not contain control")]:
        ack = workers.ReportRound(pb.RoundReportRequest(       # (once an UNKNOWN: the
            server_id=cluster.fakes[0].server_id, job_id=job_id, generation=1), timeout=10)
        assert not ack.ok and words in ack.message             # fences' store key)
        ack = iterator.ReportSteps(pb.ReportStepsRequest(
            job_id=job_id, steps=5, seconds=1.0, checkpointed=True), timeout=10)
        assert not ack.ok and words in ack.message
    assert len(cluster.status().workers) == 2
    status = cluster.jobs()[job]
    assert status.state in ("queued", "running") and status.steps_done < 10**6 - 1
    other = cluster.submit(30)
    assert cluster.wait_done([other])[other].state == "done"


def test_a_heartbeats_runs_that_name_no_job_are_ignored_and_the_heartbeat_counts(cluster):
    """A run listed under an empty or multi-line job id is logged in one line and
    ignored: it reaches neither the orphan rules nor the log as it came."""
    workers = pb_grpc.WorkerToSchedulerStub(cluster.chan)
    server = cluster.fakes[0].server_id
    reply = workers.Heartbeat(pb.HeartbeatRequest(server_id=server, running=[
        pb.RunningJob(job_id="", generation=1, gpus=[0]),
        pb.RunningJob(job_id="x\nWARNING forged line", generation=1, gpus=[0])]), timeout=10)
    assert reply.known
    log_text = (cluster.root / "scheduler.log").read_text()   # (logged before the answer)
    assert log_text.count(f"Heartbeat of server {server}: a run ignored: running.job_id") == 2
    assert "\nWARNING forged line" not in log_text
    assert f"on server {server} is stale" not in log_text
    assert cluster.alive_workers() == 2
