"""Job control in process (issue #28; ``gavelsched/daemon/control.py``, ``calls.py``,
``meter.py``): the real ``DaemonExecutor`` (real core, real policy solves, real SQLite
store) on a clock the test moves, its RunJobs recorded instead of sent
(``test_round_aligned.Scheduler``), so every round is exact.

``hold`` keeps a queued job out of the core until ``release``, and a running one runs to its
lease's end; ``update`` changes the weight the next round is planned with; ``after`` waits
for its jobs and is cancelled down the chain when one fails or is cancelled; an array is
``count`` copies its id names; ``max_runtime_s`` bounds the leases and fails the job with
reason "time limit"; all of it survives a restart. The doors are fuzzed: a submission or a
call refused raises only the door's errors (one line) and changes nothing."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gavelsched.cli import main
from gavelsched.client.request import MAX_AFTER, JobRequest
from gavelsched.daemon.calls import Denied
from gavelsched.daemon.control import MAX_ARRAY, ControlError
from gavelsched.daemon.dispatch import AFTER_SAVE
from gavelsched.daemon.submissions import SubmissionError
from gavelsched.rpc import pb
from gavelsched.rpc.identity import ADMIN, DAEMON, JOB, USER, Caller

from .cluster import free_port
from .test_round_aligned import R, Scheduler

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "60")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
ROOT = Caller("root", ADMIN)
ALICE = Caller("alice", USER)              # a user of any entity
BOB = Caller("bob", USER)
LEAD_FREE = 1.0                            # round 0 starts here (past the arrival grace)


def request(steps: int = 10**6, **kw) -> pb.JobRequest:
    return pb.JobRequest(job_type="A3C", total_steps=steps, workload="steps", **kw)


def submit(s: Scheduler, caller: Caller = ALICE, steps: int = 10**6,
           **kw) -> pb.SubmitResponse:
    return s.x.calls.submit(caller, request(steps, **kw), s.x.door())


def pump(s: Scheduler) -> None:
    """Run what the executor's loop would run next: the closures posted to its inbox (a
    job's end reaching its dependants, a run that ended out of time)."""
    while s.x.inbox.run_pending(0):
        pass


def status(s: Scheduler) -> dict[str, pb.JobStatus]:
    s.x.publish()
    return {j.id: j for j in s.x.snapshot.status().jobs}


def in_core(s: Scheduler, job_id: str) -> bool:
    return job_id in s.x.core.active_ids or job_id in s.x.core.pending_jobs


def actions(s: Scheduler, job_id: str) -> list[tuple[str, str, str]]:
    return [(e.user, e.action, e.detail) for e in s.x.tenancy.audit.history(job_id)]


def launched(s: Scheduler, since: int = 0) -> list[str]:
    """The jobs of the fresh (not extended) RunJobs sent since the ``since``-th."""
    return [r.job_id for r in s.sent.runs[since:] if not r.lease.extended]


def play(s: Scheduler, first: int, rounds: int, steps: dict[str, int]) -> list[list[str]]:
    """Rounds ``first+1 .. first+rounds`` as the workers would run them: each new run starts
    up half a second into its round, a run not kept for the next round commits 100 more
    steps (counted in ``steps``) and exits just before it ends. Returns the jobs of each
    round's runs."""
    out = []
    for k in range(first, first + rounds):
        start = LEAD_FREE + k * R
        for run in list(s.x.runs.live()):
            if not run.started_up:
                s.t = start + 0.5
                s.init(run.job_id)
        s.at(start + R - s.x.config.plan_lead)
        for run in list(s.x.runs.live()):
            if run.round <= k:
                s.t = start + R - 0.1
                steps[run.job_id] = steps.get(run.job_id, 0) + 100
                s.x.processes.durable_steps(run.job_id, steps[run.job_id], s.gen(run.job_id))
                s.exited(run.job_id, steps[run.job_id])
        s.at(start + R)
        out.append(sorted(r.job_id for r in s.x.runs.live() if r.round == k + 1))
    return out


def run_to_done(s: Scheduler, job_id: str) -> None:
    """The next round starts, with ``job_id`` the one job in the core; its process starts up
    and commits every step (the job is done), then exits."""
    assert s.x.core.has_jobs and set(s.x.core.active_ids) | set(s.x.core.pending_jobs) == {
        job_id}
    s.at(max(LEAD_FREE, s.t + R))
    assert s.x.runs.get(job_id) is not None
    s.init(job_id)
    s.x.processes.durable_steps(job_id, s.x.jobs[job_id].spec.total_steps, s.gen(job_id))
    s.exited(job_id, s.x.jobs[job_id].spec.total_steps)
    assert s.x.jobs[job_id].state == "done"
    pump(s)


def finished(s: Scheduler, job_id: str) -> None:
    """Every step of ``job_id`` is durable, as the round plan finds a job done
    (``Jobs.finish``; the core is told at once instead of at the next plan)."""
    s.x.core.cancel(job_id, s.x.now())
    s.x.jobs.finish(job_id, s.x.now())
    pump(s)


def restart(s: Scheduler, tmp_path) -> Scheduler:
    s.close()
    return Scheduler(tmp_path)


@pytest.fixture
def sched(tmp_path):
    s = Scheduler(tmp_path)
    yield s
    s.close()


# ---- hold and release --------------------------------------------------------------------
def test_a_held_queued_job_is_never_scheduled_until_released(sched):
    a = submit(sched).job_id
    sched.x.calls.hold(ALICE, a, "maintenance")
    assert (sched.x.jobs[a].state, sched.x.jobs[a].reason) == ("held", "maintenance")
    assert not in_core(sched, a)
    shown = status(sched)[a]
    assert (shown.state, shown.reason) == ("held", "maintenance")
    for t in (LEAD_FREE, LEAD_FREE + R, LEAD_FREE + 5 * R):
        sched.at(t)
    assert not sched.sent.runs and sched.x.jobs[a].state == "held"
    sched.x.calls.release(ALICE, a)
    assert (sched.x.jobs[a].state, sched.x.jobs[a].reason) == ("queued", None)
    assert in_core(sched, a)
    sched.at(LEAD_FREE + 6 * R)
    assert launched(sched) == [a]
    assert [x[1] for x in actions(sched, a)] == ["submit", "hold", "release"]
    assert actions(sched, a)[1] == ("alice", "hold", "maintenance")


def test_a_held_running_job_runs_to_its_lease_end_and_resumes_from_its_steps(sched):
    a = submit(sched).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.5
    sched.init(a)
    sched.x.calls.hold(ROOT, a, "")
    assert (sched.x.jobs[a].state, sched.x.jobs[a].reason) == ("held", "held by root")
    assert a in sched.x.runs and not sched.sent.kills     # its run goes on
    sched.at(LEAD_FREE + R - sched.x.config.plan_lead)
    assert launched(sched) == [a] and len(sched.sent.runs) == 1   # not extended
    sched.at(LEAD_FREE + R)
    sched.t = LEAD_FREE + R + 0.3            # it saved at its lease's end and exited
    sched.x.processes.durable_steps(a, 200, sched.gen(a))
    sched.exited(a, 200)
    pump(sched)
    assert (sched.x.jobs[a].state, sched.x.jobs[a].steps_done) == ("held", 200)
    assert a not in sched.x.runs
    sched.at(LEAD_FREE + 3 * R)
    assert len(sched.sent.runs) == 1                          # nothing while held
    sched.x.calls.release(ROOT, a)
    assert sched.x.jobs[a].state == "preempted"               # it has run
    sched.at(LEAD_FREE + 4 * R)
    again = sched.sent.runs[-1]
    assert (again.job_id, again.steps_done, again.lease.extended) == (a, 200, False)


def test_a_job_held_after_the_plan_is_not_launched_at_the_round_start(sched):
    """The next round was planned with the job (``plan_lead`` before it starts); held in
    between, it never starts, and its GPU goes to the other job for the round."""
    a, b = submit(sched).job_id, submit(sched).job_id
    sched.at(LEAD_FREE)
    (first,) = launched(sched)
    other = b if first == a else a
    sched.t = LEAD_FREE + 0.5
    sched.init(first)
    sched.at(LEAD_FREE + R - sched.x.config.plan_lead)
    assert other in sched.x.driver.planned.batch.keys          # planned for round 1
    sched.x.calls.hold(ALICE, other, "")
    sched.t = LEAD_FREE + R - 0.1
    sched.exited(first, 100)
    sched.at(LEAD_FREE + R)
    assert other not in launched(sched) and other not in sched.x.runs
    assert launched(sched) == [first, first]                   # the freed GPU's refill
    assert sched.x.jobs[other].state == "held" and sched.x.jobs[other].started_s is None


def test_a_job_held_while_its_move_waits_for_its_last_run_is_not_launched(sched):
    """Round 1 swaps the jobs of a v100 and a k80 server; each new placement waits for the
    job's last run to save and exit. The job held meanwhile is not launched when it does;
    the other one is (and the third job gets the GPU it would have had)."""
    k80 = sched.x.roster.register(pb.RegisterWorkerRequest(
        worker_type="k80", gpus=1, address="127.0.0.1:2", hostname="h2",
        previous_server_id=-1), sched.t).server_id
    submit(sched), submit(sched), submit(sched)
    sched.at(LEAD_FREE)
    first = {r.job_id: r for r in sched.x.runs.live()}
    sched.t = LEAD_FREE + 0.5
    for run in first.values():
        sched.x.processes.init_job(pb.InitJobRequest(job_id=run.job_id, server_id=min(run.servers),
                                                     generation=run.generation))
    sched.at(LEAD_FREE + R - sched.x.config.plan_lead)
    sched.at(LEAD_FREE + R)
    moved = [r.job_id for r in sched.x.runs.live() if r.round == 0]
    assert sorted(moved) == sorted(first) and not launched(sched, 2)   # both wait
    held, other = moved
    sched.x.calls.hold(ALICE, held, "")
    sched.t = LEAD_FREE + R + 0.5
    for job_id, run in first.items():
        for server in run.servers:
            sched.x.processes.round_report(pb.RoundReportRequest(
                server_id=server, job_id=job_id, steps=100, seconds=1.0,
                generation=run.generation))
    pump(sched)
    assert other in launched(sched, 2) and held not in launched(sched, 2)
    # (sent once its last run saved: the round's dispatch line counts it apart)
    assert {kind for r, kind in zip(sched.sent.runs, sched.sent.kinds)
            if r.job_id == other and r.round == 1} == {AFTER_SAVE}
    assert held not in sched.x.runs and sched.x.jobs[held].state == "held"
    assert {sched.server, k80} == {min(r.servers) for r in first.values()}


def test_released_before_its_lease_ends_the_run_goes_on(sched):
    a = submit(sched).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.5
    sched.init(a)
    sched.x.calls.hold(ROOT, a, "")
    sched.x.calls.release(ROOT, a)
    assert sched.x.jobs[a].state == "running" and in_core(sched, a)
    assert not sched.sent.kills
    assert play(sched, 0, 3, {}) in ([[a]] * 3, [[], [a], [a]])


def test_a_held_job_whose_run_made_its_last_steps_is_done(sched):
    a = submit(sched, steps=300).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.5
    sched.init(a)
    sched.x.calls.hold(ROOT, a, "")
    sched.x.processes.durable_steps(a, 300, sched.gen(a))
    assert sched.x.jobs[a].state == "done"


def test_hold_and_release_refusals_change_nothing(sched, tmp_path):
    a = submit(sched).job_id
    b = submit(sched, BOB).job_id
    sched.x.calls.hold(ALICE, a, "")
    before = store_dump(tmp_path)
    refusals = [
        (lambda: sched.x.calls.hold(ALICE, a, ""), ControlError, f"cannot hold job {a}: it "
                                                                 "is held"),
        (lambda: sched.x.calls.release(BOB, b), ControlError, f"cannot release job {b}: it "
                                                              "is queued"),
        (lambda: sched.x.calls.hold(ALICE, "nope", ""), LookupError, "unknown job 'nope'"),
        (lambda: sched.x.calls.hold(ALICE, b, ""), Denied, f"alice may not hold job {b} "
                                                          "(submitted by bob)"),
        (lambda: sched.x.calls.release(BOB, a), Denied, "bob may not release"),
        (lambda: sched.x.calls.hold(Caller("w", DAEMON), b, ""), Denied, "w may not hold"),
        (lambda: sched.x.calls.hold(ROOT, b, "a\0b"), ValueError, "reason: must not contain "
                                                                  "a NUL"),
        (lambda: sched.x.calls.hold(ROOT, b, "two\nlines"), ValueError,
         "reason: must not contain control characters"),
    ]
    for call, kind, words in refusals:
        with pytest.raises(kind) as err:
            call()
        assert words in str(err.value) and "\n" not in str(err.value)
    assert store_dump(tmp_path) == before
    sched.x.cancel(b)
    with pytest.raises(ControlError, match=f"cannot hold job {b}: it is cancelled"):
        sched.x.calls.hold(ROOT, b, "")


# ---- update ------------------------------------------------------------------------------
def test_update_changes_the_share_from_the_next_round(sched, tmp_path):
    """Two backlogged jobs on one GPU take turns; at weight 3 one gets three rounds in four
    (max-min fairness over weighted throughputs, thesis §5.4.1)."""
    a, b = submit(sched).job_id, submit(sched).job_id
    sched.at(LEAD_FREE)
    steps: dict[str, int] = {}
    even = play(sched, 0, 6, steps)
    assert sum(r == [a] for r in even) == 3 and sum(r == [b] for r in even) == 3
    sched.x.calls.update(ALICE, pb.UpdateRequest(job_id=b, priority_weight=3.0), ())
    assert sched.x.jobs[b].spec.priority_weight == 3.0
    assert status(sched)[b].priority_weight == 3.0
    assert actions(sched, b)[-1] == ("alice", "update", "priority_weight 3.0")
    weighted = play(sched, 6, 8, steps)
    assert sum(r == [b] for r in weighted) >= 5 and sum(r == [a] for r in weighted) >= 1
    s2 = restart(sched, tmp_path)
    assert s2.x.jobs[b].spec.priority_weight == 3.0
    s2.close()


def test_update_of_a_held_job_is_in_force_at_its_release(sched):
    a, b = submit(sched).job_id, submit(sched).job_id
    sched.x.calls.hold(ALICE, a, "")
    sched.x.calls.update(ALICE, pb.UpdateRequest(job_id=a, priority_weight=3.0,
                                                 entity="team-b"), ())
    assert not in_core(sched, a)
    sched.x.calls.release(ALICE, a)
    assert (sched.x.jobs[a].spec.priority_weight, sched.x.jobs[a].spec.entity) == (3.0,
                                                                                   "team-b")
    sched.at(LEAD_FREE)
    rounds = play(sched, 0, 8, {})
    assert sum(r == [a] for r in rounds) >= 5 and sum(r == [b] for r in rounds) >= 1


def test_update_refusals_change_nothing(sched, tmp_path):
    done = submit(sched, steps=5).job_id
    run_to_done(sched, done)
    a = submit(sched).job_id
    before = store_dump(tmp_path)
    for req, kind, words in [
            (pb.UpdateRequest(job_id=a), ControlError, "give a priority weight or an entity"),
            (pb.UpdateRequest(job_id=a, priority_weight=math.nan), ValueError,
             "priority_weight"),
            (pb.UpdateRequest(job_id=a, priority_weight=-1.0), ValueError, "priority_weight"),
            (pb.UpdateRequest(job_id=a, priority_weight=1e9), ValueError, "priority_weight"),
            (pb.UpdateRequest(job_id=a, entity="x\0y"), ValueError, "entity: must not"),
            (pb.UpdateRequest(job_id=done, priority_weight=2.0), ControlError,
             f"cannot update job {done}: it is done"),
            (pb.UpdateRequest(job_id="9_9", priority_weight=2.0), LookupError, "unknown job")]:
        with pytest.raises(kind, match=words):
            sched.x.calls.update(ALICE, req, ())
    with pytest.raises(Denied):
        sched.x.calls.update(BOB, pb.UpdateRequest(job_id=a, priority_weight=2.0), ())
    assert store_dump(tmp_path) == before


# ---- after -------------------------------------------------------------------------------
def test_after_waits_until_done_and_a_chain_cascades_a_cancel(sched):
    a = submit(sched, steps=100).job_id
    b = submit(sched, after=[a]).job_id
    c = submit(sched, after=[b]).job_id
    assert sched.x.jobs[b].after == (a,) and not in_core(sched, b) and not in_core(sched, c)
    shown = status(sched)
    assert shown[b].reason == f"waiting for {a} (after)" and list(shown[b].after) == [a]
    assert shown[c].reason == f"waiting for {b} (after)"
    run_to_done(sched, a)
    assert in_core(sched, b) and not in_core(sched, c)
    assert status(sched)[c].reason == f"waiting for {b} (after)"
    sched.x.cancel(b)
    pump(sched)
    assert sched.x.jobs[c].state == "cancelled"
    assert sched.x.jobs[c].reason == f"dependency {b} cancelled"
    assert actions(sched, c)[-1] == ("scheduler", "cancelled", f"dependency {b} cancelled")


def test_a_chain_of_three_is_cancelled_down_from_its_head(sched):
    d = submit(sched).job_id
    e = submit(sched, after=[d]).job_id
    f = submit(sched, after=[e]).job_id
    g = submit(sched, after=[f, d]).job_id
    sched.x.cancel(d)
    pump(sched)
    rows = sched.x.jobs
    assert [rows[j].state for j in (d, e, f, g)] == ["cancelled"] * 4
    assert (rows[e].reason, rows[f].reason) == (f"dependency {d} cancelled",
                                                f"dependency {e} cancelled")
    assert rows[g].reason in (f"dependency {d} cancelled", f"dependency {f} cancelled")


def test_a_held_dependant_waits_for_both_its_release_and_its_dependency(sched):
    a = submit(sched, steps=100).job_id
    b, c = submit(sched, after=[a]).job_id, submit(sched, after=[a]).job_id
    sched.x.calls.hold(ALICE, b, "")
    sched.x.calls.hold(ALICE, c, "")
    sched.x.calls.release(ALICE, b)                 # released, still waiting for a
    assert sched.x.jobs[b].state == "queued" and not in_core(sched, b)
    assert status(sched)[b].reason == f"waiting for {a} (after)"
    run_to_done(sched, a)
    assert in_core(sched, b) and not in_core(sched, c)          # c is still held
    assert sched.x.jobs[c].state == "held"
    sched.x.calls.release(ALICE, c)
    assert in_core(sched, c) and sched.x.jobs[c].state == "queued"


def test_after_a_job_already_ended(sched):
    done = submit(sched, steps=5).job_id
    run_to_done(sched, done)
    gone = submit(sched).job_id
    sched.x.cancel(gone)
    pump(sched)
    ready = submit(sched, after=[done]).job_id
    assert in_core(sched, ready) and sched.x.jobs[ready].state == "queued"
    late = submit(sched, after=[done, gone]).job_id
    assert sched.x.jobs[late].state == "cancelled"
    assert sched.x.jobs[late].reason == f"dependency {gone} cancelled"


def test_after_a_failed_job_cancels_with_its_state(sched):
    a = submit(sched, max_runtime_s=5).job_id
    b = submit(sched, after=[a]).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.2
    sched.init(a)
    sched.t = LEAD_FREE + 5.5
    sched.exited(a, 0)
    pump(sched)
    assert sched.x.jobs[a].state == "failed"
    assert sched.x.jobs[b].reason == f"dependency {a} failed"


def test_after_an_array_waits_for_each_copy(sched):
    arr = submit(sched, steps=5, count=2)
    x = submit(sched, after=[arr.array_id]).job_id
    assert sched.x.jobs[x].after == tuple(arr.job_ids)
    finished(sched, arr.job_ids[0])
    assert status(sched)[x].reason == f"waiting for {arr.job_ids[1]} (after)"
    finished(sched, arr.job_ids[1])
    assert in_core(sched, x)


@pytest.mark.parametrize("after, count, words", [
    (["nope"], 1, "after: no job or array 'nope'"),
    (["{next}"], 1, "after: {next} is this submission itself"),
    (["{next}"], 3, "after: {next} is this submission itself"),
    (["{next}_2"], 3, "after: {next}_2 is this submission itself"),
    (["{next}_3"], 3, "after: no job or array '{next}_3'"),
    (["0", "7"], 1, "after: no job or array '7'"),
])
def test_a_dependency_on_no_job_or_on_itself_is_refused(sched, tmp_path, after, count,
                                                         words):
    submit(sched)                                     # job 0
    nxt = str(sched.store.next_job_id())
    before = store_dump(tmp_path)
    with pytest.raises(SubmissionError) as err:
        submit(sched, after=[a.format(next=nxt) for a in after], count=count)
    assert str(err.value).startswith(words.format(next=nxt)), err.value
    assert store_dump(tmp_path) == before and list(sched.x.jobs) == ["0"]


# ---- arrays ------------------------------------------------------------------------------
def test_an_array_is_its_copies_for_every_call(sched):
    arr = submit(sched, steps=5, count=3)
    first = arr.array_id
    assert list(arr.job_ids) == [f"{first}_{i}" for i in range(3)] and arr.job_id == f"{first}_0"
    rows = [sched.x.jobs[j] for j in arr.job_ids]
    assert [(r.array_id, r.array_index) for r in rows] == [(first, i) for i in range(3)]
    assert [j.array_index for j in (status(sched)[i] for i in arr.job_ids)] == [0, 1, 2]
    sched.x.calls.hold(ALICE, first, "all")
    assert {sched.x.jobs[j].state for j in arr.job_ids} == {"held"}
    sched.x.calls.release(ALICE, first)
    sched.x.calls.update(ALICE, pb.UpdateRequest(job_id=first, priority_weight=2.0), ())
    assert {sched.x.jobs[j].spec.priority_weight for j in arr.job_ids} == {2.0}
    finished(sched, arr.job_ids[1])                  # one copy done
    with pytest.raises(Denied):
        sched.x.calls.cancel(BOB, first)
    ack = sched.x.calls.cancel(ALICE, first)
    assert ack.ok and ack.message == "cancelled 2 jobs"
    assert [sched.x.jobs[j].state for j in arr.job_ids] == ["cancelled", "done", "cancelled"]
    assert not sched.x.calls.cancel(ALICE, first).ok
    assert [e[1] for e in actions(sched, arr.job_ids[0])] == [
        "submit", "hold", "release", "update", "cancel", "cancelled"]
    by_array = sched.x.calls.history(ALICE, first).events      # (its first copy's)
    assert [e.action for e in by_array] == [e[1] for e in actions(sched, arr.job_ids[0])]


def test_an_array_at_the_limit_of_copies(sched):
    with pytest.raises(SubmissionError, match=f"count: must be between 1 and {MAX_ARRAY}, got "
                                              f"{MAX_ARRAY + 1}"):
        submit(sched, count=MAX_ARRAY + 1)
    one = submit(sched, count=1)
    assert (one.array_id, list(one.job_ids)) == ("", [one.job_id])


# ---- time limits -------------------------------------------------------------------------
def test_a_time_limit_bounds_the_leases_and_fails_the_job(sched):
    j = submit(sched, max_runtime_s=15).job_id
    sched.at(LEAD_FREE)
    assert sched.sent.runs[-1].lease.max_seconds == pytest.approx(R)
    sched.t = LEAD_FREE + 0.5
    assert sched.init(j).max_seconds == pytest.approx(R)
    sched.at(LEAD_FREE + R - sched.x.config.plan_lead)
    extension = sched.sent.runs[-1]
    assert extension.lease.extended and extension.lease.max_seconds == pytest.approx(15)
    sched.at(LEAD_FREE + R)
    sched.t = LEAD_FREE + 15.5                 # stopped at its checkpoint after 15 s
    sched.x.processes.durable_steps(j, 300, sched.gen(j))
    sched.exited(j, 300)
    pump(sched)
    row = sched.x.jobs[j]
    assert row.state == "failed" and row.reason.startswith("time limit")
    assert row.reason == "time limit (16s run of max_runtime_s 15)"
    assert row.steps_done == 300                # its last checkpoint counted
    shown = status(sched)[j]
    assert shown.max_runtime_s == 15 and shown.run_s == pytest.approx(15.5, abs=0.6)
    (usage,) = sched.store.usage()
    assert usage[0] == j and usage[7] - usage[6] == pytest.approx(shown.run_s)


def test_a_run_that_ends_early_leaves_the_rest_of_the_limit(sched):
    j = submit(sched, max_runtime_s=25).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.5
    sched.init(j)
    sched.t = LEAD_FREE + 8.5                  # (preempted, as by a drain) after 8 s
    sched.exited(j, 100)
    pump(sched)
    assert sched.x.jobs[j].state == "preempted"
    assert sched.x.tenancy.meter.allowed_s(sched.x.jobs[j]) == pytest.approx(17.0, abs=0.6)


def test_the_time_run_before_a_restart_counts_against_the_limit(sched, tmp_path):
    j = submit(sched, max_runtime_s=25).job_id
    sched.at(LEAD_FREE)
    sched.t = LEAD_FREE + 0.5
    sched.init(j)
    sched.t = LEAD_FREE + 8.5
    sched.exited(j, 100)
    s2 = restart(sched, tmp_path)
    assert s2.x.tenancy.meter.allowed_s(s2.x.jobs[j]) == pytest.approx(17.0, abs=0.6)
    assert status(s2)[j].run_s == pytest.approx(8.0, abs=0.6)
    s2.close()


# ---- restart -----------------------------------------------------------------------------
def test_holds_arrays_dependencies_and_limits_survive_a_restart(sched, tmp_path):
    held = submit(sched).job_id
    sched.x.calls.hold(ALICE, held, "why not")
    arr = submit(sched, count=2)
    waits = submit(sched, after=[held]).job_id
    limited = submit(sched, max_runtime_s=42).job_id
    a = submit(sched).job_id
    doomed = submit(sched, after=[a]).job_id
    sched.x.cancel(a)            # the daemon stops before its dependant is seen to
    s2 = restart(sched, tmp_path)
    rows = s2.x.jobs
    assert (rows[held].state, rows[held].reason) == ("held", "why not")
    assert not in_core(s2, held) and not in_core(s2, waits)
    assert rows[waits].after == (held,) and rows[limited].max_runtime_s == 42
    assert (rows[doomed].state, rows[doomed].reason) == ("cancelled", f"dependency {a} "
                                                                      "cancelled")
    assert s2.x.calls.cancel(ALICE, arr.array_id).message == "cancelled 2 jobs"
    s2.x.calls.release(ALICE, held)
    assert in_core(s2, held) and not in_core(s2, waits)
    s2.x.cancel(held)
    pump(s2)
    assert rows[waits].state == "cancelled"
    s2.close()


# ---- the doors, fuzzed -------------------------------------------------------------------
def store_dump(tmp_path) -> list[str]:
    """Every row of the scheduler's store, read on a connection of its own."""
    db = sqlite3.connect(f"file:{tmp_path / 'state' / 'gavelsched.db'}?mode=ro", uri=True)
    try:
        return list(db.iterdump())
    finally:
        db.close()


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
EDGE_FLOATS = st.sampled_from([0.0, -0.0, -5.0, 1e-9, 0.5, 1e308, math.nan, math.inf,
                               -math.inf])
FLOATS = st.one_of(st.just(0.0), st.floats(1.0, 1e6), EDGE_FLOATS, st.floats())
COUNTS = st.one_of(st.integers(0, 3), st.sampled_from([-1, MAX_ARRAY + 1, 2**31 - 1,
                                                       -(2**31)]),
                   st.integers(MAX_ARRAY + 1, 2**31 - 1), st.integers(-(2**31), 0))
CALLERS = st.sampled_from([ROOT, ROOT, ALICE, ALICE, BOB, Caller("w", DAEMON),
                           Caller("j", JOB, job="0")])
ENTITIES = st.one_of(st.sampled_from(["", "team-a"]), TEXT)
REFUSED = (SubmissionError, ControlError, Denied)


# A job id the fuzz names: a job's (a number), an array's copies', the next one's or its
# copies', the newest array's, or any text.
NAMES = st.one_of(st.integers(0, 8).map(str),
                  st.sampled_from(["1_0", "1_1", "1_2", "1_3", "next", "next_0", "next_1",
                                   "array", "", "-1"]), TEXT)


def named(s: Scheduler, name: str) -> str:
    nxt = str(s.store.next_job_id())
    arrays = sorted({r.array_id for r in s.x.jobs.values() if r.array_id})
    if name == "array":
        return arrays[-1] if arrays else nxt
    return name.replace("next", nxt) if name.startswith("next") else name


def picture(s: Scheduler, tmp_path) -> tuple:
    return (store_dump(tmp_path), dict(s.x.jobs), set(s.x.core.active_ids),
            s.x.core.pending_jobs)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """One scheduler for every example of the fuzz (its jobs pile up: dependencies on them)."""
    path = tmp_path_factory.mktemp("fuzz")
    s = Scheduler(path)
    s.path = path
    for kw in ({}, {"count": 3}, {}, {"after": ["0"]}):       # 0, 1_0..1_2, 4, 5
        s.x.calls.submit(ALICE, request(**kw), s.x.door())
    s.x.calls.submit(BOB, request(), s.x.door())                # 6
    s.x.calls.hold(ALICE, "4", "")
    yield s
    s.close()


GOOD = {"caller": st.sampled_from([ROOT, ALICE, BOB]), "count": st.integers(0, 3),
        "limit": st.just(0.0) | st.floats(1.0, 1e6), "entity": st.sampled_from(["", "team-a"]),
        "after": st.lists(st.sampled_from(["0", "1", "1_0", "1_2", "4", "5", "6"]),
                          max_size=3)}
ANY = {"caller": CALLERS, "count": COUNTS, "limit": FLOATS, "entity": ENTITIES,
       "after": st.lists(NAMES, max_size=3)}


@st.composite
def submissions(draw) -> dict:
    """Every field good but at most one, which may be anything (so that each check of the
    door is reached, and good submissions are common)."""
    wild = draw(st.sampled_from([None, *GOOD]))
    return {k: draw(ANY[k] if k == wild else GOOD[k]) for k in GOOD}


@FUZZ
@given(sub=submissions())
@example(sub={"caller": ROOT, "count": 0, "limit": -5.0, "entity": "", "after": []})
@example(sub={"caller": ROOT, "count": MAX_ARRAY + 1, "limit": 0.0, "entity": "", "after": []})
@example(sub={"caller": ROOT, "count": 2, "limit": math.nan, "entity": "", "after": []})
@example(sub={"caller": ROOT, "count": 3, "limit": 0.0, "entity": "", "after": ["next_2"]})
@example(sub={"caller": ROOT, "count": 1, "limit": 0.0, "entity": "", "after": ["0", "array"]})
def test_the_submit_door_refuses_in_one_line_and_changes_nothing(fuzzed, sub):
    caller, count, limit, entity, after = (sub[k] for k in GOOD)
    s = fuzzed
    after = [named(s, a) for a in after]
    req = request(100, count=count, max_runtime_s=limit, entity=entity, after=after)
    before = picture(s, s.path)
    try:
        reply = s.x.calls.submit(caller, req, s.x.door())
    except REFUSED as err:
        event(f"refused: {type(err).__name__} {str(err).split(':')[0]}")
        assert "\n" not in str(err) and str(err)
        assert picture(s, s.path) == before
        return
    event("accepted")
    assert 0 <= count <= MAX_ARRAY and caller.role in (ADMIN, USER)
    assert math.isfinite(limit) and limit >= 0
    want = max(count, 1)
    assert len(reply.job_ids) == want and len(s.x.jobs) == len(before[1]) + want
    assert bool(reply.array_id) == (count > 1)
    for job_id in reply.job_ids:
        row = s.x.jobs[job_id]
        assert row.max_runtime_s == (limit or None) and row.user == caller.name
        assert set(row.after) <= set(before[1])          # only jobs that were there
        assert row.state in ("queued", "cancelled")


CALLS = ("hold", "release", "update", "cancel", "history", "usage")


@FUZZ
@given(name=NAMES, call=st.sampled_from(CALLS), caller=CALLERS, weight=FLOATS,
       text=st.one_of(st.sampled_from(["", "x", "team-a", "entity", "type", "a\nb", "a\0b"]),
                      TEXT))
@example(name="0", call="usage", caller=ROOT, weight=math.nan, text="")
@example(name="0", call="update", caller=ROOT, weight=math.inf, text="")
@example(name="0", call="hold", caller=ROOT, weight=0.0, text="a\0b")
def test_the_control_doors_refuse_in_one_line_and_change_nothing(fuzzed, name, call, caller,
                                                                  weight, text):
    """hold, release, update, cancel, history and usage with any id, reason, weight,
    entity or ``since``: an answer, or a refusal of its door (NOT_FOUND, PERMISSION_DENIED,
    INVALID_ARGUMENT) in one line that changed nothing."""
    s = fuzzed
    job_id = named(s, name)
    calls = s.x.calls
    do = {"hold": lambda: calls.hold(caller, job_id, text),
          "release": lambda: calls.release(caller, job_id),
          "update": lambda: calls.update(caller, pb.UpdateRequest(
              job_id=job_id, priority_weight=weight, entity=text), ()),
          "cancel": lambda: calls.cancel(caller, job_id),
          "history": lambda: calls.history(caller, job_id),
          "usage": lambda: calls.usage(pb.UsageRequest(by=text, since_unix=weight))}[call]
    before = picture(s, s.path)
    try:
        do()
        event(f"{call}: answered")
    except (LookupError, ValueError, Denied) as err:
        event(f"{call}: {type(err).__name__}")
        assert "\n" not in str(err) and str(err)
        assert picture(s, s.path) == before


# ---- the job YAML's new keys and --count at the CLI's door ----------------------------------
# Values of every kind YAML holds, leaning to the edges (as tests/cli/test_fuzz_inputs.py).
YAML_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 5, 2**63, 10**400, 0.0, -0.0, 1e-300, 3.5, 1e308, math.nan,
                     math.inf, -math.inf, "", "7", "7_1", "a\nb", "x\0y", True, None,
                     [], ["1", 2], [True], [1.5], ["ok", ""], [["nested"]], {"a": 1}]),
    st.integers(), st.floats(), st.text(max_size=6),
    st.lists(st.one_of(st.integers(), st.text(max_size=4)), max_size=3))


def _id_ok(x) -> bool:
    if type(x) is int:
        return True
    return type(x) is str and x != "" and not any(c < " " or c == "\x7f" for c in x)


def acceptable(limit, after, count) -> bool:
    """The new keys' rules restated on their own: ``max_runtime_s`` a finite number > 0
    (or null), ``after`` one id or a list of at most ``MAX_AFTER`` (an id: a non-empty
    one-line string, or an integer), ``--count`` 1..10,000."""
    ok_limit = limit is None or (type(limit) in (int, float) and _finite(limit) and limit > 0)
    if after is None:
        ok_after = True
    elif type(after) in (str, int):
        ok_after = _id_ok(after)
    else:
        ok_after = type(after) is list and len(after) <= MAX_AFTER and all(map(_id_ok, after))
    return ok_limit and ok_after and (count is None or 1 <= count <= MAX_ARRAY)


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("yaml")


@FUZZ
@given(limit=st.one_of(st.none(), st.floats(0.5, 1e6), YAML_VALUES),
       after=st.one_of(st.none(), st.lists(st.integers(0, 99) | st.sampled_from(["3", "4_1"]),
                                           max_size=3), YAML_VALUES),
       count=st.one_of(st.none(), st.integers(1, 5),
                       st.sampled_from([0, MAX_ARRAY, MAX_ARRAY + 1, -1]), st.integers()))
@example(limit=-5, after=None, count=None)
@example(limit=math.nan, after=None, count=None)
@example(limit=None, after=None, count=0)
@example(limit=None, after=None, count=MAX_ARRAY + 1)
@example(limit=None, after=["ok"] * (MAX_AFTER + 1), count=None)
@example(limit=None, after="\x85", count=None)
def test_the_cli_door_of_the_new_keys(limit, after, count, capsys, scratch):
    """``gavelsched submit JOB.yaml [--count N]`` towards a port where no scheduler listens:
    a job the door lets through fails only at the connection; one it refuses exits 2 with
    one line naming the key first. What it would send is the request of the same file."""
    path = scratch / "job.yaml"
    job = {"job_type": "A3C", "total_steps": 5, "max_runtime_s": limit, "after": after}
    path.write_text(yaml.safe_dump(job, allow_unicode=True))
    after = yaml.safe_load(path.read_text())["after"]   # as YAML reads it back (a NEL: " ")
    argv = ["submit", str(path), "--scheduler", f"127.0.0.1:{free_port()}"]
    rc = main(argv + (["--count", str(count)] if count is not None else []))
    err = capsys.readouterr().err
    assert "Traceback" not in err and rc == 2, err
    (line,) = err.strip().splitlines()
    passed = "cannot reach the scheduler" in line
    assert passed == acceptable(limit, after, count), line
    event("accepted" if passed else "refused")
    if not passed:
        assert any(k in line for k in ("max_runtime_s", "after", "count")), line
        return
    request = JobRequest.from_yaml(path).to_pb()
    assert request.max_runtime_s == (float(limit) if limit is not None else 0.0)
    ids = [] if after is None else [after] if not isinstance(after, list) else after
    assert list(request.after) == [str(a) for a in ids]


@pytest.mark.parametrize("steps", [2**53 + 1, 2**63 - 1])
def test_more_steps_than_float64_counts_exactly_are_refused_at_submission(tmp_path, steps):
    """The scheduler counts steps left in float64 too (``traces.checks.MAX_STEPS``): 2^63 - 1
    steps overflowed the core's int64 cast of them (a numpy warning, a negative count)."""
    s = Scheduler(tmp_path)
    try:
        with pytest.raises(ValueError, match="^total_steps: must be > 0 and <= 9007199254740992"):
            s.submit(steps=steps)
        assert s.submit(steps=2**53)
    finally:
        s.close()
