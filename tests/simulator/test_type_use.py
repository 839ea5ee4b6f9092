"""``SimConfig.record_type_use``: the GPU-seconds each job type held on each worker type
(``SimulationResult.type_gpu_s``), which ``simulate --type-use`` reports: where a policy
puts each kind of job (issue #31, a measured type beside the catalog's)."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from simulator import SimConfig, simulate
from traces import ThroughputTable, TraceJob, generate_trace
from traces.catalog import default_table

TABLE = default_table()


def total_gpu_s(result) -> float:
    return sum(s for row in result.type_gpu_s.values() for s in row.values())


def busy_gpu_s(result, cluster, jobs) -> float:
    """The GPU-seconds the cluster was busy (``utilization`` is over the run's span)."""
    return result.utilization * sum(cluster.values()) * (result.end_s - jobs[0].arrival_s)


CLUSTER = {"v100": 8, "p100": 8, "k80": 8}


@pytest.mark.parametrize("policy,multi_gpu", [
    ("max_min_fairness_perf", False), ("max_min_fairness", True), ("fifo_perf", True)])
def test_type_use_adds_up_to_the_busy_gpu_seconds(policy, multi_gpu):
    jobs = generate_trace(40, 4.0, seed=3, multi_gpu=multi_gpu)
    result = simulate(jobs, TABLE, CLUSTER, policy, sim=SimConfig(record_type_use=True))
    assert total_gpu_s(result) == pytest.approx(busy_gpu_s(result, CLUSTER, jobs), rel=1e-9)
    assert set(result.type_gpu_s) == {j.job_type for j in jobs}
    assert all(t in CLUSTER for row in result.type_gpu_s.values() for t in row)


def test_a_pair_s_gpu_seconds_count_for_both_of_its_jobs():
    """Under space sharing two jobs share a GPU: its time counts once to each, so the
    total passes the busy time, by at most the busy time again."""
    jobs = generate_trace(40, 4.0, seed=3)
    result = simulate(jobs, TABLE, CLUSTER, "max_min_fairness_packed",
                      sim=SimConfig(record_type_use=True))
    busy = busy_gpu_s(result, CLUSTER, jobs)
    assert busy * (1 + 1e-6) < total_gpu_s(result) <= 2 * busy * (1 + 1e-9)


def test_not_recorded_unless_asked():
    jobs = generate_trace(10, 4.0, seed=0)
    result = simulate(jobs, TABLE, {"v100": 2, "k80": 2}, "max_min_fairness_perf")
    assert result.type_gpu_s == {} and "type_gpu_hours" not in result.to_dict()
    assert result.type_use_lines() == []


def test_each_job_type_runs_where_it_is_fastest_when_nothing_contends():
    """Two jobs, one GPU of each type, each job 10x faster on a different one: the aware
    policy gives each its own type for all of its time; the agnostic one splits them."""
    fast_on = {"A": "v100", "B": "k80"}
    jobs = [TraceJob(job_type=kind, scale_factor=1, total_steps=36_000, arrival_s=0.0,
                     throughputs={t: (10.0 if t == fast else 1.0) for t in ("v100", "k80")})
            for kind, fast in fast_on.items()]
    cluster = {"v100": 1, "k80": 1}
    aware = simulate(jobs, TABLE, cluster, "max_min_fairness_perf",
                     sim=SimConfig(record_type_use=True))
    for kind, fast in fast_on.items():
        assert set(aware.type_gpu_s[kind]) == {fast}
    agnostic = simulate(jobs, TABLE, cluster, "max_min_fairness",
                        sim=SimConfig(record_type_use=True))
    assert all(set(row) == {"v100", "k80"} for row in agnostic.type_gpu_s.values())


def test_a_mixed_task_counts_each_type_s_gpus():
    """A job on two types at once (VirtualFlow configurations, 1 V100 + 1 K80): it holds
    both for its whole run."""
    table = ThroughputTable(solo={"v100": {("net", 1): 8.0, ("net", 2): 15.0},
                                  "k80": {("net", 1): 2.0, ("net", 2): 3.9}})
    jobs = [TraceJob("net", 1, 100_000, 0.0, mixed=True)]
    result = simulate(jobs, table, {"v100": 1, "k80": 1}, "max_min_fairness_mixed",
                      sim=SimConfig(record_type_use=True))
    row = result.type_gpu_s["net"]
    assert row["v100"] == pytest.approx(row["k80"])
    assert row["v100"] == pytest.approx(result.jobs[0].jct_s, rel=0.01)


def test_simulate_type_use_prints_and_writes_it(tmp_path, capsys):
    out = tmp_path / "result.json"
    assert main(["simulate", "--cluster", "v100=2,k80=2", "--jobs", "12", "--type-use",
                 "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "where jobs ran" in printed
    written = json.loads(out.read_text())["type_gpu_hours"]
    for kind, row in written.items():
        assert kind in printed
        assert set(row) <= {"v100", "k80"} and all(h > 0 for h in row.values())
