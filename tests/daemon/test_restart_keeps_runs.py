"""A restarted scheduler keeps the runs it finds going on (docs/runtime.md, "The runs going
on are kept"; ``daemon/orphans.py``): a worker lists its runs, with their GPUs, when it
registers; the first plan keeps a run on its GPUs as it keeps any job that ran last round,
and the run's lease is set from its own count and clock at its first renewal: no
checkpoint, no restart, no new generation. A run the plan does not keep in place, or whose
GPUs are not known, ends at its renewal as before. The real ``DaemonExecutor`` on a
hand-moved clock (``test_round_aligned``)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from concurrent.futures import Future

import grpc
import numpy as np
import pytest

from gavelsched.core import PeriodState
from gavelsched.daemon.health import Health
from gavelsched.daemon.period import PERIOD_FILE, load_period, save_period
from gavelsched.daemon.processes import AskAgain
from gavelsched.daemon.store import ServerRow
from gavelsched.jobenv import JobContext
from gavelsched.lease_calls import SchedulerCalls
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.codes import BUSY

from .cluster import wait_until
from .test_renewals import _pumped
from .test_round_aligned import R, Scheduler


def measure(s: Scheduler, job: str, steps: int) -> bool:
    """``job`` runs from t=1 and has ``steps`` durable 5 s later, measured over them (a
    sample of its rate); whether it finished."""
    s.at(1.0)
    s.init(job)
    s.t = 6.0
    return s.x.processes.durable_steps(job, steps, s.gen(job), seconds=4.0)


class Restarted(Scheduler):
    """A new scheduler on the state directory of one that ran in ``tmp_path``, at ``t``."""

    def __init__(self, tmp_path, t: float, heartbeat_seconds: float = 1e6, **config) -> None:
        super().__init__(tmp_path, gpus=0, heartbeat_seconds=heartbeat_seconds, t=t, **config)

    def register(self, server: int, gpus: int, running: list[pb.RunningJob]) -> None:
        self.x.roster.register(pb.RegisterWorkerRequest(
            worker_type="v100", gpus=gpus, address="127.0.0.1:1", hostname="h",
            previous_server_id=server, running=running), self.t)

    def lists(self, server: int, run: pb.RunJobRequest, generation: int | None = None,
              gpus: list[int] | None = None) -> None:
        """``server`` (2 GPUs) registers again, listing ``run`` (its generation and GPUs,
        unless others are given)."""
        self.register(server, 2, [pb.RunningJob(
            job_id=run.job_id, generation=run.generation if generation is None else generation,
            round=run.round, gpus=list(run.gpus) if gpus is None else gpus)])

    def renew(self, job: str, generation: int, round_: int, steps: int, seconds: float):
        return self.x.processes.renew_lease(pb.RenewLeaseRequest(
            job_id=job, round=round_, steps=steps, seconds=seconds, generation=generation))


@pytest.fixture
def daemon_log(caplog):
    caplog.set_level(logging.INFO, logger="gavelsched.daemon")
    return caplog


@pytest.fixture
def before(tmp_path):
    """A job running on a 2-GPU server with 40 durable steps, then the scheduler gone:
    (the old scheduler, the job, its RunJob)."""
    s = Scheduler(tmp_path, gpus=2)
    job = s.submit()
    s.at(1.0)
    (run,) = s.sent.runs
    s.init(job)
    assert s.x.processes.durable_steps(job, 40, run.generation)
    s.close()
    return s, job, run


@pytest.fixture
def restarted(tmp_path, before):
    """A new scheduler on ``before``'s state at 100 s."""
    r = Restarted(tmp_path, 100.0)
    yield r
    r.close()


def test_the_first_plan_keeps_a_run_found_going_on_and_its_lease_comes_from_its_renewal(
        before, restarted, daemon_log):
    (s, job, run), r = before, restarted
    r.lists(s.server, run)
    orphan = r.x.runs.get(job)
    assert orphan.orphan and len(orphan.workers) == 1
    # Its renewal, asked before the first plan, waits for it.
    waiting = r.renew(job, run.generation, run.round, steps=55, seconds=9.0)
    assert isinstance(waiting, Future) and not waiting.done()

    r.at(101.0)                         # past the arrival grace: planned and started
    lease = waiting.result(timeout=0)
    kept = r.x.runs.get(job)
    assert not kept.orphan and kept.generation == run.generation
    assert r.x.fences.current(job) == run.generation        # no new launch
    assert r.x.jobs[job].state == "running"
    assert "1 of the 1 runs found going on kept on their GPUs" in daemon_log.text
    assert lease.extended and lease.round == kept.round > run.round
    # To the end of the new round (R from 101 s) at the planned rate, from its own
    # count and clock when it asked (55 steps, 9 s since its process started, at 100 s).
    assert lease.max_seconds == pytest.approx(9.0 + 1.0 + R)
    assert lease.max_steps == 55 + int(kept.steps_per_s * (1.0 + R))
    assert kept.last == (55, 9.0)       # its throughput is sampled from there on
    # The worker was told (an extension on the same GPU and generation), once.
    (extension,) = r.sent.runs
    assert (extension.generation, list(extension.gpus), extension.lease.extended) == (
        run.generation, list(run.gpus), True)
    assert extension.workload == "steps" and extension.total_steps == 100_000

    # The next plan extends it as any run: a round more, the lease's steps on top.
    r.at(101.0 + R - r.x.config.plan_lead)
    again = r.renew(job, run.generation, lease.round, steps=lease.max_steps - 5,
                    seconds=9.0 + R - 1)
    assert again.round == lease.round + 1 and again.extended
    assert again.max_steps > lease.max_steps
    assert again.max_seconds == pytest.approx(lease.max_seconds + R)
    assert r.x.fences.current(job) == run.generation


@pytest.mark.parametrize("gpus", [[], [7]])
def test_a_run_found_going_on_without_its_gpus_ends_at_its_renewal(before, restarted, gpus):
    (s, job, run), r = before, restarted
    # An older worker lists no GPUs, and a bad one lists GPUs the server has not:
    # neither run can be kept in place.
    r.lists(s.server, run, gpus=gpus)
    assert r.x.runs.get(job).orphan and r.x.runs.get(job).workers == ()
    r.at(101.0)
    stop = r.x.processes.renew_lease(pb.RenewLeaseRequest(
        job_id=job, round=run.round, steps=55, seconds=9.0, generation=run.generation))
    assert (stop.round, stop.max_steps) == (-1, 40)          # over: it checkpoints
    # its job is placed again, after the run ends (the launch waits for it)
    assert r.x.runs.get(job).orphan and not r.sent.runs
    r.x.processes.round_report(pb.RoundReportRequest(
        server_id=s.server, job_id=job, steps=55, seconds=9.5,
        generation=run.generation))
    assert r.x.jobs[job].steps_done == 55
    (launch,) = r.sent.runs
    assert launch.generation > run.generation and launch.steps_done == 55


def test_a_renewal_waiting_for_the_first_plan_is_answered_when_its_run_is_killed(
        before, restarted):
    """An orphan's renewal waits for the first plan; its job is cancelled meanwhile (its
    run killed): the renewal is answered at once with a lease that is over, not left to a
    plan that a scheduler with no job left never makes."""
    (s, job, run), r = before, restarted
    r.lists(s.server, run)
    waiting = r.renew(job, run.generation, run.round, steps=55, seconds=9.0)
    assert isinstance(waiting, Future) and not waiting.done()
    assert r.x.cancel(job).ok
    assert waiting.result(timeout=0) is None    # no run: its handler sends a lease that is over
    assert r.sent.killed_runs == [(job, run.generation)]


@pytest.mark.parametrize("period", ["restored", "lost"])
def test_a_run_found_going_on_whose_job_its_last_commit_ended_is_not_kept(tmp_path, period):
    """A run launched just before the restart starts up after it, adopted as an orphan,
    and commits its job's last step before the first plan judges it. With the allocation
    period lost, that plan still holds the job (the core learns of its end when its steps
    are credited, with the round) and kept the run in place: its job, done, was started
    again, and the executor's core stopped on the illegal transition (found by
    ``test_interleavings``). With the period restored, the job ends at the commit and the
    scheduler, left with no job, makes no plan: the InitJob waiting for one waited for
    good (found by ``test_interleavings`` once its restarts kept the period). Now, either
    way, the run is not kept: its waiting InitJob gets a lease that is over, its process
    exits, and nothing is launched."""
    s = Scheduler(tmp_path, gpus=2)
    job = s.submit(steps=20)
    s.at(3.0)
    (run,) = s.sent.runs
    s.close()
    if period == "lost":
        (tmp_path / "state" / "period.npz").unlink()
    r = Restarted(tmp_path, s.t)
    try:
        r.lists(s.server, run)
        r.server = s.server
        init = r.x.processes.init_job(pb.InitJobRequest(
            job_id=job, server_id=s.server, generation=run.generation))
        assert isinstance(init, Future) and not init.done()    # (it waits for the plan)
        assert r.x.processes.durable_steps(job, 20, run.generation)
        r.at(r.t + 0.5)                         # the first plan
        assert r.x.jobs[job].state == "done" and r.x.runs.get(job).orphan
        assert init.result(timeout=0).lease.round == -1      # over: it saves and exits
        late = r.x.processes.init_job(pb.InitJobRequest(         # another rank's, later
            job_id=job, rank=1, server_id=s.server, generation=run.generation))
        assert late.lease.round == -1                             # at once, not a wait
        r.x.processes.round_report(pb.RoundReportRequest(
            server_id=s.server, job_id=job, steps=20, seconds=1.0, generation=run.generation))
        assert job not in r.x.runs and not r.sent.runs
    finally:
        r.close()


def test_a_stale_run_listed_at_registration_is_stopped(before, restarted):
    (s, job, run), r = before, restarted
    r.lists(s.server, run, generation=run.generation - 1)
    assert job not in r.x.runs
    assert r.sent.killed_runs == [(job, run.generation - 1)]


def test_the_first_plan_waits_for_the_servers_known_before_the_restart(tmp_path, daemon_log):
    """Two servers of one GPU, a job running on each; after the restart the first plan
    waits until both have registered again (their runs adopted), so it keeps both runs;
    a server that does not come back is waited for one silence limit at most."""
    s = Scheduler(tmp_path, gpus=1)
    second = s.add_server(1)
    jobs = [s.submit(), s.submit()]
    s.at(1.0)
    runs = {r.job_id: r for r in s.sent.runs}
    assert set(runs) == set(jobs)
    server_of = {s.x.core.view.server_of[w]: j for j in jobs
                 for w in s.x.runs.get(j).workers}
    s.close()

    def listed(server):
        run = runs[server_of[server]]
        return [pb.RunningJob(job_id=run.job_id, generation=run.generation, round=run.round,
                              gpus=list(run.gpus))]

    r = Restarted(tmp_path, 100.0)
    try:
        r.register(s.server, 1, listed(s.server))
        r.at(101.0)
        assert r.x.clock.idle and not r.sent.runs           # the other server is not back
        r.register(second, 1, listed(second))
        r.at(101.5)
        assert not r.x.clock.idle
        assert {e.job_id for e in r.sent.runs} == set(jobs)
        assert all(e.generation == runs[e.job_id].generation and e.lease.extended
                   for e in r.sent.runs)                    # both kept, none launched anew
    finally:
        r.close()

    r = Restarted(tmp_path, 200.0, heartbeat_seconds=1.0)   # a silence limit of 3 s
    try:
        r.register(s.server, 1, [])
        r.at(201.0)
        assert r.x.clock.idle
        r.x.roster.heartbeat(s.server, 202.0, {})
        r.at(203.0)                                         # the limit: it plans without it
        assert not r.x.clock.idle
        assert f"workers {second} did not register again" in daemon_log.text
        assert r.x.driver.in_flight.resolved is not None    # a smaller cluster: re-solved
    finally:
        r.close()


def test_a_restarted_scheduler_goes_on_with_the_allocation_period(tmp_path, daemon_log):
    """Two jobs time-share one GPU for some rounds; the restarted scheduler has the same
    X, received seconds and deficits (``period.npz``), not a fresh period: its first plan
    goes on with it (no re-solve: its server coming back is not a change of the cluster)
    and runs the job that had less of its share, which a fresh period would have put after
    the other (by arrival)."""
    s = Scheduler(tmp_path)
    jobs = [s.submit(), s.submit()]
    t = 1.0
    for _ in range(2):
        s.at(t)
        s.at(t + R - s.x.config.plan_lead)
        t += R
    s.at(t)
    before = s.x.core.period_state()
    assert before.received.any() and set(before.keys) == set(jobs)
    s.close()

    r = Restarted(tmp_path, 500.0)
    try:
        after = r.x.core.period_state()
        assert after.start_s == before.start_s and after.types == before.types
        order = [after.keys.index(k) for k in before.keys]
        assert (after.received[order] == before.received).all()
        assert (after.deficit[order] == before.deficit).all()
        assert (after.allocation[order] == before.allocation).all()
        assert not after.stale
        r.register(s.server, 1, [])
        r.at(501.0)
        assert r.x.driver.in_flight.resolved is None
        (first,) = r.sent.runs
        # the job that had received less of its share since the period began, not the
        # first to arrive
        share = {k: before.received[i].sum() for i, k in enumerate(before.keys)}
        assert share[jobs[1]] < share[jobs[0]]
        assert first.job_id == jobs[1]
    finally:
        r.close()


def test_the_jobs_a_restart_admits_with_its_period_plan_on_what_was_measured_of_them(
        tmp_path):
    """Before, the jobs that taking on the period admitted as the scheduler started were
    not given their stored measurements (only jobs admitted at a round's start were): they
    planned on their priors, 15x too fast here, until their runs were measured again."""
    s = Scheduler(tmp_path)
    job = s.submit()
    assert measure(s, job, 8)           # 8 steps in 5 s: 1.6 steps/s
    assert s.x.core.planned_rates([job]) == {job: {"v100": 1.6}}
    s.close()
    r = Restarted(tmp_path, 7.0)
    try:
        assert r.x.core.active_jobs == (job,)          # admitted with the period
        assert r.x.core.planned_rates([job]) == {job: {"v100": 1.6}}
    finally:
        r.close()


@pytest.mark.parametrize("damage", ["not a zip", "nan"])
def test_a_damaged_period_file_starts_a_fresh_period_with_one_warning(tmp_path, daemon_log,
                                                                      damage):
    s = Scheduler(tmp_path)
    job = s.submit()
    s.at(1.0)
    s.at(1.0 + R - s.x.config.plan_lead)
    s.close()
    path = tmp_path / "state" / "period.npz"
    if damage == "nan":
        with np.load(path) as f:
            arrays = {name: f[name] for name in f.files}
        arrays["received"][0, 0] = np.nan
        np.savez(path, **arrays)
    else:
        path.write_bytes(b"\xff\xfe not an npz")
    r = Restarted(tmp_path, 100.0)
    try:
        assert "period.npz: not an allocation period" in daemon_log.text
        assert "the period starts afresh" in daemon_log.text
        assert r.x.core.period_state().keys == ()            # nothing taken on
        r.register(s.server, 1, [])
        r.at(101.0)
        assert [e.job_id for e in r.sent.runs] == [job]       # and it schedules as before
    finally:
        r.close()


def test_health_waits_for_restored_servers_from_the_first_registration():
    rows = [ServerRow(i, "v100", (i,), "127.0.0.1:1", "h") for i in (0, 1)]
    health = Health(1.0, rows)                      # a silence limit of 3 s
    assert not health.back(1e6)                     # none back yet: no plan is possible
    assert health.awaited(0) and health.awaited(1) and not health.awaited(2)
    health.up(rows[0], 10.0)
    assert not health.awaited(0) and health.awaited(1)   # (its runs' InitJobs: answered)
    assert not health.back(12.9)
    health.excuse(2.0, 12.9)                        # the executor was busy: not a pause
    assert not health.back(14.0)
    assert health.back(15.0) and health.take_missing() == {1}   # none since for a limit
    assert not health.awaited(1)                    # given up on: no longer waited for
    assert health.take_missing() == set()           # (once)
    again = Health(1.0, rows)
    again.up(rows[0], 10.0)
    again.up(rows[1], 11.0)
    assert again.back(11.0) and again.take_missing() == set()   # all back: at once
    assert Health(1.0).back(0.0)                    # a first start waits for nothing
    assert not Health(1.0).awaited(0)


def test_a_run_on_two_servers_is_kept_once_both_have_listed_it(tmp_path):
    s = Scheduler(tmp_path, gpus=1)
    second = s.add_server(1)
    job = s.submit(scale_factor=2)
    s.at(1.0)
    sent = {r.rank: r for r in s.sent.runs}
    assert len(sent) == 2 and len({r.generation for r in sent.values()}) == 1
    generation = sent[0].generation
    s.close()

    r = Restarted(tmp_path, 100.0)
    try:
        for server in (s.server, second):
            r.register(server, 1, [pb.RunningJob(job_id=job, generation=generation, round=0,
                                                 gpus=[0])])
        assert len(r.x.runs.get(job).workers) == 2
        r.at(101.0)
        assert not r.x.runs.get(job).orphan and r.x.fences.current(job) == generation
        assert len(r.sent.runs) == 2 and all(
            e.generation == generation and e.lease.extended for e in r.sent.runs)
        assert sorted(e.rank for e in r.sent.runs) == [0, 1]
    finally:
        r.close()


@pytest.fixture
def launched(tmp_path):
    """A job launched on a 2-GPU server, the scheduler gone before its process started up,
    and a new one on its state at 100 s: (the old scheduler, the job, its RunJob, the
    InitJob its process sends, the new scheduler)."""
    s = Scheduler(tmp_path, gpus=2)
    job = s.submit()
    s.at(1.0)
    (run,) = s.sent.runs
    s.close()
    r = Restarted(tmp_path, 100.0)
    yield s, job, run, pb.InitJobRequest(job_id=job, round=run.round, rank=0,
                                         server_id=s.server, generation=run.generation), r
    r.close()


@pytest.mark.parametrize("gpus", [None, []])
def test_a_process_that_starts_up_after_the_restart_waits_for_its_server_and_the_plan(
        launched, gpus, daemon_log):
    """Its InitJob came to a scheduler that knew no run of the job, which answered a lease
    already over: the process ended, and the job was launched again. Now it is asked again
    until its server has registered (listing the run), then waits for the first plan: kept
    on its GPUs, it gets the kept run's lease from its InitJob; not kept (its GPUs not
    listed), a lease that is over, as its renewal would."""
    s, job, run, init, r = launched
    with pytest.raises(AskAgain, match=f"server {s.server} has not registered again"):
        r.x.processes.init_job(init)
    with pytest.raises(AskAgain):
        r.x.processes.init_job(init)
    assert daemon_log.text.count(f"job {job}: its process started up before its server") == 1
    r.lists(s.server, run, gpus=gpus)
    waiting = r.x.processes.init_job(init)
    assert isinstance(waiting, Future) and not waiting.done()
    r.at(101.0)
    started = waiting.result(timeout=0)
    assert started.steps_done == 0 and started.total_steps == 100_000
    run_now = r.x.runs.get(job)
    if gpus == []:
        assert (started.lease.round, started.lease.max_steps) == (-1, 0)
        assert run_now.orphan
        return
    assert not run_now.orphan and r.x.fences.current(job) == run.generation
    # to the end of the new round (R from 101 s) from its InitJob at 100 s
    assert started.lease.extended and started.lease.round == run_now.round
    assert started.lease.max_seconds == pytest.approx(1.0 + R)
    assert started.lease.max_steps == int(run_now.steps_per_s * (1.0 + R))
    assert [e.lease.extended for e in r.sent.runs] == [True]     # kept, not launched anew


def test_a_kept_run_whose_process_starts_up_after_the_plan_gets_its_lease_from_then(
        launched):
    """Kept by the first plan before its InitJob came, its lease is set from the InitJob
    (the process's clock starts about then), as from a kept run's first renewal."""
    s, job, run, init, r = launched
    r.lists(s.server, run)
    r.at(101.0)
    r.t = 104.0
    started = r.x.processes.init_job(init)
    kept = r.x.runs.get(job)
    assert started.lease.extended and started.lease.round == kept.round
    assert started.lease.max_seconds == pytest.approx(101.0 + R - 104.0)
    assert started.lease.max_steps == int(kept.steps_per_s * (101.0 + R - 104.0))
    assert not kept.rebase and kept.last == (0, 0.0)


def test_the_iterator_s_initjob_is_asked_again_over_grpc_until_the_restart_can_answer(
        launched, daemon_log):
    """The same over real gRPC, through the iterator's own call (``lease_calls``): the
    scheduler's "ask again" is UNAVAILABLE as busy, which it retries with pauses until its
    server is back and the first plan has kept the run."""
    s, job, run, init, r = launched
    with _pumped(r) as chan:
        ctx = JobContext(scheduler=r.address, job_id=job, round=run.round,
                         total_steps=100_000, steps_done=0, checkpoint_dir=None,
                         server_id=s.server, rank=0, world_size=1,
                         generation=run.generation, job_token="t")
        answers: list = []
        asking = threading.Thread(target=lambda: answers.append(SchedulerCalls(ctx).init()))
        asking.start()
        # its first InitJob was refused (the line is logged at a job's first refusal)
        wait_until(lambda: f"job {job}: its process started up before" in daemon_log.text,
                   30, "the iterator's first InitJob")
        with pytest.raises(grpc.RpcError) as early:     # what it was told
            pb_grpc.IteratorToSchedulerStub(chan).InitJob(init, timeout=10)
        assert early.value.code() == grpc.StatusCode.UNAVAILABLE
        assert early.value.details().startswith(f"{BUSY}: server {s.server} has not")
        assert not answers and asking.is_alive()        # still asking
        r.x.call(lambda: r.lists(s.server, run))        # its server is back: adopted
        r.x.call(lambda: r.at(101.0))                   # the first plan keeps it
        asking.join(30)
    (started,) = answers
    assert started.lease.extended and started.lease.round == r.x.runs.get(job).round


@pytest.mark.parametrize("later", [None, 4.8])
def test_a_restart_re_solves_only_if_a_measurement_moved_from_what_its_period_planned_on(
        tmp_path, later):
    """The period keeps the steps/s its X was solved on: a job measured (1.6 steps/s
    against its 24.44 prior) and re-solved on it is planned on its measurement again after
    a restart, whose first plan goes on with the period. Before, the restart took the job
    back on its priors and its measurement made the period stale: it re-solved at its first
    plan. A measurement stored after the last plan that moved past noise (``later``) makes
    the period stale, as it would have without the restart."""
    s = Scheduler(tmp_path)
    job = s.submit()
    assert measure(s, job, 8)           # 8 steps in 5 s: 1.6 steps/s
    t = 1.0 + 2 * R - s.x.config.plan_lead
    s.at(t)                          # (past the re-solve interval: solved on 1.6)
    assert s.x.driver.in_flight.resolved is not None
    saved = s.x.core.period_state()
    assert saved.rates.tolist() == [[[1.6, 0.0]]] and not saved.stale   # (alone: no partner)
    if later is not None:     # (measured after the plan that saved the period)
        s.store.put_throughput_later(job, "v100", later)
        s.store.flush_later()
    # (the restarted daemon's time counts on from its first start's wall time: moved back
    # as far as this hand-moved clock went)
    s.store.set_meta({"epoch_unix": float(s.store.get_meta("epoch_unix")) - t})
    s.close()
    r = Restarted(tmp_path, 0.0)
    try:
        assert r.x.core.period_state().start_s == saved.start_s
        assert r.x.core.planned_rates([job]) == {job: {"v100": later or 1.6}}
        assert r.x.core.period_state().stale == (later is not None)
        r.register(s.server, 1, [])
        r.at(1.0)
        assert (r.x.driver.in_flight.resolved is None) == (later is None)
    finally:
        r.close()


def _period(rates) -> PeriodState:
    one = np.array([[1.0]])
    return PeriodState(0.5, ("v100",), ("0",), one, one, one, rates=rates)


def test_the_period_file_keeps_the_planned_rates_and_reads_one_from_before_them(tmp_path):
    path = tmp_path / PERIOD_FILE
    save_period(path, _period(np.array([[[1.6, 0.0]]])))
    assert load_period(path, 1.0).rates.tolist() == [[[1.6, 0.0]]]
    save_period(path, _period(np.array([[1.6]])))  # (one member's: before pairs were kept)
    assert load_period(path, 1.0).rates.tolist() == [[[1.6, 0.0]]]
    save_period(path, _period(None))           # (as a file written before rates were kept)
    assert "rates" not in np.load(path).files
    assert load_period(path, 1.0).rates is None


def test_a_restart_under_finish_time_fairness_keeps_each_jobs_isolated_time(tmp_path):
    """Before, a restarted scheduler's jobs began again at 0 isolated seconds (Themis
    t^isolated, thesis §5.4.2): its re-solves then judged each job's fairness afresh."""
    s = Scheduler(tmp_path, policy="finish_time_fairness_perf")
    job, _ = s.submit(), s.submit()
    assert measure(s, job, 8)
    t = 1.0 + 2 * R - s.x.config.plan_lead
    s.at(t)                          # (a re-solve: the job's 8 steps count, isolated)
    assert s.x.driver.in_flight.resolved is not None
    saved = s.x.core.period_state()
    assert saved.isolated[saved.keys.index(job), 0] > 0
    s.store.set_meta({"epoch_unix": float(s.store.get_meta("epoch_unix")) - t})
    s.close()
    r = Restarted(tmp_path, 0.0, policy="finish_time_fairness_perf")
    try:
        assert r.x.core.period_state().isolated.tolist() == saved.isolated.tolist()
    finally:
        r.close()


def test_the_period_file_keeps_the_isolated_times_and_refuses_ones_that_are_not(
        tmp_path, daemon_log):
    """Finish-time fairness's Themis t^isolated per job (thesis §5.4.2), as the core hands
    it on (``PeriodState.isolated``): kept, and refused in one line when not numbers."""
    path = tmp_path / PERIOD_FILE
    isolated = np.array([[1260.0, 4.0, 14960.0]])
    save_period(path, dataclasses.replace(_period(None), isolated=isolated))
    assert load_period(path, 1.0).isolated.tolist() == isolated.tolist()
    for bad in ([[np.inf, 4.0, 1.0]], [[-1.0, 4.0, 1.0]], [[1.0, 4.0, -2.0]], [[1.0, 4.0]]):
        save_period(path, dataclasses.replace(_period(None), isolated=np.array(bad)))
        assert load_period(path, 1.0) is None
    assert daemon_log.text.count("isolated: 1 x 3 finite numbers expected") == 4


def test_the_period_file_keeps_the_policys_state_and_refuses_one_that_is_not_json(
        tmp_path, daemon_log):
    path = tmp_path / PERIOD_FILE
    state = {"rng": [3, [1, 2, 3], None], "pairs": [["0", "1"]]}
    save_period(path, dataclasses.replace(_period(None), policy_state=state))
    assert load_period(path, 1.0).policy_state == state
    save_period(path, _period(None))
    assert load_period(path, 1.0).policy_state == {}
    with np.load(path) as saved:
        arrays = dict(saved)
    for bad in ("{", "[1]"):
        with open(path, "wb") as out:
            np.savez(out, **arrays, policy_state=np.array(bad))
        assert load_period(path, 1.0) is None
    assert "policy_state: not JSON" in daemon_log.text
    assert "policy_state: not a JSON object" in daemon_log.text


@pytest.mark.parametrize("rates, why", [([[np.nan]], "not finite"), ([[-1.0]], "negative"),
                                        ([[1.0, 2.0]], "numbers expected"),
                                        ([[[1.0, 2.0, 3.0]]], "numbers expected"),
                                        ([[[1.0, -2.0]]], "negative")])
def test_period_rates_that_are_not_rates_start_a_fresh_period(tmp_path, daemon_log, rates, why):
    path = tmp_path / PERIOD_FILE
    save_period(path, _period(np.array(rates)))
    assert load_period(path, 1.0) is None
    assert why in daemon_log.text and "the period starts afresh" in daemon_log.text


def test_a_policy_state_the_policy_cannot_read_is_dropped_at_the_restart_the_period_kept(
        tmp_path, daemon_log):
    """A period file whose policy state is a JSON object but not FIFO's generator (a
    hand-edited file): the restart keeps the X and drops the state, with one warning, and
    the next re-solve draws from the seed. Before, every re-solve failed on it."""
    s = Scheduler(tmp_path, policy="fifo")
    s.submit()
    s.at(1.0)
    saved = s.x.core.period_state()
    assert len(saved.policy_state["rng"][1]) == 625
    s.close()
    path = tmp_path / "state" / PERIOD_FILE
    with np.load(path) as f:
        arrays = dict(f)
    with open(path, "wb") as out:
        np.savez(out, **{**arrays, "policy_state": np.array('{"rng": [3, [1, 2], null]}')})

    r = Restarted(tmp_path, 0.0, policy="fifo")
    try:
        assert "policy_state.rng: not a random generator state" in daemon_log.text
        assert "fifo starts its state afresh" in daemon_log.text
        after = r.x.core.period_state()
        assert after.keys == saved.keys and (after.allocation == saved.allocation).all()
        assert after.policy_state == {}
        r.register(s.server, 1, [])
        r.submit()                                   # a reset event: the next plan re-solves
        r.at(1.0 + R)
        assert r.x.driver.in_flight.resolved is not None
        assert len(r.x.core.period_state().policy_state["rng"][1]) == 625
    finally:
        r.close()
