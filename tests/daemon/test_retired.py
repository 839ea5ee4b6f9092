"""Jobs that ended long ago leave the daemon's memory (issue #30; ``gavelsched/daemon/
retired.py``, ``retention.py``): the real ``DaemonExecutor`` on a hand-moved clock and a
real SQLite store (``test_round_aligned.Scheduler``). A job that ended
``ended_jobs_kept_s`` ago, with no run left, is no longer in ``status``, and a restart does
not read it; the store keeps it, and every call that names it (``history``, ``cancel``,
``hold``, ``after``, the logs, an array's id) finds it there, with the same answers and the
same permissions as before it left."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from gavelsched.cli import main
from gavelsched.core import JobSpec
from gavelsched.daemon.calls import Denied
from gavelsched.daemon.config import ConfigError, parse_config
from gavelsched.daemon.control import ControlError
from gavelsched.daemon.jobs import Jobs
from gavelsched.daemon.meta import job_keys
from gavelsched.daemon.purge import EVERY_S as PURGE_EVERY_S
from gavelsched.daemon.purge import JOB_COLUMN, purge
from gavelsched.daemon.retention import SWEEP_EVERY_S
from gavelsched.daemon.retired import live
from gavelsched.daemon.store import JobRow, Store
from gavelsched.daemon.submissions import SubmissionError

from .cluster import Cluster, running
from .test_control_unit import ALICE, BOB, LEAD_FREE, pump, run_to_done, status, submit
from .test_round_aligned import Scheduler

KEPT_S = 1000.0


def later(s: Scheduler, seconds: float) -> None:
    """The clock moves on ``seconds`` and the executor's loop wakes (a sweep is due once a
    minute: ``retention.SWEEP_EVERY_S``)."""
    s.at(s.t + seconds)


@pytest.fixture
def ended(tmp_path):
    """A scheduler keeping ended jobs ``KEPT_S`` with one job done, one cancelled, an array
    of three cancelled, and one of another user not ended."""
    s = Scheduler(tmp_path, ended_jobs_kept_s=KEPT_S, checkpoint_retention_s=3 * KEPT_S)
    done = submit(s, steps=5).job_id
    run_to_done(s, done)
    gone = submit(s).job_id
    s.x.cancel(gone)
    array = submit(s, count=3).array_id
    s.x.calls.cancel(ALICE, array)
    pump(s)
    live_job = submit(s, BOB).job_id
    yield s, {"done": done, "gone": gone, "array": array, "live": live_job}
    s.close()


def test_a_job_that_ended_long_ago_leaves_memory_and_status(ended):
    s, ids = ended
    copies = [f"{ids['array']}_{i}" for i in range(3)]
    every = [ids["done"], ids["gone"], *copies, ids["live"]]
    later(s, KEPT_S - 10)
    assert set(s.x.jobs) == set(every)               # not yet
    kept = [key for key in job_keys(ids["done"]) if s.store.get_meta(key) is not None]
    assert kept and s.x.fences.current(ids["done"])  # (its run generations)
    later(s, SWEEP_EVERY_S)
    assert set(s.x.jobs) == {ids["live"]}
    assert set(status(s)) == {ids["live"]}
    assert [row.id for row in s.store.jobs()] == every        # the store keeps every job
    assert all(s.store.get_meta(key) is None for key in kept)   # (what only a live job needs)
    assert s.x.fences.current(ids["done"]) == 0 and ids["done"] not in s.x.hosts.by_job


def test_calls_that_name_a_job_that_left_find_it_in_the_store(ended):
    s, ids = ended
    later(s, KEPT_S + SWEEP_EVERY_S)
    done, gone, array = ids["done"], ids["gone"], ids["array"]
    assert done not in s.x.jobs and gone not in s.x.jobs
    history = [e.action for e in s.x.calls.history(ALICE, done).events]
    assert history[0] == "submit" and history[-1] == "done"
    ack = s.x.calls.cancel(ALICE, gone)
    assert (ack.ok, ack.message) == (False, f"job {gone} is already cancelled")
    assert s.x.calls.cancel(ALICE, array).message == f"job {array} is already cancelled"
    with pytest.raises(ControlError, match=f"cannot hold job {done}: it is done"):
        s.x.calls.hold(ALICE, done, "")
    with pytest.raises(Denied, match=f"bob may not cancel job {gone}"):
        s.x.calls.cancel(BOB, gone)
    with pytest.raises(LookupError, match="unknown job '999'"):
        s.x.calls.cancel(ALICE, "999")
    # its logs: on the servers that ran it, read by its owner only
    assert s.x.calls.may_read_logs(ALICE, done) == (s.server,)
    assert s.x.calls.may_read_logs(ALICE, gone) == ()
    with pytest.raises(Denied, match=f"bob may not read the logs of job {done}"):
        s.x.calls.may_read_logs(BOB, done)
    assert s.x.calls.may_read_logs(BOB, ids["live"]) is None     # (in memory)
    assert s.x.calls.may_read_logs(ALICE, array) is None        # (an array has no logs)


def test_after_a_job_that_left_memory(ended):
    s, ids = ended
    later(s, KEPT_S + SWEEP_EVERY_S)
    ready = submit(s, after=[ids["done"]]).job_id
    assert s.x.jobs[ready].state == "queued" and ready in s.x.core.pending_jobs
    assert s.x.tenancy.control.waiting_reason(s.x.jobs[ready]) is None
    late = submit(s, after=[ids["done"], ids["gone"]]).job_id
    assert (s.x.jobs[late].state, s.x.jobs[late].reason) == (
        "cancelled", f"dependency {ids['gone']} cancelled")
    on_array = submit(s, after=[ids["array"]]).job_id
    assert s.x.jobs[on_array].reason == f"dependency {ids['array']}_0 cancelled"
    with pytest.raises(SubmissionError, match="after: no job or array '999'"):
        submit(s, after=["999"])


def test_a_job_whose_run_is_still_there_stays(tmp_path):
    s = Scheduler(tmp_path, ended_jobs_kept_s=KEPT_S)
    job = submit(s, steps=5).job_id
    s.at(LEAD_FREE)
    s.init(job)
    s.x.processes.durable_steps(job, 5, s.gen(job))     # done; its process has not exited
    later(s, KEPT_S + SWEEP_EVERY_S)
    assert s.x.jobs[job].state == "done" and job in s.x.runs
    s.exited(job, 5)
    later(s, SWEEP_EVERY_S)
    assert job not in s.x.runs and job not in s.x.jobs
    s.close()


def test_a_restart_reads_only_the_jobs_in_memory(ended, tmp_path):
    s, ids = ended
    later(s, KEPT_S + SWEEP_EVERY_S)
    t = s.t
    s.close()
    again = Scheduler(tmp_path, gpus=0, t=t, ended_jobs_kept_s=KEPT_S)
    assert set(again.x.jobs) == {ids["live"]}
    assert ids["done"] not in again.x.hosts.by_job
    assert [e.action for e in again.x.calls.history(ALICE, ids["done"]).events][-1] == "done"
    again.close()
    every = Scheduler(tmp_path, gpus=0, t=t, ended_jobs_kept_s=0)     # 0: every job
    assert len(every.x.jobs) == 6 and every.x.hosts.by_job[ids["done"]] == (0,)
    every.close()


def test_checkpoints_of_a_job_that_left_go_at_their_retention_across_a_restart(ended,
                                                                               tmp_path):
    s, ids = ended
    folder = s.x.config.checkpoints / ids["done"]
    folder.mkdir(parents=True)
    later(s, KEPT_S + SWEEP_EVERY_S)
    assert ids["done"] not in s.x.jobs and folder.exists()
    t = s.t
    s.close()
    again = Scheduler(tmp_path, gpus=0, t=t, ended_jobs_kept_s=KEPT_S,
                      checkpoint_retention_s=3 * KEPT_S)
    later(again, KEPT_S)
    again.x.retention.join()
    assert folder.exists()                       # 2,060 s after it ended, of 3,000
    later(again, KEPT_S)
    again.x.retention.join()
    assert not folder.exists()
    again.close()


def test_the_store_reads_live_jobs_and_every_row_it_cannot_judge(tmp_path):
    store = Store(tmp_path)
    rows = {"0": ("done", 10.0), "1": ("done", 500.0), "2": ("failed", None),
            "3": ("queued", None), "4": ("cancelled", 100.0)}
    for job_id, (state, ended_s) in rows.items():
        store.add_job(JobRow(JobSpec(job_id, "A3C", 1, 10)))
        store.update_jobs([JobRow(JobSpec(job_id, "A3C", 1, 10), state=state, ended_s=ended_s)])
    with sqlite3.connect(store.path) as db:      # a row whose state is not UTF-8
        db.execute("UPDATE jobs SET state=? WHERE id='4'", (b"\xff",))
    assert [r.id for r in store.jobs(where=live(600.0, 200.0))] == ["1", "2", "3", "4"]
    assert [r.id for r in store.jobs(where=live(600.0, 0.0))] == ["0", "1", "2", "3", "4"]
    store.close()


def test_jobs_retire_only_ended_rows_and_time_an_untimed_one(tmp_path):
    store = Store(tmp_path)
    told = []
    jobs = Jobs(store, retired=told.append)
    spec = [JobSpec(str(i), "A3C", 1, 10) for i in range(3)]
    for one in spec:
        store.add_job(JobRow(one))
    jobs.restore([JobRow(spec[0], state="failed"), JobRow(spec[1], state="done", ended_s=5.0),
                  JobRow(spec[2])])
    assert jobs.retire(["0", "1", "2", "9"], now=70.0) == ["0", "1"]
    assert list(jobs) == ["2"] and told == [["0", "1"]]
    assert {r.id: r.ended_s for r in store.jobs()}["0"] == 70.0
    store.close()


def test_a_real_scheduler_restarted_past_the_age_lists_what_is_in_memory(tmp_path, capsys):
    """A real scheduler (a subprocess, real gRPC) that keeps ended jobs 0.5 s: started again
    after that, ``status --all`` lists only the job not ended, while ``history JOB`` and
    ``cancel`` of the cancelled one answer from the store (the CLI, as a user runs it)."""
    cluster = Cluster(tmp_path, token="a-token-for-this-test", extra={"ended_jobs_kept_s": 0.5})
    flags = ["--scheduler", cluster.address, "--token-file", str(cluster.token_file)]
    with running(cluster):
        gone, waiting = cluster.submit(100), cluster.submit(100)
        assert main(["cancel", gone, *flags]) == 0
        cluster.stop()
        time.sleep(0.6)
        cluster.start_scheduler()
        assert set(cluster.jobs()) == {waiting}
        capsys.readouterr()
        assert main(["status", "--all", "--json", *flags]) == 0
        assert [j["id"] for j in json.loads(capsys.readouterr().out)["jobs"]] == [waiting]
        assert main(["history", gone, *flags]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert "submit" in lines[1] and "cancelled" in lines[-1]
        assert main(["cancel", gone, *flags]) == 2
        assert capsys.readouterr().err.strip().endswith(f"job {gone} is already cancelled")


# ---- out of the store (``purge.py``) ---------------------------------------------------------
def _counts(store: Store) -> dict[str, int]:
    with sqlite3.connect(store.path) as db:
        return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in JOB_COLUMN}


def test_a_purge_deletes_every_row_of_the_oldest_ended_jobs_and_nothing_else(tmp_path):
    store = Store(tmp_path)
    ends = {"0": 10.0, "1": 20.0, "2": 30.0, "3": 500.0, "4": None}   # 4: not ended
    for job_id, ended_s in ends.items():
        spec = JobSpec(job_id, "A3C", 1, 10)
        store.add_job(JobRow(spec))
        store.update_jobs([JobRow(spec, state="done" if ended_s else "queued", ended_s=ended_s)])
        store.add_events([(job_id, 1.0, "ann", "submit", "")])
        store.add_hosts(job_id, [0])
        store.add_usage((job_id, 1, "ann", "", "v100", 1, 1e9, 1e9 + 60, 0.0))
        store.put_throughput_later(job_id, "v100", 2.0)
    store.flush_later()
    assert purge(store, before=100.0, at_once=2) == 2           # the oldest first
    assert [r.id for r in store.jobs()] == ["2", "3", "4"]
    assert purge(store, before=100.0) == 1 and purge(store, before=100.0) == 0
    assert _counts(store) == {t: 2 for t in JOB_COLUMN} | {"pair_throughputs": 0}
    assert store.events("0") == [] and store.events("3") and store.usage(where=("job_id = '3'", ()))
    store.close()


def test_a_job_leaves_the_store_only_after_memory_and_its_checkpoints():
    base = {"listen": "127.0.0.1:0", "policy": "fifo", "round_seconds": 60, "state_dir": "s"}
    assert parse_config({**base, "ended_jobs_stored_s": 86400 * 90}).ended_jobs_stored_s > 0
    for key, value in (("ended_jobs_kept_s", 0), ("checkpoint_retention_s", 200000)):
        with pytest.raises(ConfigError, match=f"ended_jobs_stored_s 172800 must be at least "
                                              f"{key} "):
            parse_config({**base, "ended_jobs_stored_s": 172800, key: value})


def test_a_scheduler_deletes_jobs_stored_past_their_age(ended):
    s, ids = ended
    s.x.retention = type(s.x.retention)(s.x.config.checkpoints, 0.0, s.store, kept_s=KEPT_S,
                                        stored_s=3 * KEPT_S)
    later(s, KEPT_S + SWEEP_EVERY_S)
    assert {r.id for r in s.store.jobs()} >= {ids["done"], ids["gone"]}    # left memory only
    later(s, PURGE_EVERY_S)          # (a purge that found nothing waits this long)
    assert [r.id for r in s.store.jobs()] == [ids["live"]]
    with pytest.raises(LookupError, match=f"unknown job '{ids['done']}'"):
        s.x.calls.history(ALICE, ids["done"])
