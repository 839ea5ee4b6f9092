"""``daemon/exits.py``: what a server's report that its processes of a job exited says of
the run (pure)."""

from __future__ import annotations

from gavelsched.core import JobSpec
from gavelsched.daemon.exits import Died, Ended, RankFailed, exit_verdict
from gavelsched.daemon.jobs import JobRow
from gavelsched.daemon.run import Run
from gavelsched.jobenv import EXIT_JOB_FAILED, EXIT_RUN_LOST
from gavelsched.rpc import pb

JOB = JobRow(JobSpec(id="0", job_type="A3C", scale_factor=2, total_steps=100),
             state="running", steps_done=40)


def _run(servers, *, base=40, started_up=True, orphan=False) -> Run:
    return Run("0", "v100", {s: pb.RunJobRequest() for s in servers}, set(servers),
               pb.Lease(), 3, 0.0, 30.0, 1.0, base, started_up=started_up, orphan=orphan)


def test_a_failed_process_on_one_server_died_and_a_rank_of_several_failed():
    assert exit_verdict(_run([1]), JOB, 1, True, EXIT_JOB_FAILED, "boom") == \
        Died(EXIT_JOB_FAILED, "boom")
    assert exit_verdict(_run([1, 2]), JOB, 1, True, -9, "") == RankFailed(-9, "exit code -9")


def test_a_lost_run_ends_without_progress_once_its_last_server_reports():
    # a rendezvous port taken, or no scheduler: no fault of the job's, so no failure at all
    run = _run([1, 2])
    assert exit_verdict(run, JOB, 1, True, EXIT_RUN_LOST, "its rendezvous failed") is None
    run.left.discard(1)
    assert exit_verdict(run, JOB, 2, True, EXIT_RUN_LOST, "its rendezvous failed") == \
        Ended(False, why="its rendezvous failed")


def test_a_last_process_that_ended_on_its_own_says_whether_the_run_stepped():
    assert exit_verdict(_run([1], base=30), JOB, 1, False, 0, "") == Ended(True)
    assert exit_verdict(_run([1]), JOB, 1, False, 0, "") == Ended(False)
    assert exit_verdict(_run([1], started_up=False), JOB, 1, False, 0, "") == \
        Ended(False, reached=False)


def test_no_verdict_off_the_run_or_for_an_ended_job():
    assert exit_verdict(None, JOB, 1, True, 1, "x") is None
    assert exit_verdict(_run([1]), JOB, 2, True, 1, "x") is None          # not its server
    done = JobRow(JOB.spec, state="done", steps_done=100)
    assert exit_verdict(_run([1]), done, 1, True, 1, "x") is None
    assert exit_verdict(_run([1], orphan=True), JOB, 1, False, 0, "") is None
