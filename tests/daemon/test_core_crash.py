"""A scheduler whose core thread dies on an error says so and exits (issue #30: at 1,024
GPUs a planner error killed the executor thread, and the scheduler lived on answering
nothing)."""

from __future__ import annotations

import grpc
import yaml

from gavelsched.cli import main
from gavelsched.daemon.config import load_config
from gavelsched.daemon.executor import DaemonExecutor
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel

from .cluster import wait_until


def _config(tmp_path) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
                                    "round_seconds": 2, "state_dir": str(tmp_path / "state"),
                                    "eta": False}))
    return str(path)


def _boom(self):
    raise RuntimeError("boom")


def test_a_dead_core_answers_unavailable_and_says_why(tmp_path, monkeypatch):
    daemon = SchedulerDaemon(load_config(_config(tmp_path))).start()
    try:
        monkeypatch.setattr(daemon.executor, "tick", _boom.__get__(daemon.executor))
        wait_until(lambda: daemon.crashed, 30, "the core to stop")
        assert daemon.crashed == "RuntimeError: boom"
        stub = pb_grpc.ClientToSchedulerStub(channel(f"127.0.0.1:{daemon.port}"))
        try:
            stub.Status(pb.StatusRequest(), timeout=10)
            raise AssertionError("a dead core answered")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        daemon.stop()


def test_the_scheduler_command_exits_1_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(DaemonExecutor, "tick", _boom)
    assert main(["scheduler", "--config", _config(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("gavelsched scheduler: its core stopped (RuntimeError: boom); the "
                       "jobs are in its state_dir: start it again")
