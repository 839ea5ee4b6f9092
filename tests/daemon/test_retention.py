"""Checkpoint retention (issue #18, ``gavelsched/daemon/retention.py``) on a real store and
real checkpoint commits on disk: what ended is removed after the retention, nothing of a
job that has not ended ever is."""

from __future__ import annotations

import pytest

from gavelsched import checkpoints
from gavelsched.core import JobSpec
from gavelsched.daemon.config import DAY_S, ConfigError, parse_config
from gavelsched.daemon.meta import (ATTEMPTS, CHECKPOINT_GENERATION, GENERATION,
                                    NEXT_GENERATION, job_keys)
from gavelsched.daemon.retention import Retention, expired
from gavelsched.daemon.store import JobRow, Store

RETENTION_S = 100.0
# job id -> (state, steps_done, completion_s); "2" is preempted: started, now queued.
JOBS = {"0": ("done", 10, 50.0), "1": ("running", 4, None), "2": ("queued", 4, None),
        "3": ("queued", 0, None), "4": ("cancelled", 4, None), "5": ("failed", 4, None),
        "6": ("done", 10, 500.0)}


@pytest.fixture
def store_and_root(tmp_path):
    store = Store(tmp_path / "state")
    root = tmp_path / "state" / "checkpoints"
    for job_id, (state, steps, completion) in JOBS.items():
        store.add_job(JobRow(JobSpec(job_id, "A3C", 1, 10)))
        store.update_jobs([JobRow(JobSpec(job_id, "A3C", 1, 10), state=state,
                                  steps_done=steps, completion_s=completion)])
        checkpoints.begin(root / job_id, 4, 1)
        checkpoints.commit(root / job_id, 4, 1)
    (root / "stray").mkdir()               # names no job: never ours to remove
    yield store, root
    store.close()


def sweep(retention: Retention, store: Store, now: float) -> list[str]:
    due = retention.tick({row.id: row for row in store.jobs()}, now)
    retention.join()
    return due


def left(root) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def test_ended_jobs_go_after_the_retention_and_the_others_stay(store_and_root):
    store, root = store_and_root
    retention = Retention(root, RETENTION_S, every_s=0.0)
    assert sweep(retention, store, 149.0) == []          # job 0 ended at 50
    assert sweep(retention, store, 150.0) == ["0"]
    assert left(root) == ["1", "2", "3", "4", "5", "6", "stray"]
    # cancelled and failed jobs have no completion time: timed from the sweep at 149
    assert sweep(retention, store, 248.0) == []
    assert sweep(retention, store, 249.0) == ["4", "5"]
    assert sweep(retention, store, 599.0) == []
    assert sweep(retention, store, 600.0) == ["6"]
    assert sweep(retention, store, 1e9) == []
    assert left(root) == ["1", "2", "3", "stray"]
    assert checkpoints.latest(root / "2").steps == 4     # the preempted job's commit


def test_zero_keeps_everything_forever(store_and_root):
    store, root = store_and_root
    retention = Retention(root, 0.0, every_s=0.0)
    assert sweep(retention, store, 0.0) == [] and sweep(retention, store, 1e9) == []
    assert len(left(root)) == len(JOBS) + 1


def test_a_sweep_runs_at_most_once_every_interval(store_and_root):
    store, root = store_and_root
    retention = Retention(root, RETENTION_S, every_s=60.0)
    assert sweep(retention, store, 100.0) == []          # sweeps; job 0 not due yet
    assert sweep(retention, store, 159.0) == []          # due, but within the interval
    assert sweep(retention, store, 160.0) == ["0"]


def test_a_job_that_ends_later_is_timed_from_then(store_and_root):
    store, root = store_and_root
    retention = Retention(root, RETENTION_S, every_s=0.0)
    sweep(retention, store, 10.0)
    store.update_jobs([JobRow(JobSpec("1", "A3C", 1, 10), state="cancelled", steps_done=4)])
    assert "1" not in sweep(retention, store, 200.0)     # first seen ended at 200
    assert "1" in sweep(retention, store, 300.0)



def test_a_retired_jobs_meta_keys_go_with_its_checkpoints(store_and_root):
    """Its attempts and run generations (``meta.PER_JOB``) go when its checkpoints are
    retired; those of the jobs kept, and the counters, stay."""
    store, root = store_and_root
    for job_id in ("0", "1", "6"):
        store.set_meta({ATTEMPTS.key(job_id): "[]", GENERATION.key(job_id): 3,
                        CHECKPOINT_GENERATION.key(job_id): 2})
    store.set_meta({NEXT_GENERATION.key(): 4})
    retention = Retention(root, RETENTION_S, store, every_s=0.0)
    assert sweep(retention, store, 150.0) == ["0"]
    assert [store.get_meta(k) for k in job_keys("0")] == [None, None, None]
    for job_id in ("1", "6"):
        assert None not in [store.get_meta(k) for k in job_keys(job_id)]
    assert store.get_meta(NEXT_GENERATION.key()) == "4"
    assert sweep(retention, store, 600.0) == ["4", "5", "6"]
    assert [store.get_meta(k) for k in job_keys("6")] == [None, None, None]
    assert store.get_meta(GENERATION.key("1")) == "3"   # running: never retired


def test_a_job_that_ended_without_a_checkpoint_folder_is_retired_from_the_store(
        store_and_root):
    """Its meta rows and measured steps/s go as a folder's job's do, once. Before, retention
    saw folders only: such a job's rows (never checkpointed, or run by a hollow worker)
    stayed forever."""
    store, root = store_and_root
    spec = JobSpec("7", "A3C", 1, 10)
    store.add_job(JobRow(spec))
    store.update_jobs([JobRow(spec, state="done", steps_done=10, completion_s=50.0)])
    store.set_meta({ATTEMPTS.key("7"): "[]", GENERATION.key("7"): 3})
    store.put_throughput_later("7", "v100", 2.0)
    store.put_pair_throughput_later("1+7", "7", "v100", 1.0)
    retention = Retention(root, RETENTION_S, store, every_s=0.0)
    assert sweep(retention, store, 149.0) == []
    assert sweep(retention, store, 150.0) == ["0", "7"]
    assert [store.get_meta(k) for k in job_keys("7")] == [None, None, None]
    assert "7" not in store.throughputs() and store.pair_throughputs() == {}
    assert left(root) == ["1", "2", "3", "4", "5", "6", "stray"]   # (no folder of its own)
    assert "7" not in sweep(retention, store, 1e9)                  # (once)
    done = {row.id: row for row in store.jobs() if row.id == "7"}
    assert Retention(root, RETENTION_S, every_s=0.0).tick(done, 1e9) == []   # without the
                                                                # store: folders only


def test_expired_is_pure_and_ignores_unknown_names():
    rows = {"0": JobRow(JobSpec("0", "A3C", 1, 10), state="done", completion_s=0.0)}
    assert expired(["9", "0", "x"], rows, {}, 10.0, 5.0) == ["0"]
    assert expired(["0"], rows, {}, 10.0, 0.0) == []


def test_the_config_key():
    base = {"listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 6, "state_dir": "/s"}
    assert parse_config(base).checkpoint_retention_s == DAY_S
    assert parse_config({**base, "checkpoint_retention_s": 0}).checkpoint_retention_s == 0
    with pytest.raises(ConfigError, match="checkpoint_retention_s must be a number >= 0"):
        parse_config({**base, "checkpoint_retention_s": -1})
