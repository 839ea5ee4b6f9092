"""The worker daemon's side of fencing (docs/runtime.md, "Fencing"; issue #17): run
generations on RunJob, KillJob, heartbeats and reports; a worker cut off from its scheduler
stops its jobs; a restarted worker daemon keeps its identity and kills what its killed
predecessor left running. Real worker daemons, a fake scheduler over real gRPC."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gavelsched.daemon.local import subprocess_env
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeScheduler
from workers.daemon.worker import Worker, WorkerConfig

from .test_worker import report_of, run_job


@pytest.fixture
def sched():
    fake = FakeScheduler(round_seconds=1.0, heartbeat_seconds=0.2)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def worker(sched, tmp_path):
    w = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=2,
                            work_dir=tmp_path / "work", grace_s=0.5))
    w.start()
    yield w
    w.stop()


def generation(request: pb.RunJobRequest, gen: int) -> pb.RunJobRequest:
    request.generation = gen
    return request


def reports(sched: FakeScheduler, job_id: str) -> list[pb.RoundReportRequest]:
    return [r for r in sched.log.rounds if r.job_id == job_id]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_newer_generation_replaces_the_older_run_and_an_older_one_is_refused(
        sched, worker, tmp_path):
    stub = sched.worker_stub(worker.address)
    assert stub.RunJob(generation(run_job("j", command="sleep 600"), 1)).ok
    sched.wait_for(lambda: worker.launcher.runs() == [("j", 1, 0)])
    marker = tmp_path / "new"
    ack = stub.RunJob(generation(run_job("j", command=f"touch {marker}", gpus=(1,)), 2))
    assert ack.ok
    old = sched.wait_for(lambda: next((r for r in reports(sched, "j") if r.generation == 1),
                                      None))
    assert "superseded by run generation 2" in old.reason and not old.failed
    new = sched.wait_for(lambda: next((r for r in reports(sched, "j") if r.generation == 2),
                                      None))
    assert new.exit_code == 0 and marker.exists()
    # a RunJob of an older generation than the one here is refused, and nothing starts
    assert stub.RunJob(generation(run_job("k", command="sleep 600"), 5)).ok
    sched.wait_for(lambda: ("k", 5, 0) in worker.launcher.runs())
    late = stub.RunJob(generation(run_job("k", command=f"touch {tmp_path / 'late'}"), 4))
    assert not late.ok and "stale RunJob" in late.message
    time.sleep(0.3)
    assert worker.launcher.runs() == [("k", 5, 0)] and not (tmp_path / "late").exists()


def test_kill_job_names_the_run_it_kills(sched, worker):
    stub = sched.worker_stub(worker.address)
    stub.RunJob(generation(run_job("j", command="sleep 600"), 6))
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["j"])
    assert not stub.KillJob(pb.KillJobRequest(job_id="j", reason="stale", generation=5)).ok
    time.sleep(0.3)
    assert worker.launcher.runs() == [("j", 6, 0)]
    assert stub.KillJob(pb.KillJobRequest(job_id="j", reason="round over", generation=6)).ok
    report = report_of(sched, "j")
    assert report.generation == 6 and report.reason == "round over"


def test_heartbeats_list_each_run_with_its_generation(sched, worker):
    sched.worker_stub(worker.address).RunJob(generation(run_job("j", command="sleep 600"), 3))
    beat = sched.wait_for(lambda: next((h for h in reversed(sched.log.heartbeats)
                                        if h.running), None))
    assert [(r.job_id, r.generation, r.round) for r in beat.running] == [("j", 3, 0)]


def test_a_worker_cut_off_from_its_scheduler_longer_than_a_lease_stops_its_jobs(
        sched, worker):
    stub = sched.worker_stub(worker.address)
    stub.RunJob(generation(run_job("j", command="sleep 600", max_seconds=600.0), 1))
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["j"])
    (pid,) = [p.pid for p in worker.launcher._running["j"].procs]  # noqa: SLF001 - the test's view
    sched.stop()                         # the scheduler is gone; the lease had 600 s left
    sched.wait_for(lambda: worker.launcher.running_jobs() == [], timeout=30)
    assert not alive(pid)


def test_a_restarted_worker_daemon_keeps_its_id_and_kills_its_predecessors_jobs(
        sched, tmp_path):
    work = tmp_path / "work"
    argv = [sys.executable, "-m", "gavelsched", "worker", "--scheduler", sched.address,
            "--type", "k80", "--gpus", "1", "--listen", "127.0.0.1:0", "--work-dir", str(work)]
    first = subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    second, pid = None, None
    try:
        reg = sched.wait_for(lambda: sched.log.registrations and sched.log.registrations[0])
        assert reg.previous_server_id == -1
        stub = sched.worker_stub(reg.address)
        assert stub.RunJob(generation(run_job("j", command="sleep 600", max_seconds=600.0),
                                      1)).ok
        (pids,) = sched.wait_for(lambda: list((work / "pids").glob("*.json")))
        (pid,) = [e["pid"] for e in json.loads(pids.read_text())["procs"]]
        first.send_signal(signal.SIGKILL)     # the daemon dies; its job process does not
        first.wait(10)
        assert alive(pid)
        second = subprocess.Popen(argv, env=subprocess_env(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        again = sched.wait_for(lambda: len(sched.log.registrations) >= 2
                               and sched.log.registrations[1])
        assert again.previous_server_id == 0      # the id the first daemon was given
        assert not alive(pid)                     # killed before it registered
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if pid is not None and alive(pid):
            os.killpg(pid, signal.SIGKILL)
