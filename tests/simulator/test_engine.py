"""The virtual-clock executor: exact finish times, overheads, cost, SLOs, windows."""

from __future__ import annotations

import pytest

from gavelsched.core import CoreConfig
from policies.base import Policy, Solution
from simulator import PriceTrace, SimConfig, SimulationError, simulate
from traces import ThroughputTable, TraceJob

R = 360.0

TABLE = ThroughputTable(solo={
    "v100": {("fast", 1): 10.0, ("slow", 1): 4.0, ("fast", 2): 18.0, ("fast", 8): 60.0},
    "k80": {("fast", 1): 2.0, ("slow", 1): 3.0, ("fast", 2): 3.5, ("fast", 8): 12.0},
})


def tj(kind="fast", steps=1000, arrival=0.0, sf=1, **kw):
    return TraceJob(job_type=kind, scale_factor=sf, total_steps=steps, arrival_s=arrival, **kw)


def run(jobs, cluster=None, policy="max_min_fairness_perf", **kw):
    return simulate(jobs, TABLE, cluster or {"v100": 1, "k80": 1}, policy, **kw)


def test_a_job_finishes_mid_round_at_the_exact_time():
    r = run([tj(steps=1000)], cluster={"v100": 1})
    (j,) = r.jobs
    assert j.completion_s == pytest.approx(100.0) and j.jct_s == pytest.approx(100.0)
    assert r.rounds == 1 and r.avg_jct_s == pytest.approx(100.0)
    assert r.makespan_s == pytest.approx(100.0)


def test_a_long_job_runs_in_whole_steps_per_round():
    # 5000 steps at 10/s: 3600 steps in round 1, 1400 in round 2.
    r = run([tj(steps=5000)], cluster={"v100": 1})
    assert r.jobs[0].completion_s == pytest.approx(500.0)
    assert r.rounds == 2


def test_arrivals_wait_for_the_round_boundary_and_jct_counts_from_arrival():
    # Job 0 holds the only worker for a full round; job 1 arrives at t=50.
    r = run([tj(steps=3600), tj(steps=100, arrival=50.0)], cluster={"v100": 1})
    j0, j1 = r.jobs
    assert j0.completion_s == pytest.approx(360.0)
    assert j1.completion_s == pytest.approx(370.0)
    assert j1.jct_s == pytest.approx(320.0)


def test_early_finishers_leave_workers_idle_until_the_round_ends():
    # Two workers; job 0 finishes at t=10, job 1 runs the whole round; job 2 (arrived at
    # t=1) must wait for the boundary at t=360, not take the free worker at t=10.
    jobs = [tj(steps=100), tj(steps=10**5), tj(steps=100, arrival=1.0)]
    r = run(jobs, cluster={"v100": 2})
    assert r.jobs[0].completion_s == pytest.approx(10.0)
    assert r.jobs[2].completion_s == pytest.approx(370.0)


def test_preemption_overhead_is_charged_only_when_the_lease_is_not_extended():
    sim = SimConfig(preemption_overhead_s={"fast": 20.0})
    # 10,000 steps at 10/s; round 1 loses 20 s (fresh start); later rounds keep the worker.
    r = run([tj(steps=10_000)], cluster={"v100": 1}, sim=sim)
    assert r.jobs[0].completion_s == pytest.approx(1000.0 + 20.0)
    assert r.lease_extension_rate == pytest.approx(1.0)
    base = run([tj(steps=10_000)], cluster={"v100": 1})
    assert base.jobs[0].completion_s == pytest.approx(1000.0)


def test_a_round_s_launches_start_up_slower_the_more_start_at_once_on_a_machine():
    """``SimConfig.wave_slope`` (``gavelsched/core/waves.py``, issue #29): three jobs
    launched at once on one machine each pay their start-up times 1 + slope x 2; over
    three machines, one each, alone; a later round's single launch pays it alone."""
    jobs = [tj(steps=1000), tj(steps=1000), tj(steps=1000)]
    over = {"fast": 20.0}

    def finishes(**wave):
        sim = SimConfig(preemption_overhead_s=over, **wave)
        return [j.completion_s for j in run(jobs, cluster={"v100": 3}, sim=sim).jobs]
    assert finishes() == [pytest.approx(100.0 + 20.0)] * 3
    assert finishes(wave_slope=0.5) == [pytest.approx(100.0 + 20.0 * 2.0)] * 3
    assert finishes(wave_slope=0.5, machines=3) == [pytest.approx(100.0 + 20.0)] * 3
    # 4 jobs on 3 GPUs: the one left for round 1 (from 140 s, the round's last finish, as
    # Gavel's rounds end) starts up alone
    four = run(jobs + [tj(steps=1000)], cluster={"v100": 3},
               sim=SimConfig(preemption_overhead_s=over, wave_slope=0.5))
    assert four.jobs[3].completion_s == pytest.approx(140.0 + 20.0 + 100.0)
    with pytest.raises(ValueError, match="wave slope"):
        SimConfig(wave_slope=-0.1)


def test_cost_charges_each_gpu_at_its_type_price_for_the_time_it_ran():
    r = run([tj(steps=1000, sf=2)], cluster={"v100": 2}, prices={"v100": 3.6})
    # 1000 steps at 18/s on 2 GPUs: 55.56 s x 2 GPUs x $3.6/h.
    assert r.cost_usd == pytest.approx(2 * (1000 / 18) * 3.6 / 3600)
    assert r.utilization == pytest.approx(1.0)


def test_price_changes_trigger_a_resolve():
    jobs = [tj(steps=10**6)]
    trace = PriceTrace.from_mapping({"v100": [[0, 1.0], [4000, 2.0]]})
    base = run(jobs, cluster={"v100": 1})
    priced = run(jobs, cluster={"v100": 1}, price_trace=trace)
    assert priced.resolves == base.resolves + 1
    # $1/h until the first boundary after t=4000, $2/h after.
    assert priced.cost_usd == pytest.approx((4320 + 2 * (10**5 - 4320)) / 3600, rel=1e-6)


def test_slo_violations_are_counted():
    jobs = [tj(steps=1000, slo_s=50.0), tj(steps=1000, slo_s=500.0), tj(steps=1000)]
    r = run(jobs, cluster={"v100": 3})
    assert r.slo_violations == 1


def test_window_averages_its_jobs_and_stops_when_they_finish():
    jobs = [tj(steps=1000, arrival=0.0), tj(steps=2000, arrival=0.0),
            tj(steps=10**6, arrival=0.0)]
    r = run(jobs, cluster={"v100": 3}, sim=SimConfig(window=(0, 2)))
    assert r.avg_jct_s == pytest.approx((100.0 + 200.0) / 2)
    assert r.jobs[2].completion_s is None  # the run stopped when the window was done
    assert r.window == (0, 2)
    with pytest.raises(SimulationError):
        run(jobs, sim=SimConfig(window=(5, 9)))


def test_idle_cluster_jumps_to_the_next_arrival():
    r = run([tj(steps=100), tj(steps=100, arrival=10_000.0)], cluster={"v100": 1})
    assert r.jobs[1].completion_s == pytest.approx(10_010.0)
    assert r.rounds == 2


def test_gavel_quirk_new_jobs_wait_for_a_resolve_while_others_run():
    # Jobs 0 and 1 run from t=0 and t=10 (re-solves at 0 and, by the time-0 quirk, at 360).
    # Job 2 arrives at t=400: until 360 + 1920 s have passed it has no allocation, so it
    # does not run although a worker is free (it holds that worker idle, as in Gavel).
    jobs = [tj(steps=10**6), tj(steps=10**6, arrival=10.0), tj(steps=100, arrival=400.0)]
    r = run(jobs, cluster={"v100": 3})
    # Boundaries fall every 360 s; the first at or after 2280 is 2520.
    assert r.jobs[2].completion_s == pytest.approx(2520.0 + 10.0)
    eager = run(jobs, cluster={"v100": 3},
                core_config=CoreConfig(min_resolve_interval_s=0, type_order=("v100",)))
    assert eager.jobs[2].completion_s == pytest.approx(720.0 + 10.0)


def test_multi_gpu_jobs_and_heterogeneous_types():
    jobs = [tj(steps=6000, sf=8), tj(kind="slow", steps=3000), tj(steps=1000)]
    r = run(jobs, cluster={"v100": 8, "k80": 8})
    assert all(j.completion_s is not None for j in r.jobs)
    # Its whole type at once: at worst 6000 steps at k80 speed, in whole rounds.
    assert r.jobs[0].completion_s <= 2 * R


def test_a_job_that_cannot_run_anywhere_is_an_error():
    with pytest.raises(SimulationError, match="job 0"):
        run([tj(steps=10, sf=8)], cluster={"v100": 2, "k80": 2})


def test_results_are_deterministic_and_json_has_the_contract_keys():
    jobs = [tj(kind=k, steps=s, arrival=a) for k, s, a in
            [("fast", 20_000, 0), ("slow", 9000, 100), ("fast", 5000, 900), ("slow", 30_000, 1000)]]
    a = run(jobs, policy="max_min_fairness")
    b = run(jobs, policy="max_min_fairness")
    assert a.to_dict() | {"wall_s": 0, "solve_s": 0} == b.to_dict() | {"wall_s": 0, "solve_s": 0}
    d = a.to_dict()
    for key in ("policy", "avg_jct_s", "makespan_s", "utilization", "cost_usd",
                "slo_violations", "rounds", "wall_s", "jobs"):
        assert key in d
    assert set(d["jobs"][0]) == {"id", "job_type", "scale_factor", "arrival_s",
                                 "completion_s", "jct_s"}


class FixedShares(Policy):
    name = "fixed"

    def _solve(self, problem):
        return Solution({j.id: {"v100": 0.5, "k80": 0.5} for j in problem.jobs}, None, None)

    def evaluate(self, problem, allocation):
        return None


def test_received_time_tracks_the_allocation_and_the_gap_is_reported():
    # Two equal jobs, one worker of each type, X = 0.5/0.5: they alternate types.
    jobs = [tj(kind="slow", steps=10**5), tj(kind="slow", steps=10**5)]
    r = run(jobs, policy=FixedShares(), core_config=CoreConfig(
        type_order=("v100", "k80"), resolve_period_s=20 * R, min_resolve_interval_s=0))
    assert r.allocation_gap is not None and r.allocation_gap < 0.1
    assert r.jobs[0].completion_s == pytest.approx(r.jobs[1].completion_s, rel=0.05)


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_min_fairness_perf", "fifo",
                                    "fifo_perf", "finish_time_fairness_perf",
                                    "min_total_duration_perf", "gandiva"])
def test_policies_run_to_completion(policy):
    jobs = [tj(kind=k, steps=s, arrival=a, sf=f) for k, s, a, f in
            [("fast", 20_000, 0, 1), ("slow", 9000, 100, 1), ("fast", 5000, 900, 2),
             ("slow", 30_000, 1000, 1), ("fast", 7000, 1500, 1)]]
    r = run(jobs, cluster={"v100": 2, "k80": 2}, policy=policy)
    assert r.completed == len(jobs)
