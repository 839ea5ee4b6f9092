"""``SimConfig.plan_lead_s`` (``simulate --plan-lead``): the simulator plans each round
when the daemon does, ``plan_lead_s`` before the last one ends (thesis §5.6), so a job that
arrives or finishes after a plan is seen a round later, as on the live cluster."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gavelsched.cli import main
from gavelsched.core.driver import config_for
from policies import get_policy
from simulator import SimConfig, simulate
from traces import TraceJob, default_table

R, LEAD = 60.0, 18.0
KIND = "ResNet-18 (batch size 32)"
TABLE = default_table()
RATE = TABLE.get("v100", KIND)


def run(jobs, policy="fifo_perf", *, lead=0.0, refill=False, gpus=1):
    """Started and finished times of ``jobs`` on ``gpus`` V100s, rounds of exactly R, with
    the daemon's re-solve rule."""
    policy = get_policy(policy)
    config = config_for(policy, TABLE, ("v100",), round_seconds=R, refill_freed=refill,
                        refill_until=1.0 - lead / R, resolve="responsive",
                        min_resolve_interval_s=R)
    result = simulate(jobs, TABLE, {"v100": gpus}, policy, core_config=config,
                      sim=SimConfig(round_ends_at_last_finish=False, plan_lead_s=lead))
    return [(j.started_s, j.completion_s) for j in result.jobs]


def job(seconds: float, arrival: float = 0.0) -> TraceJob:
    """A job of about ``seconds`` of work on a V100."""
    return TraceJob(job_type=KIND, scale_factor=1, total_steps=int(seconds * RATE),
                    arrival_s=arrival)


@pytest.mark.parametrize("arrival,start_without,start_with", [
    (40.0, 60.0, 60.0),     # before the plan at 42 s: planned for the round at 60 s
    (50.0, 60.0, 120.0),    # after it: the daemon plans it a round later
])
def test_a_job_that_arrives_after_the_plan_waits_a_round(arrival, start_without, start_with):
    """Max-min fairness on two V100s, one of them idle: the newcomer gets it from the
    first round it is planned for."""
    jobs = [job(10_000), job(10_000, arrival)]
    without = run(jobs, "max_min_fairness_perf", gpus=2)
    with_lead = run(jobs, "max_min_fairness_perf", lead=LEAD, gpus=2)
    assert without[1][0] == pytest.approx(start_without)
    assert with_lead[1][0] == pytest.approx(start_with)


def test_on_an_idle_cluster_an_arrival_is_planned_at_once():
    """Nothing ran in the last round, so no plan was made early (the daemon plans an idle
    cluster's first round when a job arrives)."""
    assert run([job(100, 50.0)], lead=LEAD)[0][0] == pytest.approx(50.0)


@pytest.mark.parametrize("refill,start", [(False, 120.0), (True, 60.0)])
def test_a_job_that_finishes_after_the_plan_was_planned_a_round(refill, start):
    """FIFO on one V100: the head job ends at about 50 s, after the plan at 42 s, which
    gave it the next round too. Without refills its GPU sits that round out, and the next
    job starts a round later; with refills (the daemon's default) the job's GPU goes to the
    next one when the round starts, as in the simulator without a lead. The head job
    finishes at its own time either way."""
    jobs = [job(50.0), job(10_000)]
    plain = run(jobs, refill=refill)
    led = run(jobs, lead=LEAD, refill=refill)
    assert plain[1][0] == pytest.approx(60.0)
    assert led[1][0] == pytest.approx(start)
    assert led[0][1] == pytest.approx(plain[0][1]) == pytest.approx(50.0, abs=0.5)


def test_a_job_that_finishes_before_the_plan_is_not_planned():
    jobs = [job(30.0), job(10_000)]
    assert run(jobs, lead=LEAD)[1][0] == pytest.approx(60.0)


def test_no_lead_is_gavels_simulator(capsys):
    """``--plan-lead 0`` (the default) changes nothing."""
    args = ["simulate", "--jobs", "40", "--rate", "20", "--cluster", "4:4:4", "--quiet",
            "--json", "-"]

    def out(*extra):
        assert main([*args, *extra]) == 0
        data = json.loads(capsys.readouterr().out)
        data.pop("wall_s"), data.pop("solve_s")
        return data

    default = out()
    assert out("--plan-lead", "0") == default
    led = out("--plan-lead", "108", "--refill")
    assert len(led["jobs"]) == len(default["jobs"]) == 40


@pytest.mark.parametrize("lead", ["-1", "360", "nan"])
def test_a_lead_outside_the_round_exits_2(lead, capsys):
    assert main(["simulate", "--jobs", "5", "--plan-lead", lead]) == 2
    assert "--plan-lead" in capsys.readouterr().err


@pytest.mark.parametrize("grace,second_start", [(0.0, 60.0), (0.5, 0.5)])
def test_jobs_submitted_together_are_planned_together_after_the_arrival_grace(grace, second_start):
    """The daemon plans an idle cluster's round half a second after the job that woke it,
    so that jobs submitted together (a trace whose jobs all arrive at t = 0, submitted one
    RPC after another) share that round; ``SimConfig.arrival_grace_s`` replays that rule
    (``RoundDriver.first_plan_at``). Without it the second job waits a whole round."""
    jobs = [job(10_000), job(10_000, 0.3)]
    policy = get_policy("max_min_fairness_perf")
    config = config_for(policy, TABLE, ("v100",), round_seconds=R, resolve="responsive",
                        min_resolve_interval_s=R)
    result = simulate(jobs, TABLE, {"v100": 2}, policy, core_config=config,
                      sim=SimConfig(round_ends_at_last_finish=False, plan_lead_s=LEAD,
                                    arrival_grace_s=grace))
    assert result.jobs[0].started_s == pytest.approx(grace)
    assert result.jobs[1].started_s == pytest.approx(second_start)


def led_run(jobs, *, types=("v100",), priors=None, timeline=False):
    """Max-min fairness on one GPU of each of ``types`` with the daemon's rules (lead,
    grace, re-solve)."""
    policy = get_policy("max_min_fairness_perf")
    config = config_for(policy, TABLE, types, round_seconds=R, resolve="responsive",
                        min_resolve_interval_s=R, refill_until=1.0 - LEAD / R)
    return simulate(jobs, TABLE, {t: 1 for t in types}, policy, core_config=config,
                    sim=SimConfig(round_ends_at_last_finish=False, plan_lead_s=LEAD,
                                  arrival_grace_s=0.5, priors=priors,
                                  record_timeline=timeline))


def test_the_second_round_of_jobs_arriving_together_is_planned_and_resolved_at_the_lead():
    """Issue #29: jobs that all arrive at t = 0 start at the grace (0.5 s); the next round
    is planned LEAD before that one ends (42.5 s), as the daemon plans it, and the
    completion of the short job in the first round is re-solved for then, not at the
    boundary (60.5 s): the re-solve rule counts from the plan, as the daemon's does."""
    result = led_run([job(10.0), job(10_000), job(10_000)], timeline=True)
    assert result.jobs[0].completion_s < 42.5
    assert [t for t, _ in result.timeline.allocations][:2] == pytest.approx([0.5, 42.5])


def test_a_runs_sample_reaches_the_replay_after_the_plan_it_ran_through():
    """Issue #29: with the daemon's knowledge (``SimConfig.priors``) a run is sampled at its
    checkpoint, when its lease ends with the round: after the next round's plan, made LEAD
    early. That plan does not re-solve on the samples, so max-min fairness gives the second
    round to the job that had none in the first (on the simultaneous-arrival trace the
    daemon swapped all six first-round jobs out). Learning the samples before that plan
    re-solved, reset the received times and kept the first round's jobs for a second one:
    job 2 started at 120.5 s."""
    kinds = ("ResNet-50 (batch size 16)", "ResNet-50 (batch size 32)",
             "ResNet-50 (batch size 64)", "ResNet-50 (batch size 128)")
    jobs = [TraceJob(job_type=kind, scale_factor=1, arrival_s=0.0,
                     total_steps=int(10_000 * TABLE.get("v100", kind))) for kind in kinds]
    priors = TABLE.scaled(0.5)        # the jobs really run twice as fast as the priors say
    result = led_run(jobs, types=("v100", "p100", "k80"), priors=priors)
    assert [j.started_s for j in result.jobs] == pytest.approx([0.5, 0.5, 60.5, 0.5])


def test_a_kept_run_gets_ahead_of_the_round_clock_by_at_most_the_lead():
    # the daemon's run goes on into its next lease as soon as the lease is extended (at
    # the next plan, a lead before the round ends): a whole-step lease of floor(rate x R)
    # steps ends before its round, so a lone job gains R - floor(rate R) / rate a round,
    # up to the lead (issue #29: torch forecasts were a steady half second late)
    rate, lead = 1.55, 3.0
    table = TABLE.__class__(solo={"v100": {("slow", 1): rate}})
    policy = get_policy("fifo_perf")
    config = config_for(policy, table, ("v100",), round_seconds=10.0, resolve="responsive")

    def finish(steps, ahead):
        sim = SimConfig(round_ends_at_last_finish=False, plan_lead_s=lead,
                        kept_runs_ahead=ahead)
        jobs = [TraceJob(job_type="slow", scale_factor=1, total_steps=steps, arrival_s=0.0)]
        return simulate(jobs, table, {"v100": 1}, policy, core_config=config,
                        sim=sim).jobs[0].completion_s
    slack = 10.0 - 15 / rate        # 15 steps a round
    # 100 steps: six whole rounds (90 steps), then 10 steps; six rounds' slack gained
    assert finish(100, False) == pytest.approx(60.0 + 10 / rate)
    assert finish(100, True) == pytest.approx(60.0 + 10 / rate - 6 * slack)
    # 400 steps: 26 rounds' slack would be 8.4 s; the run waits for each plan: 3 s at most
    assert finish(400, True) == pytest.approx(finish(400, False) - lead)


def test_a_resumed_replay_plans_its_first_round_a_lead_before_it_starts():
    """A live cluster's replay (``simulate(resume=...)``, ``twin.py``) starts at the end of
    the round the daemon placed, and the daemon plans the next round a lead before that
    end: so does the replay. Planned at its start, its re-solves and allocation periods
    came a lead late, so that an interval which had passed on the daemon at its next plan
    had not in the replay (issue #29: two identical jobs' forecasts swapped by two rounds
    and back)."""
    import numpy as np

    from gavelsched.core import PeriodState
    policy = get_policy("max_min_fairness_perf")
    config = config_for(policy, TABLE, ("v100",), round_seconds=R, resolve="responsive",
                        min_resolve_interval_s=R)
    period = PeriodState(-100.0, ("v100",), ("0",), np.array([[1.0]]), np.array([[R]]),
                         np.zeros((1, 1)), stale=True)
    result = simulate([job(3 * R)], TABLE, {"v100": 1}, policy, core_config=config,
                      sim=SimConfig(round_ends_at_last_finish=False, plan_lead_s=LEAD,
                                    record_timeline=True), resume=period)
    assert [at for at, _ in result.timeline.allocations] == [-LEAD]     # (it was 0)
    assert result.jobs[0].completion_s == pytest.approx(3 * R, abs=1.0)


@pytest.mark.parametrize("whole", [False, True])
def test_received_time_is_the_round_as_the_daemon_credits_it(monkeypatch, whole):
    """``SimConfig.received_whole_round``: a task of the plan counts the whole round as
    received time, as the daemon credits it (``Runs.held_s``), not its lease's whole steps
    (Gavel), which differ between identical jobs by fractions of a step and broke their
    ties the other way in the forecast's replay (issue #29)."""
    from gavelsched.core.driver import RoundDriver
    credited = []
    plan = RoundDriver.plan

    def spy(self, now, seconds=None, **kw):
        if seconds is not None:
            credited.extend(np.asarray(seconds, dtype=float).tolist())
        return plan(self, now, seconds, **kw)

    monkeypatch.setattr(RoundDriver, "plan", spy)
    policy = get_policy("fifo_perf")
    simulate([job(5 * R)], TABLE, {"v100": 1}, policy,
             core_config=config_for(policy, TABLE, ("v100",), round_seconds=R),
             sim=SimConfig(round_ends_at_last_finish=False, received_whole_round=whole))
    assert len(credited) >= 4
    if whole:
        assert credited == [R] * len(credited)
    else:       # floor(rate x R) steps at the rate: under a round
        assert all(R - 1.0 < s < R for s in credited)
