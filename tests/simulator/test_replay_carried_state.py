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
