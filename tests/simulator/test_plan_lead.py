"""``SimConfig.plan_lead_s`` (``simulate --plan-lead``): the simulator plans each round
when the daemon does, ``plan_lead_s`` before the last one ends (thesis §5.6), so a job that
arrives or finishes after a plan is seen a round later, as on the live cluster."""

from __future__ import annotations

import json

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
