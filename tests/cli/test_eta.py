"""ETA from the simulator (issue #18): the live state replayed client-side."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gavelsched.cli import eta
from gavelsched.rpc import pb
from simulator.twin import DaemonRules, daemon_policy, sim_config, this_round


def state(jobs, workers=None, policy="max_min_fairness", round_seconds=10.0, now=100.0):
    workers = workers or {"v100": 1}
    return eta.LiveState(now, 1_700_000_000.0, policy,
                         DaemonRules(round_seconds, "responsive", refill_freed=False), workers,
                         {t: 1 for t in workers}, tuple(jobs))


def job(job_id, steps, rate, started=True, startup=0.0, types=("v100",), weight=1.0):
    return eta.LiveJob(job_id, "ResNet-18", 1, steps, {t: rate for t in types}, weight,
                       startup, 5.0 if started else None)


def test_one_job_finishes_after_steps_over_rate():
    etas = eta.replay(state([job("a", 1000, 2.0)]))
    assert etas["a"].finish_s == pytest.approx(500.0, abs=1.0)
    assert etas["a"].start_s is None            # it runs already


def test_a_startup_longer_than_half_a_round_is_charged_under_a_round():
    # a fresh run always gets half a round after its start-up (daemon/leases.py); charged
    # in full, a start-up of a round or more let no fresh task step: the replay never ended
    inputs = eta.replay_inputs(state([job("a", 100, 2.0, startup=25.0)], round_seconds=10.0))
    assert [j.startup_s for j in inputs.trace] == [pytest.approx(10.0 * 25.0 / 30.0)]
    two = [job("a", 100, 2.0, startup=25.0), job("b", 100, 2.0, startup=25.0)]
    etas = eta.replay(state(two, round_seconds=10.0))
    assert all(e.finish_s < 10_000 for e in etas.values())


def test_startup_is_charged_once_per_fresh_lease():
    etas = eta.replay(state([job("a", 1000, 2.0, startup=3.0)]))
    # the first lease pays 3 s; every later one is extended on the same worker
    assert 500.0 < etas["a"].finish_s <= 500.0 + 3.0 + 10.0


def test_second_job_under_max_min_fairness_shares_the_gpu():
    alone = eta.replay(state([job("a", 1000, 2.0)]))["a"].finish_s
    both = eta.replay(state([job("a", 1000, 2.0), job("b", 1000, 2.0, started=False)]))
    # two equal jobs time-share one GPU: both finish after about the sum of their work
    assert both["a"].finish_s == pytest.approx(2 * alone, rel=0.05)
    assert both["b"].finish_s == pytest.approx(2 * alone, rel=0.05)
    assert both["b"].start_s is not None and both["b"].start_s < 2 * 10.0 + 1


def test_fifo_queues_the_second_job_behind_the_first():
    etas = eta.replay(state([job("a", 1000, 2.0), job("b", 200, 2.0, started=False)],
                            policy="fifo"))
    assert etas["a"].finish_s == pytest.approx(500.0, abs=10.0)
    assert etas["b"].start_s == pytest.approx(etas["a"].finish_s, abs=10.0)
    assert etas["b"].finish_s == pytest.approx(600.0, abs=20.0)


def test_unrunnable_job_never_finishes_and_others_still_do():
    etas = eta.replay(state([job("a", 100, 2.0), job("x", 100, 2.0, types=("k80",))]))
    assert etas["x"] == eta.Eta(None, None)
    assert etas["a"].finish_s == pytest.approx(50.0, abs=1.0)


@pytest.mark.parametrize("weight", [5e-324, 1e-300, 1e300, float("nan"), float("inf"), -1.0])
def test_a_priority_weight_the_scheduler_would_not_admit_is_refused_in_one_line(weight):
    """The scheduler admits weights in [1e-6, 1e6] (``traces.checks``); a picture with a
    subnormal one made the replay's solve fail (Clarabel: NumericalError)."""
    reply = pb.StatusResponse(
        now_s=50.0, policy="max_min_fairness_perf", round_seconds=6.0,
        workers=[pb.WorkerStatus(id="1", type="v100", gpus=1, alive=True)],
        jobs=[pb.JobStatus(id="j1", state="running", total_steps=100, job_type="ResNet-18",
                           scale_factor=1, steps_per_s={"v100": 4.0}, priority_weight=weight)])
    with pytest.raises(ValueError, match="^job j1: priority_weight: must be") as caught:
        eta.state_of(reply)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("seconds", [1e308, 0.01, float("nan"), 0.0])
def test_a_round_length_the_scheduler_would_not_run_is_refused_in_one_line(seconds):
    """The scheduler's config admits rounds of 0.1 s to 1e7 s; 1e308 made the replay's
    horizon endless ("horizon must be > 0 seconds, got inf", from deep in the replay)."""
    reply = pb.StatusResponse(now_s=50.0, policy="fifo", round_seconds=seconds)
    with pytest.raises(ValueError, match="^round_seconds: must be"):
        eta.state_of(reply)


def test_state_of_a_status_reply():
    reply = pb.StatusResponse(
        now_s=50.0, epoch_unix=1.0, policy="fifo", round_seconds=6.0, resolve="responsive",
        min_resolve_interval_s=32.0,
        workers=[pb.WorkerStatus(id="1", type="v100", gpus=2, alive=True),
                 pb.WorkerStatus(id="2", type="v100", gpus=2, alive=False),
                 pb.WorkerStatus(id="3", type="k80", gpus=1, alive=True)],
        jobs=[pb.JobStatus(id="j1", state="running", steps_done=30, total_steps=100,
                           job_type="ResNet-18", scale_factor=1, started_s=3.0,
                           steps_per_s={"v100": 4.0, "k80": 1.0}, priority_weight=2.0,
                           startup_s=1.5, restart_s=2.5),
              pb.JobStatus(id="j2", state="done", steps_done=10, total_steps=10,
                           job_type="ResNet-18", scale_factor=1)])
    s = eta.state_of(reply)
    assert s.workers == {"v100": 2, "k80": 1} and s.gpus_per_server == {"v100": 2, "k80": 1}
    assert s.rules.min_resolve_interval_s == 32.0
    assert s.jobs == (eta.LiveJob("j1", "ResNet-18", 1, 70, {"v100": 4.0, "k80": 1.0}, 2.0,
                                  None, 3.0, None, restart_s=2.5),)
    assert s.rules.startup_s == {"ResNet-18": 1.5}
    inputs = eta.replay_inputs(s)
    assert inputs.trace[0].total_steps == 70 and inputs.trace[0].arrival_s == 0.0
    assert inputs.trace[0].job_type == "ResNet-18"      # its own speeds, not a renamed type
    assert inputs.trace[0].throughputs == {"v100": 4.0, "k80": 1.0}
    assert inputs.trace[0].restart_s == 2.5       # start-up + save: the daemon's restart cost
    assert sim_config(s.rules).preemption_overhead_s == {"ResNet-18": 1.5}
    assert s.rules.published()["refill_until"] == 0.0   # a scheduler that does not refill
    for sent, taken in ((0.7, 0.7), (5.0, 0.0), (float("nan"), 0.0), (-1.0, 0.0)):
        reply.refill_until = sent
        assert eta.state_of(reply).rules.published()["refill_until"] == taken


def test_a_status_with_a_wave_slope_is_replayed_on_each_type_s_start_up_alone():
    """(``gavelsched/core/waves.py``, issue #29) the slope and the machines the alive
    workers are on reach the simulator; each type is charged its start-up alone. A slope
    out of range is read as none, and then each type's mean start-up is charged."""
    reply = pb.StatusResponse(
        now_s=50.0, epoch_unix=1.0, policy="fifo", round_seconds=6.0, resolve="responsive",
        startup_wave_slope=0.3,
        workers=[pb.WorkerStatus(id="1", type="v100", gpus=2, alive=True,
                                 address="10.0.0.1:5"),
                 pb.WorkerStatus(id="2", type="v100", gpus=2, alive=True,
                                 address="10.0.0.1:6"),
                 pb.WorkerStatus(id="3", type="k80", gpus=1, alive=True,
                                 address="10.0.0.2:5"),
                 pb.WorkerStatus(id="4", type="k80", gpus=1, alive=False,
                                 address="10.0.0.3:5")],
        jobs=[pb.JobStatus(id="j1", state="queued", total_steps=100, job_type="ResNet-18",
                           scale_factor=1, steps_per_s={"v100": 4.0}, startup_s=1.5,
                           startup_alone_s=1.2)])
    rules = eta.state_of(reply).rules
    assert (rules.startup_wave_slope, rules.machines) == (0.3, 2)
    assert rules.startup_s == {"ResNet-18": 1.2}
    assert (sim_config(rules).wave_slope, sim_config(rules).machines) == (0.3, 2)
    assert rules.wave_factor(6) == pytest.approx(1.0 + 0.3 * 2)   # 3 a machine
    for bad in (float("nan"), -0.1, 1.5):
        reply.startup_wave_slope = bad
        rules = eta.state_of(reply).rules
        assert rules.startup_wave_slope == 0.0 and rules.startup_s == {"ResNet-18": 1.5}


def test_runs_still_starting_up_step_after_their_start_up_alone_times_their_wave():
    # three runs launched at this round's start (t = 94) on one machine, none up yet at
    # t = 100: each up at 94 + 4 x (1 + 0.5 x 2) = 102, then the lease floor past the
    # round's end: 10 steps at 2/s by t = 107. A refill placed at t = 96 starts alone.
    def starting(job_id, refill=False):
        return dataclasses.replace(job(job_id, 10, 2.0, startup=4.0), running_on="v100",
                                   run_began_s=96.0 if refill else 94.0, run_refill=refill)
    three = dataclasses.replace(placed([starting(k) for k in "abc"]),
                                workers={"v100": 4}, gpus_per_server={"v100": 4})
    three = dataclasses.replace(three, rules=dataclasses.replace(three.rules,
                                                                 startup_wave_slope=0.5))
    assert three.wave_factor == pytest.approx(2.0)
    etas = eta.replay(three)
    assert [etas[k].finish_s for k in "abc"] == [pytest.approx(7.0)] * 3
    refill = dataclasses.replace(three, jobs=(*three.jobs, starting("d", refill=True)))
    assert refill.wave_factor == pytest.approx(2.0)           # (the refill is not of it)
    assert eta.replay(refill)["d"].finish_s == pytest.approx(96.0 + 4.0 + 5.0 - 100.0)


def test_predict_reports_the_new_job_and_the_delay_it_causes():
    s = state([job("a", 1000, 2.0)])
    new = eta.hypothetical(pb.JobRequest(job_type="ResNet-18 (batch size 16)",
                                         total_steps=1000, scale_factor=1), s)
    assert new.steps_per_s["v100"] > 0
    before, after = eta.predict(s, new)
    assert after["new"].finish_s is not None
    assert after["a"].finish_s > before["a"].finish_s


def test_predict_scales_the_catalog_by_what_the_live_jobs_run_at():
    from traces.catalog import default_table
    kind = "ResNet-18 (batch size 16)"
    catalog = default_table().get("v100", kind, 1)
    live = dataclasses.replace(job("a", 1000, 0.1 * catalog), job_type=kind)
    new = eta.hypothetical(pb.JobRequest(job_type="LM (batch size 5)", total_steps=10,
                                         scale_factor=1), state([live]))
    assert new.steps_per_s["v100"] == pytest.approx(
        0.1 * default_table().get("v100", "LM (batch size 5)", 1))


def placed(jobs, *, now=100.0, ends=104.0, round_seconds=10.0):
    """A state whose round (placed by the daemon) ends at ``ends``."""
    base = state(jobs, round_seconds=round_seconds, now=now)
    return dataclasses.replace(base, round_ends_s=ends)


def test_a_running_job_that_ends_within_the_placed_round_finishes_there():
    # durable count at the round's start (t = 94): 16 steps at 2/s end at t = 102
    running = dataclasses.replace(job("a", 16, 2.0), running_on="v100")
    etas = eta.replay(placed([running]))
    assert etas["a"].finish_s == pytest.approx(2.0)


def test_the_placed_round_is_kept_and_the_replay_starts_at_its_end():
    # 100 steps at 2/s: 20 in the placed round (t = 94..104), 80 from its end: 40 s more
    running = dataclasses.replace(job("a", 100, 2.0, startup=3.0), running_on="v100")
    queued = job("b", 10, 2.0, started=False)
    etas = eta.replay(placed([running, queued], round_seconds=10.0))
    assert etas["b"].start_s is not None and etas["b"].start_s >= 4.0   # not before the end
    alone = eta.replay(placed([running]))
    assert alone["a"].finish_s == pytest.approx(4.0 + 40.0, abs=0.5)   # no new start-up


def test_a_run_begun_this_round_pays_its_start_up_in_it():
    # its run began with this round (t = 94) and reached the scheduler at t = 97: then
    # 7 s at 2/s = 14 steps
    fresh = dataclasses.replace(job("a", 14, 2.0, startup=3.0), running_on="v100",
                                run_began_s=94.0, run_up_s=97.0)
    assert eta.replay(placed([fresh]))["a"].finish_s == pytest.approx(4.0)


def test_a_run_still_starting_up_steps_after_its_type_s_mean_start_up():
    # began at t = 94, not up yet at t = 100: up at 94 + 8 = 102 (the mean, uncapped),
    # then the lease floor (5 s) past the round's end: 10 steps at 2/s by t = 107
    starting = dataclasses.replace(job("a", 10, 2.0, startup=8.0), running_on="v100",
                                   run_began_s=94.0)
    assert eta.replay(placed([starting]))["a"].finish_s == pytest.approx(7.0)


def test_a_first_run_still_starting_up_starts_when_its_start_up_ends():
    # placed in this round at t = 94 (a refill, say), never started before: it steps from
    # 94 + 8 = 102, not from the replay's first round (t = 104), which keeps it running
    for done in (10, 100):          # within the placed round, and past it
        starting = dataclasses.replace(job("a", done, 2.0, started=False, startup=8.0),
                                       running_on="v100", run_began_s=94.0)
        assert eta.replay(placed([starting]))["a"].start_s == pytest.approx(2.0)


def test_a_kept_run_steps_from_the_round_s_start_and_later_restarts_pay_a_start_up():
    kept = dataclasses.replace(job("a", 12, 2.0, startup=4.0), running_on="v100",
                               run_began_s=84.0, run_up_s=87.0, run_reported_s=94.0)
    assert eta.replay(placed([kept]))["a"].finish_s == pytest.approx(0.0)   # at t = 100
    # two jobs time-share the GPU round by round (Gavel's restart rule): the kept one goes
    # on without a start-up in the first replayed round, but each later fresh run of
    # either pays its 4 s
    long = dataclasses.replace(kept, steps_left=400)
    other = job("b", 400, 2.0, started=False, startup=4.0)
    both = eta.replay(_gavel_rule(placed([long, other])))
    a_free = eta.replay(_gavel_rule(placed([dataclasses.replace(long, startup_s=0.0), other])))
    assert both["a"].finish_s > a_free["a"].finish_s + 4.0
    # under the daemon's default rule (``core/restarts.py``) the jobs alternate until a's
    # run is within 30 of its 4 s restarts (120 s) of its end, and is then kept to it:
    # a finishes at 290 s (200 s of its own, 90 of b's), not 614
    held = eta.replay(placed([long, other]))
    assert held["a"].finish_s == pytest.approx(290.0)
    assert both["a"].finish_s == pytest.approx(614.0)


def test_a_gpu_freed_within_the_placed_round_is_refilled_as_the_daemon_does():
    # issue #29: "a" ends at t = 102 in the round 94-104; the daemon gives its GPU to "b"
    # for the rest of the round (refill_freed) and b's run goes on. The replay had b wait
    # for the next round: its forecasts were late by up to a round and, with the restart
    # rule, often by several
    a = dataclasses.replace(job("a", 16, 2.0), running_on="v100")
    b = job("b", 100, 2.0, started=False)
    s = placed([a, b])
    refilling = dataclasses.replace(s, rules=DaemonRules(10.0, "responsive"))
    etas = eta.replay(refilling)
    assert etas["a"].finish_s == pytest.approx(2.0)
    assert etas["b"].start_s == pytest.approx(2.0)            # at 102, not at 104
    assert etas["b"].finish_s == pytest.approx(52.0, abs=0.5)  # 100 steps at 2/s from 102
    assert eta.replay(s)["b"].start_s == pytest.approx(4.0)   # no refills: the next round
    # past the refill cut-off (the next round's plan, a lead before its end): none
    late = dataclasses.replace(s, rules=DaemonRules(10.0, "responsive", plan_lead_s=3.0))
    assert eta.replay(late)["b"].start_s == pytest.approx(4.0)


@pytest.mark.parametrize("exit_s", [0.0, 0.3, 0.6])
def test_a_finished_job_s_gpu_is_refilled_at_its_last_step_and_starts_once_it_exits(exit_s):
    # issue #29: "a"'s last step is at t = 102, and the next round is planned at 102.5. The
    # daemon places the refill then (``Runs.idle_workers``), and b's run starts on the GPU
    # once a's process has exited (a torch process: half a second later); the refill is
    # not lost when the exit comes after the plan (the forecast was a round early)
    a = dataclasses.replace(job("a", 16, 2.0), running_on="v100")
    b = job("b", 100, 2.0, started=False)
    s = placed([a, b])
    rules = DaemonRules(10.0, "responsive", plan_lead_s=1.5, exit_s={"ResNet-18": exit_s})
    etas = eta.replay(dataclasses.replace(s, rules=rules))
    assert etas["a"].finish_s == pytest.approx(2.0)
    assert etas["b"].start_s == pytest.approx(2.0 + exit_s)
    assert etas["b"].finish_s == pytest.approx(52.0 + exit_s, abs=0.5)


def test_a_kept_run_has_stepped_since_its_last_report():
    # issue #29: a run kept across rounds (its lease spans them: the restart rule held it)
    # reports its count only at its lease's end. Its durable count was as of t = 84, two
    # rounds ago: at 2/s it has made 20 steps since, so 30 left end at t = 94 + 15 = 109,
    # not at 94 + 25 = 119 (its forecasts were late by the rounds since its report)
    kept = dataclasses.replace(job("a", 50, 2.0), running_on="v100", run_began_s=74.0,
                               run_up_s=75.0, run_reported_s=84.0)
    assert eta.replay(placed([kept]))["a"].finish_s == pytest.approx(9.0, abs=0.5)
    # no report yet (a refill kept into this round, at its start): its count is the
    # checkpoint it began from at t = 75, and it has made 38 steps since; 12 left at t = 94
    # end at t = 100, not 119 (the scheduler's forecast at a round's start was a round late)
    silent = dataclasses.replace(kept, run_reported_s=None)
    assert eta.replay(placed([silent]))["a"].finish_s == pytest.approx(0.0, abs=0.5)
    # a report within the round: its count is as of then, it steps from then
    fresh = dataclasses.replace(kept, steps_left=10, run_reported_s=99.0)
    assert eta.replay(placed([fresh]))["a"].finish_s == pytest.approx(4.0)


def test_a_kept_run_whose_lease_ends_before_its_round_goes_on_ahead_of_the_clock():
    # issue #29: the daemon extends a kept run's lease at the next plan (3 s before the
    # round's end) and the run goes on at once, so a whole-step lease (15 steps at 1.55/s:
    # 9.68 s of a 10 s round) puts it ahead of the round clock, by up to the lead. Its
    # lease ends 10 steps past its count of t = 96: at 102.45, 1.55 s before the round's end
    kept = dataclasses.replace(job("a", 100, 1.55), running_on="v100", run_began_s=74.0,
                               run_up_s=75.0, run_reported_s=96.0, run_lease_left=10)
    s = placed([kept])
    s = dataclasses.replace(s, rules=dataclasses.replace(s.rules, plan_lead_s=3.0))
    later, _, _, ahead = this_round(s)
    assert ahead == {"a": pytest.approx(1.55, abs=0.01)}
    assert later.jobs[0].steps_left == 90
    # 90 steps: six rounds of 15 from t = 104, each 0.32 s short of its round, ahead by
    # 1.87, 2.20, 2.52, 2.84, then the lead (3 s): the last ends 3 s before 104 + 60
    gain = 10.0 - 15 / 1.55
    assert 1.55 + 4 * gain < 3.0 < 1.55 + 5 * gain
    assert eta.replay(s)["a"].finish_s == pytest.approx(4.0 + 50.0 + 15 / 1.55 - 3.0)


def test_the_replay_runs_the_policy_the_scheduler_made():
    # the forecast replayed a makespan policy with Gavel's bisection, as a simulation of a
    # trace does (``make_policy``), while the scheduler runs the exact search and its
    # short-jobs-first second solve: it must make the policy as the scheduler did
    reply = pb.StatusResponse(policy="min_total_duration_perf", round_seconds=10.0,
                              now_s=5.0, policy_options="")
    assert daemon_policy(eta.state_of(reply)).search == "exact"
    reply.policy_options = json.dumps({"search": "bisection"})
    assert daemon_policy(eta.state_of(reply)).search == "bisection"
    reply.policy_options = "[1, 2]"
    with pytest.raises(ValueError, match="policy_options: not a JSON object"):
        eta.state_of(reply)


def _gavel_rule(s):
    return dataclasses.replace(s, rules=dataclasses.replace(s.rules, restart_rule="gavel"))


def test_predict_says_why_a_job_finishes_sooner_with_the_new_one():
    # Two live jobs on a v100 and a k80 (10 s rounds, start-ups of 4-8 s, Gavel's restart
    # rule: jobs move round by round): with a third
    # job the LM job finishes sooner in the replay, though its first allocation is smaller;
    # the delay below zero is the replay's own, and ``why_sooner`` says where it comes from
    from simulator.whatif import why_sooner
    rules = DaemonRules(10.0, "responsive", plan_lead_s=3.0,
                        startup_s={"A3C": 8.0, "LM (batch size 5)": 4.0,
                                   "Transformer (batch size 16)": 8.0}, restart_rule="gavel")
    live = (eta.LiveJob("0", "A3C", 1, 427, {"v100": 2.444, "k80": 1.111}, 1.0, None, 5.0,
                        None, "v100", 90.0, 93.0),
            eta.LiveJob("1", "LM (batch size 5)", 1, 573, {"v100": 4.633, "k80": 2.365}, 1.0,
                        None, 5.0, None, "k80", 90.0, 93.0))
    s = eta.LiveState(100.0, 0.0, "max_min_fairness_perf", rules, {"v100": 1, "k80": 1},
                      {"v100": 1, "k80": 1}, live, 104.0)
    new = eta.hypothetical(pb.JobRequest(job_type="Transformer (batch size 16)",
                                         total_steps=219, scale_factor=1), s)
    before, after = eta.predict(s, new)
    assert after["0"].finish_s > before["0"].finish_s           # the A3C job is delayed
    assert after["1"].finish_s < before["1"].finish_s           # the LM job is not
    assert "sooner with the new job" in why_sooner(s, new, "1")


def test_a_run_ending_at_the_round_start_holds_no_gpu_in_the_replay_and_made_its_lease():
    # at a round's start, a run whose lease was not extended is still saving (it shows on
    # its type); taken as running, it made a whole round more and finished early
    reply = pb.StatusResponse(policy="max_min_fairness_perf", round_seconds=10.0, now_s=100.0,
                              round_ends_s=110.0, epoch_unix=1.7e9)
    reply.workers.add(id="0", type="v100", gpus=1, alive=True)
    reply.jobs.add(id="a", state="running", steps_done=50, total_steps=100, job_type="x",
                   scale_factor=1, worker_type="v100", steps_per_s={"v100": 2.0},
                   started_s=10.0, run_began_s=80.0, run_up_s=82.0, run_ending=True,
                   run_lease_steps=80)
    reply.jobs.add(id="b", state="running", steps_done=0, total_steps=100, job_type="x",
                   scale_factor=1, worker_type="v100", steps_per_s={"v100": 2.0},
                   started_s=-1, run_began_s=100.0, run_up_s=-1)
    reply.jobs.add(id="c", state="running", steps_done=10, total_steps=100, job_type="x",
                   scale_factor=1, worker_type="k80", steps_per_s={"v100": 2.0},
                   started_s=10.0, run_began_s=80.0, run_up_s=82.0, run_ending=True,
                   run_lease_steps=30, run_next_type="v100")
    a, b, c = eta.state_of(reply).jobs
    assert a.running_on is None and a.steps_left == 20
    assert b.running_on == "v100" and b.run_began_s == 100.0 and b.run_up_s is None
    # placed on the v100 this round, waiting for its run on the k80 to exit: a fresh run
    assert (c.running_on, c.run_began_s, c.run_up_s, c.steps_left) == ("v100", 100.0, None, 70)


def test_the_replay_goes_on_with_the_scheduler_s_allocation_period():
    # two equal jobs share one GPU (X = 0.5 each); in the scheduler's period so far "a" has
    # had 20 s and "b" nothing, so "b" is next (thesis §5.5); a replay that started a
    # period of its own gave the next round to the first job, "a"
    from gavelsched.core import CoreConfig, PeriodState
    from simulator.twin import DaemonRules as Rules
    seed = CoreConfig(round_seconds=10.0).seed_seconds
    jobs = [job("a", 100, 2.0, started=False), job("b", 100, 2.0, started=False)]
    fresh = eta.replay(state(jobs))
    assert fresh["a"].start_s < fresh["b"].start_s
    period = PeriodState(80.0, ("v100",), ("a", "b"), np.array([[0.5], [0.5]]),
                         np.array([[seed + 20.0], [seed]]), np.zeros((2, 1)))
    s = dataclasses.replace(state(jobs), period=period)
    assert s.rules == Rules(10.0, "responsive", refill_freed=False)
    going_on = eta.replay(s)
    assert going_on["b"].start_s < going_on["a"].start_s


def test_the_replay_keeps_a_run_the_restart_rule_holds_to_its_end():
    # issue #29: "a" runs this round and ends 15 s into the next; a preemption would cost it
    # another 2 s start-up, so the scheduler keeps it to its end (core/restarts.py, the
    # finish rule) though "b" is owed more. The replay knew nothing of the run and
    # predicted "a" after "b": 10-20 s late on a job with seconds left
    from gavelsched.core import CoreConfig, PeriodState
    seed = CoreConfig(round_seconds=10.0).seed_seconds
    a = dataclasses.replace(job("a", 40, 2.0, startup=2.0), running_on="v100",
                            run_began_s=95.0, run_up_s=97.0)
    b = job("b", 400, 2.0, started=False, startup=2.0)
    period = PeriodState(60.0, ("v100",), ("a", "b"), np.array([[0.5], [0.5]]),
                         np.array([[seed + 30.0], [seed]]), np.zeros((2, 1)))
    s = dataclasses.replace(state([a, b]), round_ends_s=105.0, period=period)
    etas = eta.replay(s)
    # 16 of its steps in this round (97-105 s), the other 24 in the next: done at 117 s
    assert etas["a"].finish_s == pytest.approx(17.0, abs=0.5)
    assert etas["b"].start_s == pytest.approx(25.0)     # the round after (no refills here)


def test_a_job_type_with_no_start_up_yet_is_charged_the_others_mean():
    reply = pb.StatusResponse(policy="fifo", round_seconds=10.0, now_s=5.0)
    reply.workers.add(id="0", type="v100", gpus=1, alive=True)
    for job_id, kind, startup, exit_s in (("a", "x", 4.0, 0.6), ("b", "y", 2.0, float("nan")),
                                          ("c", "z", 0.0, 0.2)):
        reply.jobs.add(id=job_id, state="queued", total_steps=10, job_type=kind,
                       scale_factor=1, steps_per_s={"v100": 1.0}, startup_s=startup,
                       started_s=-1, run_began_s=-1, run_up_s=-1, exit_s=exit_s)
    rules = eta.state_of(reply).rules
    assert dict(rules.startup_s) == {"x": 4.0, "y": 2.0, "z": 3.0}
    # the exits likewise (a NaN is not taken), and the simulator frees GPUs by them
    assert dict(rules.exit_s) == {"x": 0.6, "y": pytest.approx(0.4), "z": 0.2}
    assert sim_config(rules).exit_s == rules.exit_s


def test_the_replay_plans_on_the_rows_the_scheduler_plans_on():
    """A Status job's ``plan_steps_per_s`` (its priors until a run moved them past noise)
    is what the replay's core plans on; it progresses at ``steps_per_s`` (issue #29:
    identical jobs measured 1% apart swapped places in the replay but not in the daemon).
    A row that is missing, NaN or negative is not taken."""
    reply = pb.StatusResponse(
        now_s=50.0, epoch_unix=1.0, policy="fifo", round_seconds=6.0,
        workers=[pb.WorkerStatus(id="1", type="v100", gpus=1, alive=True)],
        jobs=[pb.JobStatus(id="j1", state="queued", total_steps=100, job_type="A",
                           scale_factor=1, steps_per_s={"v100": 4.04},
                           plan_steps_per_s={"v100": 4.0})])
    inputs = eta.replay_inputs(eta.state_of(reply))
    assert inputs.trace[0].throughputs == {"v100": 4.04}
    assert inputs.trace[0].planned == {"v100": 4.0}
    for bad in (float("nan"), -1.0):
        reply.jobs[0].plan_steps_per_s["v100"] = bad
        assert eta.state_of(reply).jobs[0].plan_steps_per_s is None
    # identical jobs, b measured 1% faster: on its own row b is the shorter job and goes
    # first; planned on their priors they tie, and the earlier job goes first
    two = [dataclasses.replace(job(i, 600, rate), started_s=None, plan_steps_per_s={"v100": 2.0})
           for i, rate in (("a", 2.0), ("b", 2.02))]
    sjf = "shortest_job_first_perf"
    planned = eta.replay(state(two, policy=sjf))
    measured = eta.replay(state([dataclasses.replace(j, plan_steps_per_s=None) for j in two],
                                policy=sjf))
    assert planned["a"].finish_s < planned["b"].finish_s
    assert measured["b"].finish_s < measured["a"].finish_s


def test_a_job_of_the_period_that_ends_before_the_next_plan_makes_the_replayed_period_stale():
    """A job that the scheduler's period covers and that ends in the placed round before
    the next round's plan makes the allocation stale, and the daemon re-solves at that plan;
    the replay went on with the old allocation for a round (issue #29: identical jobs then
    swapped places). One that ends after the plan does not."""
    from gavelsched.core import PeriodState
    from simulator.twin import _ends_before_plan, replay_inputs, resumed
    period = PeriodState(80.0, ("v100",), ("a", "c"), np.array([[0.5], [0.5]]),
                         np.zeros((2, 1)), np.zeros((2, 1)))
    for left, stale in ((13, True), (15, False)):     # at 2/s from t = 94: 100.5, 101.5
        c = dataclasses.replace(job("c", left, 2.0), running_on="v100")
        s = dataclasses.replace(placed([job("a", 100, 2.0, started=False), c]), period=period)
        s = dataclasses.replace(s, rules=dataclasses.replace(s.rules, plan_lead_s=3.0))
        later, offset, done, ahead = this_round(s)
        assert _ends_before_plan(s, done) is stale       # the plan: at 104 - 3 = 101
        inputs = replay_inputs(later)
        assert resumed(s, later, inputs, offset, _ends_before_plan(s, done)).stale is stale
        assert eta.replay(s)["c"].finish_s == pytest.approx(left / 2.0 - 6.0)
    # the one still running at the plan, when the restart rule keeps it (it ends within
    # its finish restarts), is placed again by it with its last step, which is credited at
    # the next round's start: that start re-solves and refills its GPU
    assert set(done) == {"c"} and ahead == {} and "c" not in {j.id for j in later.jobs}
    kept = dataclasses.replace(s, jobs=tuple(dataclasses.replace(j, restart_s=0.5)
                                             for j in s.jobs))
    later, offset, done, ahead = this_round(kept)
    assert set(done) == {"c"} and ahead == {}
    assert [j.steps_left for j in later.jobs if j.id == "c"] == [1]
    assert eta.replay(kept)["c"].finish_s == pytest.approx(1.5)
    refilling = dataclasses.replace(kept, rules=dataclasses.replace(kept.rules,
                                                                    refill_freed=True))
    assert eta.replay(refilling)["a"].start_s == pytest.approx(4.0)   # from the round's start
    assert eta.replay(kept)["a"].start_s == pytest.approx(14.0)       # (no refills: after it)


def test_the_placed_round_is_counted_in_the_period_once():
    """The replay's period gets the placed round's time for each run in it (received time,
    thesis §5.5) unless the picture comes after the next round's plan, when the scheduler
    has counted it already (issue #29: a picture in the plan lead counted it twice, and the
    job that had run looked served). A refill the replay makes in the placed round is
    counted from its launch, and its run held its GPUs from then."""
    from gavelsched.core import PeriodState
    from simulator.twin import replay_inputs, resumed
    period = PeriodState(80.0, ("v100",), ("a", "b"), np.array([[0.5], [0.5]]),
                         np.array([[6.0], [6.0]]), np.zeros((2, 1)))
    a = dataclasses.replace(job("a", 100, 2.0), running_on="v100", run_began_s=94.0,
                            run_up_s=94.5, run_reported_s=99.0, restart_s=0.5)
    for now, added in ((100.0, 10.0), (101.5, 0.0)):    # the plan: at 104 - 3 = 101
        s = dataclasses.replace(placed([a, job("b", 100, 2.0, started=False)], now=now),
                                period=period)
        s = dataclasses.replace(s, rules=dataclasses.replace(s.rules, plan_lead_s=3.0))
        later, offset, _, _ = this_round(s)
        got = resumed(s, later, replay_inputs(later), offset)
        assert got.received[:, 0].tolist() == [6.0 + added, 6.0]
        assert got.runs == {"0": ("v100", 10.0)}
    refilled = dataclasses.replace(later, jobs=tuple(
        dataclasses.replace(j, running_on="v100", run_began_s=102.0, run_refill=True)
        if j.id == "b" else dataclasses.replace(j, running_on=None) for j in later.jobs))
    s = dataclasses.replace(s, now_s=100.0)
    got = resumed(s, refilled, replay_inputs(refilled), offset)
    assert got.received[:, 0].tolist() == [6.0, 8.0]
    assert got.runs == {"1": ("v100", 2.0)}


def test_a_run_of_the_plan_launched_after_the_round_s_start_is_credited_the_round():
    """The scheduler credits each task of its plan the whole round (``Runs.held_s``, as
    the simulator counts it), however late in it the run was launched; only a refill
    counts from its launch. The replay credited a run launched 0.4 ms after the round's
    start 0.4 ms less than an identical job kept from before it, and broke their tie
    the other way."""
    from gavelsched.core import PeriodState
    from simulator.twin import replay_inputs, resumed
    period = PeriodState(80.0, ("v100",), ("a",), np.array([[0.5]]), np.array([[6.0]]),
                         np.zeros((1, 1)))
    for refill, credited in ((False, 10.0), (True, 104.0 - 96.0)):
        a = dataclasses.replace(job("a", 100, 2.0), running_on="v100", run_began_s=96.0,
                                run_up_s=96.5, run_refill=refill)
        s = dataclasses.replace(placed([a], now=100.0), period=period)
        later, offset, _, _ = this_round(s)
        got = resumed(s, later, replay_inputs(later), offset)
        assert got.received[0, 0] == pytest.approx(6.0 + credited)


def test_a_freed_gpu_goes_to_the_job_the_scheduler_s_refill_takes():
    """The scheduler's refill plans the freed GPUs alone (``place_freed``): the waiting
    job of highest priority on the freed type gets them. The replay took the job its next
    round would put there, and that round had put the first job on the V100, so the P100
    went to the second (issue #29: two identical jobs' forecasts swapped by two rounds and
    back)."""
    from gavelsched.core import PeriodState
    a = dataclasses.replace(job("a", 16, 2.0, types=("p100",)), running_on="p100")
    c = dataclasses.replace(job("c", 1000, 2.0, types=("v100", "p100")), running_on="v100")
    x = job("x", 100, 2.0, started=False, types=("v100", "p100"))
    y = job("y", 100, 2.0, started=False, types=("v100", "p100"))
    period = PeriodState(80.0, ("v100", "p100"), ("a", "c", "x", "y"),
                         np.array([[0.0, 0.5], [0.1, 0.0], [0.5, 0.5], [0.1, 0.3]]),
                         np.array([[6.0, 16.0], [16.0, 6.0], [6.0, 6.0], [6.0, 6.0]]),
                         np.zeros((4, 2)))
    s = dataclasses.replace(placed([a, c, x, y]), workers={"v100": 1, "p100": 1},
                            gpus_per_server={"v100": 1, "p100": 1}, period=period,
                            rules=DaemonRules(10.0, "responsive"))
    etas = eta.replay(s)
    assert etas["a"].finish_s == pytest.approx(2.0)
    assert etas["x"].start_s == pytest.approx(2.0)            # the P100 freed at t = 102
    assert etas["y"].start_s > 2.0


def test_a_job_that_ends_in_the_plan_lead_has_its_gpu_refilled_after_a_re_solve():
    """Issue #29: job c, kept by the restart rule, ends after the next round's plan. The
    daemon's round start finds it ended since the plan, re-solves (the allocation counted
    on c) and refills its GPU on the new allocation (``RoundDriver.start``). The replay ran
    c's last step ahead of that round and refilled on the stale allocation (identical jobs
    then swapped places, and their forecasts by a round and back)."""
    from gavelsched.core import PeriodState
    # X gave a 0.2 and b 0.3 since t = 40; b has received 5 s (received times count from a
    # seed of half a round), a nothing: on that allocation a goes first. Re-solved without
    # c, a and b get 1/2 each, and b, owed more (deficits 0.3 x 64 - 5 against 0.2 x 64),
    # goes first
    period = PeriodState(40.0, ("v100",), ("a", "b", "c"), np.array([[0.2], [0.3], [0.5]]),
                         np.array([[5.0], [10.0], [5.0]]), np.zeros((3, 1)))
    c = dataclasses.replace(job("c", 15, 2.0), running_on="v100", restart_s=0.5)
    waiting = [job(i, 100, 2.0, started=False) for i in ("a", "b")]
    s = dataclasses.replace(placed([*waiting, c]), period=period)
    s = dataclasses.replace(s, rules=DaemonRules(10.0, "responsive", plan_lead_s=3.0,
                                                 min_resolve_interval_s=10.0))
    etas = eta.replay(s)
    assert etas["c"].finish_s == pytest.approx(1.5)   # at 101.5, after the plan at 101
    assert etas["b"].start_s == pytest.approx(4.0)    # on c's GPU from the round's start
    assert etas["a"].start_s > etas["b"].start_s
