"""Room on the state_dir's disk (``gavelsched/daemon/room.py``): below its reserve a
submission is refused whole and running jobs go on; a write that finds the disk full is
refused in one line, loses nothing the store was asked to keep, and a core stopped by it
says what to free. The end-to-end test fills a real, small tmpfs; it skips where this
machine may not mount one."""

from __future__ import annotations

import errno
import logging
import sqlite3
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from gavelsched.cli import main
from gavelsched.client import connect
from gavelsched.client.request import JobRequest
from gavelsched.daemon import doors
from gavelsched.daemon import room as room_module
from gavelsched.daemon.config import load_config
from gavelsched.daemon.meta import ROUND
from gavelsched.daemon.room import MIB, NoRoom, Room, disk_full, says_disk_full
from gavelsched.daemon.server import SchedulerDaemon
from gavelsched.daemon.servers import BY_OPERATOR, BY_ROOM
from gavelsched.daemon.statusjson import cluster_dict
from gavelsched.daemon.store import Store
from gavelsched.rpc import pb
from workers.daemon.room import short_of_room

from .cluster import JOB_TYPE, Cluster, running, wait_until
from .fake_worker import FakeWorker
from .test_budgets import Clock
from .test_round_aligned import Scheduler
from .test_users_cluster import refused

TIB = 1 << 40


def _full_sqlite_error(tmp_path: Path) -> sqlite3.Error:
    """SQLite's own SQLITE_FULL, from a database capped at a few pages."""
    db = sqlite3.connect(tmp_path / "capped.db")
    db.execute("CREATE TABLE t (x BLOB)")
    db.execute("PRAGMA max_page_count = 3")
    try:
        db.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.Error as err:
        return err
    finally:
        db.close()
    raise AssertionError("a capped database took 100 kB")


def test_disk_full_tells_a_full_disk_from_other_errors(tmp_path):
    assert disk_full(_full_sqlite_error(tmp_path))
    with pytest.raises(OSError) as full, open("/dev/full", "wb") as dev:
        dev.write(b"x")
        dev.flush()
    assert full.value.errno == errno.ENOSPC and disk_full(full.value)
    other = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError) as missing:
        other.execute("SELECT * FROM nowhere")
    assert not disk_full(missing.value)
    assert not disk_full(FileNotFoundError(errno.ENOENT, "gone"))
    assert not disk_full(ValueError("database or disk is full"))
    assert says_disk_full(f"{type(full.value).__name__}: {full.value}")   # as Python prints it
    assert says_disk_full("tar: model.pt: Cannot write: Disk quota exceeded")
    assert not says_disk_full("ValueError: the loss is NaN")


def test_below_the_reserve_a_submission_is_refused_and_the_log_says_so(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="gavelsched.daemon.room")
    clock = Clock()
    clock.now = 1000.0
    room = Room(tmp_path, 0, clock=clock)
    room.check()                                  # no reserve: never refused
    room.tick()
    assert not caplog.records
    room.min_free_bytes = room._free() + TIB      # more than this disk has free
    with pytest.raises(NoRoom, match=r"^the scheduler's state_dir has \d+ MiB free, under "
                       r"its reserve of \d+ MiB \(state_dir_min_free_mb\): no job is taken "
                       r"until space is freed on the disk of .*; running jobs go on$"):
        room.check()
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "under its reserve" in caplog.records[0].getMessage()
    clock.now += room_module.CHECK_EVERY_S
    room.tick()                                   # still low: said once ...
    assert len(caplog.records) == 1
    clock.now += room_module.REMIND_EVERY_S
    room.tick()                                   # ... and again after a while
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    room.min_free_bytes = MIB
    room.tick()                                   # (not due yet: read at most every 10 s)
    assert room.low and len(caplog.records) == 2
    clock.now += room_module.CHECK_EVERY_S
    room.tick()
    assert not room.low and caplog.records[-1].levelname == "INFO"
    assert "free again: submissions are taken" in caplog.records[-1].getMessage()
    room.check()
    assert room.free_bytes() > 0


def test_a_write_that_finds_the_disk_full_keeps_what_was_kept_for_later(tmp_path):
    """The store's writes kept for later (``flush_later``) that fail on a full disk are
    kept for the next write, and the connection is left usable (no transaction open)."""
    store = Store(tmp_path / "state")
    store.set_meta({ROUND.key(): 1})
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")      # the "disk" is full
    store.set_meta_later({ROUND.key(): 9})
    for n in range(2000):
        store.put_throughput_later(f"job{n}", "k80", 1.0 + n)
    with pytest.raises(sqlite3.Error) as err:
        store.flush_later()
    assert disk_full(err.value) and not store._db.in_transaction
    store._db.execute("PRAGMA max_page_count = 1000000")       # space freed
    rates = store.throughputs()                                # (flushes first)
    assert len(rates) == 2000 and rates["job1999"] == {"k80": 2000.0}
    assert store.get_meta(ROUND.key()) == "9"
    store.close()


def _config(tmp_path: Path, **extra) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf",
                                    "round_seconds": 2, "state_dir": str(tmp_path / "state"),
                                    "eta": False, **extra}))
    return path


def _job(total_steps: int = 100_000) -> JobRequest:
    return JobRequest(job_type=JOB_TYPE, total_steps=total_steps, workload="steps")


def test_a_scheduler_below_its_reserve_refuses_submissions_in_one_line(tmp_path, capsys):
    """``state_dir_min_free_mb`` above what the disk has free: Submit (one job or an
    array) is refused, RESOURCE_EXHAUSTED, and nothing of it is submitted; ``status``
    (the Python API, the CLI's table, the dashboard's JSON) says so in its notices, and
    the metric shows the free bytes."""
    daemon = SchedulerDaemon(load_config(_config(
        tmp_path, state_dir_min_free_mb=TIB // MIB))).start()
    try:
        with connect(f"127.0.0.1:{daemon.port}") as client:
            refused("RESOURCE_EXHAUSTED", lambda: client.submit(_job()), "under its reserve")
            refused("RESOURCE_EXHAUSTED", lambda: client.submit_array(_job(), 3),
                    "(state_dir_min_free_mb)")
            status = client.status()
            assert list(status.jobs) == []
            (notice,) = status.notices
            assert notice.startswith("the scheduler's state_dir has ") and \
                "no job is taken until space is freed" in notice
            assert status.to_dict()["notices"] == [notice]
        reply = daemon.executor.snapshot.status(pb.StatusRequest(), "admin")
        assert cluster_dict(reply)["notices"] == [notice]       # (the dashboard's JSON)
        capsys.readouterr()
        assert main(["status", "--scheduler", f"127.0.0.1:{daemon.port}"]) == 0
        assert f"note: {notice}" in capsys.readouterr().out.splitlines()
        free = daemon.metrics.registry.get_sample_value("gavelsched_state_dir_free_bytes")
        assert free is not None and free > 0
    finally:
        daemon.stop()


def test_the_notice_goes_when_the_disk_has_room_again(tmp_path):
    changes = []
    room = Room(tmp_path, TIB // MIB, changed=lambda: changes.append(room.notice))
    with pytest.raises(NoRoom):
        room.check()
    room.min_free_bytes = 1                     # one byte: this disk has it
    room.check()
    assert room.notice is None and len(changes) == 2 and changes[-1] is None


# ---- a real disk that fills ----------------------------------------------------------------
@contextmanager
def small_disk(path: Path, mib: int):
    """A tmpfs of ``mib`` MiB mounted on ``path`` (skips where mounting is not allowed)."""
    path.mkdir(parents=True)
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(path)],
                         capture_output=True, text=True, check=False)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {got.stderr.strip() or got.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """A file that leaves about ``leave_bytes`` free on ``disk`` (0: none)."""
    filler = disk / "filler"
    free = room_module.shutil.disk_usage(disk).free
    try:
        with open(filler, "ab") as f:
            f.write(b"\0" * max(0, free - leave_bytes))
    except OSError as err:
        assert err.errno == errno.ENOSPC
    return filler


def test_a_disk_that_fills_refuses_work_keeps_every_job_and_says_what_to_free(tmp_path):
    """The scheduler's state_dir on a 16 MiB disk with a reserve of 4 MiB, a job running
    on an in-test worker (its checkpoints on another disk: the worker's own writes are not
    what is tested). Below the reserve a submission is refused and the job runs on;
    space freed, submissions are taken; the disk full, the scheduler stops in one line
    that says to free space; started again with space, it has every job it took."""
    with small_disk(tmp_path / "disk", 16) as disk, running(Cluster(
            tmp_path / "c", extra={"state_dir": str(disk / "state"),
                                   "checkpoint_dir": str(tmp_path / "checkpoints"),
                                   "state_dir_min_free_mb": 4})) as c:
        c.fakes.append(FakeWorker(c.address, "k80"))
        first = c.submit(100_000)
        wait_until(lambda: c.jobs()[first].state == "running", 30, "the first job to run")
        filler = _fill(disk, 2 * MIB)
        with connect(c.address) as client:
            refused("RESOURCE_EXHAUSTED", lambda: client.submit(_job(10)),
                    "under its reserve of 4 MiB")
        assert set(c.jobs()) == {first} and c.jobs()[first].state == "running"
        filler.unlink()
        second = c.submit(100_000)
        c.fakes[0].silence()       # (its job makes no call to the scheduler that stops)
        _fill(disk, 0)
        wait_until(lambda: c.scheduler.poll() is not None, 60, "the scheduler to stop")
        assert c.scheduler.returncode == 1
        last = (c.root / "scheduler.log").read_text().strip().splitlines()[-1]
        assert last.startswith("gavelsched scheduler: its core stopped (") and (
            f"free space on the disk of the state_dir {disk / 'state'}, which is full"
            in last), last
        filler.unlink()
        c.start_scheduler()
        jobs = c.jobs()
        assert set(jobs) == {first, second}
        assert all(j.state in ("queued", "running", "preempted") for j in jobs.values())


def test_a_checkpoint_disk_that_fills_loses_runs_not_jobs(tmp_path):
    """A real worker runs a job whose checkpoint_dir is on a disk that is full: its process
    fails saving (``OSError: [Errno 28] No space left on device``), and the run is lost, not
    the job (before, the job failed for good at its first save). Space freed, it finishes."""
    with small_disk(tmp_path / "disk", 4) as disk, running(Cluster(
            tmp_path / "c", extra={"checkpoint_dir": str(disk / "checkpoints")})) as c:
        c.start_worker("k80")
        wait_until(lambda: c.alive_workers() >= 1, 60, "the worker to register")
        filler = _fill(disk, 0)
        job = c.submit(300)
        wait_until(lambda: "No space left on device" in (c.jobs()[job].reason or ""), 60,
                   "a run to fail on the full disk")
        assert c.jobs()[job].state in ("queued", "preempted", "running"), c.jobs()[job]
        filler.unlink()
        assert c.wait_done([job], timeout=120)[job].state == "done"


# ---- a worker's own disk -------------------------------------------------------------------
def test_a_worker_short_of_room_says_why_in_one_line(tmp_path):
    assert short_of_room(tmp_path, 0) == ""                  # no reserve
    assert short_of_room(tmp_path, 1) == ""                  # (this disk has a MiB free)
    assert short_of_room(tmp_path / "gone", 1) == ""         # a disk that cannot be read
    why = short_of_room(tmp_path, 1 << 30)
    assert why.startswith(f"its work_dir {tmp_path} has ") and why.endswith(
        "under its reserve of 1073741824 MiB (--min-free-mb)")


def test_a_server_whose_worker_is_short_of_room_is_drained_while_it_says_so(tmp_path):
    """Heartbeats that say the worker is short of room drain its server (nothing new is
    planned there, status says why); one that no longer says so puts it back, after a
    scheduler restart too; an operator's drain is never undone by it."""
    s = Scheduler(tmp_path)
    server, why = s.server, "its work_dir /w has 1 MiB free, under its reserve of 256 MiB"
    s.x.roster.heartbeat(server, s.t, {}, short_of_room=why)
    assert s.x.roster.drained == {server: BY_ROOM}
    s.x.publish()
    (notice,) = s.x.snapshot.status().notices
    assert notice.startswith(f"worker {server} (v100 x1) takes no new run: {why}; ")
    job = s.submit()
    s.at(1.0)
    assert not s.sent.runs and s.x.jobs[job].state == "queued"
    s.close()
    s = Scheduler(tmp_path, gpus=0)                            # restarted: still drained
    assert s.x.roster.drained == {server: BY_ROOM}
    s.x.roster.register(pb.RegisterWorkerRequest(worker_type="v100", gpus=1,
                                                 address="127.0.0.1:1", hostname="h",
                                                 previous_server_id=server), s.t)
    s.x.roster.heartbeat(server, s.t, {})                      # room again
    assert s.x.roster.drained == {} and not s.x.roster.notices()
    s.x.roster.drain(server)                                   # the operator's
    s.x.roster.heartbeat(server, s.t, {}, short_of_room=why)
    s.x.roster.heartbeat(server, s.t, {})
    assert s.x.roster.drained == {server: BY_OPERATOR}
    s.close()


def test_a_heartbeats_reason_is_checked_at_the_door():
    long = pb.HeartbeatRequest(short_of_room="x" * 2000)
    assert len(doors.short_of_room(long)) == doors.MAX_SHORT_OF_ROOM
    assert doors.short_of_room(pb.HeartbeatRequest(short_of_room="a\nb")) == "'a\\nb'"
    assert doors.short_of_room(pb.HeartbeatRequest()) == ""


def test_a_real_worker_whose_disk_fills_takes_no_new_run_until_it_has_room(tmp_path):
    """A real worker daemon whose work_dir is a 16 MiB tmpfs with a reserve of 4 MiB: filled
    to 2 MiB free, the scheduler drains it within heartbeats and says why (status's note),
    and a job submitted waits; space freed, the worker is back and the job runs."""
    with small_disk(tmp_path / "disk", 16) as disk, running(Cluster(tmp_path / "c")) as c:
        c.start_worker("k80", work_dir=str(disk / "worker"), extra_args=["--min-free-mb", "4"])
        wait_until(lambda: c.alive_workers() >= 1, 60, "the worker to register")
        filler = _fill(disk, 2 * MIB)
        wait_until(lambda: c.status().workers[0].drained, 30, "the worker to be drained")
        (notice,) = c.status().notices
        assert f"takes no new run: its work_dir {disk / 'worker'} has " in notice
        job = c.submit(100_000)
        wait_until(lambda: c.jobs()[job].reason, 30, "the job's reason to wait")
        assert c.jobs()[job].state == "queued"
        filler.unlink()
        wait_until(lambda: not c.status().workers[0].drained, 30, "the worker to be back")
        assert not c.status().notices
        wait_until(lambda: c.jobs()[job].state == "running", 60, "the job to run")
