"""A bug in one of the worker's threads, or in one launch, must not wedge the worker: a
monitor thread that died silently left it reporting no exits and starting nothing, while
the scheduler went on extending runs that had ended. A real worker daemon against a fake
scheduler over real gRPC; real processes."""

from __future__ import annotations

import logging

from .test_worker import cluster, report_of, run_job  # noqa: F401, F811 - cluster: the fixture


def test_a_failing_monitor_loop_is_logged_and_started_again(cluster, monkeypatch,  # noqa: F811
                                                             caplog):
    sched, worker = cluster
    poll, failures = worker.launcher.poll, []

    def poll_failing_once():
        if not failures:
            failures.append("a bug")
            raise RuntimeError("a bug in the monitor's loop")
        return poll()

    caplog.set_level(logging.ERROR, logger="workers.daemon.worker")
    monkeypatch.setattr(worker.launcher, "poll", poll_failing_once)
    sched.wait_for(lambda: failures)
    assert sched.worker_stub(worker.address).RunJob(run_job("a", command="true")).ok
    report = report_of(sched, "a")              # the monitor saw its exit and reported it
    assert (report.exit_code, report.failed) == (0, False)
    assert "worker monitor thread failed; starting it again" in caplog.text
    assert "a bug in the monitor's loop" in caplog.text   # with its traceback


def test_a_launch_that_raises_fails_alone(cluster, monkeypatch, caplog):  # noqa: F811
    sched, worker = cluster
    launch = worker.launcher.launch

    def launch_or_fail(spec):
        if spec.job_id == "bad":
            raise ValueError("a bug in this launch")
        return launch(spec)

    monkeypatch.setattr(worker.launcher, "launch", launch_or_fail)
    stub = sched.worker_stub(worker.address)
    ack = stub.RunJob(run_job("bad", command="sleep 600", gpus=(0,)))
    # the answer says the launch failed (it said "queued until its GPUs are free"); ok, as
    # the failure reaches the scheduler once, as the run's exit below
    assert ack.ok and ack.message.startswith("launch failed, reported as its exit: cannot "
                                             "start /bin/sh: ValueError"), ack.message
    bad = report_of(sched, "bad")
    assert bad.failed and bad.exit_code == 127
    assert "cannot start /bin/sh: ValueError: a bug in this launch" in bad.reason, bad.reason
    assert stub.RunJob(run_job("good", command="sleep 600", gpus=(0,))).ok   # its GPU is free
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["good"])
    assert all(t.is_alive() for t in worker._threads)


def test_a_stopping_worker_starts_none_of_its_queued_launches(cluster, monkeypatch):  # noqa: F811
    """A run waiting for a GPU when the worker stops is reported as never started. It used
    to start as soon as the run before it had been killed, and to go on running (on a GPU)
    after the worker had stopped."""
    sched, worker = cluster
    launch, launched = worker.launcher.launch, []

    def recorded(spec):
        launched.append(spec.job_id)
        return launch(spec)

    monkeypatch.setattr(worker.launcher, "launch", recorded)
    stub = sched.worker_stub(worker.address)
    assert stub.RunJob(run_job("a", command="sleep 600", gpus=(0,))).ok
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["a"])
    waiting = stub.RunJob(run_job("b", command="sleep 600", gpus=(0,)))
    assert waiting.ok and "queued" in waiting.message, waiting.message   # a holds GPU 0
    worker.stop("worker stopping")
    try:
        assert launched == ["a"], launched
        assert worker.launcher.running_jobs() == []
        b = report_of(sched, "b")
        assert not b.failed and "worker stopping (before it started)" in b.reason, b.reason
        late = worker.run_job(run_job("c", command="sleep 600", gpus=(1,)))   # (queue closed)
        assert not late.ok and "this worker is stopping" in late.message, late.message
        assert launched == ["a"], launched
    finally:
        worker.launcher.kill_all("test over")


def test_a_report_whose_sending_fails_is_kept_and_sent_again(cluster, monkeypatch):  # noqa: F811
    """Round reports are the scheduler's record of what ran: one the reporter thread failed
    to send, by a failed call or by a bug, is sent again, never dropped."""
    sched, worker = cluster
    send, failures = worker._stub.ReportRound, []

    def failing_once(request, timeout=None):
        if not failures:
            failures.append(request.job_id)
            raise RuntimeError("a bug in sending a report")
        return send(request, timeout=timeout)

    monkeypatch.setattr(worker._stub, "ReportRound", failing_once)
    assert sched.worker_stub(worker.address).RunJob(run_job("a", command="true")).ok
    report = report_of(sched, "a")          # sent again, once the thread had started again
    assert failures == ["a"] and (report.exit_code, report.failed) == (0, False)
    assert [r.job_id for r in sched.log.rounds] == ["a"]      # sent once, not twice
