"""Job states and times (issue #18): a job is ``queued`` until its first process starts,
``running`` while a process of it runs, ``preempted`` between its runs (not ``queued``
again), then done, failed or cancelled; its first start is kept in the store, and every
final state has an end time. The same states show in ``Status`` (filtered by state, type
and entity), the Prometheus gauge and the round's log line.

The real ``DaemonExecutor`` (real core, policy, SQLite store) on a hand-moved clock
(``test_round_aligned.Scheduler``)."""

from __future__ import annotations

import logging
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.daemon.metrics import DaemonMetrics
from gavelsched.daemon.jobs import FINAL, STATES
from gavelsched.daemon.snapshot import Snapshot, build_snapshot
from gavelsched.rpc import pb

from .test_round_aligned import R, Scheduler


def at(t: float):
    """The daemon's clock at the test's ``t`` (its origin is the state's first start, a
    moment before the clock the test moves began)."""
    return pytest.approx(t, abs=0.5)


def status(s: Scheduler, **filters) -> dict[str, pb.JobStatus]:
    snap = build_snapshot(s.x.view(s.x.now()))
    return {j.id: j for j in snap.status(pb.StatusRequest(**filters)).jobs}


def gauge(s: Scheduler) -> dict[str, float]:
    metrics = DaemonMetrics()
    metrics.on_state(s.x.view(s.x.now()))
    return {sample.labels["state"]: sample.value for family in metrics.registry.collect()
            if family.name == "gavelsched_jobs" for sample in family.samples}


def test_a_started_job_is_preempted_between_its_runs_and_keeps_its_first_start(tmp_path):
    s = Scheduler(tmp_path)
    job, never = s.submit(steps=1000), s.submit(steps=1000)
    s.at(1.0)                                          # round 0: one job placed
    placed = s.sent.runs[0].job_id
    assert placed in (job, never)
    job, never = placed, ({job, never} - {placed}).pop()
    assert s.x.jobs[job].state == "queued"             # dispatched, its process not started
    s.t = 3.0
    s.init(job)
    got = status(s)
    assert (got[job].state, got[job].started_s, got[job].ended_s) == ("running", at(3.0), -1.0)
    assert got[never].state == "queued" and got[never].started_s == -1.0
    s.t = 4.0
    s.exited(job, 50)                                  # its run ended: waits for the next
    got = status(s)
    assert got[job].state == "preempted" and got[job].started_s == at(3.0)
    assert got[job].steps_done == 50 and got[job].worker_type == ""
    # a preempted job also says why it waits, with what it received against X
    assert got[job].reason.startswith("pending: waiting its turn (allocation: v100 ")
    assert "; received: v100 " in got[job].reason, got[job].reason
    assert "received" not in got[never].reason           # never ran: X only
    assert gauge(s) == {"queued": 1, "running": 0, "preempted": 1, "held": 0, "done": 0,
                        "failed": 0, "cancelled": 0}
    assert set(status(s, states=["preempted"])) == {job}
    assert set(status(s, active=True)) == {job, never}
    s.close()

    again = Scheduler(tmp_path)          # a restart: the first start was kept
    assert again.x.jobs[job].state == "preempted"
    assert again.x.jobs[job].started_s == got[job].started_s
    assert again.x.jobs[never].state == "queued" and again.x.jobs[never].started_s is None
    again.close()


def test_final_states_have_an_end_time_and_done_has_its_jct(tmp_path):
    s = Scheduler(tmp_path)
    done = s.submit(steps=100)
    s.at(1.0)
    s.t = 2.0
    s.init(done)
    cancelled = s.submit(steps=100)
    s.t = 5.0
    assert s.x.cancel(cancelled).ok
    s.t = 6.0
    s.x.processes.durable_steps(done, 100, s.gen(done))
    got = status(s)
    assert (got[cancelled].state, got[cancelled].ended_s) == ("cancelled", at(5.0))
    assert got[cancelled].completion_s == -1.0         # completion: done jobs only
    assert got[done].state == "done" and got[done].ended_s == got[done].completion_s == at(6.0)
    assert set(status(s, states=["done", "cancelled"])) == {done, cancelled}
    assert status(s, active=True) == {}
    s.close()
    again = Scheduler(tmp_path)
    assert (again.x.jobs[cancelled].ended_s, again.x.jobs[done].ended_s) == (
        got[cancelled].ended_s, got[done].ended_s)
    again.close()


def test_status_filters_by_type_and_entity(tmp_path):
    s = Scheduler(tmp_path)
    a = s.x.submit(pb.JobRequest(job_type="A3C", total_steps=10, workload="steps",
                                 entity="teamA"))
    b = s.x.submit(pb.JobRequest(job_type="ResNet-50 (batch size 16)", total_steps=10,
                                 entity="teamA"))
    c = s.x.submit(pb.JobRequest(job_type="A3C", total_steps=10, workload="steps",
                                 entity="teamB"))
    assert set(status(s, entity="teamA")) == {a, b}
    assert set(status(s, job_type="A3C")) == {a, c}
    assert set(status(s, job_type="ResNet-50")) == {b}           # its batch sizes too
    assert status(s, job_type="ResNet-5") == {}
    assert set(status(s, job_type="A3C", entity="teamA", states=["queued"])) == {a}
    assert status(s, job_type="A3C", states=["running"]) == {}
    assert status(s)[b].entity == "teamA"
    s.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STATES), st.sampled_from(["A3C", "A3C (batch size 4)",
                                                                    "LM"]),
                          st.sampled_from(["", "teamA"])), max_size=30),
       st.sets(st.sampled_from(STATES)), st.booleans(), st.sampled_from(["", "A3C"]))
def test_a_filtered_status_keeps_the_picture_s_order(jobs, states, active, kind):
    """The jobs in some states are found by an index (a poll at 50,000 jobs read every
    one): the same jobs, in the same order, as a plain filter over the picture."""
    response = pb.StatusResponse(jobs=[
        pb.JobStatus(id=f"j{i}", state=s, job_type=t, entity=e)
        for i, (s, t, e) in enumerate(jobs)])
    snapshot = Snapshot(0, "fifo", 1.0, 0.0, response)
    request = pb.StatusRequest(states=sorted(states), active=active, job_type=kind)
    wanted = (set(states) or set(STATES)) - (FINAL if active else set())
    expected = [j.id for j in response.jobs if j.state in wanted and (
        not kind or j.job_type == kind or j.job_type.startswith(kind + " ("))]
    if not (states or active or kind):
        expected = [j.id for j in response.jobs]
    assert [j.id for j in snapshot.status(request).jobs] == expected


def test_each_round_start_logs_one_line_at_info(tmp_path, caplog):
    """One line a round, written once its launches are sent: how late it began against
    its boundary (the first after idle has none) and how long the launches took, so that
    the boundaries read from the log are the round's own (issue #30)."""
    s = Scheduler(tmp_path)
    s.submit(), s.submit()
    place = s.x.runs.place

    def slow_place(*args, **kwargs):       # the launches take half a second
        place(*args, **kwargs)
        s.t += 0.5

    s.x.runs.place = slow_place
    with caplog.at_level(logging.INFO, logger="gavelsched.daemon.executor"):
        s.at(1.0)
        s.at(1.0 + R - 0.3 * R)             # the next plan, ``plan_lead`` before
        s.at(1.0 + R + 0.25)                # the loop wakes a quarter second late
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("round ")]
    own = r" \((\d+\.\d\d) s of it the executor's own work\)"     # its CPU: this machine's
    assert len(lines) == 2
    assert re.fullmatch(
        r"round 0: 1 jobs running, 1 queued, 0 preempted, 0 finished; GPUs 1 busy of 1; "
        r"began 0\.00 s after its boundary, launched in 0\.50 s" + own, lines[0])
    assert re.fullmatch(
        r"round 1: 1 jobs running, 1 saving, 0 queued, 0 preempted, 0 finished; GPUs 1 busy "
        r"of 1; began 0\.25 s after its boundary, launched in 0\.50 s" + own, lines[1])
    s.close()


def test_a_plan_that_re_solved_the_allocation_says_so_in_its_dispatch_line(tmp_path, caplog):
    """The operator sees from the log which plans re-solved (the first one does; the next,
    with nothing changed, does not)."""
    s = Scheduler(tmp_path)
    s.submit(), s.submit()
    with caplog.at_level(logging.INFO, logger="gavelsched.daemon.dispatch"):
        lead = s.x.config.plan_lead
        for t in (1.0, 1.0 + R - lead, 1.0 + R, 1.0 + 2 * R - lead):   # plans and starts
            s.at(t)
    lines = [r.getMessage() for r in caplog.records if "planned in" in r.getMessage()]
    assert len(lines) == 2
    assert re.match(r"round 0: planned in \d+\.\d\d s, \d+\.\d\d s of it the executor's own "
                    r"work \(the allocation re-solved in ", lines[0])   # (the rest: GIL waits)
    assert lines[1].startswith("round 1: planned in ") and "re-solved" not in lines[1]
    s.close()


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
def test_a_re_solve_logs_its_allocation_at_debug_only(tmp_path, caplog, level):
    """``gavelsched -v scheduler`` says what each re-solve allocated (the core's solve logs
    it, so a refill's re-solve too), so that a replay's difference from the daemon can be
    traced to its inputs; at INFO it says nothing."""
    s = Scheduler(tmp_path)
    a, b = s.submit(), s.submit()
    with caplog.at_level(level, logger="gavelsched.core.solving"):
        s.at(1.0)                                   # the first plan re-solves
    lines = [r.getMessage() for r in caplog.records if "allocation {" in r.getMessage()]
    if level == logging.INFO:
        assert lines == []
    else:
        assert len(lines) == 1 and lines[0].startswith("re-solved at ")
        assert f"'{a}': {{" in lines[0] and f"'{b}': {{" in lines[0]
    s.close()


@pytest.mark.parametrize("job_state, started, steps, shown", [
    ("queued", None, 0, "queued"), ("running", 3.0, 0, "preempted"),
    ("queued", None, 7, "preempted")])     # a store from before started_s: durable steps
def test_a_restart_tells_a_job_that_started_from_one_that_never_did(tmp_path, job_state,
                                                                     started, steps, shown):
    s = Scheduler(tmp_path)
    job = s.submit(steps=100)
    # the store as a daemon that stopped left it (``x.jobs`` takes only transitions)
    s.store.update_jobs([s.x.jobs[job].but(state=job_state, started_s=started,
                                           steps_done=steps)])
    s.close()
    again = Scheduler(tmp_path)
    assert again.x.jobs[job].state == shown
    again.close()


def test_a_run_the_scheduler_kills_leaves_its_job_preempted(tmp_path):
    """(e.g. a rank failed and the job is tried again: ``retries``), not ``running``
    without a run."""
    s = Scheduler(tmp_path)
    job = s.submit()
    s.at(1.0)
    s.init(job)
    s.x.runs.kill(job, "tried again from its last checkpoint")
    assert job not in s.x.runs and s.x.jobs[job].state == "preempted"
    s.close()


def test_a_filtered_status_carries_every_field_of_the_picture_but_its_jobs():
    """``Snapshot.status`` copies the picture without its jobs, then the jobs asked for: a
    field the answer gains must be copied too (each set here to a value not its default).
    The ``period_*`` fields are only in the pictures the scheduler's own forecast replays
    (``forecast.py``), never in an answer."""
    from google.protobuf.descriptor import FieldDescriptor as F

    skipped = {"jobs", "caller", "period_start_s", "period_stale", "period_pairs",
               "period_policy_state"}
    response = pb.StatusResponse(jobs=[pb.JobStatus(id="a", state="queued"),
                                       pb.JobStatus(id="b", state="done")])
    values = {F.TYPE_DOUBLE: 1.5, F.TYPE_INT32: 3, F.TYPE_INT64: 3, F.TYPE_STRING: "x",
              F.TYPE_BOOL: True}
    for field in response.DESCRIPTOR.fields:
        if field.name in skipped:
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value = field.message_type.fields_by_name["value"]
            if value.type != F.TYPE_MESSAGE:
                getattr(response, field.name)["k"] = values[value.type]
                continue
            entry = getattr(response, field.name)["k"]     # a map of messages: every
            for inner in value.message_type.fields:        # number field of its entry set
                if inner.is_repeated:
                    getattr(entry, inner.name).append(values[inner.type])
                else:
                    setattr(entry, inner.name, values[inner.type])
        elif field.type == F.TYPE_MESSAGE:
            getattr(response, field.name).add()
        elif field.is_repeated:
            getattr(response, field.name).append(values[field.type])
        else:
            setattr(response, field.name, values[field.type])
    answer = Snapshot(0, "fifo", 1.0, 0.0, response).status(
        pb.StatusRequest(states=["queued"]), caller="u")
    assert [j.id for j in answer.jobs] == ["a"] and answer.caller == "u"
    for field in response.DESCRIPTOR.fields:
        if field.name not in skipped:
            assert getattr(answer, field.name) == getattr(response, field.name), field.name
