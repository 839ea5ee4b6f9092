"""The forecast's door (``live.state_of``) against Status pictures of a real executor with
number fields, of the reply or of its jobs, set to edge values (NaN, infinities, negative,
subnormal, huge): each picture is replayed (``twin.replay``) or refused in one line
(``ValueError``: ``state_of``'s checks, or those of the trace it makes), never failed
otherwise, and with no numpy ``RuntimeWarning``. Pictures come from the scheduler's own
status, but the forecast process is a door of its own (docs/design.md, Safety rules). An
ad hoc run of 3,000 such pictures found a subnormal priority weight, which made the replay's
solve fail (Clarabel: NumericalError); this test then found a round of 1e308 s (an endless
horizon), 2^63 - 1 total steps, a restart cost of 1e308 s and an X of 1e308 (numpy
overflows). Each is now refused or read as none at the door, as the scheduler's own doors
would (its config, ``traces.checks``)."""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gavelsched.daemon.forecast import with_period
from gavelsched.daemon.snapshot import build_snapshot
from gavelsched.rpc import pb
from simulator.live import state_of
from simulator.twin import replay

from ..daemon.test_restart_keeps_runs import R, measure
from ..daemon.test_round_aligned import Scheduler

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "25")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
EDGES = (math.nan, math.inf, -math.inf, -1.0, 0.0, 5e-324, 1e-300, 0.5, 1e20, 1e308)


def _numbers(message) -> list[str]:
    """``message``'s number fields and its maps of numbers (``map<string, double>``)."""
    out = []
    for f in message.DESCRIPTOR.fields:
        entry = f.message_type
        if entry is not None and entry.GetOptions().map_entry:
            if entry.fields_by_name["value"].type == f.TYPE_DOUBLE:
                out.append(f.name)
        elif not f.is_repeated and f.type in (f.TYPE_DOUBLE, f.TYPE_INT32, f.TYPE_INT64):
            out.append(f.name)
    return sorted(out)


CHANGES = st.lists(st.one_of(
    st.tuples(st.none(), st.sampled_from(_numbers(pb.StatusResponse)), st.sampled_from(EDGES)),
    st.tuples(st.integers(0, 2), st.sampled_from(_numbers(pb.JobStatus)),
              st.sampled_from(EDGES))), min_size=1, max_size=3)


@pytest.fixture(scope="module")
def picture(tmp_path_factory):
    """A forecast picture (the period with it) of three jobs on two GPUs, one measured."""
    s = Scheduler(tmp_path_factory.mktemp("picture"), gpus=2)
    try:
        jobs = [s.submit() for _ in range(3)]
        assert measure(s, jobs[0], 8)
        s.at(1.0 + 2 * R - s.x.config.plan_lead)
        s.at(1.0 + 2 * R)
        return with_period(build_snapshot(s.x.view(s.t)).response, s.x.core.period_state())
    finally:
        s.close()


def _set(message, name: str, value: float) -> None:
    field = message.DESCRIPTOR.fields_by_name[name]
    if field.type == field.TYPE_DOUBLE and not field.is_repeated:
        setattr(message, name, value)
    elif field.is_repeated:                           # a map of numbers: every entry
        entries = getattr(message, name)
        for key in list(entries) or ["v100"]:
            entries[key] = value
    elif math.isfinite(value):
        top = 2**31 - 1 if field.type == field.TYPE_INT32 else 2**63 - 1
        setattr(message, name, int(max(-top, min(top, value))))


@pytest.mark.filterwarnings("error::RuntimeWarning")   # (numpy: an edge value is no noise)
@FUZZ
@given(changes=CHANGES)
@example(changes=[(0, "priority_weight", 5e-324)])   # (the solve failed: NumericalError)
@example(changes=[(None, "round_seconds", 1e308)])   # (an endless horizon)
@example(changes=[(0, "total_steps", 1e20)])      # (2^63 - 1 steps overflowed an int64 cast)
@example(changes=[(0, "restart_s", 1e308)])       # (the restart rule's sums overflowed)
@example(changes=[(0, "period_x", 1e308)])        # (an X is a fraction of time)
@example(changes=[(None, "now_s", math.inf), (0, "period_x", 0.0)])  # (periods from -inf)
@example(changes=[(None, "prices", 1e308)])       # (a run's cost overflowed: CI, session 64)
def test_a_picture_with_edge_numbers_is_refused_in_one_line_or_replayed(picture, changes):
    reply = pb.StatusResponse()
    reply.CopyFrom(picture)
    for at, name, value in changes:
        _set(reply if at is None else reply.jobs[at % len(reply.jobs)], name, value)
    try:
        replay(state_of(reply))
    except ValueError as err:      # refused at a door: the picture's, or the replay's trace's
        assert "\n" not in str(err)


@pytest.mark.parametrize("at_s, price, says", [
    ([math.nan], [1.0], "v100[0]: time_s"), ([math.inf], [1.0], "v100[0]: time_s"),
    ([-1.0], [1.0], "v100[0]: time_s"), ([5.0], [math.nan], "v100[0]: price"),
    ([5.0], [-1.0], "v100[0]: price"), ([5.0, 5.0], [1.0, 2.0], "v100: two prices"),
    ([5.0], [1.0, 2.0], "v100: 1 times for 2 prices")])
def test_a_bad_price_change_is_refused_in_one_line(picture, at_s, price, says):
    reply = pb.StatusResponse()
    reply.CopyFrom(picture)
    reply.price_changes["v100"].at_s.extend(at_s)
    reply.price_changes["v100"].price.extend(price)
    with pytest.raises(ValueError) as err:
        state_of(reply)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"price_changes: {says}")
    reply.price_changes["v100"].Clear()
    reply.price_changes["v100"].at_s.append(reply.now_s + 5.0)      # a good one: replayed
    reply.price_changes["v100"].price.append(2.0)
    state = state_of(reply)
    assert state.price_trace.changes == {"v100": ((reply.now_s + 5.0, 2.0),)}
    assert set(replay(state)) == {j.id for j in state.jobs}
