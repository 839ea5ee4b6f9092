"""Smoke tests of benchmarks/headline.py and the sweep features it uses (no full run)."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from simulator.sweep import SweepPoint, SweepSpec, run_points
from tests.benchmark_modules import loaded
from traces.catalog import default_table

@pytest.fixture(scope="module")
def headline():
    with loaded("headline") as module:
        yield module


def test_fluid_capacity_aware_exceeds_agnostic(headline):
    cluster = {"v100": 36, "p100": 36, "k80": 36}
    agnostic, aware = headline.fluid_capacity(default_table(), cluster, multi_gpu=False)
    # 108 GPUs over a mean V100 job of ~16.8 h: at most 6.4 jobs/h if every GPU were a V100.
    assert 0 < agnostic < aware < 108 / headline.mean_v100_hours()
    multi = headline.fluid_capacity(default_table(), cluster, multi_gpu=True)
    assert multi[0] < agnostic and multi[1] < aware  # multi-GPU jobs need more GPUs


def test_cost_trace_follows_the_thesis_workload(headline):
    jobs = headline.cost_trace(1.0, 3, jobs=200, day_s=100.0)
    assert {j.job_type for j in jobs} == set(headline.COST_JOB_TYPES)
    table = default_table()
    for j in jobs:
        seconds = j.total_steps / table.get("v100", j.job_type, 1)
        assert min(abs(seconds - 100.0 * d) for d in headline.COST_DAYS) < 1.0
        assert round(j.slo_s / (j.total_steps / table.get("v100", j.job_type, 1)), 1) in (
            1.2, 2.0, 10.0)
    assert jobs == headline.cost_trace(1.0, 3, jobs=200, day_s=100.0)


def test_run_points_keeps_task_order_and_uses_custom_traces(headline):
    cluster = {"v100": 2, "p100": 2, "k80": 2}
    spec = SweepSpec(jobs=6, cluster=cluster, window=(0, 6), prices={"v100": 2.48,
                     "p100": 1.46, "k80": 0.45},
                     trace=functools.partial(headline.cost_trace, jobs=6, day_s=600.0))
    no_backfill = dataclasses.replace(spec, core_options={"backfill": False})
    tasks = [(SweepPoint("max_sum_throughput_normalized_by_cost_perf", 6.0, 0), no_backfill),
             (SweepPoint("max_sum_throughput_perf", 6.0, 0), spec)]
    rows = run_points(tasks, processes=1)
    assert [r["policy"] for r in rows] == [t[0].policy for t in tasks]
    assert all(r["jobs"] == 6 and len(r["jcts_s"]) == 6 for r in rows)
    # Without backfill, the cost policy keeps A3C on its K80 even when V100s are idle.
    assert rows[0]["cost_usd"] <= rows[1]["cost_usd"]


def test_throughput_estimation_benchmark_runs_its_three_lines(tmp_path, capsys):
    """benchmarks/throughput_estimation.py (Figure 5.16) on a tiny trace."""
    with loaded("throughput_estimation") as module:
        assert module.main(["--out", str(tmp_path), "--jobs", "12", "--rates", "0.5",
                            "--window", "2", "8", "--processes", "1"]) == 0
        out = capsys.readouterr().out
        assert "estimated vs oracle" in out
        lines = (tmp_path / "estimation.csv").read_text().splitlines()
        assert {line.split(",")[0] for line in lines[1:]} == {
            module.NO_SHARING, module.SHARING, module.ESTIMATED}


def test_flags_select_and_change_the_experiments(headline, tmp_path):
    """--only / --throughputs / --rates / --window / --jobs / --seeds (no simulation)."""
    import json

    from traces import table_to_gavel_dict

    path = tmp_path / "gavel_table.json"  # Gavel's JSON format
    path.write_text(json.dumps(table_to_gavel_dict(default_table())))
    options = headline.Options(only=("continuous_single_thesis_window", "makespan"),
                               throughputs=str(path), rates=(5.0, 5.6), window=(40, 60),
                               jobs=80, seeds=(3,))
    window, makespan = headline.experiments(False, options)
    assert window.name == "continuous_single_thesis_window" and makespan.name == "makespan"
    assert window.rates == (5.0, 5.6) and window.seeds == (3,) and makespan.seeds == (3,)
    assert (window.spec.jobs, window.spec.window) == (80, (40, 60))
    assert window.spec.table.job_keys == default_table().job_keys
    assert makespan.spec.table is not None and makespan.spec.jobs == 500
    assert headline.Options.from_dict(options.to_dict()) == options
    with pytest.raises(ValueError, match="ends past"):
        headline.experiments(False, headline.Options(only=("continuous_single",), jobs=50))
