"""TLS both ways (docs/runtime.md, "Auth and TLS"; issue #8): the scheduler serves TLS and,
with ``workers_tls: true``, reaches its workers over TLS too, verified with the cluster's CA.
A real worker daemon serves its own TLS certificate; the scheduler's RunJob reaches it, the
job (a real process that talks TLS to the scheduler) completes, and plain text reaches
neither daemon. The CA is self-signed, made in the test."""

from __future__ import annotations

import grpc
import pytest

from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import Cluster, wait_until
from .test_tls import make_ca_and_server_cert


def test_scheduler_dispatches_runjob_to_a_tls_worker_and_the_job_completes(tmp_path):
    paths = make_ca_and_server_cert(tmp_path)        # for 127.0.0.1: both daemons use it
    cluster = Cluster(tmp_path, round_seconds=2.0, extra={
        "tls": {k: str(v) for k, v in paths.items()}, "workers_tls": True})
    cluster._chan = channel(cluster.address, ca=paths["ca"])
    try:
        cluster.start_scheduler()
        worker = cluster._spawn([
            "worker", "--scheduler", cluster.address, "--type", "v100", "--gpus", "1",
            "--listen", "127.0.0.1:0", "--work-dir", str(tmp_path / "worker0"),
            "--grace", "3", "--tls-ca", str(paths["ca"]), "--tls-cert", str(paths["cert"]),
            "--tls-key", str(paths["key"])], "worker0.log")
        cluster.workers.append(worker)
        wait_until(lambda: cluster.alive_workers() == 1, 60, "the TLS worker to register")

        job = cluster.submit(40)
        done = cluster.wait_done([job], timeout=120)[job]
        assert done.state == "done", done.reason
        assert done.steps_done == done.total_steps == 40
        log = (tmp_path / "worker0.log").read_text()
        assert f"job {job} round" in log and "launched" in log    # RunJob arrived over TLS

        # the worker's service speaks TLS only: a plain-text RunJob never reaches it
        address = log.split("serving on ", 1)[1].split()[0]
        plain = channel(address)
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.SchedulerToWorkerStub(plain).RunJob(pb.RunJobRequest(job_id="x"),
                                                        timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        plain.close()
        secure = channel(address, ca=paths["ca"])
        ack = pb_grpc.SchedulerToWorkerStub(secure).KillJob(
            pb.KillJobRequest(job_id="nothing-here"), timeout=5)
        assert not ack.ok                       # reached over TLS, nothing to kill
        secure.close()
    finally:
        cluster.stop()
