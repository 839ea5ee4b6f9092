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
from simulator.ray_sweep import run_task, summary

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
SUMMARY = re.compile(r"^ray: (\d+) runs? on (\d+) nodes? \((.*)\)$")


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


def _cluster(*workers: str) -> RayNodes:
    """A head with no CPU (it only coordinates, as on a large cluster) and ``workers``
    nodes of one CPU each, that notice a lost node within ~5 s; skips when Ray is missing
    or its nodes do not start (e.g. a machine too loaded for Ray's 30 s)."""
    why = missing()
    if why:
        pytest.skip(why)
    nodes = RayNodes(FAST_HEALTH)
    try:
        nodes.head(cpus=0)
        for name in workers:
            nodes.add(name, cpus=1)
    except RuntimeError as err:
        nodes.close()
        pytest.skip(str(err))
    return nodes


@pytest.fixture(scope="module")
def nodes():
    """The head and a second node. Every run crosses to the second node: with a CPU on
    the head too, Ray's SPREAD is best effort (a worker that is free takes the next task)
    and a short sweep may run whole on the head, as one CI run did."""
    nodes = _cluster("node2")
    try:
        yield nodes
    finally:
        nodes.close()


@pytest.fixture
def cluster(nodes) -> str:
    """The two nodes' address."""
    return nodes.address


def test_a_sweep_on_two_nodes_writes_the_local_rows(nodes, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert main([*SWEEP, "--quiet", "--processes", "1", "-o", str(tmp_path / "local")]) == 0
    assert main([*SWEEP, "--ray", nodes.address, "-o", str(tmp_path / "ray")]) == 0
    local, remote = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert len(local) == 8 and remote == local
    assert (tmp_path / "ray" / "jct_vs_rate.png").stat().st_size > 0
    second = nodes.nodes[1].node_id()[:8]            # every run made on the second node
    assert _summary(capsys.readouterr().err).groups() == ("8", "1", f"{second}: 8")


def test_the_summary_counts_the_runs_of_each_node():
    assert summary(["9b01d2e4aa", "3f2a91c0bb", "9b01d2e4aa"]) == \
        "ray: 3 runs on 2 nodes (3f2a91c0: 1, 9b01d2e4: 2)"
    assert summary(["3f2a91c0bb"]) == "ray: 1 run on 1 node (3f2a91c0: 1)"


def test_progress_is_the_same_for_ray_and_local_runs(cluster, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    assert main([*SWEEP, "--processes", "2", "-o", str(tmp_path / "local")]) == 0
    local = _progress(capsys.readouterr().err)
    assert main([*SWEEP, "--ray", cluster, "-o", str(tmp_path / "ray")]) == 0
    remote = _progress(capsys.readouterr().err)
    assert local == [f"sweep: {k}/8 runs done" for k in range(1, 9)]
    assert remote == local


def test_a_point_that_cannot_run_is_the_local_runs_one_line(cluster, tmp_path, capsys,
                                                            monkeypatch):
    """A point whose trace no type can run raises on its node; the sweep ends with the
    line a local run gives (not the header of Ray's remote traceback), exit 2."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    bad = ["simulate", "sweep", "--rates", "1", "--seeds", "0", "--policies", "fifo",
           "--jobs", "50", "--multi-gpu", "--cluster", "v100=1", "--quiet"]
    assert main([*bad, "--processes", "1", "-o", str(tmp_path / "local")]) == 2
    local = capsys.readouterr().err.strip()
    assert main([*bad, "--ray", cluster, "-o", str(tmp_path / "ray")]) == 2
    assert capsys.readouterr().err.strip() == local
    assert "fifo at rate 1, seed 0: <generated trace>:" in local and len(local.splitlines()) == 1


def test_a_sweep_survives_a_node_that_dies(tmp_path):
    """A cluster of its own, whose one node with a CPU is killed while it runs a point;
    the node that joins then runs what was left, the lost point again."""
    nodes = _cluster("doomed")
    doomed = nodes.nodes[1]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "gavelsched", *SLOW, "--ray", nodes.address,
         "-o", str(tmp_path / "ray")], env=nodes.env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    try:
        while not doomed.running(TASK) and sweep.poll() is None:
            time.sleep(0.05)
        lost = doomed.running(TASK)
        doomed.kill()                                   # while it runs a point
        try:
            joined = nodes.add("rescue", cpus=1)
        except RuntimeError as why:                     # a machine too loaded for Ray
            pytest.skip(str(why))
        rescue = joined.node_id()[:8]
        err = sweep.communicate(timeout=300)[1]
    finally:
        sweep.kill()
        nodes.close()
    assert lost == 1 and sweep.returncode == 0, err   # its point ran again elsewhere
    assert main([*SLOW, "--quiet", "--processes", "1", "-o", str(tmp_path / "local")]) == 0
    assert _rows(tmp_path / "ray") == _rows(tmp_path / "local")
    assert len(_rows(tmp_path / "local")) == 4
    runs, _, per_node = _summary(err).groups()
    assert runs == "4" and f"{rescue}: " in per_node


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
