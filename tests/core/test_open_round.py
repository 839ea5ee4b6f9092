"""A round opened, its solve run elsewhere, then planned (``SchedulerCore.open_round`` /
``settle``; ``RoundDriver.open``): the daemon solves off its executor thread and serves
events meanwhile. Planned right after the solve, a round is the one ``start_round`` plans;
events during the solve are not lost; a solve still out plans on the allocation in force."""

from __future__ import annotations

import pytest

from gavelsched.core import CoreConfig, CoreError, Solve
from gavelsched.core.driver import RoundDriver
from policies import Allocation, ProblemError

from .test_core import R, Recording, finish, job, make_core


def _busy_core(policy=None, **config):
    """Two jobs admitted and running, a third waiting: the next boundary re-solves."""
    core = make_core(policy, config=CoreConfig(min_resolve_interval_s=0, **config))
    core.submit(job(0), 0.0)
    core.submit(job(1, "slow"), 0.0)
    finish(core, core.start_round(0.0), R)
    core.submit(job(2), 10.0)
    return core


def test_a_round_planned_after_its_solve_settles_is_the_one_start_round_plans():
    whole, split = _busy_core(), _busy_core()
    expected = whole.start_round(R)
    solve = split.open_round(R)
    assert isinstance(solve, Solve) and solve.problem.jobs.ids == ("0", "1", "2")
    assert isinstance(split.settle(solve, solve.run()), Allocation)
    got = split.start_round(R)
    assert got.admitted == expected.admitted == ("2",)
    assert got.resolved.allocation == expected.resolved.allocation
    assert got.batch.keys == expected.batch.keys and got.batch.workers == expected.batch.workers


def test_a_job_that_ends_while_the_solve_runs_gets_no_row_and_no_task():
    core = _busy_core()
    solve = core.open_round(R)
    result = solve.run()                               # (on another thread, in the daemon)
    core.add_progress("0", core.remaining_steps("0"), R + 1.0)    # "0" finished meanwhile
    allocation = core.settle(solve, result)
    assert "0" in allocation.allocation                # the policy planned it ...
    rnd = core.start_round(R)
    assert "0" not in rnd.batch.keys and set(rnd.batch.keys) <= {"1", "2"}
    assert "0" not in core.shares(R + 2.0)             # ... the core holds no row of it


def test_a_solve_still_out_plans_on_the_allocation_in_force_and_is_installed_after():
    core = _busy_core()
    before = core.allocation
    solve = core.open_round(R)
    rnd = core.start_round(R)                          # the boundary came first
    assert rnd.resolved is None and core.allocation is before
    assert set(rnd.batch.keys) <= {"0", "1"}           # "2" has no share of the old X yet
    assert core.period_state().stale                   # (a restart would re-solve)
    allocation = core.settle(solve, solve.run())       # mid-round
    assert core.allocation is allocation and "2" in allocation.allocation
    assert not core.period_state().stale
    finish(core, rnd, 2 * R)
    nxt = core.start_round(2 * R)
    assert nxt.resolved is None                        # nothing changed: no second solve
    assert "2" in nxt.batch.keys


def test_no_second_solve_begins_while_one_is_out():
    core = _busy_core()
    solve = core.open_round(R)
    finish(core, core.start_round(R), 2 * R)
    core.submit(job(3), 2 * R)
    assert core.open_round(2 * R) is None              # one at a time
    core.start_round(2 * R)
    core.settle(solve, solve.run())
    assert core.period_state().stale                   # "3" came after: re-solved next


def test_a_solve_over_columns_that_changed_is_dropped_and_the_allocation_stays_stale():
    core = _busy_core()
    before = core.allocation
    solve = core.open_round(R)
    core.add_workers("p100", 2, R)                     # a type joined: the rows' columns
    assert core.settle(solve, solve.run()) is None
    assert core.allocation is before and core.period_state().stale


class _Refuses(Recording):
    """Refuses job "2" (a job the policy cannot take), plans the rest."""

    def _solve(self, problem):
        if "2" in problem.jobs.ids:
            raise ProblemError("job 2 cannot be planned", job_id="2")
        return super()._solve(problem)


def test_a_job_the_policy_refuses_is_dropped_and_the_rest_solved_again():
    core = _busy_core(_Refuses(), on_solve_error="keep")    # (the daemon's)
    solve = core.open_round(R)
    again = core.settle(solve, solve.run())
    assert isinstance(again, Solve) and again.problem.jobs.ids == ("0", "1")
    assert isinstance(core.settle(again, again.run()), Allocation)
    rnd = core.start_round(R)
    assert [job_id for job_id, _ in rnd.rejected] == ["2"] and "2" not in core.active_ids


def test_a_round_is_opened_once_and_only_its_own_solve_settles():
    core = _busy_core()
    solve = core.open_round(R)
    with pytest.raises(CoreError, match="has not ended"):
        core.open_round(R)
    assert core.settle(solve, solve.run()) is not None
    with pytest.raises(CoreError, match="not the solve in progress"):
        core.settle(solve, solve.run())


def test_the_driver_opens_then_plans_with_the_same_inputs():
    core = _busy_core()
    driver = RoundDriver(core)
    solve = driver.open(R)
    core.settle(solve, solve.run())
    step = driver.plan(R)
    assert step.round.admitted == ("2",) and step.round.resolved is not None
    assert driver.planned is step.round
