"""The restart rule (``gavelsched/core/restarts.py``, issue #32): a fresh run keeps its GPUs
until its restart has paid, so short rounds never thrash; a run that gets GPUs always makes
progress; fairness holds at the grain of tenures; and jobs whose restarts are free are
scheduled exactly as under Gavel's rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simulator.engine as engine
from gavelsched.core import CoreConfig, JobSpec
from gavelsched.core.driver import config_for
from gavelsched.core.restarts import efficiency, tenure_s
from gavelsched.mechanism import ClusterView, Demand, plan_round
from simulator.config import SimConfig
from simulator.engine import make_policy, simulate
from traces import ThroughputTable, TraceJob

TABLE = ThroughputTable(solo={
    "v100": {("a", 1): 10.0, ("b", 1): 6.0, ("a", 2): 18.0, ("b", 2): 11.0},
    "k80": {("a", 1): 3.0, ("b", 1): 4.0, ("a", 2): 5.0, ("b", 2): 7.0},
})


def test_tenure_is_the_restart_over_its_share():
    assert tenure_s(50.0, 0.2) == pytest.approx(250.0)
    assert tenure_s(0.0, 0.2) == 0.0


def test_efficiency_is_what_a_run_keeps_when_preempted_at_its_first_chance():
    assert efficiency(0.0, 60.0, 0.2) == 1.0
    assert efficiency(6.0, 60.0, 0.2) == pytest.approx(0.9)       # a round, 6 s of it lost
    assert efficiency(250.0, 60.0, 0.2) == pytest.approx(0.8)     # its tenure, a fifth lost


def test_config_refuses_an_unknown_rule_or_a_share_that_leaves_no_progress():
    with pytest.raises(ValueError, match="restart_rule"):
        CoreConfig(restart_rule="sia")
    with pytest.raises(ValueError, match="restart_share"):
        CoreConfig(restart_share=0.6)
    with pytest.raises(ValueError, match="restart_s"):
        JobSpec(id="0", job_type="a", scale_factor=1, total_steps=10, restart_s=math.nan)


def _demand(prio_first: str, pinned=None, servers: int = 1):
    """Two 2-GPU jobs on one type of 2 workers; ``prio_first`` is owed more."""
    keys = ("x", "y")
    owed = {"x": 0.0, "y": 0.0}
    owed[prio_first] = 1000.0
    return Demand(
        keys=keys, members=(("x",), ("y",)), types=("v100",),
        scale_factor=np.array([2, 2]), allocation=np.array([[0.5], [0.5]]),
        received=np.array([[1.0 + owed["y"]], [1.0 + owed["x"]]]),
        deficit=np.zeros((2, 1)), runnable=np.ones((2, 1), dtype=bool),
        allocated=np.ones(2, dtype=bool), previous={"y": (0, 1)},
        pinned=None if pinned is None else np.array(pinned))


@pytest.mark.parametrize("per_server", [1, 2])
def test_a_pinned_run_keeps_its_workers_over_a_job_owed_more(per_server):
    view = ClusterView.build({"v100": 2}, per_server)
    free = plan_round(_demand("x"), view)
    assert [p.key for p in free.placements] == ["x"]                 # Gavel: x is owed more
    pinned = plan_round(_demand("x", pinned=[-1, 0]), view)
    assert [(p.key, p.workers, p.extended) for p in pinned.placements] == [("y", (0, 1), True)]


def _owed(x_received: float, preferred) -> Demand:
    """Two 1-GPU jobs at equal shares of one V100; y ran on it last round and has
    received 10 s, x has received ``x_received`` (None: never ran)."""
    return Demand(
        keys=("x", "y"), members=(("x",), ("y",)), types=("v100",),
        scale_factor=np.array([1, 1]), allocation=np.array([[0.5], [0.5]]),
        received=np.array([[0.0 if x_received is None else x_received], [10.0]]),
        deficit=np.zeros((2, 1)), runnable=np.ones((2, 1), dtype=bool),
        allocated=np.ones(2, dtype=bool), previous={"y": (0,)},
        preferred=np.array(preferred))


@pytest.mark.parametrize("x_received, runs", [(6.0, "y"), (4.0, "x"), (None, "x")])
def test_a_preferred_run_yields_only_to_a_job_owed_twice_as_much(x_received, runs):
    """Priority is X / received: x at 6 s is owed 1.7x what y is, at 4 s 2.5x, and a job
    that never ran infinitely more. Preferred (its priority counts twice), y keeps the
    GPU over the first only; not preferred, x gets it each time."""
    view = ClusterView.build({"v100": 1})
    assert [p.key for p in plan_round(_owed(x_received, [-1, 0]), view).placements] == [runs]
    assert [p.key for p in plan_round(_owed(x_received, [-1, -1]), view).placements] == ["x"]


def test_a_pinned_job_runs_in_no_other_combination():
    view = ClusterView.build({"v100": 2}, 1)
    demand = Demand(
        keys=("x", "y", "x+y"), members=(("x",), ("y",), ("x", "y")), types=("v100",),
        scale_factor=np.array([1, 1, 1]), allocation=np.array([[0.2], [0.2], [0.8]]),
        received=np.ones((3, 1)), deficit=np.zeros((3, 1)), runnable=np.ones((3, 1), bool),
        allocated=np.ones(3, bool), previous={"x": (0,)}, pinned=np.array([0, -1, -1]))
    keys = {p.key for p in plan_round(demand, view).placements}
    assert "x" in keys and "x+y" not in keys


def _jobs(n: int, steps: int = 2000, job_type: str = "a") -> list[TraceJob]:
    return [TraceJob(job_type=job_type, scale_factor=1, total_steps=steps, arrival_s=0.0)
            for _ in range(n)]


def _run(jobs, cluster, rule: str, restart_s: float, R: float = 60.0,
         policy="max_min_fairness_perf", finish_restarts: float = 30.0):
    pol = make_policy(policy)
    config = config_for(pol, TABLE, ClusterView.build(cluster).worker_types).but(
        round_seconds=R, restart_rule=rule, finish_restarts=finish_restarts)
    sim = SimConfig(preemption_overhead_s={j.job_type: restart_s for j in jobs})
    return simulate(jobs, TABLE, cluster, pol, core_config=config, sim=sim)


def test_short_rounds_with_long_restarts_thrash_under_gavel_and_not_under_tenure():
    """Three jobs time-share two V100s at 60 s rounds; a restart takes 150 s. Gavel's
    rule re-deals every round: most runs are preempted before they step. Tenure keeps
    each run for 750 s."""
    jobs = _jobs(3, steps=6000)
    gavel = _run(jobs, {"v100": 2}, "gavel", 150.0)
    tenure = _run(jobs, {"v100": 2}, "tenure", 150.0)
    free = _run(jobs, {"v100": 2}, "tenure", 0.0)
    assert tenure.avg_jct_s < 0.5 * gavel.avg_jct_s
    assert tenure.avg_jct_s < 1.25 * free.avg_jct_s


def test_free_restarts_schedule_exactly_as_gavel():
    jobs = [TraceJob(job_type=t, scale_factor=sf, total_steps=s, arrival_s=a)
            for t, sf, s, a in [("a", 1, 3000, 0), ("b", 2, 2000, 30), ("a", 2, 5000, 400),
                                ("b", 1, 900, 900), ("a", 1, 4000, 1000)]]
    cluster = {"v100": 2, "k80": 3}
    gavel = _run(jobs, cluster, "gavel", 0.0)
    tenure = _run(jobs, cluster, "tenure", 0.0)
    assert [j.completion_s for j in tenure.jobs] == [j.completion_s for j in gavel.jobs]


def _spy_runs(monkeypatch):
    """Record every round's tasks as run: (keys, extended, steps made)."""
    seen = []
    original = engine._Run.run_tasks

    def run_tasks(self, batch, span, start):
        ran = original(self, batch, span, start)
        seen.append((batch.keys, batch.extended.tolist(), ran.steps.sum(axis=1).tolist()))
        return ran
    monkeypatch.setattr(engine._Run, "run_tasks", run_tasks)
    return seen


def _runs(seen) -> list[tuple[str, float]]:
    """Each run (a fresh start and the rounds that extended its lease): (key, steps made)."""
    out: list[list] = []
    open_run: dict[str, int] = {}
    for keys, extended, steps in seen:
        now_open = {}
        for key, ext, made in zip(keys, extended, steps):
            if ext and key in open_run:
                out[open_run[key]][1] += made
                now_open[key] = open_run[key]
            else:
                now_open[key] = len(out)
                out.append([key, made])
        open_run = now_open
    return [(k, s) for k, s in out]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_run_that_gets_gpus_makes_progress(monkeypatch, data):
    """Random traces whose restarts reach 5x the round: no run ends without a step, and
    every job finishes."""
    R = 60.0
    n = data.draw(st.integers(2, 7))
    jobs = [TraceJob(job_type=data.draw(st.sampled_from("ab")),
                     scale_factor=data.draw(st.sampled_from([1, 1, 2])),
                     total_steps=data.draw(st.integers(50, 4000)),
                     arrival_s=data.draw(st.sampled_from([0.0, 0.0, 100.0, 700.0])),
                     startup_s=data.draw(st.sampled_from([0.0, 10.0, 60.0, 150.0, 300.0])))
            for _ in range(n)]
    cluster = {"v100": data.draw(st.integers(2, 3)), "k80": data.draw(st.integers(0, 2))}
    policy = data.draw(st.sampled_from(["max_min_fairness_perf", "fifo_perf",
                                        "max_sum_throughput_perf"]))
    seen = _spy_runs(monkeypatch)
    pol = make_policy(policy)
    config = config_for(pol, TABLE, ClusterView.build(cluster).worker_types).but(round_seconds=R)
    result = simulate(jobs, TABLE, cluster, pol, core_config=config)
    monkeypatch.undo()
    assert all(j.completion_s is not None for j in result.jobs)
    idle = [(key, steps) for key, steps in _runs(seen) if steps == 0]
    assert idle == []


def test_identical_jobs_share_evenly_at_the_grain_of_tenures():
    """Max-min's time sharing goes on: five identical jobs on two GPUs, restarts of 2.5
    rounds, no finish hold. They finish in three groups (two GPUs for five jobs), each at
    most a tenure and a round after the last (Gavel's rule staggers them by rounds: here
    runs last tenures), and no later than their fair share of the GPUs, net of restarts,
    allows."""
    R, restart = 60.0, 150.0
    jobs = _jobs(5, steps=30000)
    result = _run(jobs, {"v100": 2}, "tenure", restart, R, finish_restarts=0.0)
    ends = [j.completion_s for j in result.jobs]
    assert max(ends) - min(ends) <= 2 * (tenure_s(restart, 0.2) + R)
    alone = 30000 / 10.0                                    # steps / V100 steps/s
    fair = alone * 5 / 2 / efficiency(restart, R, 0.2)     # 2/5 of a GPU, net of restarts
    assert max(ends) <= fair + tenure_s(restart, 0.2) + 2 * R


def test_a_job_near_its_end_runs_to_it(monkeypatch):
    """Five 50-minute jobs on two GPUs, restarts of 150 s: each would end within 30
    restarts once started, so each runs once, start to end, two at a time. The mean JCT
    falls by more than a third against time sharing (no finish hold), and the last job
    ends no later."""
    R, restart = 60.0, 150.0
    jobs = _jobs(5, steps=30000)
    seen = _spy_runs(monkeypatch)
    held = _run(jobs, {"v100": 2}, "tenure", restart, R)
    monkeypatch.undo()
    shared = _run(jobs, {"v100": 2}, "tenure", restart, R, finish_restarts=0.0)
    assert sorted(key for key, _ in _runs(seen)) == ["0", "1", "2", "3", "4"]
    run = restart + 30000 / 10.0
    assert sorted(j.completion_s for j in held.jobs) == [run, run, 2 * run, 2 * run, 3 * run]
    assert held.avg_jct_s < 2 / 3 * shared.avg_jct_s
    assert max(j.completion_s for j in held.jobs) <= max(j.completion_s for j in shared.jobs)


def test_long_jobs_still_share_and_none_ends_later_than_its_fair_share():
    """The same five jobs five times longer (250 minutes: far more than 30 restarts):
    they time-share until each is within its finish hold, and the last ends within the
    bound of pure time sharing (their fair share net of restarts, a tenure and two
    rounds)."""
    R, restart = 60.0, 150.0
    result = _run(_jobs(5, steps=150000), {"v100": 2}, "tenure", restart, R)
    fair = 150000 / 10.0 * 5 / 2 / efficiency(restart, R, 0.2)
    assert max(j.completion_s for j in result.jobs) <= fair + tenure_s(restart, 0.2) + 2 * R


def test_a_daemons_status_carries_its_restart_rule_to_a_replay():
    from gavelsched.core.rules import DaemonRules
    from gavelsched.rpc import pb
    published = DaemonRules(10.0, restart_rule="gavel").published()
    reply = pb.StatusResponse(round_seconds=10.0, **published)
    assert DaemonRules.of_status(reply).restart_rule == "gavel"
    assert DaemonRules.of_status(pb.StatusResponse(round_seconds=10.0)).restart_rule == "tenure"
    assert DaemonRules.of_status(reply).core_config(
        make_policy("fifo_perf"), TABLE, ("v100",)).restart_rule == "gavel"


def _longest_wait(interval_s: float) -> int:
    """Rounds that job A, which ran alone for 3 h, waits in a row once B arrives on its one
    V100 (rounds of 60 s, restarts of 6 s, re-solves at every arrival, received time reset
    once a period lasted ``interval_s``). C, a short job, arrived 30 min before B: its
    re-solve reset the period then, so A has 30 min of received time when B comes."""
    R, seen = 60.0, []
    jobs = [TraceJob(job_type="a", scale_factor=1, total_steps=400_000, arrival_s=0.0),
            TraceJob(job_type="a", scale_factor=1, total_steps=600, arrival_s=9000.0),
            TraceJob(job_type="a", scale_factor=1, total_steps=400_000, arrival_s=10800.0)]
    pol = make_policy("max_min_fairness_perf")
    config = config_for(pol, TABLE, ("v100",)).but(
        round_seconds=R, resolve="responsive", min_resolve_interval_s=interval_s)
    original = engine._Run.run_tasks

    def run_tasks(self, batch, span, start):
        seen.append(tuple(batch.keys))
        return original(self, batch, span, start)

    engine._Run.run_tasks = run_tasks
    try:
        simulate(jobs, TABLE, {"v100": 1}, pol, core_config=config,
                 sim=SimConfig(preemption_overhead_s={"a": 6.0}, horizon_s=30000.0))
    finally:
        engine._Run.run_tasks = original
    after = seen[[i for i, keys in enumerate(seen) if "2" in keys][0]:]
    longest = run = 0
    for keys in after:
        run = 0 if "0" in keys else run + 1
        longest = max(longest, run)
    return longest


def test_a_job_that_ran_alone_waits_for_an_arrival_no_longer_than_a_period():
    """Received time goes back to the seed once a period has lasted Gavel's interval
    (1,920 s), so B catches up on A's 30 minutes, not on its 3 hours: A waits about half
    an hour, as it would under Gavel, where B would wait for the next re-solve. Were the
    period never closed (an interval of 10^9 s), A would wait for B to catch up on all
    its time since the start."""
    assert _longest_wait(1920.0) <= (1920.0 + 3 * 60.0) / 60.0
    assert _longest_wait(1e9) > 100


@pytest.mark.parametrize("made, holds", [(None, False), (1990.0, True)])
def test_a_run_near_its_end_by_steps_not_yet_reported_keeps_its_gpu(made, holds):
    """A daemon plans before its runs' checkpoints report their steps, and tells the core
    what they will have made (``uncredited``); the simulator has credited them by then.
    The finish hold judges by the same steps left in both: a run that will be 10 steps
    from its end keeps its GPU over a job that never ran."""
    from gavelsched.core import SchedulerCore
    from gavelsched.core.records import RoundReport
    from gavelsched.mechanism import ClusterView

    pol = make_policy("max_min_fairness_perf")
    config = config_for(pol, TABLE, ("v100",)).but(round_seconds=60.0, restart_rule="tenure")
    core = SchedulerCore(pol, ClusterView.build({"v100": 1}), TABLE, config)
    for job_id in ("x", "y"):
        core.submit(JobSpec(job_id, "a", 1, 2000, restart_s=1.0), 0.0)
    ran = core.start_round(0.0).batch.keys
    assert len(ran) == 1
    core.end_round(RoundReport(seconds=np.array([60.0])), 60.0)    # no steps reported yet
    uncredited = None if made is None else {ran[0]: made}
    assert (core.start_round(60.0, uncredited).batch.keys == ran) is holds
