"""A gRPC server's connections (``gavelsched/rpc/limits.py``): a daemon lifts its soft
limit of open files to the hard one at its start (a real ``gavelsched scheduler`` started
under ``prlimit``-like limits); a server takes at most its cap of connections and closes
the idle ones, so that a flood of connections that never make a call cannot take every
file of the process, and the place they held is free again (the flood's helpers are
``benchmarks/connection_flood.py``'s)."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gavelsched.daemon.local import free_port, subprocess_env, wait_until
from gavelsched.rpc.limits import connection_cap, raise_open_files
from gavelsched.rpc.security import serve
from tests.benchmark_modules import loaded


def test_the_cap_keeps_a_quarter_of_the_files():
    assert connection_cap(1024) == 768
    assert connection_cap(20000) == 15000
    assert connection_cap(256) == 128 and connection_cap(64) == 16


def _health_server(**limits) -> tuple[grpc.Server, int]:
    servicer = health.HealthServicer()
    return serve("127.0.0.1:0", [lambda s: health_pb2_grpc.add_HealthServicer_to_server(
        servicer, s)], **limits)


def _check(port: int) -> str:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(),
                                                      timeout=5)
            return "OK"
        except grpc.RpcError as err:
            return err.code().name


def test_past_its_cap_a_server_closes_new_connections_and_the_idle_ones_go():
    server, port = _health_server(max_connections=20, idle_s=1.0)
    flood = []
    with loaded("connection_flood") as bench:
        _closed, preface = bench.closed_by_peer, bench.PREFACE
    try:
        for _ in range(60):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(preface)
            flood.append(sock)
        wait_until(lambda: _closed(flood) >= 40, 10, "the connections past the cap closed")
        assert _closed(flood) < 60
        wait_until(lambda: _closed(flood) == 60, 10, "the idle connections closed")
        assert _check(port) == "OK"                      # its place is free again
    finally:
        for sock in flood:
            sock.close()
        server.stop(0)


def test_a_daemon_lifts_its_soft_limit_of_open_files_to_the_hard_one(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard <= 1024 and hard != resource.RLIM_INFINITY:
        assert raise_open_files() == soft
        return
    config = tmp_path / "cluster.yaml"
    config.write_text(f"listen: 127.0.0.1:{free_port()}\npolicy: fifo\nround_seconds: 30\n"
                      f"state_dir: {tmp_path / 'state'}\neta: false\n")
    # started as systemd starts a service: a soft limit of 1,024 under the hard one
    low = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
           f"(1024, {hard})); os.execv(sys.executable, sys.argv)")
    proc = subprocess.Popen([sys.executable, "-c", low, "-m", "gavelsched", "scheduler",
                             "--config", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=subprocess_env())
    try:
        for line in proc.stdout:
            if "listening on port" in line:
                break
        limits = Path(f"/proc/{proc.pid}/limits").read_text().splitlines()
        (line,) = [row for row in limits if row.startswith("Max open files")]
        assert int(line.split()[3]) == min(hard, 1 << 20) > 1024
    finally:
        proc.terminate()
        proc.wait(30)
