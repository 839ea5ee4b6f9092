"""A live scheduler that pairs jobs (thesis §5.3.1, a space-sharing policy) is replayed
pairing them: its ``Status`` carries the rates it plans pairs on (``pair_table``), and the
replay's pairs make the co-located rates (``Knowledge.shared``). Before, the replay's table
had no pair rates: every ETA under such a policy was the time-sliced one."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from gavelsched.daemon.forecast import with_period
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.rpc import pb
from simulator.knowledge import Knowledge
from simulator.live import NEW_ID, hypothetical, pairing, state_of
from simulator.twin import replay, replay_inputs, resumed
from simulator.whatif import predict
from traces import TraceJob, default_table

from ..daemon.test_round_aligned import Scheduler

A3C = ("A3C", 1)
RESNET = ("ResNet-18 (batch size 64)", 1)
STEPS = 20_000


@pytest.fixture
def packed(tmp_path):
    """A scheduler with one v100 under the packed max-min policy, two A3C jobs, placed."""
    s = Scheduler(tmp_path, policy="max_min_fairness_packed")
    jobs = (s.submit(steps=STEPS), s.submit(steps=STEPS))
    s.at(1.0)
    yield s, jobs
    s.close()


def test_the_status_carries_the_rates_the_scheduler_plans_pairs_on(packed):
    s, jobs = packed
    assert {(r.job_id, r.colocated_job_id) for r in s.sent.runs} == {jobs, jobs[::-1]}
    state = state_of(build_snapshot(s.x.view(1.0)).response)
    catalog = default_table()
    assert state.pair_table.pair("v100", A3C, A3C) == catalog.pair("v100", A3C, A3C)
    assert state.pair_table.get("v100", *A3C) == catalog.get("v100", *A3C)


def test_a_scheduler_that_plans_no_pairs_sends_none(tmp_path):
    s = Scheduler(tmp_path)
    try:
        s.submit()
        reply = build_snapshot(s.x.view(0.0)).response
        assert reply.pair_table == "" and state_of(reply).pair_table is None
    finally:
        s.close()


def test_the_replay_pairs_the_jobs_as_the_scheduler_does(packed):
    s, jobs = packed
    state = state_of(build_snapshot(s.x.view(1.0)).response)
    pair_rate = default_table().pair("v100", A3C, A3C)[0]
    etas = replay(state)
    assert [etas[j].finish_s for j in jobs] == pytest.approx([STEPS / pair_rate] * 2, rel=0.01)
    alone = replay(dataclasses.replace(state, pair_table=None))   # (what it replayed before)
    assert min(alone[j].finish_s for j in jobs) > 1.7 * STEPS / pair_rate


@pytest.mark.parametrize("bad", ["{", "[" * 100_000, '{"v100": {"A3C": {"1": -1}}}', '["v100"]',
                                 '{"v100": {"A3C": {"1": 1}}, "pairs": {"v100": [{"a": 1}]}}'])
def test_a_malformed_pair_table_is_refused_in_one_line(packed, bad):
    s, _ = packed
    reply = build_snapshot(s.x.view(1.0)).response
    reply.pair_table = bad
    with pytest.raises(ValueError, match="^pair_table: ") as caught:
        state_of(reply)
    assert "\n" not in str(caught.value)


def test_a_pair_member_makes_the_co_located_rate_scaled_by_its_own():
    """A member that makes half the table's rate alone makes half its pair rate, as the
    core plans it (``core.jobs.pair_rates``); a member without its own rates, the table's."""
    table = default_table()
    jobs = [TraceJob("A3C", 1, 100, 0.0, throughputs={"v100": table.get("v100", *A3C) / 2},
                     planned={"v100": 1.0}),
            TraceJob("A3C", 1, 100, 0.0)]
    knowledge = Knowledge.planned_apart(table, jobs)
    batch = SimpleNamespace(members=(("0", "1"), ("1",)), types=("v100",),
                            type_index=np.array([0, 0]), rates=np.zeros((2, 2)))
    pair = table.pair("v100", A3C, A3C)
    got = knowledge.rates(batch)
    assert got[0].tolist() == pytest.approx([pair[0] / 2, pair[1]])
    assert got[1, 0] == table.get("v100", *A3C)


def test_a_predicted_job_of_a_kind_no_live_job_has_is_paired_from_the_catalog(packed):
    """``predict``'s new job: the scheduler's table has rows for the live kinds only, so
    its kind's are the catalog's (``live.pairing``); the scheduler's rows stay."""
    s, _ = packed
    state = state_of(build_snapshot(s.x.view(1.0)).response)
    new = hypothetical(pb.JobRequest(job_type=RESNET[0], total_steps=STEPS), state)
    paired = pairing(state, new).pair_table
    catalog = default_table()
    assert paired.pair("v100", A3C, RESNET) == catalog.pair("v100", A3C, RESNET)
    assert paired.pair("v100", RESNET, RESNET) == catalog.pair("v100", RESNET, RESNET)
    assert paired.pair("v100", A3C, A3C) == state.pair_table.pair("v100", A3C, A3C)
    assert pairing(state, dataclasses.replace(new, job_type="A3C")) is state
    after = predict(pairing(state, new), new)[1]
    alone = predict(state, new)[1]
    assert after[NEW_ID].finish_s != alone[NEW_ID].finish_s     # (it was never paired)


def _forecast_picture(s):
    """What the daemon hands its forecast: the picture with its allocation period."""
    return with_period(build_snapshot(s.x.view(1.0)).response, s.x.core.period_state())


def test_the_forecast_picture_carries_the_pairs_period_and_its_replay_pairs_the_jobs(packed):
    # before, the period's pair row did not travel: the replay took both jobs' X alone (0)
    # for the whole period, not stale, and said 818 s and 1,629 s where the scheduler
    # pairs them (909 s each)
    s, jobs = packed
    reply = _forecast_picture(s)
    (pair,) = reply.period_pairs
    assert (pair.a, pair.b) == jobs and pair.x["v100"] == pytest.approx(1.0)
    state = state_of(reply)
    pair_rate = default_table().pair("v100", A3C, A3C)[0]
    etas = replay(state)
    assert [etas[j].finish_s for j in jobs] == pytest.approx([STEPS / pair_rate] * 2, rel=0.01)
    # the placed round is the pair's: its row is credited the round, its jobs' rows not
    period = resumed(state, state, replay_inputs(state, ()), 0.0)
    assert period.keys == ("0", "1", "0+1")
    got = period.received[:, 0] - state.period.received[:, 0]
    assert got.tolist() == pytest.approx([0.0, 0.0, state.round_ends_s - 1.0], abs=0.01)
    assert list(period.runs) == ["0+1"]    # (the restart rule's run: the pair's, not job 0's)


@pytest.mark.parametrize("bad, why", [(float("nan"), "not a finite"), (-1.0, "below 0"),
                                      (None, "a job or pair twice")])
def test_a_period_pair_that_is_not_one_is_refused_in_one_line(packed, bad, why):
    s, _ = packed
    reply = _forecast_picture(s)
    if bad is None:
        reply.period_pairs.add().CopyFrom(reply.period_pairs[0])
    else:
        reply.period_pairs[0].x["v100"] = bad
    with pytest.raises(ValueError, match="^period: ") as caught:
        state_of(reply)
    assert why in str(caught.value) and "\n" not in str(caught.value)


def test_a_pair_the_scheduler_measured_is_replayed_at_its_measured_rates(packed):
    # thesis §5.3.3: the scheduler plans a measured pair on what its runs made. Before,
    # the replay planned and ran it at the table's pair rate scaled by its members' own
    # rates, whatever the pair was measured to make
    s, jobs = packed
    for job in jobs:
        s.init(job)
    s.t = 6.0
    made = {jobs[0]: 90, jobs[1]: 100}      # 18 and 20 steps/s over the 5 s since InitJob
    # (the table's pair rate is 22 each: the measured pair is still worth pairing)
    for job in jobs:
        assert s.x.processes.durable_steps(job, made[job], s.gen(job), seconds=4.0)
    reply = _forecast_picture(s)
    (pair,) = reply.measured_pairs
    assert (pair.a, pair.b) == jobs
    assert (pair.a_steps_per_s["v100"], pair.b_steps_per_s["v100"]) == (18.0, 20.0)
    state = state_of(reply)
    slowest = max(j.steps_left / rate for j, rate in zip(state.jobs, (18.0, 20.0)))
    etas = replay(state)        # (the pair's jobs finish as the pair does: its slower one)
    assert [etas[j].finish_s for j in jobs] == pytest.approx([slowest] * 2, rel=0.03)
    table = replay(dataclasses.replace(state, measured_pairs={}))   # (what it replayed
    pair_rate = default_table().pair("v100", A3C, A3C)[0]            # before)
    assert [table[j].finish_s for j in jobs] == pytest.approx([STEPS / pair_rate] * 2,
                                                              rel=0.03)


@pytest.mark.parametrize("a, b, why", [(0.0, 4.0, "finite and > 0"),
                                       (float("inf"), 4.0, "finite and > 0"),
                                       (None, 4.0, "one member's rate")])
def test_a_measured_pair_that_is_not_one_is_refused_in_one_line(packed, a, b, why):
    s, jobs = packed
    reply = _forecast_picture(s)
    pair = reply.measured_pairs.add(a=jobs[0], b=jobs[1])
    pair.b_steps_per_s["v100"] = b
    if a is not None:
        pair.a_steps_per_s["v100"] = a
    with pytest.raises(ValueError, match="^measured_pairs: ") as caught:
        state_of(reply)
    assert why in str(caught.value) and "\n" not in str(caught.value)
