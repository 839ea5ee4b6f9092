"""When a stale allocation is re-solved (issue #18; ``gavelsched/core/resolving.py``): Gavel's
interval, or at the next boundary after any reset event while the last solve was cheap."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gavelsched.core import CoreConfig
from gavelsched.core.resolving import (JITTER_SHARE, RESOLVE_MODES, allowed, cheap,
                                       next_allowed_s)
from policies import Job, Problem, SolverFailed

from .test_core import R, Recording, finish, job, make_core


class Timed(Recording):
    """``Recording`` whose solves report ``solve_s`` seconds (the policy's own measurement)."""

    def __init__(self, solve_s: float):
        super().__init__()
        self.solve_s = solve_s

    def solve(self, problem):
        return replace(super().solve(problem), solve_s=self.solve_s)


ARRIVALS = {360.0: 1, 720.0: 2, 2880.0: 3}


def resolved_at(policy, config) -> list[float]:
    """Boundaries every R seconds with arrivals at ``ARRIVALS``: when the policy re-solved."""
    core = make_core(policy, config=config)
    core.submit(job(0, steps=10**7), 0.0)
    out, t = [], 0.0
    for _ in range(12):
        if t in ARRIVALS:
            core.submit(job(ARRIVALS[t], steps=10**7), t)
        rnd = core.start_round(t)
        if rnd.resolved is not None:
            out.append(t)
        finish(core, rnd, t + R)
        t += R
    return out


def test_gavel_waits_for_its_interval():
    # 720 waits for 360 + 1920 -> 2520 (as tests/core/test_core.py); 2880 for 4440
    assert resolved_at(Timed(0.01), CoreConfig()) == [0.0, 360.0, 2520.0]


def test_responsive_re_solves_at_the_boundary_after_each_event():
    config = CoreConfig(resolve="responsive")
    assert resolved_at(Timed(0.01), config) == [0.0, 360.0, 720.0, 2880.0]


def test_an_expensive_solve_falls_back_to_the_interval():
    # 36 s = 10% of a 360 s round is not cheap: Gavel's interval applies again
    config = CoreConfig(resolve="responsive")
    assert resolved_at(Timed(36.0), config) == [0.0, 360.0, 2520.0]
    wider = config.but(cheap_solve_fraction=0.2)
    assert resolved_at(Timed(36.0), wider) == [0.0, 360.0, 720.0, 2880.0]


class Failing(Recording):
    """``Recording`` whose solves fail, each after ``solve_s`` seconds (as ``Policy.solve``
    records a failure's time on the error)."""

    def __init__(self, solve_s: float):
        super().__init__()
        self.solve_s = solve_s

    def solve(self, problem):
        self.problems.append(problem)
        err = SolverFailed("recording: solver CLARABEL ended with status NumericalError")
        err.solve_s = self.solve_s
        raise err


def tried_at(policy, config) -> list[float]:
    """Boundaries every R seconds, one job waiting: when the policy was asked to solve."""
    core = make_core(policy, config=config.but(on_solve_error="keep"))
    core.submit(job(0, steps=10**7), 0.0)
    out, t = [], 0.0
    for _ in range(8):
        asked = len(policy.problems)
        finish(core, core.start_round(t), t + R)
        if len(policy.problems) > asked:
            out.append(t)
        t += R
    return out


def test_an_expensive_failure_waits_for_the_interval_as_an_expensive_solve_does():
    """A solve that fails after a tenth of a round or more (2,000 jobs of finish-time
    fairness with pairs took 42 s, then a numerical error) is not run again at every
    boundary, each time holding up the daemon's round as long; a cheap failure is retried
    at once."""
    config = CoreConfig(resolve="responsive")
    assert tried_at(Failing(0.01), config) == [i * R for i in range(8)]
    # (a failure at 0 starts no interval, as a solve at 0 does not)
    assert tried_at(Failing(100.0), config) == [0.0, R, 7 * R]


def test_policy_solve_records_what_a_failure_cost():
    class Refusing(Recording):
        def _solve(self, problem):
            raise SolverFailed("recording: no")

    with pytest.raises(SolverFailed) as caught:
        Refusing().solve(Problem(cluster={"v100": 1}, jobs=(Job("a", {"v100": 1.0}),)))
    assert caught.value.solve_s is not None and caught.value.solve_s >= 0.0


def test_next_allowed_time_follows_the_rule():
    core = make_core(Timed(0.01), config=CoreConfig(resolve="responsive"))
    core.submit(job(0), 0.0)
    finish(core, core.start_round(10.0), 10.0 + R)
    assert core.next_resolve_allowed_s() == -math.inf        # the last solve was cheap
    slow = make_core(Timed(100.0), config=CoreConfig(resolve="responsive"))
    slow.submit(job(0), 0.0)
    finish(slow, slow.start_round(10.0), 10.0 + R)
    assert slow.next_resolve_allowed_s() == 10.0 + 1920.0 - JITTER_SHARE * R   # (a plan's jitter)


@pytest.mark.parametrize("change", [{"resolve": "sometimes"}, {"cheap_solve_fraction": -0.1},
                                    {"cheap_solve_fraction": 1.5},
                                    {"cheap_solve_fraction": math.nan}])
def test_bad_modes_are_refused(change):
    with pytest.raises(ValueError, match=next(iter(change))):
        CoreConfig(**change)


times = st.floats(0, 1e5, allow_nan=False)


@given(now=times, last=times, solve=st.none() | st.floats(0, 1e3), forced=st.booleans(),
       interval=st.floats(0, 4000), fraction=st.floats(0, 1))
def test_responsive_is_never_later_than_gavel(now, last, solve, forced, interval, fraction):
    gavel = CoreConfig(min_resolve_interval_s=interval, cheap_solve_fraction=fraction)
    responsive = gavel.but(resolve="responsive")
    if allowed(gavel, now, last, solve, forced):
        assert allowed(responsive, now, last, solve, forced)
    assert next_allowed_s(responsive, last, solve, forced) <= next_allowed_s(gavel, last, solve,
                                                                            forced)
    if cheap(responsive, solve):
        assert allowed(responsive, now, last, solve, forced)
    if now - last >= interval:
        assert all(allowed(gavel.but(resolve=m), now, last, solve, forced)
                   for m in RESOLVE_MODES)


@pytest.mark.parametrize("jitter_s", [-0.02, 0.0, 0.02])
def test_an_interval_of_whole_rounds_passes_at_a_plan_whatever_its_jitter(jitter_s):
    """The daemon plans a round apart give or take milliseconds; with an interval of one
    round (``local-cluster``'s) the next plan is always past it, early or late, as on the
    simulator's exact clock (issue #29). Half a round in, it is not."""
    config = CoreConfig(round_seconds=30.0, min_resolve_interval_s=30.0)
    assert allowed(config, 53.3 + 30.0 + jitter_s, 53.3, 1.0, False)
    assert next_allowed_s(config, 53.3, 1.0, False) <= 53.3 + 30.0 + jitter_s
    assert not allowed(config, 53.3 + 15.0, 53.3, 1.0, False)


@pytest.mark.parametrize("jitter_s", [-0.02, 0.0, 0.02])
def test_a_period_of_one_round_ends_at_the_next_plan_whatever_its_jitter(jitter_s):
    """Under the restart rule received times go back to the seed at the first re-solve a
    period's interval after its start: at the plan a round later, 20 ms early or not."""
    config = CoreConfig(round_seconds=30.0, min_resolve_interval_s=30.0, resolve="responsive")
    core = make_core(Timed(0.01), config=config)
    core.set_restart_costs({"fast": 1.0})
    for i, t in enumerate((0.0, 30.0)):
        core.submit(job(i, steps=10**7), t)
        finish(core, core.start_round(t + (jitter_s if t else 0.0)), t + 30.0)
    core.submit(job(2, steps=10**7), 60.0)
    start = core.counted_since_s
    core.start_round(start + 30.0 + jitter_s)
    assert core.counted_since_s == start + 30.0 + jitter_s
