"""``gavelsched simulate sweep --ray`` (issue #30): every (policy, rate, seed) as a task on a
real Ray cluster (``ray start --head`` on loopback, its own temp dir), writing the local
run's CSV row for row; without the extra, or without a cluster, one line and exit 2."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys

import pytest

from gavelsched.cli import main
from gavelsched.daemon.local import free_port

SWEEP = ["simulate", "sweep", "--rates", "10,30", "--seeds", "0,1",
         "--policies", "max_min_fairness_perf,fifo_perf", "--jobs", "12",
         "--cluster", "2:2:2", "--quiet"]


def _rows(path) -> list[dict]:
    """The CSV's rows without ``wall_s`` (each point's own time)."""
    with open(path / "sweep.csv") as f:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


@pytest.fixture
def ray_head(tmp_path_factory):
    """A Ray head on 127.0.0.1 with two CPUs; its address. Stopped afterwards."""
    pytest.importorskip("ray", reason="the ray extra is not installed")
    ray_cli = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")
    if not os.path.exists(ray_cli):
        pytest.skip("no 'ray' command next to this Python")
    temp = tmp_path_factory.mktemp("ray")
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    start = subprocess.run(
        [ray_cli, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={temp}"], env=env, capture_output=True, text=True, timeout=180)
    if start.returncode != 0:
        pytest.skip(f"ray start failed: {start.stderr.strip().splitlines()[-1:]}")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_a_sweep_on_ray_writes_the_local_rows(ray_head, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert main([*SWEEP, "--processes", "1", "-o", str(tmp_path / "local")]) == 0
    assert main([*SWEEP, "--ray", ray_head, "-o", str(tmp_path / "ray")]) == 0
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert len(local) == 8 and remote == local
    assert (tmp_path / "ray" / "jct_vs_rate.png").stat().st_size > 0


def test_without_the_extra_it_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray fails
    assert main([*SWEEP, "--ray", "auto", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gavelsched simulate: error: --ray needs Ray, an optional extra: "
                   "pip install 'gavelsched[ray]'"]
    assert not (tmp_path / "sweep.csv").exists()


def test_without_a_cluster_it_is_one_line(tmp_path, capsys):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    port = free_port()                                     # nothing listens there
    assert main([*SWEEP, "--ray", f"127.0.0.1:{port}", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--ray 127.0.0.1:{port}: no Ray cluster there" in err[0]
