"""The daemon's twin (issue #27): ``DaemonRules`` yields the configs the daemon runs by, and
a job's own throughputs (``TraceJob.throughputs``) reach the simulator without renaming
its job type."""

from __future__ import annotations

import dataclasses

import pytest

from gavelsched.core.rules import MIN_LEASE_FRACTION, startup_charge
from gavelsched.daemon.snapshot import build_snapshot
from policies import get_policy
from simulator import SimConfig, SimulationError, simulate
from simulator.twin import DaemonRules, sim_config
from traces import ThroughputTable, TraceJob, default_prices, default_table
from traces.errors import TraceError
from traces.formats import load_trace, validate_trace, write_trace

from ..daemon.test_round_aligned import Scheduler


@pytest.mark.parametrize("config", [
    {}, {"resolve": "gavel"}, {"refill_freed": False}, {"plan_lead_seconds": 1.0},
    {"min_resolve_interval_s": 55.0, "plan_lead_seconds": 4.0}])
def test_the_rules_a_status_publishes_give_the_daemons_core_config(tmp_path, config):
    sched = Scheduler(tmp_path, **config)
    try:
        x = sched.x
        reply = build_snapshot(x.view(0.0)).response
        rules = DaemonRules.of_status(reply)
        # the config's rules, and the order the core serves the types in
        assert rules == dataclasses.replace(x.config.rules, type_order=x.core.config.type_order)
        table = default_table()
        replayed = rules.core_config(get_policy("max_min_fairness_perf"), table,
                                     table.worker_types, seed=x.config.seed)
        daemon = x.core.config
        if not daemon.refill_freed:     # refills off: the fraction is not published
            replayed = dataclasses.replace(replayed, refill_until=daemon.refill_until)
        assert replayed == daemon
        assert sim_config(rules).plan_lead_s == x.driver.plan_lead_s == x.config.plan_lead
        # a whole run's arrivals wait the daemon's grace; an ETA's jobs are there already
        grace = x.config.rules.arrival_grace_s
        assert x.driver.arrival_grace_s == grace > 0
        assert sim_config(rules, arrivals=True).arrival_grace_s == grace
        assert sim_config(rules).arrival_grace_s == 0.0
        assert not sim_config(rules).round_ends_at_last_finish       # wall-clock rounds
    finally:
        sched.close()


def test_a_jobs_slo_reaches_its_replay_as_the_time_left_to_its_deadline(tmp_path):
    """Under an SLO policy the scheduler plans a job toward its deadline (thesis §6.4.3). A
    replay of its picture (the scheduler's ETAs, ``predict``) starts at the picture's time,
    so it plans the job with the time left: arrival plus SLO, less now. A deadline already
    past is no SLO there (best effort and Gavel's mode drop a late one); no SLO stays
    none. The Status carried no SLO: the ETAs replayed SLO policies without them."""
    from gavelsched.rpc import pb
    from simulator.live import hypothetical, state_of
    from simulator.twin import replay_inputs

    sched = Scheduler(tmp_path, policy="max_sum_throughput_normalized_by_cost_perf_SLOs")
    try:
        for slo, steps in ((500.0, 10_000), (2.0, 40), (0.0, 10_000)):  # 0: none (each
            sched.x.submit(pb.JobRequest(job_type="A3C", total_steps=steps,   # within reach
                                         workload="steps", slo_s=slo))      # alone)
        sched.t = 5.0
        reply = build_snapshot(sched.x.view(sched.t)).response
        assert [j.slo_s for j in reply.jobs] == [500.0, 2.0, 0.0]
        state = state_of(reply)
        assert [j.slo_left_s for j in state.jobs] == [pytest.approx(495.0), None, None]
        trace = replay_inputs(state).trace
        assert [j.slo_s for j in trace] == [pytest.approx(495.0), None, None]
        # ``predict``'s job arrives at the picture's time: its whole SLO is left
        asked = pb.JobRequest(job_type="A3C", total_steps=100, workload="steps", slo_s=60.0)
        assert hypothetical(asked, state).slo_left_s == 60.0
    finally:
        sched.close()


def test_predict_says_why_strict_slos_would_refuse_the_job(tmp_path):
    """Under strict SLOs the scheduler refuses a job whose SLO no allocation meets (it fails
    with the policy's reason); ``predict``'s replay keeps going past the refusal as the
    daemon does, and says why, where it printed neither a start nor a finish (and the
    replay raised before replays kept going). A cost policy's replay plans with the
    scheduler's prices (it had none: the ETAs of every cost policy failed)."""
    from gavelsched.rpc import pb
    from simulator.live import NEW_ID, hypothetical, state_of
    from simulator.whatif import predict

    sched = Scheduler(tmp_path, policy="max_sum_throughput_normalized_by_cost_perf_SLOs")
    try:
        running = sched.x.submit(pb.JobRequest(job_type="A3C", total_steps=100_000,
                                               workload="steps", slo_s=1e6))
        sched.at(1.0)
        state = state_of(build_snapshot(sched.x.view(sched.t)).response)
    finally:
        sched.close()
    # the Status carries the prices the policy plans with (here the catalog's): without
    # them every re-solve of a cost policy's replay failed, and its ETAs with it
    assert state.prices == default_prices()
    fits = hypothetical(pb.JobRequest(job_type="A3C", total_steps=100, workload="steps",
                                      slo_s=3600.0), state)
    beyond = hypothetical(pb.JobRequest(job_type="A3C", total_steps=10**9, workload="steps",
                                        slo_s=1.0), state)
    _, after = predict(state, fits)
    assert after[NEW_ID].refused is None and after[NEW_ID].finish_s is not None
    before, after = predict(state, beyond)
    assert (after[NEW_ID].start_s, after[NEW_ID].finish_s) == (None, None)
    assert after[NEW_ID].refused.startswith(
        "max_sum_throughput_normalized_by_cost_perf_SLOs: SLOs beyond reach")
    assert after[running].finish_s == before[running].finish_s is not None   # unmoved


def test_a_cost_policys_replay_re_plans_at_the_price_traces_changes(tmp_path):
    """A price trace (thesis chapter 6: spot prices) changes what a cost policy plans: the
    Status carries its changes to come, and the scheduler's ETA replay re-plans at each as
    the scheduler will. Here the v100 costs ten times more from t = 100 s, and the job
    moves to the k80 (more steps per dollar there from then): it finishes about twice as
    late as a replay at the prices of now says, which is what the replay said before."""
    from gavelsched.daemon.settings import ClusterSettings
    from gavelsched.rpc import pb
    from simulator.live import state_of
    from simulator.twin import replay
    from traces.prices import PriceTrace

    trace = PriceTrace({"v100": ((0.0, 1.0), (100.0, 10.0))})
    sched = Scheduler(tmp_path, policy="max_sum_throughput_normalized_by_cost_perf",
                      settings=ClusterSettings(prices={"k80": 1.0}, price_trace=trace))
    try:
        sched.x.roster.register(pb.RegisterWorkerRequest(
            worker_type="k80", gpus=1, address="127.0.0.1:2", hostname="k",
            previous_server_id=-1), sched.t)
        v100, k80 = (default_table().solo[t][("A3C", 1)] for t in ("v100", "k80"))
        job = sched.x.submit(pb.JobRequest(job_type="A3C", total_steps=int(600 * v100),
                                           workload="steps"))
        sched.at(1.0)
        state = state_of(build_snapshot(sched.x.view(sched.t)).response)
    finally:
        sched.close()
    assert state.prices["v100"] == 1.0
    assert state.price_trace.changes == {"v100": ((100.0, 10.0),)}   # to come, on its clock
    at_prices_of_now = replay(dataclasses.replace(state, price_trace=None))[job].finish_s
    assert at_prices_of_now == pytest.approx(600, rel=0.1)          # all on the v100
    # on the v100 until t = 100 s, then the rest on the k80
    assert replay(state)[job].finish_s == pytest.approx(100 + 500 * v100 / k80, rel=0.1)


def test_a_type_order_that_names_a_type_twice_is_read_as_none(tmp_path):
    sched = Scheduler(tmp_path)
    try:
        reply = build_snapshot(sched.x.view(0.0)).response
        assert DaemonRules.of_status(reply).type_order == ("v100", "p100", "k80")
        del reply.type_order[:]
        reply.type_order.extend(["v100", "k80", "v100"])
        assert DaemonRules.of_status(reply).type_order == ()
    finally:
        sched.close()


def test_the_partners_a_daemon_lists_reach_its_replays_and_a_negative_count_is_every_pair(
        tmp_path):
    sched = Scheduler(tmp_path, pair_partners=3)
    try:
        reply = build_snapshot(sched.x.view(0.0)).response
        assert DaemonRules.of_status(reply).pair_partners == 3
        assert sched.x.core.config.pair_partners == 3
        reply.pair_partners = -3
        assert DaemonRules.of_status(reply).pair_partners == 0
    finally:
        sched.close()


def test_a_start_up_past_the_lease_floor_is_charged_the_share_of_the_gpus_it_costs():
    # up to half a round, the start-up itself; a longer one s still gets the floor F = 5 s
    # of steps, holding the GPUs s + F: charged R s / (s + F) of a 10 s round, under R
    rules = DaemonRules(10.0, startup_s={"A": 25.0, "B": 2.0, "C": 0.0})
    floor = MIN_LEASE_FRACTION * 10.0
    assert rules.startup_charges() == {"A": pytest.approx(10.0 * 25.0 / 30.0), "B": 2.0}
    assert sim_config(rules).preemption_overhead_s == rules.startup_charges()
    assert startup_charge(floor, 10.0) == floor                      # continuous there
    assert startup_charge(7.5, 10.0) == pytest.approx(6.0)           # 5 s of steps in 12.5 s
    assert startup_charge(1e12, 10.0) < 10.0


def test_rules_refuse_a_plan_lead_of_a_round():
    with pytest.raises(ValueError, match="plan lead"):
        DaemonRules(10.0, plan_lead_s=10.0)


# ---- per-job throughputs -------------------------------------------------------------
CLUSTER = {"v100": 2, "p100": 1, "k80": 2}
OWN = [({"v100": 3.0, "p100": 1.5, "k80": 0.5}, 4000, 0.0, 2.0),
       ({"v100": 2.0, "p100": 1.0}, 3000, 0.0, None),
       ({"v100": 1.2, "p100": 1.1, "k80": 0.9}, 2500, 40.0, 1.0),
       ({"v100": 4.0, "k80": 1.0}, 6000, 100.0, 0.0),
       ({"p100": 2.0, "k80": 1.5}, 1500, 130.0, None)]


def own_trace():
    return [TraceJob("ResNet-18", 1, steps, arrival, throughputs=rates, startup_s=startup)
            for rates, steps, arrival, startup in OWN]


def renamed_trace():
    """The same jobs as ``own_trace``, each under a job type of its own (the old way)."""
    jobs, solo, overhead = [], {t: {} for t in CLUSTER}, {}
    for i, (rates, steps, arrival, startup) in enumerate(OWN):
        name = f"ResNet-18 #{i}"
        for t, r in rates.items():
            solo[t][(name, 1)] = r
        overhead[name] = 3.0 if startup is None else startup
        jobs.append(TraceJob(name, 1, steps, arrival))
    return jobs, ThroughputTable(solo), overhead


def test_a_job_runs_at_its_own_throughputs():
    table = ThroughputTable({"v100": {("ResNet-18", 1): 100.0}})
    job = TraceJob("ResNet-18", 1, 1000, 0.0, throughputs={"v100": 2.0})
    result = simulate([job], table, {"v100": 1}, "fifo_perf")
    assert result.jobs[0].completion_s == pytest.approx(500.0)
    assert result.jobs[0].job_type == "ResNet-18"           # its name is kept
    plain = simulate([dataclasses.replace(job, throughputs=None)], table, {"v100": 1},
                     "fifo_perf")
    assert plain.jobs[0].completion_s == pytest.approx(10.0)


@pytest.mark.parametrize("policy", ["max_min_fairness_perf", "fifo_perf",
                                    "finish_time_fairness_perf"])
@pytest.mark.parametrize("fixed_rounds", [False, True])
def test_own_throughputs_give_what_renamed_job_types_gave(policy, fixed_rounds):
    renamed, table, overhead = renamed_trace()
    base = dict(round_ends_at_last_finish=not fixed_rounds, plan_lead_s=3.0 * fixed_rounds)
    old = simulate(renamed, table, CLUSTER, policy, sim=SimConfig(
        preemption_overhead_s=overhead, **base))
    empty = ThroughputTable({t: {} for t in CLUSTER})
    new = simulate(own_trace(), empty, CLUSTER, policy, sim=SimConfig(
        preemption_overhead_s={"ResNet-18": 3.0}, **base))
    drop = ("wall_s", "solve_s")
    got, want = new.to_dict(), old.to_dict()
    for key in drop:
        got.pop(key), want.pop(key)
    for job in want["jobs"]:
        job["job_type"] = "ResNet-18"
    assert got == want


def test_own_throughputs_with_the_daemons_priors_give_what_renamed_types_gave():
    renamed, table, overhead = renamed_trace()
    prior_rows = {t: {} for t in CLUSTER}
    for job in renamed:
        for t in CLUSTER:
            prior_rows[t][(job.job_type, 1)] = 1.0
    old = simulate(renamed, table, CLUSTER, "max_min_fairness_perf",
                   sim=SimConfig(priors=ThroughputTable(prior_rows)))
    priors = ThroughputTable({t: {("ResNet-18", 1): 1.0} for t in CLUSTER})
    jobs = [dataclasses.replace(j, startup_s=None) for j in own_trace()]
    new = simulate(jobs, ThroughputTable({t: {} for t in CLUSTER}), CLUSTER,
                   "max_min_fairness_perf", sim=SimConfig(priors=priors))
    assert [j.completion_s for j in new.jobs] == [j.completion_s for j in old.jobs]


def test_a_trace_with_own_throughputs_round_trips_through_jsonl(tmp_path):
    path = tmp_path / "own.jsonl"
    write_trace(path, own_trace())
    assert load_trace(path) == own_trace()
    validate_trace(own_trace(), ThroughputTable({t: {} for t in CLUSTER}), CLUSTER)


def test_a_job_s_own_restart_cost_round_trips_and_drives_the_restart_rule(tmp_path):
    # issue #32: the daemon weighs start-up + save; its replay (twin.py) carries that as
    # the job's restart_s, apart from the start-up it charges. Two equal jobs on one GPU,
    # no start-up charged: free restarts rotate them each round (both end late); a restart
    # of 100 s holds the first run to its end (core/restarts.py, the finish rule)
    jobs = [TraceJob("ResNet-18", 1, 1000, 0.0, throughputs={"v100": 1.0}, startup_s=0.0,
                     restart_s=restart) for restart in (None, 100.0)]
    path = tmp_path / "restart.jsonl"
    write_trace(path, jobs)
    assert load_trace(path) == jobs
    path.write_text('{"job_type": "A", "scale_factor": 1, "total_steps": 10, '
                    '"arrival_s": 0, "restart_s": -1}\n')
    with pytest.raises(TraceError, match="restart_s"):
        load_trace(path)

    def ends(restart):
        two = [dataclasses.replace(jobs[0], restart_s=restart) for _ in range(2)]
        result = simulate(two, ThroughputTable({"v100": {}}), {"v100": 1},
                          get_policy("max_min_fairness"),
                          sim=SimConfig(round_ends_at_last_finish=False))
        return sorted(j.completion_s for j in result.jobs)
    assert ends(None)[0] > 1500.0                   # time-shared: each ends near 2,000 s
    assert ends(100.0)[0] == pytest.approx(1000.0, abs=1.0)   # the first one held


@pytest.mark.parametrize("bad, field", [
    ('{"v100": -1}', "throughputs.v100"), ('{"v100": "fast"}', "throughputs.v100"),
    ('[1, 2]', "throughputs"), ('{"v100": NaN}', "throughputs.v100")])
def test_bad_own_throughputs_are_refused_at_the_door(tmp_path, bad, field):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"job_type": "A", "scale_factor": 1, "total_steps": 10, '
                    f'"arrival_s": 0, "throughputs": {bad}}}\n')
    with pytest.raises(TraceError, match=field.replace(".", r"\.")):
        load_trace(path)


def test_own_throughputs_must_name_known_worker_types():
    job = TraceJob("A", 1, 10, 0.0, throughputs={"h100": 5.0, "v100": 1.0})
    table = ThroughputTable({"v100": {}})
    with pytest.raises(TraceError, match="h100"):
        validate_trace([job], table, {"v100": 1})
    with pytest.raises(SimulationError, match="h100"):
        simulate([job], table, {"v100": 1}, "fifo_perf")
    with pytest.raises(SimulationError, match="cannot run"):
        simulate([TraceJob("A", 1, 10, 0.0, throughputs={"v100": 0.0})], table,
                 {"v100": 1}, "fifo_perf")
