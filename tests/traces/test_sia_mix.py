"""The Sia-like workload (``traces.sia``, ``trace generate --mix sia``) and the restart
costs a native throughput table declares (``restart_s``; issue #32)."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from gavelsched.cli import main
from traces import TraceError, dump_table, load_table, load_trace
from traces.sia import (
    APPLICATION_JOBS,
    GPU_COUNT_JOBS,
    SIA_CLUSTER,
    SIA_GPUS_PER_SERVER,
    SIA_TABLE_PATH,
    TOTAL_STEPS,
    generate_sia_trace,
    sample_helios_arrivals_s,
    sia_table,
)

SIA_RESTARTS = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0,
                "imagenet": 250.0}


def test_the_sia_table_loads_with_its_types_applications_and_restart_costs():
    table = load_table(SIA_TABLE_PATH)
    assert table == sia_table()
    assert table.worker_types == ("t4", "a100", "rtx")
    assert set(table.job_types) == set(APPLICATION_JOBS)
    assert dict(table.restart_s) == SIA_RESTARTS
    for app, counts in GPU_COUNT_JOBS.items():     # every type runs every count of the mix
        for sf in counts:
            assert all(table.get(w, app, sf) > 0 for w in table.worker_types), (app, sf)
    assert sum(SIA_CLUSTER.values()) == 64
    assert all(SIA_CLUSTER[t] % SIA_GPUS_PER_SERVER[t] == 0 for t in SIA_CLUSTER)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_restart_costs_round_trip_through_dump_and_load(tmp_path, suffix):
    path = tmp_path / f"t{suffix}"
    dump_table(sia_table(), path)
    again = load_table(path)
    assert dict(again.restart_s) == SIA_RESTARTS
    assert again == sia_table()


def test_a_table_without_restart_costs_declares_none(tmp_path):
    gavel = tmp_path / "gavel.json"
    gavel.write_text(json.dumps({"v100": {"('A3C', 1)": {"null": 20.0}}}))
    native = tmp_path / "native.yaml"
    native.write_text("v100: {A3C: 20.0}\n")
    for path in (gavel, native):
        assert dict(load_table(path).restart_s) == {}
    dump_table(load_table(native), tmp_path / "again.yaml")
    assert "restart_s" not in (tmp_path / "again.yaml").read_text()


@pytest.mark.parametrize("section, words", [
    ("{A3C: -1}", "restart_s/A3C': restart cost must be a number of seconds in [0, 1e+07], "
                  "got -1"),
    ("{A3C: 1.0e+300}", "got 1e+300"),     # (a replay with it never ended)
    ("{A3C: .nan}", "got nan"),
    ("{A3C: .inf}", "got inf"),
    ("{A3C: soon}", "got 'soon'"),
    ("{A3C: true}", "got True"),
    ("{GPT: 10}", "restart_s/GPT': job type 'GPT' has no throughput in the table"),
    ("[10, 20]", "'restart_s': expected a mapping of job types to seconds, got list"),
])
def test_a_bad_restart_cost_is_one_clear_error(tmp_path, capsys, section, words):
    path = tmp_path / "t.yaml"
    path.write_text(f"v100: {{A3C: 20.0}}\nrestart_s: {section}\n")
    with pytest.raises(TraceError) as info:
        load_table(path)
    message = str(info.value)
    assert words in message and "\n" not in message and message.startswith(str(path))
    # and through the CLI: exit 2, one line
    assert main(["trace", "generate", "--jobs", "2", "--rate", "1", "--throughputs",
                 str(path), "-o", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_generate_mix_sia_defaults_to_sias_160_jobs_on_its_applications(tmp_path, capsys):
    out = tmp_path / "sia.jsonl"
    assert main(["trace", "generate", "--mix", "sia", "--seed", "3", "-o", str(out)]) == 0
    assert "wrote 160 jobs" in capsys.readouterr().out
    jobs = load_trace(out, table=sia_table(), cluster=dict(SIA_CLUSTER))
    assert len(jobs) == 160
    for job in jobs:
        assert job.scale_factor in GPU_COUNT_JOBS[job.job_type]
        assert job.total_steps == TOTAL_STEPS[job.job_type]
        assert job.startup_s is None and job.min_scale_factor is None
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)


def test_the_mix_has_sias_shares_gpu_counts_and_mean_rate():
    n = 16000
    jobs = generate_sia_trace(n, 20.0, seed=5)
    apps = Counter(j.job_type for j in jobs)
    total = sum(APPLICATION_JOBS.values())
    for app, weight in APPLICATION_JOBS.items():
        p = weight / total
        assert abs(apps[app] / n - p) < 4 * math.sqrt(p * (1 - p) / n), app
    cifar = Counter(j.scale_factor for j in jobs if j.job_type == "cifar10")
    weights = GPU_COUNT_JOBS["cifar10"]
    for sf, weight in weights.items():
        p = weight / sum(weights.values())
        assert abs(cifar[sf] / apps["cifar10"] - p) < 4 * math.sqrt(p * (1 - p) / apps["cifar10"])
    hours = jobs[-1].arrival_s / 3600
    assert n / hours == pytest.approx(20.0, rel=0.05)


def test_helios_arrivals_follow_the_half_hour_profile():
    rng = np.random.default_rng(0)
    arrivals = sample_helios_arrivals_s(rng, 20000, 20.0)
    per_bin = np.bincount(((arrivals % 28800) // 1800).astype(int), minlength=16)
    assert per_bin[6] > 5 * per_bin[13]         # the busiest half hour (225) vs the quietest (19)
    assert np.all(np.diff(arrivals) >= 0)
    assert not sample_helios_arrivals_s(rng, 5, 0.0).any()


def test_same_seed_same_sia_trace(tmp_path):
    paths = [tmp_path / name for name in ("a.jsonl", "b.jsonl", "c.jsonl")]
    for path, seed in zip(paths, ("7", "7", "8")):
        assert main(["trace", "generate", "--mix", "sia", "--jobs", "50", "--seed", seed,
                     "-o", str(path)]) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()


@pytest.mark.parametrize("fraction, elastic", [("1", 60), ("0", 0)])
def test_elastic_sia_jobs_may_run_down_to_one_gpu(tmp_path, fraction, elastic):
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--mix", "sia", "--jobs", "60", "--elastic-fraction",
                 fraction, "-o", str(out)]) == 0
    floors = [j.min_scale_factor for j in load_trace(out)]
    assert sum(f == 1 for f in floors) == elastic
    assert all(f in (None, 1) for f in floors)


@pytest.mark.parametrize("argv, words", [
    (["--mix", "sia", "--multi-gpu"], "--multi-gpu: not with --mix sia"),
    (["--mix", "sia", "--slos"], "--slos: not with --mix sia"),
    (["--rate", "2"], "--jobs is required with --mix gavel"),
    (["--jobs", "2"], "--rate is required with --mix gavel"),
])
def test_bad_generate_flags_are_one_line(tmp_path, capsys, argv, words):
    assert main(["trace", "generate", *argv, "-o", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_a_table_that_cannot_run_the_mix_is_refused(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text("t4: {cifar10: {1: 1.0}}\n")
    assert main(["trace", "generate", "--mix", "sia", "--throughputs", str(path),
                 "-o", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot run 'cifar10' on 4 GPUs" in err


def test_simulate_runs_a_small_sia_trace_on_sias_cluster_to_completion(tmp_path):
    trace, result = tmp_path / "sia.jsonl", tmp_path / "r.json"
    assert main(["trace", "generate", "--mix", "sia", "--jobs", "20", "--seed", "1",
                 "-o", str(trace)]) == 0
    cluster = ",".join(f"{t}={n}" for t, n in SIA_CLUSTER.items())
    per_server = ",".join(f"{t}={n}" for t, n in SIA_GPUS_PER_SERVER.items())
    assert main(["simulate", "--trace", str(trace), "--throughputs", str(SIA_TABLE_PATH),
                 "--cluster", cluster, "--gpus-per-server", per_server,
                 "--round-seconds", "60", "--quiet", "--json", str(result)]) == 0
    jobs = json.loads(result.read_text())["jobs"]
    assert len(jobs) == 20 and all(j["completion_s"] is not None for j in jobs)
