"""``gavelsched simulate sweep --ray`` (issue #30): every (policy, rate, seed) as a task on a
real two-node Ray cluster on this machine (``ray_nodes``), writing the local run's CSV row
for row, with the same progress lines, and finishing with every row when a node dies
mid-sweep; without the extra, or without a cluster, one line and exit 2."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import time

import pytest

from gavelsched.cli import main
from gavelsched.daemon.local import free_port
from simulator.ray_sweep import run_task

from .ray_nodes import RayNodes, missing

SWEEP = ["simulate", "sweep", "--rates", "10,30", "--seeds", "0,1",
         "--policies", "max_min_fairness_perf,fifo_perf", "--jobs", "12",
         "--cluster", "2:2:2"]
# Slower points for the lost node: it is killed while it runs one.
SLOW = ["simulate", "sweep", "--rates", "2,6", "--seeds", "0",
        "--policies", "max_min_fairness_perf,fifo_perf", "--jobs", "150"]
# The head notices a lost node within ~5 s (Ray's default: ~15 s).
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
               "RAY_health_check_failure_threshold": "5"}
TASK = run_task.__name__                # a worker running one is titled ray::TASK
SUMMARY = re.compile(r"^ray: (\d+) runs on (\d+) nodes? \((.*)\)$")


def _rows(path) -> list[dict]:
    """The CSV's rows without ``wall_s`` (each point's own time)."""
    with open(path / "sweep.csv") as f:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


def _progress(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("sweep: ")]


def _summary(err: str) -> re.Match:
    found = [m for m in map(SUMMARY.match, err.splitlines()) if m]
    assert len(found) == 1, err
    return found[0]


@pytest.fixture(scope="module")
def nodes():
    """A head and a second node on this machine, one CPU each, that notice a lost node
    within ~5 s."""
    why = missing()
    if why:
        pytest.skip(why)
    nodes = RayNodes(FAST_HEALTH)
    try:
        nodes.head(cpus=1)
        nodes.add("node2", cpus=1)
    except RuntimeError as err:           # e.g. a machine too loaded for Ray's 30 s
        nodes.close()
        pytest.skip(str(err))
    try:
        yield nodes
    finally:
        nodes.close()


@pytest.fixture
def cluster(nodes) -> str:
    """The two nodes' address."""
    return nodes.address


def test_a_sweep_on_two_nodes_writes_the_local_rows(cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert main([*SWEEP, "--quiet", "--processes", "1", "-o", str(tmp_path / "local")]) == 0
    assert main([*SWEEP, "--ray", cluster, "-o", str(tmp_path / "ray")]) == 0
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert len(local) == 8 and remote == local
    assert (tmp_path / "ray" / "jct_vs_rate.png").stat().st_size > 0
    runs, nodes, per_node = _summary(capsys.readouterr().err).groups()
    counts = [int(n.split(": ")[1]) for n in per_node.split(", ")]
    assert (runs, nodes) == ("8", "2")
    assert len(counts) == 2 and min(counts) >= 1 and sum(counts) == 8   # each node ran some


def test_progress_is_the_same_for_ray_and_local_runs(cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert main([*SWEEP, "--processes", "2", "-o", str(tmp_path / "local")]) == 0
    local = _progress(capsys.readouterr().err)
    assert main([*SWEEP, "--ray", cluster, "-o", str(tmp_path / "ray")]) == 0
    remote = _progress(capsys.readouterr().err)
    assert local == [f"sweep: {k}/8 runs done" for k in range(1, 9)]
    assert remote == local


def test_a_sweep_survives_a_node_that_dies(nodes, tmp_path):
    try:
        node3 = nodes.add("node3", cpus=1)          # the one that dies
    except RuntimeError as err:
        pytest.skip(str(err))
    sweep = subprocess.Popen(
        [sys.executable, "-m", "gavelsched", *SLOW, "--ray", nodes.address,
         "-o", str(tmp_path / "ray")], env=nodes.env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    while not node3.running(TASK) and sweep.poll() is None:
        time.sleep(0.05)
    lost = node3.running(TASK)
    node3.kill()                                    # while it runs a point
    err = sweep.communicate(timeout=300)[1]
    assert lost == 1 and sweep.returncode == 0, err   # its point ran again elsewhere
    assert main([*SLOW, "--quiet", "--processes", "1", "-o", str(tmp_path / "local")]) == 0
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")
    assert len(_rows(tmp_path / "local")) == 4
    assert _summary(err).group(1) == "4"


def test_without_the_extra_it_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray fails
    assert main([*SWEEP, "--quiet", "--ray", "auto", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gavelsched simulate: error: --ray needs Ray, an optional extra: "
                   "pip install 'gavelsched[ray]'"]
    assert not (tmp_path / "sweep.csv").exists()


def test_without_a_cluster_it_is_one_line(tmp_path, capsys):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    port = free_port()                                     # nothing listens there
    assert main([*SWEEP, "--quiet", "--ray", f"127.0.0.1:{port}", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--ray 127.0.0.1:{port}: no Ray cluster there" in err[0]
