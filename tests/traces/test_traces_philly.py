"""Importing the Philly cluster_job_log (our own small sample in its format)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traces import ThroughputTable, TraceError
from traces.catalog import default_table
from traces.importers import IMPORTERS, import_philly

SAMPLE = Path(__file__).with_name("data") / "philly_cluster_job_log.json"


def test_import_keeps_finished_jobs_and_counts_the_rest():
    result = import_philly(SAMPLE, seed=0)
    assert len(result.jobs) == 7
    assert result.skipped == {"status Failed": 1, "status Killed": 1, "zero GPUs": 1,
                              "missing time": 1, "no attempts": 1}
    assert result.capped == 1  # the 16-GPU job


def test_arrivals_scale_factors_and_entities():
    jobs = import_philly(SAMPLE, seed=0).jobs
    # Sorted by submission, relative to the first (08:00:00).
    assert [j.arrival_s for j in jobs] == [0.0, 4500.0, 7200.0, 9000.0, 10800.0, 18000.0,
                                           19200.0]
    # GPUs 2, 1, 3 (last attempt, two machines), 8, 16 (capped), 5, 1.
    assert [j.scale_factor for j in jobs] == [2, 1, 4, 8, 8, 8, 1]
    assert [j.entity for j in jobs] == ["a1b2c3", "a1b2c3", "d4e5f6", "a1b2c3", "g7h8i9",
                                        "g7h8i9", "a1b2c3"]


def test_total_steps_are_run_time_times_v100_throughput():
    table = default_table()
    jobs = import_philly(SAMPLE, seed=0, table=table).jobs
    run_times = [1800, 7200, 6 * 3600, 16 * 3600, 12 * 3600, 2700, 3600]
    for job, seconds in zip(jobs, run_times):
        rate = table.get("v100", job.job_type, job.scale_factor)
        assert job.total_steps == round(seconds * rate)


def test_job_types_are_seeded():
    a = import_philly(SAMPLE, seed=1).jobs
    assert a == import_philly(SAMPLE, seed=1).jobs
    assert [j.job_type for j in a] != [j.job_type for j in import_philly(SAMPLE, seed=2).jobs]
    assert {j.job_type for j in a} <= set(default_table().job_types)


def test_options():
    assert len(import_philly(SAMPLE, statuses=("Pass", "Killed")).jobs) == 8
    assert len(import_philly(SAMPLE, max_jobs=3).jobs) == 3
    only = import_philly(SAMPLE, job_types=["A3C"]).jobs
    assert {j.job_type for j in only} == {"A3C"}
    assert IMPORTERS["philly"] is import_philly


def test_scale_factor_rounds_up_to_what_the_table_has():
    table = ThroughputTable(solo={"v100": {("A3C", 1): 10.0, ("A3C", 4): 30.0}})
    jobs = import_philly(SAMPLE, table=table).jobs
    assert [j.scale_factor for j in jobs] == [4, 1, 4, 4, 4, 4, 1]


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    (json.dumps({"jobs": []}), "expected a JSON array"),
])
def test_bad_files(tmp_path, text, words):
    path = tmp_path / "cluster_job_log"
    path.write_text(text)
    with pytest.raises(TraceError, match=words) as info:
        import_philly(path)
    assert "cluster_job_log" in str(info.value)


def test_entries_of_the_wrong_shape_are_skipped_with_their_reason(tmp_path):
    """(Each was a TypeError's traceback, or a surrogate that failed the trace's write.)"""
    good = json.loads(SAMPLE.read_text())[0]
    entries = [{**good, "status": ["Pass"]}, {**good, "vc": "a\ud800"},
               {**good, "attempts": [{**good["attempts"][-1],
                                      "detail": [{"ip": "m1", "gpus": 3}]}]}, good]
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(entries))
    result = import_philly(path)
    assert len(result.jobs) == 1
    assert result.skipped == {"status not text": 1, "vc not a name": 1, "zero GPUs": 1}


def test_empty_log(tmp_path):
    path = tmp_path / "cluster_job_log"
    path.write_text("[]")
    assert import_philly(path).jobs == []
