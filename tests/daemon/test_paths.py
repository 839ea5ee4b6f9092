"""Paths are made absolute once, where they are read (issue #18; docs/design.md, Safety
rules): the cluster YAML's against its own folder, flags against the working directory. The
end-to-end test runs the real scheduler and workers from different working directories on
a config named by a relative path, with ``state_dir: ./state``."""

from __future__ import annotations

import os

import yaml

from gavelsched import checkpoints
from gavelsched.daemon.config import load_config, parse_config
from gavelsched.rpc.security import write_token

from .cluster import Cluster, wait_until


def test_relative_config_paths_are_taken_from_the_config_folder(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "cluster.yaml").write_text(yaml.safe_dump({
        "listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 6,
        "state_dir": "./state", "checkpoint_dir": "../ckpt", "throughputs": "t.yaml",
        "tls": {"cert": "c.pem", "key": "k.pem", "ca": "sub/ca.pem"}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config("../conf/cluster.yaml")
    assert config.state_dir == conf / "state"
    assert config.checkpoint_dir == tmp_path / "ckpt"
    assert config.checkpoints == tmp_path / "ckpt"
    assert config.throughputs == conf / "t.yaml"
    assert (config.tls.cert, config.tls.key, config.tls.ca) == (
        conf / "c.pem", conf / "k.pem", conf / "sub" / "ca.pem")


def test_parse_config_without_a_base_takes_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = parse_config({"listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 6,
                           "state_dir": "state"})
    assert config.state_dir == tmp_path / "state"
    assert config.checkpoints.is_absolute()


def test_daemons_in_different_working_dirs_agree_on_every_path(tmp_path):
    """Scheduler in ``a/`` with ``--config ../conf/cluster.yaml`` (``state_dir: ./state``),
    workers in ``x/b/`` with ``--work-dir ./w`` and ``--token-file ./token``: every job ends
    done, its checkpoints under ``conf/state/checkpoints`` (the path sent to the workers is
    absolute, so they write where the scheduler reads), nothing under the working dirs but
    what their flags name."""
    cluster = Cluster(tmp_path / "logs", token="t0ken")
    # b is deeper than a: the same relative path names different folders from each
    conf, a, b = tmp_path / "conf", tmp_path / "a", tmp_path / "x" / "b"
    for d in (conf, a, b):
        d.mkdir(parents=True)
    (conf / "cluster.yaml").write_text(yaml.safe_dump({
        "listen": cluster.address, "policy": "max_min_fairness_perf", "round_seconds": 2.0,
        "heartbeat_seconds": 0.3, "min_resolve_interval_s": 0.0, "state_dir": "./state",
        "auth_token_file": "token"}))
    write_token(conf / "token", "t0ken")
    write_token(b / "token", "t0ken")
    try:
        cluster.start_scheduler(cwd=a, config=os.path.join("..", "conf", "cluster.yaml"))
        for worker_type in ("v100", "k80"):
            cluster.start_worker(worker_type, cwd=b, work_dir=f"./w-{worker_type}",
                                 token_file="./token")
        wait_until(lambda: cluster.alive_workers() == 2, 60, "two workers")
        jobs = [cluster.submit(steps) for steps in (40, 60, 80)]
        done = cluster.wait_done(jobs)
    finally:
        cluster.stop()
    for job_id in jobs:
        assert done[job_id].state == "done", done[job_id].reason
        assert checkpoints.latest(conf / "state" / "checkpoints" / job_id) is not None
    assert sorted(p.name for p in a.iterdir()) == []
    assert sorted(p.name for p in b.iterdir()) == ["token", "w-k80", "w-v100"]
    # Without -v, the daemons log their main events at INFO (issue #18).
    scheduler_log = (cluster.root / "scheduler.log").read_text()
    assert "INFO gavelsched.daemon.server: scheduler listening on" in scheduler_log
    assert "INFO gavelsched.daemon.jobs: job 0 done" in scheduler_log   # (jobs.py owns job state)
    assert "INFO workers.daemon.worker: registered as server" in (
        cluster.root / "worker0.log").read_text()
