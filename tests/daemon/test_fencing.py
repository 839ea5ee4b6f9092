"""The scheduler's side of fencing (docs/runtime.md, "Fencing"; issue #17): every launch
gets a new run generation, persisted across restarts; a message of an older one is ignored
and never changes state; a run resumes from exactly the commit the scheduler counted; a
stale process a heartbeat lists is told to stop. An executor on a hand-moved clock, as in
``test_round_aligned``."""

from __future__ import annotations

import pytest

from gavelsched.daemon.fences import StaleRun
from gavelsched.rpc import pb

from .test_round_aligned import R, Scheduler


def relaunched(s: Scheduler, job: str) -> tuple[int, int]:
    """The job's run ends (its worker daemon restarted under it) and it is placed again
    at the next round: (old generation, new generation)."""
    old = s.gen(job)
    s.x.roster.register(pb.RegisterWorkerRequest(worker_type="v100", gpus=1, address="127.0.0.1:1",
                                                 hostname="h", previous_server_id=s.server), s.t)
    assert job not in s.x.runs
    s.at(s.t + R - s.x.config.plan_lead)
    s.at(s.t + s.x.config.plan_lead)
    assert job in s.x.runs
    return old, s.gen(job)


@pytest.fixture
def sched(tmp_path):
    s = Scheduler(tmp_path)
    yield s
    s.close()


def test_each_launch_gets_a_new_generation_and_the_older_runs_messages_are_ignored(sched):
    s = sched
    job = s.submit()
    s.at(1.0)
    (first,) = s.sent.runs
    assert first.generation == s.gen(job) > 0
    s.init(job)
    assert s.x.processes.durable_steps(job, 40, first.generation)
    old, new = relaunched(s, job)
    assert new > old == first.generation
    assert s.sent.runs[-1].generation == new and s.sent.runs[-1].steps_done == 40

    # The cut-off process of the old generation goes on and reports: none of it counts.
    assert not s.x.processes.durable_steps(job, 90, old)
    s.x.processes.round_report(pb.RoundReportRequest(server_id=s.server, job_id=job, steps=90,
                                                     seconds=5.0, exit_code=-9, failed=True,
                                                     reason="killed", generation=old))
    assert s.x.jobs[job].steps_done == 40 and s.x.jobs[job].state != "failed"
    assert s.x.runs.get(job).generation == new           # the new run is untouched
    assert s.x.retries.history(job) == ()                 # and no retry was charged
    with pytest.raises(StaleRun, match=f"run generation {old} of job {job} is stale"):
        s.x.processes.init_job(pb.InitJobRequest(job_id=job, generation=old))
    stop = s.x.processes.renew_lease(pb.RenewLeaseRequest(job_id=job, round=0, steps=90,
                                                          generation=old))
    assert (stop.round, stop.max_steps, stop.extended) == (-1, 90, False)

    # The new run resumes from exactly the commit that was counted: 40 steps by `old`.
    init = s.x.processes.init_job(pb.InitJobRequest(job_id=job, generation=new))
    assert (init.steps_done, init.checkpoint_generation) == (40, old)
    assert init.lease.max_steps > 40
    assert s.x.processes.durable_steps(job, 70, new)
    init = s.x.processes.init_job(pb.InitJobRequest(job_id=job, generation=new))
    assert (init.steps_done, init.checkpoint_generation) == (70, new)


def test_a_message_about_a_job_never_launched_says_so_and_is_not_remembered(sched):
    """A queued job has no run: a message for it is refused as such, not as "generation 0
    is stale (newest: 0)"; and messages naming made-up jobs leave no trace in memory."""
    s = sched
    job = s.submit()
    with pytest.raises(StaleRun, match=f"^job {job} has no run$"):
        s.x.processes.init_job(pb.InitJobRequest(job_id=job, generation=0))
    for made_up in (f"nojob{i}" for i in range(100)):
        s.x.processes.round_report(pb.RoundReportRequest(job_id=made_up, generation=1))
    assert s.x.processes.fences._issued == {}
    s.at(1.0)
    assert s.x.processes.fences.current(job) == s.gen(job) > 0


def test_a_heartbeat_listing_a_stale_run_stops_it_and_a_current_one_is_left(sched):
    s = sched
    job = s.submit()
    s.at(1.0)
    old, new = relaunched(s, job)
    s.x.roster.heartbeat(s.server, s.t, {job: new})
    assert s.sent.killed_runs == []
    s.x.roster.heartbeat(s.server, s.t, {job: old})
    assert s.sent.killed_runs == [(job, old)]
    assert s.x.runs.get(job).generation == new


def test_generations_and_the_counted_commit_survive_a_scheduler_restart(tmp_path):
    s = Scheduler(tmp_path)
    job = s.submit()
    s.at(1.0)
    old, new = relaunched(s, job)
    assert s.x.processes.durable_steps(job, 25, new)
    s.close()

    # A new scheduler on the same state: the run of `new` is still on the worker.
    again = Scheduler(tmp_path, gpus=0, t=100.0)
    x = again.x
    try:
        x.roster.register(pb.RegisterWorkerRequest(
            worker_type="v100", gpus=1, address="127.0.0.1:1", hostname="h",
            previous_server_id=s.server), 100.0)
        x.roster.heartbeat(s.server, 100.0, {job: new})
        assert x.runs.get(job).orphan and x.runs.get(job).generation == new
        # A late report of the older run, sent before the restart, changes nothing.
        x.processes.round_report(pb.RoundReportRequest(server_id=s.server, job_id=job, steps=60,
                                                       seconds=3.0, generation=old))
        assert x.jobs[job].steps_done == 25 and job in x.runs
        assert x.processes.durable_steps(job, 30, new)            # the orphan's own commit counts
        # (an orphan's InitJob waits for the first plan)
        init = x.processes.init_job(pb.InitJobRequest(job_id=job, generation=new))
        again.at(101.0)
        init = init.result(timeout=0)
        assert (init.steps_done, init.checkpoint_generation) == (30, new)
        assert x.fences.issue(job) > new                # the counter only grows
    finally:
        again.close()


def test_a_heartbeat_sent_before_a_runs_reported_exit_does_not_bring_the_run_back(sched):
    """A worker lists its runs in each heartbeat and reports each exit (``ReportRound``)
    from another thread: a heartbeat that listed a process just before it exited can reach
    the executor after the exit's report. The executor took the exited process for a run
    found going on (an orphan): a drained server held a run again (CI's drain test), and
    the job's next launch waited for a process that was gone. A process whose exit its
    server reported is gone for good; a listing of it changes nothing."""
    s = sched
    s.submit(), s.submit()
    s.at(1.0)                                   # one GPU: one job runs in round 0
    (first,) = s.sent.runs
    job, generation = first.job_id, first.generation
    s.init(job)
    s.at(1.0 + R - s.x.config.plan_lead)        # round 1 goes to the other job
    s.at(1.0 + R)
    assert s.x.runs.get(job).generation == generation
    s.exited(job, 50)                           # its process saved and exited
    assert job not in s.x.runs
    s.x.roster.heartbeat(s.server, s.t, {job: generation})     # (listed before the exit)
    assert job not in s.x.runs and s.sent.killed_runs == []
    assert s.gen(job) == generation             # nothing launched it again


def test_a_heartbeat_listing_a_finished_jobs_last_run_is_not_called_stale(sched, caplog):
    """A job's last run exits and the job is done; a heartbeat listing that process, sent
    before the exit's report, reaches the executor after it. The process is told to stop
    (a KillJob of an exited process changes nothing; a cancelled job's may still run), but
    it is the job's newest run, not a stale one: no warning says so."""
    s = sched
    job = s.submit(steps=50)
    s.at(1.0)
    generation = s.gen(job)
    s.init(job)
    s.exited(job, 50)                           # done: its last process exited
    assert s.x.jobs[job].final
    with caplog.at_level("INFO", logger="gavelsched.daemon.orphans"):
        s.x.roster.heartbeat(s.server, s.t, {job: generation})   # (listed before the exit)
    assert s.sent.killed_runs == [(job, generation)]
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert f"job {job} has ended: stopping its run (generation {generation})" in caplog.text
