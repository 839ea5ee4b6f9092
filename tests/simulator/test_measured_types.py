"""A cluster of a worker type the throughput table lacks (issue #19): ``simulate`` fills it
from its measured row in ``traces/data/measured`` (here a folder of the test's own: no fake
measured data is committed), and refuses, in one line, a type nothing measured."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from simulator import SimConfig, simulate
from simulator.sweep import SweepSpec, run_sweep
from traces import dump_table, generate_trace, profiles
from traces.catalog import default_table
from traces.profiles import SCHEMA, table_for_types


@pytest.fixture
def measured(tmp_path, monkeypatch):
    """A measured-rows folder with an fp32 row of h100, twice a v100 at one GPU."""
    folder = tmp_path / "measured"
    folder.mkdir()
    table = default_table()
    rates = {job: 2 * table.get("v100", job) for job in table.job_types
             if table.get("v100", job) > 0}
    (folder / "h100-fp32.json").write_text(json.dumps({
        "schema": SCHEMA, "worker_type": "h100", "precision": "fp32",
        "device": "NVIDIA H100 80GB HBM3", "steps_per_s": rates}))
    monkeypatch.setattr(profiles, "MEASURED_DIR", folder)
    return folder


def test_simulate_runs_on_a_measured_type_alone_multi_gpu_jobs_included(measured, tmp_path):
    out = tmp_path / "result.json"
    assert main(["simulate", "--cluster", "h100=8", "--jobs", "20", "--rate", "30",
                 "--multi-gpu", "--json", str(out), "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert len(result["jobs"]) == 20
    assert all(j["completion_s"] is not None for j in result["jobs"])
    assert any(j["scale_factor"] > 1 for j in result["jobs"])


def test_simulate_on_the_issues_cluster_and_with_a_throughputs_file(measured, tmp_path):
    assert main(["simulate", "--cluster", "h100=8,v100=16,k80=16", "--jobs", "20",
                 "--quiet"]) == 0
    small = tmp_path / "table.json"
    base = default_table()
    dump_table(type(base)(solo={t: base.solo[t] for t in ("v100", "k80")}), small)
    out = tmp_path / "result.json"
    assert main(["simulate", "--throughputs", str(small), "--cluster", "h100=2,k80=2",
                 "--jobs", "10", "--json", str(out), "--quiet"]) == 0
    assert all(j["completion_s"] is not None for j in json.loads(out.read_text())["jobs"])


def test_the_measured_type_takes_work(measured):
    cluster = {"h100": 2, "k80": 2}
    table = table_for_types(default_table(), cluster)
    jobs = generate_trace(30, 0.0, table=table, seed=1)
    result = simulate(jobs, table, cluster, "max_min_fairness_perf",
                      sim=SimConfig(record_timeline=True))
    h100 = result.timeline.types.index("h100")
    assert sum(busy[h100] for busy in result.timeline.busy) > 0
    assert all(j.completion_s is not None for j in result.jobs)


def test_a_sweep_fills_the_measured_type(measured, tmp_path):
    rows = run_sweep(["max_min_fairness_perf"], [20.0], [0],
                     SweepSpec(jobs=8, cluster={"h100": 2}), tmp_path / "sweep", processes=1)
    assert rows[0]["jobs"] == 8 and rows[0]["utilization"] > 0


def test_a_type_nothing_measured_is_refused_in_one_line(measured, tmp_path, capsys):
    assert main(["simulate", "--cluster", "t4=4,v100=4", "--jobs", "5", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("gavelsched simulate: error: worker type 't4'")
    assert "known: k80, p100, v100, h100" in err[0]
