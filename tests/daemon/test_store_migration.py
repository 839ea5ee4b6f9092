"""A state directory from before issue #18 still loads (``migrate.migrate``): its ``jobs``
table gets the ``started_s`` and ``ended_s`` columns (a done job ended when it was done)
and the ``hosts`` table appears; its jobs load as before, a job with durable steps as
``preempted`` (it had started), and a real scheduler daemon restarts on it and runs them."""

from __future__ import annotations

import json
import sqlite3
import time

from gavelsched import checkpoints
from gavelsched.daemon.store import Store

from .cluster import Cluster, running
from .fake_worker import FakeWorker

# The schema as it was, and a job of each kind in it.
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
    steps_done INTEGER NOT NULL, reason TEXT, arrival_s REAL NOT NULL, completion_s REAL);
CREATE TABLE servers (
    id INTEGER PRIMARY KEY, worker_type TEXT NOT NULL, workers TEXT NOT NULL,
    address TEXT NOT NULL, hostname TEXT NOT NULL);
CREATE TABLE throughputs (
    job_id TEXT NOT NULL, worker_type TEXT NOT NULL, steps_per_s REAL NOT NULL,
    PRIMARY KEY (job_id, worker_type));
"""
SPEC = {"job_type": "A3C", "scale_factor": 1, "total_steps": 40, "priority_weight": 1.0,
        "slo_s": None, "entity": None, "mixed": False, "min_scale_factor": None,
        "workload": "steps", "command": ""}
ROWS = [("0", 0, "done", 40, None, 1.0, 9.0), ("1", 1, "running", 12, None, 2.0, None),
        ("2", 2, "queued", 0, None, 3.0, None), ("3", 3, "cancelled", 0, "cancelled", 4.0, None)]


def old_state_dir(path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path / "gavelsched.db")
    db.executescript(OLD_SCHEMA)
    db.executemany("INSERT INTO jobs VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                   [(i, seq, json.dumps(SPEC), *rest) for i, seq, *rest in ROWS])
    db.executemany("INSERT INTO meta VALUES(?, ?)", [("next_job_id", "4"),
                                                     ("epoch_unix", str(time.time() - 60))])
    db.commit()
    db.close()


def test_an_old_store_gets_the_new_columns_and_loads_as_before(tmp_path):
    old_state_dir(tmp_path)
    store = Store(tmp_path)
    jobs = {j.id: j for j in store.jobs()}
    assert [(j.state, j.steps_done, j.started_s, j.ended_s) for j in jobs.values()] == [
        ("done", 40, None, 9.0), ("running", 12, None, None), ("queued", 0, None, None),
        ("cancelled", 0, None, None)]
    assert [j.waiting for j in jobs.values()][1:3] == ["preempted", "queued"]
    assert store.hosts() == {}
    store.update_jobs([jobs["2"].but(state="running", started_s=20.0)])
    store.add_hosts("2", [0])
    store.close()
    again = Store(tmp_path)                     # opened again: nothing to add twice
    assert {j.id: j.started_s for j in again.jobs()}["2"] == 20.0
    assert again.hosts() == {"2": (0,)}
    again.close()


def test_a_real_scheduler_restarts_on_an_old_store_and_runs_its_jobs(tmp_path):
    old_state_dir(tmp_path / "state")
    job_1 = tmp_path / "state" / "checkpoints" / "1"      # its 12 durable steps
    checkpoints.begin(job_1, 12, 0)
    checkpoints.commit(job_1, 12, 0)
    with running(Cluster(tmp_path)) as c:
        jobs = c.jobs()
        assert [jobs[i].state for i in "0123"] == ["done", "preempted", "queued", "cancelled"]
        assert jobs["0"].ended_s == 9.0 and jobs["1"].started_s == -1.0
        c.fakes.append(FakeWorker(c.address, "v100"))
        done = c.wait_done(["1", "2"])
        assert [done[i].state for i in "12"] == ["done", "done"]
        assert done["2"].started_s >= done["2"].arrival_s and done["2"].ended_s > 0
