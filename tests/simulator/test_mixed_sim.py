"""The simulator runs jobs on several GPU types at once (VirtualFlow §6.5.2), and the CLI
drives it (``simulate --policy max_min_fairness_mixed --mixed-jobs``, ``--mixed-fraction``)."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from gavelsched.core import CoreConfig
from gavelsched.core.configurations import Configurations
from policies import get_policy
from simulator import SimConfig, simulate
from traces import ThroughputTable, TraceJob, generate_trace
from traces.formats import load_trace

TABLE = ThroughputTable(solo={
    "v100": {("net", 1): 8.0, ("net", 2): 15.0},
    "k80": {("net", 1): 2.0, ("net", 2): 3.9},
})


def test_a_lone_job_runs_at_its_configuration_rate():
    """One job on 1 V100 + 1 K80: the LP gives it the mix, each round makes
    floor(rate x 360) steps, and it finishes after total / rate seconds (+ lease rounding)."""
    steps = 100_000
    (option,) = [o for o in Configurations(TABLE).options("net", 1, {"v100": 1, "k80": 1})]
    rate = option.configuration.throughput
    assert rate > 8.0
    jobs = [TraceJob("net", 1, steps, 0.0, mixed=True)]
    mixed = simulate(jobs, TABLE, {"v100": 1, "k80": 1}, "max_min_fairness_mixed")
    single = simulate(jobs, TABLE, {"v100": 1, "k80": 1}, "max_min_fairness_perf")
    # every round runs floor(rate x 360) steps in that many / rate seconds
    assert mixed.jobs[0].jct_s == pytest.approx(steps / rate, rel=1e-6)
    assert single.jobs[0].jct_s == pytest.approx(steps / 8.0, rel=1e-6)
    assert mixed.utilization > single.utilization  # both types busy


def test_without_mixed_jobs_the_mixed_policy_simulates_like_perf():
    from traces import default_table

    table = default_table()
    jobs = generate_trace(6, 20.0, table=table, seed=3)
    cluster = {"v100": 2, "p100": 2, "k80": 2}
    a = simulate(jobs, table, cluster, "max_min_fairness_mixed")
    b = simulate(jobs, table, cluster, "max_min_fairness_perf")
    assert [j.completion_s for j in a.jobs] == pytest.approx([j.completion_s for j in b.jobs])


def test_mixed_tasks_are_costed_and_counted_on_every_type_they_use():
    jobs = [TraceJob("net", 1, 20_000, 0.0, mixed=True)]
    policy = get_policy("max_min_fairness_mixed")
    result = simulate(jobs, TABLE, {"v100": 1, "k80": 1}, policy,
                      core_config=CoreConfig.for_policy(policy, type_order=("v100", "k80")),
                      prices={"v100": 3.6, "k80": 0.36}, sim=SimConfig(record_timeline=True))
    busy_s = result.jobs[0].jct_s
    # both GPUs held for the whole run (one job, one configuration): $3.96 an hour
    assert result.cost_usd == pytest.approx(busy_s * 3.96 / 3600, rel=0.02)
    assert result.utilization == pytest.approx(1.0, abs=0.02)


def test_cli_simulates_a_mixed_policy_and_generates_mixed_traces(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--jobs", "10", "--rate", "20", "--mixed-fraction",
                 "0.5", "--seed", "1", "-o", str(trace)]) == 0
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    flagged = sum(bool(r.get("mixed")) for r in rows)
    assert 0 < flagged < 10
    assert sum(j.mixed for j in load_trace(trace)) == flagged
    out = tmp_path / "r.json"
    assert main(["simulate", "--trace", str(trace), "--cluster", "v100=2,p100=2,k80=4",
                 "--policy", "max_min_fairness_mixed", "--json", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["policy"] == "max_min_fairness_mixed"
    assert main(["simulate", "--jobs", "6", "--rate", "20", "--cluster", "v100=2,k80=2",
                 "--policy", "finish_time_fairness_mixed", "--mixed-jobs", "all",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["trace", "generate", "--jobs", "3", "--rate", "1", "--mixed-fraction",
                 "1.5", "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "mixed_fraction must be between 0 and 1, got 1.5" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"job_type": "A3C", "scale_factor": 1, "total_steps": 5,
                               "arrival_s": 0, "mixed": "maybe"}) + "\n")
    assert main(["simulate", "--trace", str(bad), "--quiet"]) == 2
    assert "mixed" in capsys.readouterr().err


def test_cli_generates_elastic_traces_and_simulates_them(tmp_path, capsys):
    """``--elastic-fraction``: multi-GPU jobs carry a min_scale_factor in the .jsonl, which
    the loader keeps, and a *_mixed policy replays them (Varuna §4)."""
    trace = tmp_path / "e.jsonl"
    assert main(["trace", "generate", "--jobs", "40", "--rate", "20", "--multi-gpu",
                 "--elastic-fraction", "1", "--seed", "3", "-o", str(trace)]) == 0
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    multi = [r for r in rows if r["scale_factor"] > 1]
    assert multi and all(1 <= r["min_scale_factor"] < r["scale_factor"] for r in multi)
    assert all("min_scale_factor" not in r for r in rows if r["scale_factor"] == 1)
    assert [j.min_scale_factor for j in load_trace(trace)] == [r.get("min_scale_factor")
                                                               for r in rows]
    results = {}
    for fraction in ("0", "1"):     # the same jobs, rigid and then elastic
        out = tmp_path / f"r{fraction}.json"
        assert main(["simulate", "--jobs", "12", "--rate", "20", "--multi-gpu",
                     "--elastic-fraction", fraction, "--cluster", "v100=4,k80=4",
                     "--policy", "max_min_fairness_mixed", "--json", str(out),
                     "--quiet"]) == 0
        results[fraction] = json.loads(out.read_text())
    assert [j["job_type"] for j in results["0"]["jobs"]] == \
        [j["job_type"] for j in results["1"]["jobs"]]
    # elastic jobs run on fewer GPUs rather than wait: the replay changes
    assert results["1"]["makespan_s"] != results["0"]["makespan_s"]
    capsys.readouterr()
    assert main(["trace", "generate", "--jobs", "3", "--rate", "1", "--elastic-fraction",
                 "2", "-o", str(tmp_path / "x.jsonl")]) == 2
    assert "elastic_fraction must be between 0 and 1, got 2" in capsys.readouterr().err
