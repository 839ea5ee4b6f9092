"""The scheduler core: events with the time as an argument, re-solve rules, Problems."""

from __future__ import annotations

import numpy as np
import pytest

from gavelsched.core import CoreConfig, CoreError, JobSpec, Report, SchedulerCore
from gavelsched.core.resolving import JITTER_SHARE
from gavelsched.mechanism import ClusterView
from policies import ProblemError, get_policy
from policies.base import Policy, Solution
from policies.table import JobTable

R = 360.0


class Table:
    """A ThroughputSource: one rate per (job type, worker type); pairs at 60% each."""

    def __init__(self, rates, pairs=False):
        self.rates, self.pairs = rates, pairs

    def get(self, worker_type, job_type, scale_factor=1):
        return self.rates.get(job_type, {}).get(worker_type, 0.0)

    def pair(self, worker_type, a, b):
        if not self.pairs:
            return None
        ra, rb = self.get(worker_type, *a), self.get(worker_type, *b)
        return (0.6 * ra, 0.6 * rb) if ra and rb else None


class Recording(Policy):
    """Equal share of every type for every job; remembers the problems it saw."""

    name = "recording"

    def __init__(self):
        super().__init__()
        self.problems = []

    def _solve(self, problem):
        self.problems.append(problem)
        share = {t: min(1.0, n / max(len(problem.jobs), 1)) / len(problem.cluster)
                 for t, n in problem.cluster.items()}
        return Solution({j.id: dict(share) for j in problem.jobs}, None, None)

    def evaluate(self, problem, allocation):
        return None


RATES = {"fast": {"v100": 10.0, "k80": 2.0}, "slow": {"v100": 4.0, "k80": 3.0}}


def make_core(policy=None, counts=None, config=None, table=None, **kw):
    view = ClusterView.build(counts or {"v100": 2, "k80": 2})
    return SchedulerCore(policy or Recording(), view, table or Table(RATES), config, **kw)


def job(i, kind="fast", steps=10_000, sf=1, **kw):
    return JobSpec(id=str(i), job_type=kind, scale_factor=sf, total_steps=steps, **kw)


def finish(core, rnd, end):
    """End a round in which every task ran its whole lease."""
    reports = [Report(t.key, t.steps, max(s / r for s, r in zip(t.steps, t.throughputs)))
               for t in rnd.tasks]
    return core.end_round(reports, end)


def test_arrivals_wait_for_the_round_boundary_and_trigger_a_resolve():
    policy = Recording()
    core = make_core(policy)
    core.submit(job(0), now=0.0)
    assert core.active_jobs == () and core.pending_jobs == ("0",)
    rnd = core.start_round(0.0)
    assert rnd.admitted == ("0",) and rnd.resolved is not None
    assert len(policy.problems) == 1
    finish(core, rnd, R)


def test_resolves_at_most_once_per_interval_after_the_first():
    policy = Recording()
    core = make_core(policy, config=CoreConfig(min_resolve_interval_s=1920))
    core.submit(job(0, steps=10**7), 0.0)
    t = 0.0
    resolved_at = []
    arrivals = {360.0: 1, 720.0: 2, 2700.0: 3}
    for _ in range(12):
        if t in arrivals:
            core.submit(job(arrivals[t], steps=10**7), t)
        rnd = core.start_round(t)
        if rnd.resolved is not None:
            resolved_at.append(t)
        finish(core, rnd, t + R)
        t += R
    # t=0 (first); 360 (a re-solve at time 0 does not start the interval, as in Gavel);
    # the arrival at 720 waits for 360 + 1920 = 2280 -> boundary 2520; 2700 -> 4440.
    assert resolved_at == [0.0, 360.0, 2520.0]
    assert core.next_resolve_allowed_s() == 2520.0 + 1920 - JITTER_SHARE * R  # (a plan's jitter)


def test_force_resolve_ignores_the_interval():
    policy = Recording()
    core = make_core(policy)
    core.submit(job(0, steps=10**7), 0.0)
    finish(core, core.start_round(0.0), R)
    finish(core, core.start_round(R), 2 * R)  # t=360: the time-0 quirk re-solves once more
    core.submit(job(1), 2 * R)
    core.force_resolve()
    assert core.start_round(2 * R).resolved is not None


def test_periodic_resolve_without_events():
    policy = Recording()
    core = make_core(policy, config=CoreConfig(resolve_period_s=3 * R,
                                               min_resolve_interval_s=0))
    core.submit(job(0, steps=10**7), 0.0)
    resolved = []
    for k in range(8):
        rnd = core.start_round(k * R + 1)
        resolved.append(rnd.resolved is not None)
        finish(core, rnd, (k + 1) * R + 1)
    assert resolved == [True, False, False, True, False, False, True, False]


def test_lease_is_floor_of_throughput_times_round_capped_at_remaining():
    core = make_core(counts={"v100": 1})
    core.submit(job(0, kind="fast", steps=5000), 0.0)
    rnd = core.start_round(0.0)
    (task,) = rnd.tasks
    assert task.steps == (3600,) and task.throughputs == (10.0,)
    finish(core, rnd, R)
    rnd = core.start_round(R)
    assert rnd.tasks[0].steps == (1400,)
    out = finish(core, rnd, R + 140)
    assert out.completed == ("0",) and core.active_jobs == ()


def test_received_time_resets_and_deficits_absorb_the_period():
    core = make_core(counts={"v100": 1}, config=CoreConfig(min_resolve_interval_s=0))
    core.submit(job(0, steps=10**7), 0.0)
    core.submit(job(1, steps=10**7), 0.0)
    rnd = core.start_round(0.0)  # X = 0.5 v100 each (Recording: 1 worker / 2 jobs / 1 type)
    (task,) = rnd.tasks
    finish(core, rnd, R)
    ran, idle = task.key, ({"0", "1"} - {task.key}).pop()
    core.submit(job(2, steps=10**7), R)
    rnd = core.start_round(R)  # re-solve: deficit += X * 360 - received
    assert rnd.resolved is not None
    periods = core.take_closed_periods()
    assert len(periods) == 1
    assert periods[0].row(ran) == ((0.5,), (R,)) and periods[0].row(idle) == ((0.5,), (0.0,))
    demand = core._demand()
    row = {k: i for i, k in enumerate(demand.keys)}
    assert demand.deficit[row[ran], 0] == pytest.approx(0.5 * R - R)
    assert demand.deficit[row[idle], 0] == pytest.approx(0.5 * R)
    assert np.all(demand.received == R / 2)
    # The job that is owed time runs now.
    assert rnd.tasks[0].key in (idle, "2")


def test_problem_carries_elapsed_remaining_weights_and_previous():
    policy = Recording()
    core = make_core(policy, config=CoreConfig(min_resolve_interval_s=0))
    core.submit(job(0, steps=10_000, priority_weight=2.0, slo_s=9000.0), 100.0)
    rnd = core.start_round(100.0)
    finish(core, rnd, 100.0 + R)
    core.submit(job(1, kind="slow"), 460.0)
    core.start_round(460.0)
    p = policy.problems[-1]
    assert p.job_ids == ("0", "1")
    j0 = p.job("0")
    assert j0.elapsed_s == pytest.approx(360.0)
    assert j0.remaining_steps == 10_000 - 3600
    assert j0.weight == 2.0 and j0.slo_s == 9000.0
    assert j0.isolated_elapsed_s is None  # isolated_time is off: policies use elapsed time
    assert dict(j0.throughputs) == {"v100": 10.0, "k80": 2.0}
    assert set(p.previous) == {"0"}


def test_isolated_time_accumulates_steps_over_isolated_throughput():
    policy = Recording()
    core = make_core(policy, counts={"v100": 2, "k80": 2},
                     config=CoreConfig(isolated_time=True, min_resolve_interval_s=0))
    core.submit(job(0, steps=10**6), 0.0)
    rnd = core.start_round(0.0)
    steps = rnd.tasks[0].steps[0]
    finish(core, rnd, R)
    core.submit(job(1), R)
    core.start_round(R)
    # One job: X^isolated = all of both types, capped at 1 in total -> half each.
    iso = 0.5 * 10.0 + 0.5 * 2.0
    assert policy.problems[-1].job("0").isolated_elapsed_s == pytest.approx(steps / iso)


def test_previous_keeps_finished_jobs_for_fifo():
    """A finished job stays in Problem.previous at the next re-solve: FIFO hands its type to
    the head of the queue (Gavel's FIFOPolicy remembers it itself)."""
    policy = Recording()
    core = make_core(policy, config=CoreConfig(min_resolve_interval_s=0))
    core.submit(job(0, steps=100), 0.0)
    core.submit(job(1, steps=10**6), 0.0)
    outcome = finish(core, core.start_round(0.0), R)
    assert outcome.completed == ("0",)
    core.start_round(R)
    problem = policy.problems[-1]
    assert problem.job_ids == ("1",) and set(problem.previous) == {"0", "1"}


def test_isolated_time_uses_the_isolated_throughput_of_the_previous_resolve():
    """Gavel's FinishTimeFairness: at each re-solve, t^isolated += steps since the last
    re-solve / throughput(m, X^isolated) computed then (with the jobs active then)."""
    policy = Recording()
    core = make_core(policy, counts={"v100": 2, "k80": 2},
                     config=CoreConfig.for_policy(get_policy("finish_time_fairness_perf"),
                                                  min_resolve_interval_s=0))
    assert core.config.isolated_time
    core.submit(job(0, steps=10**6), 0.0)
    core.submit(job(1, steps=10**6), 0.0)
    rnd = core.start_round(0.0)
    assert policy.problems[-1].job("0").isolated_elapsed_s == 0.0
    done = {t.job_ids[0]: t.steps[0] for t in rnd.tasks}
    finish(core, rnd, R)
    core.submit(job(2), R)  # a third job: the isolated share shrinks from now on
    core.start_round(R)
    # Two jobs at the first re-solve: each 1/2 of 2 V100s and 2 K80s = 1 + 1 worker-share,
    # capped at full time: half time on each type.
    iso = 0.5 * 10.0 + 0.5 * 2.0
    assert policy.problems[-1].job("0").isolated_elapsed_s == pytest.approx(done["0"] / iso)
    assert policy.problems[-1].job("2").isolated_elapsed_s == 0.0


class Planned(Table):
    """Pair estimates: 90% of each job's solo rate (the oracle ``Table`` says 60%)."""

    def pair(self, worker_type, a, b):
        ra, rb = self.get(worker_type, *a), self.get(worker_type, *b)
        return (0.9 * ra, 0.9 * rb) if ra and rb else None


def test_policies_plan_on_estimated_pairs_until_a_pair_has_run():
    policy = get_policy("max_min_fairness_packed")
    seen = []
    solve = policy.solve
    policy.solve = lambda problem: (seen.append(problem), solve(problem))[1]
    core = SchedulerCore(policy, ClusterView.build({"v100": 1}), Table(RATES, pairs=True),
                         CoreConfig.for_policy(policy, min_resolve_interval_s=0),
                         planned_pairs=Planned(RATES))
    core.submit(job(0, kind="fast", steps=10**6), 0.0)
    core.submit(job(1, kind="slow", steps=10**6), 0.0)
    rnd = core.start_round(0.0)
    assert dict(seen[-1].pairs[0].throughputs)["v100"] == pytest.approx((9.0, 3.6))
    assert rnd.tasks[0].key == "0+1"
    assert rnd.tasks[0].throughputs == (6.0, 2.4)  # jobs progress at the oracle rates
    finish(core, rnd, R)
    core.submit(job(2, kind="fast", steps=10**6), R)
    core.start_round(R)
    pairs = {p.key: dict(p.throughputs) for p in seen[-1].pairs}
    assert pairs["0+1"]["v100"] == pytest.approx((6.0, 2.4))   # measured on the v100
    assert pairs["0+2"]["v100"] == pytest.approx((9.0, 9.0))   # never ran: the estimate


def test_pairs_are_listed_for_space_sharing_policies():
    policy = Recording()
    core = make_core(policy, table=Table(RATES, pairs=True),
                     config=CoreConfig(pairs=True))
    for i in range(3):
        core.submit(job(i, kind="fast" if i else "slow"), 0.0)
    core.start_round(0.0)
    pairs = policy.problems[-1].pairs
    assert [p.key for p in pairs] == ["0+1", "0+2", "1+2"]
    got = {t: pytest.approx(v) for t, v in pairs[0].throughputs.items()}
    assert got == {"v100": (2.4, 6.0), "k80": (1.8, 1.2)}


def test_packed_policy_runs_pairs():
    core = SchedulerCore(get_policy("max_min_fairness_packed"),
                         ClusterView.build({"v100": 1}), Table(RATES, pairs=True),
                         CoreConfig.for_policy(get_policy("max_min_fairness_packed")))
    core.submit(job(0, kind="fast", steps=10**6), 0.0)
    core.submit(job(1, kind="slow", steps=10**6), 0.0)
    rnd = core.start_round(0.0)
    assert [t.key for t in rnd.tasks] == ["0+1"]
    assert rnd.tasks[0].throughputs == (6.0, 2.4)


def test_worker_failure_and_join_are_reset_events():
    policy = Recording()
    core = make_core(policy, config=CoreConfig(min_resolve_interval_s=0))
    core.submit(job(0, steps=10**6), 0.0)
    finish(core, core.start_round(0.0), R)
    core.fail_workers([0, 1], R)
    rnd = core.start_round(R)
    assert rnd.resolved is not None
    assert dict(policy.problems[-1].cluster) == {"v100": 0, "k80": 2}
    assert all(t.worker_type == "k80" for t in rnd.tasks)
    finish(core, rnd, 2 * R)
    core.add_workers("a100", 1, 2 * R)
    rnd = core.start_round(2 * R)
    assert dict(policy.problems[-1].cluster) == {"v100": 0, "k80": 2, "a100": 1}
    assert core.worker_types == ("v100", "k80", "a100")


def test_cancel_and_bad_events():
    core = make_core()
    core.submit(job(0), 0.0)
    with pytest.raises(CoreError):
        core.submit(job(0), 1.0)
    core.cancel("0", 1.0)
    assert not core.has_jobs
    with pytest.raises(CoreError):
        core.cancel("nope", 1.0)
    with pytest.raises(CoreError):
        core.end_round([], 1.0)
    core.start_round(1.0)
    with pytest.raises(CoreError):
        core.start_round(2.0)
    with pytest.raises(CoreError):
        core.end_round([Report("ghost", (1,), 1.0)], 2.0)


def test_config_for_policy_follows_gavel_rules():
    """The rules come from the policy's declared traits (the full table over every
    registered policy is tests/policies/test_traits.py)."""
    def config(name):
        return CoreConfig.for_policy(get_policy(name))
    assert config("max_min_fairness").shuffle_type_order
    assert not config("max_min_fairness_perf").shuffle_type_order
    assert not config("fifo").backfill
    assert config("gandiva").pairs
    assert config("max_min_fairness_packed").pairs
    assert not config("max_min_fairness_perf").pairs
    assert config("finish_time_fairness_perf").isolated_time
    assert not config("max_min_fairness_perf").isolated_time
    with pytest.raises(TypeError, match="takes a Policy"):
        CoreConfig.for_policy("fifo")
    assert CoreConfig().seed_seconds == 180.0
    with pytest.raises(ValueError):
        CoreConfig(round_seconds=0)


def test_fractional_leases_and_unreset_received_time():
    core = make_core(counts={"v100": 1},
                     config=CoreConfig(whole_step_leases=False, reset_received_on_resolve=False,
                                       min_resolve_interval_s=0))
    core.submit(job(0, kind="fast", steps=5000), 0.0)
    rnd = core.start_round(0.0)
    assert rnd.tasks[0].steps == (3600.0,)
    finish(core, rnd, R)
    core.submit(job(1, steps=10**6), R)
    rnd = core.start_round(R)  # re-solves, but received time is kept
    assert rnd.resolved is not None
    demand = core._demand()
    assert demand.received[list(demand.keys).index("0"), 0] == pytest.approx(R / 2 + R)


class RefusesJob(Recording):
    """Refuses, by name, any problem that holds job ``bad`` (as the policies refuse a job
    with a non-finite value); otherwise the equal share of ``Recording``."""

    def __init__(self, bad: str):
        super().__init__()
        self.bad = bad

    def _solve(self, problem):
        if self.bad in problem.job_ids:
            raise ProblemError(f"job {self.bad!r}: throughputs must be finite, got nan",
                               job_id=self.bad)
        return super()._solve(problem)


def test_a_job_the_policy_refuses_is_dropped_and_the_others_are_planned():
    core = make_core(RefusesJob("1"), config=CoreConfig(on_solve_error="keep"))
    for i in range(3):
        core.submit(job(i), 0.0)
    rnd = core.start_round(0.0)
    assert [j for j, _ in rnd.rejected] == ["1"] and "must be finite" in rnd.rejected[0][1]
    assert core.active_jobs == ("0", "2")
    assert rnd.resolved is not None and set(rnd.resolved.allocation) == {"0", "2"}
    assert {j for t in rnd.tasks for j in t.job_ids} == {"0", "2"}


def test_a_refused_job_raises_when_solve_errors_raise():
    core = make_core(RefusesJob("0"))
    core.submit(job(0), 0.0)
    with pytest.raises(ProblemError, match="must be finite"):
        core.start_round(0.0)


@pytest.mark.parametrize("config", [
    CoreConfig(),
    CoreConfig(isolated_time=True),
    CoreConfig(restart_rule="tenure"),
])
def test_the_problems_job_table_is_that_of_its_records(config):
    """The core hands its jobs as arrays (``policies.table.JobTable``); the column model
    reads the same numbers from them as from the ``Job`` records they stand for (SLOs,
    weights, isolated time, throughputs net of restarts, steps not yet credited)."""
    policy = Recording()
    core = make_core(policy, config=config)
    core.submit(job(0, restart_s=30.0, slo_s=7200.0), now=0.0)
    core.submit(job(1, "slow", sf=2, priority_weight=2.0), now=5.0)
    finish(core, core.start_round(10.0), 10.0 + R)
    core.submit(job(2), now=400.0)
    core.force_resolve()
    core.start_round(10.0 + R, uncredited={"0": 100.0})
    assert len(policy.problems) == 2
    for problem in policy.problems:
        table = problem.jobs
        assert isinstance(table, JobTable) and problem.table is table
        again = JobTable.of(tuple(problem.jobs), problem.worker_types)
        assert table.ids == again.ids
        np.testing.assert_array_equal(table.T, again.T)
        np.testing.assert_array_equal(table.numbers, again.numbers)
    first, last = policy.problems[0].jobs[0], policy.problems[-1].jobs[0]
    assert last.remaining_steps < first.remaining_steps


def test_a_problems_job_records_are_the_jobs_at_its_re_solve():
    """The records a ``JobTable`` makes when first read are the jobs as they were when the
    core built the Problem, even if the core has changed them since (a frozen value)."""
    policy, seen = get_policy("max_min_fairness_perf"), []
    solve = policy.solve
    policy.solve = lambda problem: (seen.append(problem), solve(problem))[1]
    core = make_core(policy)
    core.submit(job(0), now=0.0)
    finish(core, core.start_round(0.0), R)
    core.update_job("0", R, priority_weight=5.0)
    assert seen[0].jobs[0].weight == 1.0 and seen[0].table.numbers[0, 1] == 1.0



def test_a_re_solve_reads_each_jobs_numbers_as_its_spec_now():
    """The weight, restart and SLO seconds and arrival a re-solve reads (kept in
    ``Rows.planned`` from admission) follow ``update_job`` and ``set_restart_costs``, and
    equal the ``JobTable`` of the same jobs' records."""
    policy = Recording()
    core = make_core(policy)
    core.submit(job(0, priority_weight=2.0, slo_s=5000.0), now=3.0)
    core.submit(job(1, "slow"), now=7.0)
    finish(core, core.start_round(10.0), 10.0 + R)
    core.update_job("1", 10.0 + R, priority_weight=4.0)
    core.set_restart_costs({"fast": 12.5})
    core.force_resolve()
    core.start_round(10.0 + R)
    for problem, weights in zip(policy.problems, ([2.0, 1.0], [2.0, 4.0])):
        table = problem.jobs
        again = JobTable.of(tuple(table), problem.worker_types)
        np.testing.assert_array_equal(table.numbers, again.numbers)
        assert [j.weight for j in table] == weights and table[0].slo_s == 5000.0
    assert [j.elapsed_s for j in policy.problems[-1].jobs] == [10.0 + R - 3.0, 10.0 + R - 7.0]
    assert core._rows.planned.tolist() == [[2.0, 12.5, 5000.0, 3.0], [4.0, 0.0, 0.0, 7.0]]

def test_planned_rates_are_the_rows_the_core_plans_on():
    """``planned_rates``: a pending job's priors (or its own row), an admitted job's row
    after a measurement; a job the core does not hold is left out."""
    core = make_core()
    core.submit(job(0), 0.0)
    core.submit(job(1, "slow"), 0.0, throughputs={"v100": 5.0})
    assert core.planned_rates(["0", "1", "x"]) == {
        "0": {"v100": 10.0, "k80": 2.0}, "1": {"v100": 5.0, "k80": 0.0}}
    core.start_round(0.0)
    core.set_job_throughputs("0", {"k80": 2.5}, 1.0)
    assert core.planned_rates(["0"]) == {"0": {"v100": 10.0, "k80": 2.5}}
