"""Simulator modes: estimated pair throughputs (§5.3.3, §5.7.6), hierarchical entities
(§5.4.3), and how co-located pairs finish."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from policies import Entity, get_policy
from simulator import SimConfig, simulate
from traces import ThroughputTable, TraceJob
from traces.catalog import default_table
from traces.generator import generate_trace

CLUSTER = {"v100": 2, "p100": 2, "k80": 2}


def recording(name):
    """``get_policy(name)`` whose ``solve`` keeps every Problem it is given."""
    policy = get_policy(name)
    policy.problems = []
    solve = policy.solve

    def record(problem):
        policy.problems.append(problem)
        return solve(problem)

    policy.solve = record
    return policy


@pytest.fixture(scope="module")
def packed_runs():
    table = default_table()
    jobs = generate_trace(16, 12.0, table=table, seed=4)
    oracle = recording("max_min_fairness_packed")
    estimated = recording("max_min_fairness_packed")
    a = simulate(jobs, table, CLUSTER, oracle, seed=1)
    b = simulate(jobs, table, CLUSTER, estimated, sim=SimConfig(estimate_pairs=True), seed=1)
    return table, jobs, (a, oracle.problems), (b, estimated.problems)


def _pair_gaps(table, jobs, problems):
    """|planned - oracle| over every pair throughput the policy was shown."""
    gaps = []
    for problem in problems:
        for pair in problem.pairs:
            a, b = (jobs[int(i)] for i in pair.jobs)
            for t, (ta, tb) in pair.throughputs.items():
                oa, ob = table.pair(t, (a.job_type, a.scale_factor), (b.job_type, b.scale_factor))
                gaps += [abs(ta - oa), abs(tb - ob)]
    return gaps


def test_estimated_pairs_plan_on_estimates_and_finish_every_job(packed_runs):
    table, jobs, (oracle, oracle_problems), (estimated, est_problems) = packed_runs
    assert oracle.completed == estimated.completed == len(jobs)
    assert max(_pair_gaps(table, jobs, oracle_problems)) == pytest.approx(0.0)
    assert max(_pair_gaps(table, jobs, est_problems)) > 1e-3
    # Jobs still progress at the oracle rates: a misestimate costs little (Figure 5.16).
    assert estimated.avg_jct_s == pytest.approx(oracle.avg_jct_s, rel=0.25)


def test_estimates_do_not_touch_policies_without_pairs():
    table = default_table()
    jobs = generate_trace(10, 20.0, table=table, seed=2)
    a = simulate(jobs, table, CLUSTER, "max_min_fairness_perf")
    b = simulate(jobs, table, CLUSTER, "max_min_fairness_perf",
                 sim=SimConfig(estimate_pairs=True))
    assert [j.completion_s for j in a.jobs] == [j.completion_s for j in b.jobs]


def test_cli_estimate_pairs(capsys):
    assert main(["simulate", "--jobs", "8", "--rate", "30", "--cluster", "1:1:1",
                 "--policy", "max_min_fairness_packed", "--estimate-pairs",
                 "--profiled-fraction", "0.5", "--quiet"]) == 0
    assert "average JCT" in capsys.readouterr().out
    assert main(["simulate", "--jobs", "4", "--estimate-pairs", "--profiled-fraction", "2",
                 "--quiet"]) == 2


# ---- hierarchical policies ---------------------------------------------------------------
TABLE = ThroughputTable(solo={"v100": {("a", 1): 1.0}, "k80": {("a", 1): 1.0}})


def _entity_jobs(steps):
    # Four identical jobs at t=0: two of entity "x", two of entity "y".
    return [TraceJob(job_type="a", scale_factor=1, total_steps=steps, arrival_s=0.0,
                     entity=e) for e in ("x", "x", "y", "y")]


def test_entities_reach_the_policy():
    policy = recording("max_min_fairness_water_filling_perf")
    entities = {"x": Entity("x", 3.0), "y": Entity("y", 1.0)}
    simulate(_entity_jobs(3600), TABLE, {"v100": 1, "k80": 1}, policy, entities=entities)
    first = policy.problems[0]
    assert dict(first.entities) == entities
    assert [j.entity for j in first.jobs] == ["x", "x", "y", "y"]


def test_a_fifo_entity_runs_its_oldest_job_first():
    # Two GPUs, two entities of equal weight: x (FIFO) gives its whole GPU to job 0, y
    # shares its GPU between jobs 2 and 3; job 1 waits for job 0.
    entities = {"x": Entity("x", 1.0, "fifo"), "y": Entity("y", 1.0)}
    result = simulate(_entity_jobs(36_000), TABLE, {"v100": 2},
                      "max_min_fairness_water_filling_perf", entities=entities,
                      sim=SimConfig(window=(0, 1)))
    done = {j.id for j in result.jobs if j.completion_s is not None}
    assert done == {"0"}
    assert result.jobs[0].completion_s == pytest.approx(36_000.0, rel=0.02)


def test_cli_entities(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    rows = [{"job_type": "ResNet-18 (batch size 64)", "scale_factor": 1,
             "total_steps": 3000, "arrival_s": 0.0, "entity": e} for e in ("x", "y", "y")]
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    base = ["simulate", "--trace", str(trace), "--cluster", "1:1:1", "--quiet",
            "--policy", "max_min_fairness_water_filling_perf"]
    assert main(base + ["--entities", "x=2,y=1:fifo"]) == 0
    spec = tmp_path / "entities.yaml"
    spec.write_text("x: {weight: 2}\ny: {weight: 1, policy: fifo}\n")
    assert main(base + ["--entities", str(spec)]) == 0
    for bad in ("x=2", "x=oops,y=1", "x=1:lottery,y=1"):
        assert main(base + ["--entities", bad]) == 2
    assert "entities" in capsys.readouterr().err


# ---- co-located pairs --------------------------------------------------------------------
def test_a_job_in_a_pair_finishes_when_the_pair_does():
    table = ThroughputTable(solo={"v100": {("a", 1): 10.0, ("b", 1): 10.0}},
                            pairs={"v100": {(("a", 1), ("b", 1)): (8.0, 4.0)}})
    jobs = [TraceJob(job_type="a", scale_factor=1, total_steps=800, arrival_s=0.0),
            TraceJob(job_type="b", scale_factor=1, total_steps=1000, arrival_s=0.0)]
    # Gandiva pairs the two jobs (one GPU, two jobs): a needs 100 s beside b, b 250 s; a
    # completes with the micro-task, at 250 s (Gavel's completion time for both).
    result = simulate(jobs, table, {"v100": 1}, "gandiva")
    a, b = result.jobs
    assert b.completion_s == pytest.approx(250.0)
    assert a.completion_s == pytest.approx(250.0)


def test_sweep_points_get_entities_and_estimated_pairs(monkeypatch):
    """``simulate sweep`` hands entities (generated jobs join them) and the estimator to
    every simulation, as ``simulate`` does."""
    from gavelsched.estimator import EstimatorConfig
    from simulator import sweep

    seen = {}

    def spy(jobs, *args, **kwargs):
        seen.update(kwargs, jobs=jobs)
        return simulate(jobs, *args, **kwargs)

    monkeypatch.setattr(sweep, "simulate", spy)
    entities = {"x": Entity("x", 3.0), "y": Entity("y", 1.0, "fifo")}
    spec = sweep.SweepSpec(jobs=12, cluster={"v100": 2, "p100": 2, "k80": 2}, entities=entities,
                           estimate_pairs=True, estimator=EstimatorConfig(profiled_fraction=0.5))
    row = sweep.run_point(sweep.SweepPoint("max_min_fairness_water_filling_perf", 6.0, 0), spec)
    assert row["avg_jct_s"] > 0
    assert seen["entities"] == entities
    assert {j.entity for j in seen["jobs"]} == {"x", "y"}
    assert seen["sim"].estimate_pairs and seen["sim"].estimator.profiled_fraction == 0.5


def test_cli_sweep_takes_entities_and_estimate_pairs(tmp_path, capsys):
    assert main(["simulate", "sweep", "--rates", "6", "--jobs", "10", "--cluster", "2:2:2",
                 "--policies", "max_min_fairness_water_filling_perf", "max_min_fairness_packed",
                 "--entities", "x=1,y=2:fifo", "--estimate-pairs", "--processes", "1",
                 "--quiet", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "sweep.csv").exists()


def test_simulator_runs_makespan_policies_as_gavel_does():
    from simulator import make_policy

    assert make_policy("min_total_duration_perf").search == "bisection"
    assert make_policy("min_total_duration_perf", search="exact").search == "exact"
    assert get_policy("min_total_duration_perf").search == "exact"
