"""A client sees what it just did (issue #18): the job a Submit returned is in the very next
Status, and so is a cancel, although the scheduler republishes its picture on its own
thread (``DaemonExecutor.publish``). Before, a Status right after a Submit could miss the
job, and ``local-cluster`` then lost it from its metrics (``KeyError``)."""

from __future__ import annotations

from gavelsched.rpc import pb, pb_grpc

from .cluster import Cluster, running
from .fake_worker import FakeWorker


def test_a_submitted_or_cancelled_job_is_in_the_next_status(tmp_path):
    with running(Cluster(tmp_path, round_seconds=1.0, heartbeat_seconds=0.3)) as cluster:
        cluster.fakes.append(FakeWorker(cluster.address, "v100"))
        for _ in range(25):
            job = cluster.submit(10**6)
            assert job in {j.id for j in cluster.status().jobs}
            assert pb_grpc.ClientToSchedulerStub(cluster.chan).Cancel(
                pb.CancelRequest(job_id=job), timeout=30).ok
            assert {j.id: j.state for j in cluster.status().jobs}[job] == "cancelled"
