"""Secure by default, the scheduler's side (issue #17; docs/design.md, Safety rules): a tokenless
scheduler refuses a ``listen`` beyond loopback (exit 2, one line saying how to make a token)
unless ``--insecure`` (then it starts and warns); on loopback it starts with a notice; and
``gavelsched local-cluster`` gives its daemons a fresh token (mode 0600), so a plain channel
reaches neither its scheduler nor its workers. Binds 127.0.0.1 or 0.0.0.0, port 0 only."""

from __future__ import annotations

import argparse
import logging
import stat
import subprocess
import sys
import time

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gavelsched.cli import main
from gavelsched.daemon.config import load_config
from gavelsched.daemon.local import subprocess_env, wait_until
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import SecurityError, channel


def _config(tmp_path, listen: str, **extra) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"listen": listen, "policy": "max_min_fairness_perf",
                                    "round_seconds": 2, "state_dir": str(tmp_path / "state"),
                                    **extra}))
    return str(path)


def test_tokenless_scheduler_beyond_loopback_refuses_to_start(tmp_path, capsys):
    path = _config(tmp_path, "0.0.0.0:0")
    assert main(["scheduler", "--config", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("gavelsched scheduler: error: the scheduler would listen on "
                           "0.0.0.0:0, beyond loopback, without an auth token")
    assert "head -c 32 /dev/urandom" in line and "auth_token_file" in line
    assert "--insecure" in line
    assert not (tmp_path / "state").exists()         # refused before anything was opened
    with pytest.raises(SecurityError, match="beyond loopback"):
        SchedulerDaemon(load_config(path))


def test_insecure_scheduler_beyond_loopback_starts_and_warns(tmp_path):
    path = _config(tmp_path, "0.0.0.0:0")
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "scheduler", "--config",
                                 path, "--insecure"], stdout=o, stderr=e, env=subprocess_env())
    try:
        def port():
            if proc.poll() is not None:
                raise AssertionError(f"scheduler exited {proc.returncode}: {err.read_text()}")
            text = out.read_text()
            return text.split("listening on port ", 1)[1].split()[0] if "\n" in text else None
        bound = wait_until(port, 90, "the scheduler to listen")
        chan = channel(f"127.0.0.1:{bound}")             # every interface, loopback too
        reply = health_pb2_grpc.HealthStub(chan).Check(health_pb2.HealthCheckRequest(),
                                                       timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        chan.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    warnings = [line for line in err.read_text().splitlines() if "--insecure:" in line]
    assert len(warnings) == 1 and "WARNING" in warnings[0], err.read_text()
    assert f"the scheduler on 0.0.0.0:{bound} has no auth token" in warnings[0]


def test_scheduler_with_a_token_beyond_loopback_needs_no_flag(tmp_path):
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    daemon = SchedulerDaemon(load_config(_config(tmp_path, "0.0.0.0:0",
                                                 auth_token_file=str(token))))
    daemon.stop()


def test_tokenless_scheduler_on_loopback_starts_with_a_notice(tmp_path, caplog):
    daemon = SchedulerDaemon(load_config(_config(tmp_path, "127.0.0.1:0")))
    try:
        with caplog.at_level(logging.WARNING, logger="gavelsched.daemon.server"):
            daemon.start()
        notices = [r.getMessage() for r in caplog.records if "no auth token" in r.getMessage()]
        assert len(notices) == 1 and "any local user" in notices[0]
        assert f"127.0.0.1:{daemon.port}" in notices[0]
    finally:
        daemon.stop()


def test_local_cluster_daemons_use_a_fresh_token(tmp_path):
    from gavelsched.client.local import make_cluster, start_daemons
    from traces import default_table

    args = argparse.Namespace(policy="max_min_fairness_perf", round_seconds=2.0,
                              emulation_speed=1.0)
    cluster = make_cluster(args, tmp_path, {"k80": 1}, default_table())
    marker = tmp_path / "MARKER"
    try:
        assert cluster.token and cluster.token_file is not None
        assert stat.S_IMODE(cluster.token_file.stat().st_mode) == 0o600
        assert cluster.token_file.read_text().strip() == cluster.token
        assert yaml.safe_load(cluster.config_path.read_text())["auth_token_file"] == \
            str(cluster.token_file)
        start_daemons(cluster, args, {"k80": 1})
        (worker,) = cluster.status().workers          # the client here holds the token
        assert worker.address.startswith("127.0.0.1:")
        plain = grpc.insecure_channel(worker.address)
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.SchedulerToWorkerStub(plain).RunJob(pb.RunJobRequest(
                job_id="evil", command=f"touch {marker}", total_steps=1, gpus=[0],
                world_size=1, lease=pb.Lease(max_steps=1, max_seconds=30)), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        plain.close()
        plain = grpc.insecure_channel(cluster.address)
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.ClientToSchedulerStub(plain).Status(pb.StatusRequest(), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        plain.close()
        time.sleep(0.5)
        assert not marker.exists()
    finally:
        cluster.stop()
    logs = (tmp_path / "scheduler.log").read_text() + (tmp_path / "worker0.log").read_text()
    assert "no auth token" not in logs
    # a second demo gets another token
    other = make_cluster(args, tmp_path / "again", {"k80": 1}, default_table())
    assert other.token != cluster.token
