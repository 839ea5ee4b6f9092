"""``SimConfig.priors`` (issue #20): the simulator replays with the daemon's knowledge as it
was. The core plans and sizes leases on the priors until a job has run, then on what its
runs measured (``gavelsched.core.online``, the daemon's estimator), while jobs progress at
the trace table's rates, cut at their lease's steps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator import SimConfig, SimulationError, simulate
from traces import ThroughputTable, TraceJob, default_table

CATALOG = default_table()
JOBS = [TraceJob("ResNet-18 (batch size 16)", 1, 3000, 0.0),
        TraceJob("LM (batch size 5)", 1, 4000, 10.0),
        TraceJob("Transformer (batch size 16)", 1, 2000, 20.0)]
CLUSTER = {"k80": 1, "v100": 1}
WALL = SimConfig(round_ends_at_last_finish=False)


def with_priors(priors) -> SimConfig:
    return SimConfig(round_ends_at_last_finish=False, priors=priors)


def scaled(table: ThroughputTable, factor, only=lambda w, key: True) -> ThroughputTable:
    return ThroughputTable({w: {k: v * (factor if only(w, k) else 1.0) for k, v in rows.items()}
                            for w, rows in table.solo.items()})


def jcts(result) -> list[float]:
    return [job.jct_s for job in result.jobs]


def test_priors_that_are_the_truth_change_nothing():
    oracle = simulate(JOBS, CATALOG, CLUSTER, "max_min_fairness_perf", sim=WALL)
    known = simulate(JOBS, CATALOG, CLUSTER, "max_min_fairness_perf", sim=with_priors(CATALOG))
    assert jcts(known) == jcts(oracle)


def test_misleading_priors_cost_until_the_job_has_run_and_is_measured():
    """The truth: LM is 5x slower on k80 than the priors say. The three jobs arrive
    together, so that the allocation depends on the rates: two jobs on one k80 and one
    V100 get half of each whatever their rates (each runs on one GPU at a time), and JOBS'
    later arrivals made that case, where only solver noise between the two tied jobs had
    told the runs apart (issue #29)."""
    together = [replace(job, arrival_s=0.0) for job in JOBS]
    truth = scaled(CATALOG, 0.2, lambda w, key: w == "k80" and key[0].startswith("LM"))
    oracle = simulate(together, truth, CLUSTER, "max_min_fairness_perf", sim=WALL)
    known = simulate(together, truth, CLUSTER, "max_min_fairness_perf",
                     sim=with_priors(CATALOG))
    assert jcts(known) != jcts(oracle)
    assert known.jobs[1].jct_s > oracle.jobs[1].jct_s      # LM planned on a k80 it is slow on
    assert all(job.completion_s is not None for job in known.jobs)


def test_a_job_faster_than_its_prior_is_cut_at_its_lease_until_measured():
    # alone on a v100 that is really twice as fast as the priors say: its first lease holds
    # the priors' steps, so the job ends later than with the truth known from the start
    job = [TraceJob("ResNet-50 (batch size 64)", 1, 30_000, 0.0)]
    fast = scaled(CATALOG, 2.0)
    oracle = simulate(job, fast, {"v100": 1}, "max_min_fairness_perf", sim=WALL)
    known = simulate(job, fast, {"v100": 1}, "max_min_fairness_perf", sim=with_priors(CATALOG))
    assert known.jobs[0].jct_s > oracle.jobs[0].jct_s
    # ... by about one round's cut: the steps the first lease lacked, at the true rate
    rate, R = fast.get("v100", job[0].job_type), 360.0
    assert known.jobs[0].jct_s - oracle.jobs[0].jct_s == pytest.approx(
        (rate * R - CATALOG.get("v100", job[0].job_type) * R) / rate, rel=0.2)


def test_not_with_co_located_pairs():
    with pytest.raises(SimulationError, match="priors: not with co-located pairs"):
        simulate(JOBS, CATALOG, CLUSTER, "max_min_fairness_packed", sim=with_priors(CATALOG))


def test_the_cli_flag_replays_with_priors_and_refuses_pairs_in_one_line(tmp_path, capsys):
    from gavelsched.cli import main
    from traces.throughputs import dump_table

    priors = tmp_path / "priors.yaml"      # LM 5x faster on k80 than the catalog says
    dump_table(scaled(CATALOG, 5.0, lambda w, key: w == "k80" and key[0].startswith("LM")),
               priors)
    base = ["simulate", "--jobs", "12", "--seed", "3", "--quiet", "--cluster", "k80=2,v100=1"]
    assert main([*base, "--json", str(tmp_path / "a.json")]) == 0
    assert main([*base, "--priors", str(priors), "--json", str(tmp_path / "b.json")]) == 0
    import json
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert [j["jct_s"] for j in a["jobs"]] != [j["jct_s"] for j in b["jobs"]]
    capsys.readouterr()
    assert main([*base, "--priors", str(priors), "--policy", "max_min_fairness_packed"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not with co-located pairs" in err[0]


def test_restart_costs_are_learned_as_the_daemon_learns_them(monkeypatch):
    """The daemon's core charges a job type's restarts from the plan after its first run
    started up (it measures the start-up then); a replay with its knowledge does the same,
    where the oracle replay knows every cost from the start."""
    from gavelsched.core import SchedulerCore
    from gavelsched.core.driver import RoundDriver

    events = []
    learn, plan = SchedulerCore.set_restart_costs, RoundDriver.plan

    def learned(core, costs):
        events.append(("costs", dict(costs)))
        return learn(core, costs)

    def planned(driver, now, *args, **kw):
        events.append(("plan", now))
        return plan(driver, now, *args, **kw)

    monkeypatch.setattr(SchedulerCore, "set_restart_costs", learned)
    monkeypatch.setattr(RoundDriver, "plan", planned)
    startups = {job.job_type: 5.0 + i for i, job in enumerate(JOBS)}
    simulate(JOBS, CATALOG, CLUSTER, "max_min_fairness_perf",
             sim=SimConfig(round_ends_at_last_finish=False, priors=CATALOG,
                           preemption_overhead_s=startups))
    assert events[0][0] == "plan"
    costs = [c for kind, c in events if kind == "costs"]
    assert {t: v for c in costs for t, v in c.items()} == startups   # each once, as charged
    assert sum(len(c) for c in costs) == len(startups)
    events.clear()
    simulate(JOBS, CATALOG, CLUSTER, "max_min_fairness_perf",
             sim=SimConfig(round_ends_at_last_finish=False, preemption_overhead_s=startups))
    assert not [c for kind, c in events if kind == "costs"]
