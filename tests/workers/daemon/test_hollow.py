"""Hollow workers (issue #30, ``workers/hollow.py``) against a fake scheduler over
real gRPC: the real ``Worker`` whose job ranks are threads stepping the real GavelIterator.
Its jobs make the iterator's calls and commit checkpoints; a kill, an outlived lease and a
missing checkpoint end them as they end a job's process (exit code, reason, round report).
"""

from __future__ import annotations

import signal

import pytest

from gavelsched import checkpoints
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import LEASE_S, FakeJob, FakeScheduler
from traces.catalog import default_table
from workers.daemon.emulation import Emulation
from workers.hollow import hollow_worker
from workers.daemon.worker import WorkerConfig

JOB_TYPE = "A3C"          # 11 steps/s on a k80 (the catalog's table)


@pytest.fixture
def hollow(tmp_path):
    """A fake scheduler and one hollow 2-GPU k80 worker, its jobs paced at 4x the table."""
    sched = FakeScheduler()
    sched.start()
    worker = hollow_worker(WorkerConfig(
        scheduler=sched.address, worker_type="k80", gpus=2, work_dir=tmp_path / "work",
        emulation=Emulation("k80", default_table(), speed=4.0), grace_s=0.5))
    worker.start()
    yield sched, worker
    worker.stop()
    sched.stop()


def run_job(sched: FakeScheduler, job_id: str, tmp_path, *, total: int = 60,
            max_seconds: float = 30.0, gpus=(0,), generation: int = 1) -> pb.RunJobRequest:
    return pb.RunJobRequest(
        job_id=job_id, round=0, job_type=JOB_TYPE, workload="steps", total_steps=total,
        gpus=list(gpus), rank=0, world_size=len(gpus), checkpoint_dir=str(tmp_path / job_id),
        scheduler_address=sched.address, generation=generation,
        lease=pb.Lease(max_steps=total, max_seconds=max_seconds, round=0))


def report_of(sched: FakeScheduler, job_id: str) -> pb.RoundReportRequest:
    return sched.wait_for(lambda: next((r for r in sched.log.rounds if r.job_id == job_id),
                                       None))


def test_a_hollow_job_makes_the_iterators_calls_and_commits_its_steps(hollow, tmp_path):
    sched, worker = hollow
    sched.jobs["a"] = FakeJob(total_steps=60)
    ack = sched.worker_stub(worker.address).RunJob(run_job(sched, "a", tmp_path, gpus=(0, 1)))
    assert ack.ok, ack.message
    report = report_of(sched, "a")
    assert (report.exit_code, report.failed, report.steps, report.generation) == (0, False,
                                                                                60, 1)
    inits = sorted((i.job_id, i.rank, i.generation) for i in sched.log.inits)
    assert inits == [("a", 0, 1), ("a", 1, 1)]
    assert [(s.steps, s.checkpointed, s.rank) for s in sched.log.steps] == [(60, True, 0)]
    assert checkpoints.latest(tmp_path / "a", 1).steps == 60
    assert sched.jobs["a"].steps_done == 60 and not worker.launcher.running_jobs()


def test_a_kill_stops_a_hollow_job_as_sigterm_stops_its_process(hollow, tmp_path):
    sched, worker = hollow
    sched.jobs["k"] = FakeJob(total_steps=10**6)
    stub = sched.worker_stub(worker.address)
    assert stub.RunJob(run_job(sched, "k", tmp_path, total=10**6)).ok
    sched.wait_for(lambda: sched.log.inits)
    ack = stub.KillJob(pb.KillJobRequest(job_id="k", reason="preempted", generation=1))
    assert ack.ok, ack.message
    report = report_of(sched, "k")
    assert (report.exit_code, report.failed, report.reason) == (-signal.SIGTERM, False,
                                                                "preempted")
    assert report.steps == -1 and not sched.log.steps      # no checkpoint: killed mid-lease


def test_a_hollow_job_that_outlives_its_lease_is_killed(hollow, tmp_path):
    sched, worker = hollow
    # The iterator's lease (InitJob) runs far past the worker's (RunJob): the worker kills it.
    sched.jobs["o"] = FakeJob(total_steps=10**6, lease=lambda job, rank: pb.Lease(
        max_steps=10**6, max_seconds=LEASE_S))
    assert sched.worker_stub(worker.address).RunJob(
        run_job(sched, "o", tmp_path, total=10**6, max_seconds=1.0)).ok
    report = report_of(sched, "o")
    assert report.exit_code == -signal.SIGTERM and not report.failed
    assert report.reason.startswith("killed: outlived its lease")


def test_a_missing_checkpoint_fails_a_hollow_job_with_its_reason(hollow, tmp_path):
    sched, worker = hollow
    sched.jobs["m"] = FakeJob(total_steps=100, steps_done=40, checkpoint_generation=1)
    assert sched.worker_stub(worker.address).RunJob(
        run_job(sched, "m", tmp_path, total=100, generation=2)).ok
    report = report_of(sched, "m")
    assert (report.exit_code, report.failed) == (3, True)
    assert report.reason.startswith("gavel: checkpoint missing:"), report.reason


def test_a_hollow_ranks_end_wakes_its_monitor_which_polls_only_for_deadlines(tmp_path):
    """The monitor does not poll hollow ranks ten times a second (``HollowRanks.poll_s``):
    with an hour between polls, a job's end is still reported, as the rank wakes it; and
    ``stop`` ends the monitor thread without waiting out its poll."""
    sched = FakeScheduler()
    sched.start()
    worker = hollow_worker(WorkerConfig(
        scheduler=sched.address, worker_type="k80", gpus=1, work_dir=tmp_path / "work",
        emulation=Emulation("k80", default_table(), speed=4.0), grace_s=0.5))
    assert worker.launcher.ranks.poll_s == 1.0
    worker.launcher.ranks.poll_s = 3600.0
    worker.start()
    try:
        sched.jobs["w"] = FakeJob(total_steps=20)
        assert sched.worker_stub(worker.address).RunJob(
            run_job(sched, "w", tmp_path, total=20)).ok
        report = report_of(sched, "w")
        assert (report.exit_code, report.steps) == (0, 20)
        assert not worker.launcher.running_jobs()
    finally:
        worker.stop()
        sched.stop()
    monitor = next(t for t in worker._threads if t.name == "worker-monitor")
    monitor.join(timeout=30)
    assert not monitor.is_alive()
