"""Finish-time fairness ρ against an isolated run on the same trace (thesis §5.4.2)."""

from __future__ import annotations

import pytest

from simulator import simulate
from simulator.fairness import finish_time_fairness
from traces.catalog import default_table
from traces.generator import generate_trace


@pytest.fixture(scope="module")
def runs():
    table = default_table()
    jobs = generate_trace(40, 6.0, table=table, seed=3)
    cluster = {"v100": 4, "p100": 4, "k80": 4}
    ours = simulate(jobs, table, cluster, "max_min_fairness_perf")
    alone = simulate(jobs, table, cluster, "isolated")
    return ours, alone


def test_rho_is_jct_over_isolated_jct(runs):
    ours, alone = runs
    ftf = finish_time_fairness(ours, alone)
    assert len(ftf.per_job) == len(ours.jobs)
    job = ours.jobs[5]
    expected = job.jct_s / next(j.jct_s for j in alone.jobs if j.id == job.id)
    assert ftf.per_job[job.id] == pytest.approx(expected)
    assert ftf.worst >= ftf.mean > 0 and 0 <= ftf.unfair_share <= 1


def test_heterogeneity_aware_fairness_beats_isolated_on_average(runs):
    """Sharing incentive (§5.4.4), seen end to end: the aware policy's mean ρ is below 1."""
    ours, alone = runs
    assert finish_time_fairness(ours, alone).mean < 1.0


def test_window_limits_the_jobs(runs):
    ours, alone = runs
    ftf = finish_time_fairness(ours, alone, window=(10, 20))
    assert set(ftf.per_job) == {str(i) for i in range(10, 20)}


def test_cli_reports_ftf(tmp_path, capsys):
    from gavelsched.cli import main
    out = tmp_path / "result.json"
    assert main(["simulate", "--jobs", "20", "--rate", "6", "--ftf", "--quiet",
                 "--json", str(out)]) == 0
    import json
    ftf = json.loads(out.read_text())["ftf"]
    assert len(ftf["per_job"]) == 20 and ftf["max"] >= ftf["mean"] > 0
    assert "finish-time fairness rho" in capsys.readouterr().out
