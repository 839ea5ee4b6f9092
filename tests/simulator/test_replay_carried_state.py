"""A live scheduler is replayed with what it carries from one re-solve to the next: under
finish-time fairness each job's Themis t^isolated as the scheduler accumulated it (thesis
§5.4.2; ``JobStatus.period_isolated``), and the state its policy hands from one solve to
the next (``StatusResponse.period_policy_state``: FIFO's and Gandiva's random generator),
in forecast pictures. Before, the replay's jobs began at 0 isolated seconds, so its first
re-solve judged each job's fairness afresh, and its FIFO drew from the seed."""

from __future__ import annotations

import pytest

from gavelsched.daemon.forecast import with_period
from gavelsched.daemon.snapshot import build_snapshot
from simulator.live import state_of
from simulator.twin import replay_inputs, resumed

from ..daemon.test_restart_keeps_runs import R, measure
from ..daemon.test_round_aligned import Scheduler


@pytest.fixture
def ftf(tmp_path):
    """A scheduler under finish-time fairness that re-solved after one job made steps."""
    s = Scheduler(tmp_path, policy="finish_time_fairness_perf")
    jobs = (s.submit(), s.submit())
    assert measure(s, jobs[0], 8)
    s.at(1.0 + 2 * R - s.x.config.plan_lead)
    assert s.x.driver.in_flight.resolved is not None
    yield s, jobs
    s.close()


def _picture(s):
    return with_period(build_snapshot(s.x.view(s.t)).response, s.x.core.period_state())


def test_the_forecast_picture_carries_each_jobs_isolated_time_to_the_replay(ftf):
    s, jobs = ftf
    kept = s.x.core.period_state().isolated
    reply = _picture(s)
    shown = {j.id: list(j.period_isolated) for j in reply.jobs}
    assert shown[jobs[0]][0] > 0
    state = state_of(reply)
    period = resumed(state, state, replay_inputs(state, ()), 0.0)
    assert period.isolated.tolist() == kept.tolist()


@pytest.mark.parametrize("bad", [[float("nan"), 1.0, 1.0], [-1.0, 1.0, 1.0],
                                 [1.0, 1.0, -2.0], [1.0, 1.0]])
def test_an_isolated_time_that_is_not_one_is_refused_in_one_line(ftf, bad):
    s, _ = ftf
    reply = _picture(s)
    reply.jobs[0].period_isolated[:] = bad
    with pytest.raises(ValueError, match="^period_isolated: ") as caught:
        state_of(reply)
    assert "\n" not in str(caught.value)


def test_the_forecast_picture_carries_the_policys_state_to_the_replay(tmp_path):
    """FIFO's random type draws (Gavel draws from one generator for a whole run): the
    replay's solves go on from the scheduler's generator, not from the seed."""
    s = Scheduler(tmp_path, policy="fifo")
    try:
        s.submit(), s.submit()
        s.at(1.0)
        kept = dict(s.x.core.period_state().policy_state)
        assert "rng" in kept
        reply = _picture(s)
        state = state_of(reply)
        assert dict(state.period.policy_state) == kept
        period = resumed(state, state, replay_inputs(state, ()), 0.0)
        assert dict(period.policy_state) == kept
        reply.period_policy_state = "[1]"
        with pytest.raises(ValueError, match="^period_policy_state: not a JSON object"):
            state_of(reply)
    finally:
        s.close()


def test_the_replay_goes_on_with_gandivas_pairs_named_by_trace_index(tmp_path):
    """Gandiva's pairs name the scheduler's job ids; the replay's core names its jobs by
    trace index, so the pairs go to it renamed (``Policy.renamed_state``). Before, they
    named no job of the replay's, and its first solve drew new pairs."""
    s = Scheduler(tmp_path, policy="gandiva")
    try:
        first, *jobs = [s.submit() for _ in range(5)]
        s.x.cancel(first)                 # (the replay's trace indices are not job ids)
        s.at(1.0)
        kept = s.x.core.period_state().policy_state
        assert kept["pairs"] and {m for p in kept["pairs"] for m in p} <= set(jobs)
        state = state_of(_picture(s))
        inputs = replay_inputs(state, ())
        period = resumed(state, state, inputs, 0.0)
        index = {job_id: str(i) for i, job_id in enumerate(inputs.ids)}
        assert period.policy_state["pairs"] == [[index[a], index[b]] for a, b in kept["pairs"]]
        assert period.policy_state["rng"] == kept["rng"]
    finally:
        s.close()
