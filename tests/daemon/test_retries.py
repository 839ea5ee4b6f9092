"""Bounded retries (issue #17): a run killed by a signal (the OOM killer's ``kill -9``) is
tried again from its last checkpoint after a doubling backoff, up to a budget, then the job
fails with the history of its attempts; a process that fails on its own fails the job at
once; runs that never step fail their job instead of being relaunched for ever. The real
``DaemonExecutor`` on a hand-moved clock (``test_round_aligned.Scheduler``)."""

from __future__ import annotations

import logging

import pytest

from gavelsched.daemon.retries import Retries, signal_name, signal_of
from gavelsched.daemon.store import Store
from gavelsched.jobenv import EXIT_JOB_FAILED, EXIT_RUN_LOST
from gavelsched.rpc import pb

from .test_round_aligned import R, Scheduler


@pytest.fixture
def sched(tmp_path):
    s = Scheduler(tmp_path)
    yield s
    s.close()


def launches(s: Scheduler, job: str) -> int:
    return sum(r.job_id == job and not r.lease.extended for r in s.sent.runs)


def killed(s: Scheduler, job: str, code: int = -9, reason: str = "") -> None:
    s.x.processes.round_report(pb.RoundReportRequest(server_id=s.server, job_id=job, steps=-1,
                                                     exit_code=code, failed=True, reason=reason,
                                                     generation=s.gen(job)))


def run_rounds(s: Scheduler, start: float, rounds: int) -> float:
    """Move the clock through ``rounds`` rounds (plan, then start) from ``start``."""
    t = start
    for _ in range(rounds):
        s.at(t + R - s.x.config.plan_lead)
        s.at(t + R)
        t += R
    return t


@pytest.mark.parametrize("code, sig", [(-9, 9), (137, 9), (-15, 15), (143, 15), (0, None),
                                       (1, None), (EXIT_JOB_FAILED, None), (127, None)])
def test_a_signal_is_told_from_an_exit_code(code, sig):
    assert signal_of(code) == sig
    assert (signal_name(code) is None) == (sig is None)


def test_a_killed_run_is_retried_after_a_doubling_backoff_then_the_job_fails(sched):
    s, budget = sched, sched.x.retries.budget
    job = s.submit()
    s.at(1.0)
    assert launches(s, job) == 1
    t, waits = 1.0, []
    for attempt in range(1, budget + 1):
        s.init(job)
        s.t = t + 1.0
        killed(s, job)
        # it started, and waits for its next run: preempted, not queued (never started)
        assert s.x.jobs[job].state == "preempted", s.x.jobs[job].reason
        s.x.publish()      # status says why it waits: the kill and the attempt to come
        reason = next(j.reason for j in s.x.snapshot.status().jobs if j.id == job)
        assert reason.startswith(f"retrying after its run was killed by SIGKILL (attempt "
                                 f"{attempt + 1} of {budget + 1}, in "), reason
        before, rounds = launches(s, job), 0
        while launches(s, job) == before:             # waits out its backoff
            t = run_rounds(s, t, 1)
            rounds += 1
        waits.append(rounds)
    # backoffs of 1, 2, 4 rounds from a kill 1 s into a round: each ends 1 s past a boundary
    assert waits == [1 + 2 ** k for k in range(budget)]
    # each round of a backoff but its last placed the job and did not launch it
    assert s.x.runs.not_launched == {"servers_down": 0, "too_late": 0,
                                     "backing_off": sum(2 ** k for k in range(budget))}
    s.init(job)
    killed(s, job)
    row = s.x.jobs[job]
    assert row.state == "failed"
    assert row.reason.startswith(f"failed after {budget + 1} attempts: round ")
    assert row.reason.count("killed by SIGKILL") == budget + 1


def test_a_process_that_fails_on_its_own_fails_the_job_at_once(sched):
    s = sched
    job = s.submit()
    s.at(1.0)
    s.init(job)
    killed(s, job, EXIT_JOB_FAILED, "checkpoint corrupt: bad magic")
    assert s.x.jobs[job].state == "failed"
    assert s.x.jobs[job].reason == "checkpoint corrupt: bad magic"


@pytest.mark.parametrize("reaches, reason", [
    (True, " (its process steps nothing)"),
    # issue #29: a command that exits 0 without a GavelIterator (``command: true``) was
    # launched every round for 40 rounds, holding its GPU, "waiting its turn"
    (False, ": its process exited each time without reaching the scheduler (does it "
            "build a GavelIterator?)")])
def test_runs_that_never_step_fail_the_job(sched, reaches, reason):
    s, limit = sched, sched.x.retries.no_progress_runs
    job = s.submit()
    t = 1.0
    s.at(t)
    for run in range(limit):
        assert s.x.jobs[job].state != "failed", run
        before = launches(s, job)
        if reaches:
            s.init(job)
        s.exited(job, 0 if reaches else -1)          # exits 0 without a step
        t = run_rounds(s, t, 1)
        if run < limit - 1:
            assert launches(s, job) == before + 1    # launched again next round
    assert s.x.jobs[job].state == "failed"
    assert s.x.jobs[job].reason == f"no progress in {limit} runs in a row{reason}"


@pytest.mark.parametrize("code, reason", [
    (EXIT_RUN_LOST, "InitJob to scheduler 127.0.0.1:1 failed: DEADLINE_EXCEEDED: Deadline"),
    (1, "OSError: [Errno 28] No space left on device"),     # Python's, saving a checkpoint
    (1, "save: Disk quota exceeded"),                       # a C program's perror
    (EXIT_RUN_LOST, "gavel: its checkpoint: [Errno 28] No space left on device")])
def test_runs_lost_through_no_fault_of_their_job_fail_it_only_after_many_in_a_row(
        sched, code, reason):
    """Issue #30: at 2,048 GPUs InitJobs that waited past their timeout on an overloaded
    scheduler failed 640 jobs at once; such a run ends without failing its job, and counts
    apart from runs without progress (hundreds to thousands a round were lost on an
    overloaded VM: five in a row would fail jobs for the scheduler's own trouble). So does
    a run that failed on a full disk (a shared checkpoint disk that fills fails every run
    that saves; exit 1, it failed its job at once before). Status says why the job waits."""
    s, limit = sched, sched.x.retries.lost_runs
    assert limit > sched.x.retries.no_progress_runs
    job = s.submit()
    t = 1.0
    s.at(t)
    for run in range(limit):
        assert s.x.jobs[job].state != "failed", run
        before = launches(s, job)
        killed(s, job, code, reason)
        if run < limit - 1:
            assert s.x.jobs[job].state == "queued" and job not in s.x.runs
            s.x.publish()
            shown = next(j.reason for j in s.x.snapshot.status().jobs if j.id == job)
            assert shown == (f"launched again after its run was lost, {run + 1} in a row of "
                             f"the {limit} it may lose: {reason} (on server {s.server})"), shown
            t = run_rounds(s, t, 1)
            assert launches(s, job) == before + 1    # launched again next round
    assert s.x.jobs[job].state == "failed"
    assert s.x.jobs[job].reason == (f"no progress in {limit} runs in a row, each lost "
                                    f"through no fault of its own (the last: {reason} (on "
                                    f"server {s.server}))")


def test_a_job_that_ends_after_a_lost_run_shows_no_reason_to_wait(sched):
    s = sched
    job = s.submit(steps=10)
    t = 1.0
    s.at(t)
    killed(s, job, 1, "OSError: [Errno 28] No space left on device")
    t = run_rounds(s, t, 1)
    s.init(job)
    s.exited(job, 10)                                # its next run makes every step
    assert s.x.jobs[job].state == "done"
    assert job not in s.x.retries.waiting(0.0)      # nothing of it kept once it ended
    s.x.publish()
    assert next(j.reason for j in s.x.snapshot.status(pb.StatusRequest()).jobs
                if j.id == job) == ""


def test_a_process_that_fails_on_its_own_still_fails_its_job_at_once(sched):
    s = sched
    job = s.submit()
    s.at(1.0)
    killed(s, job, 1, "ValueError: the loss is NaN")
    assert s.x.jobs[job].state == "failed" and "the loss is NaN" in s.x.jobs[job].reason


def test_lost_runs_are_logged_a_line_a_while_however_many(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="gavelsched.daemon.retries")
    store = Store(tmp_path / "state")
    try:
        retries = Retries(store, 1.0)
        full = "OSError: [Errno 28] No space left on device"
        for job in ("a", "b", "c"):
            assert retries.ran(job, False, why=full) is None
        first = (f"1 run of 1 job lost through no fault of their own, launched again (the "
                 f"last: job a, {full})")
        assert [r.getMessage() for r in caplog.records] == [first]   # the rest: the next line
    finally:
        store.close()


def test_a_run_that_reaches_the_scheduler_starts_the_lost_count_again(tmp_path):
    store = Store(tmp_path / "state")
    retries = Retries(store, 1.0, no_progress_runs=5, lost_runs=3)
    try:
        assert retries.ran("j", False, why="lost") is None
        assert retries.ran("j", False, why="lost") is None
        assert retries.ran("j", False) is None       # it reached the scheduler: no step
        assert retries.ran("j", False, why="lost") is None
        assert retries.ran("j", False, why="lost") is None
        assert retries.ran("j", False, why="lost").startswith("no progress in 3 runs")
        assert retries.ran("k", False, why="lost") is None      # (per job)
    finally:
        store.close()


def test_a_run_that_steps_resets_the_count(sched):
    s, limit = sched, sched.x.retries.no_progress_runs
    job = s.submit()
    t, steps = 1.0, 0
    s.at(t)
    for run in range(2 * limit):
        s.init(job)
        steps += run % 2                             # every other run makes a step
        s.exited(job, steps)
        t = run_rounds(s, t, 1)
    assert s.x.jobs[job].state != "failed"


def test_a_job_the_policy_refuses_fails_and_the_others_keep_running(sched):
    """One bad job never stops the others (issue #17): a non-finite throughput that got past
    the doors makes the policy refuse that job by name; the daemon fails it with the
    policy's reason and plans the rest."""
    s = sched
    s.x.roster.register(pb.RegisterWorkerRequest(
        worker_type="v100", gpus=1, address="127.0.0.1:2", hostname="h2",
        previous_server_id=-1), s.t)
    good, bad = s.submit(), s.submit()
    s.at(1.0)
    assert {r.job_id for r in s.sent.runs} == {good, bad}
    s.x.core.set_job_throughputs(bad, {"v100": float("inf")}, s.x.now())
    run_rounds(s, 1.0, 2)                  # the next re-solve the interval (a round) allows
    assert s.x.jobs[bad].state == "failed"
    assert s.x.jobs[bad].reason.startswith("refused by the policy: ")
    assert "must be finite, got inf" in s.x.jobs[bad].reason
    assert s.x.jobs[good].state != "failed" and good in s.x.core.active_jobs
    assert s.x.core.allocation is not None and good in s.x.core.allocation.allocation
