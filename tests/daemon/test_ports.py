"""Ports already taken: the scheduler says which key it could not bind in one line (exit 2,
no traceback), and ``LocalCluster`` picks another port when a process takes the one it
picked before its scheduler bound it (a race between parallel tests: a ``local-cluster``
example failed once at start in the suite)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import yaml

from gavelsched.daemon.local import LOOPBACK_ANY, LocalCluster, subprocess_env


def _hold_a_port() -> socket.socket:
    """A socket listening on a loopback port (the port another process took)."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


@pytest.mark.parametrize("key", ["listen", "metrics_listen", "dashboard_listen"])
def test_a_taken_port_is_one_line_naming_its_key(tmp_path, key):
    held = _hold_a_port()
    taken = f"127.0.0.1:{held.getsockname()[1]}"
    config = {"listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 6,
              "state_dir": str(tmp_path / "state"), key: taken}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    try:
        done = subprocess.run([sys.executable, "-m", "gavelsched", "-q", "scheduler",
                               "--config", str(tmp_path / "c.yaml")], capture_output=True,
                              text=True, timeout=60, env=subprocess_env())
    finally:
        held.close()
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"gavelsched scheduler: error: {key}: cannot listen on {taken}: "
                    "address in use (another process holds the port)")


def test_local_cluster_picks_again_when_its_ports_are_taken(tmp_path):
    """The ports picked at construction are taken before the start: the scheduler exits
    on them, and the cluster starts on fresh ones, whose addresses it then reports."""
    cluster = LocalCluster(tmp_path, config={"dashboard_listen": LOOPBACK_ANY,
                                             "eta": False})
    first = (cluster.address, cluster.dashboard_address)
    held = []
    for address in first:
        s = socket.socket()
        s.bind(("127.0.0.1", int(address.rpartition(":")[2])))
        s.listen()
        held.append(s)
    try:
        cluster.start_scheduler()
        assert cluster.address != first[0] and cluster.dashboard_address != first[1]
        assert cluster.healthy()
        written = yaml.safe_load(cluster.config_path.read_text())
        assert written["listen"] == cluster.address
        assert written["dashboard_listen"] == cluster.dashboard_address
        log = (tmp_path / "scheduler.log").read_text()
        assert f"cannot listen on {first[0]}: address in use" in log
    finally:
        cluster.stop()
        for s in held:
            s.close()


def test_a_given_port_is_not_replaced(tmp_path):
    """A ``listen`` the caller gave is the caller's: taken, the start fails, naming it."""
    held = _hold_a_port()
    taken = f"127.0.0.1:{held.getsockname()[1]}"
    cluster = LocalCluster(tmp_path, config={"listen": taken, "eta": False})
    try:
        with pytest.raises(RuntimeError, match="the scheduler exited"):
            cluster.start_scheduler(timeout=60)
        assert cluster.address == taken
    finally:
        cluster.stop()
        held.close()
