"""``gavelsched simulate``: the CLI contract (docs/design.md)."""

from __future__ import annotations

import csv
import json
import re
import signal
from pathlib import Path

import pytest

from gavelsched.cli import main


def test_a_small_generated_run_prints_a_summary(capsys):
    assert main(["simulate", "--jobs", "12", "--rate", "30", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "average JCT" in out and "max_min_fairness_perf" in out


def test_json_and_plots(tmp_path, capsys):
    out = tmp_path / "result.json"
    plots = tmp_path / "plots"
    code = main(["simulate", "--jobs", "10", "--rate", "20", "--policy", "max_min_fairness",
                 "--cluster", "2:2:2", "--window", "2:8", "--json", str(out),
                 "--plot", str(plots), "--quiet"])
    assert code == 0
    data = json.loads(out.read_text())
    assert data["policy"] == "max_min_fairness" and data["window"] == [2, 8]
    measured = [j["jct_s"] for j in data["jobs"] if 2 <= int(j["id"]) < 8]
    assert data["avg_jct_s"] == pytest.approx(sum(measured) / len(measured))
    assert {p.name for p in plots.iterdir()} == {"jct_cdf.png", "allocation.png",
                                                   "utilization.png"}


def test_trace_file_round_trip(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    lines = [{"job_type": "ResNet-18 (batch size 64)", "scale_factor": 1, "total_steps": 5000,
              "arrival_s": 60.0 * i} for i in range(4)]
    trace.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    pytest.importorskip("traces.catalog")
    from traces.catalog import default_table
    if not default_table().has("ResNet-18 (batch size 64)", 1):
        pytest.skip("catalog lacks the job type used here")
    assert main(["simulate", "--trace", str(trace), "--cluster", "v100=1,k80=1",
                 "--json", "-", "--quiet"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)  # the summary goes to stderr when the JSON goes to stdout
    assert len(data["jobs"]) == 4 and all(j["completion_s"] for j in data["jobs"])


def test_bad_trace_exits_2_with_one_line_naming_file_line_and_field(tmp_path, capsys):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"job_type": "ResNet-50 (batch size 64)", "scale_factor": 1, '
                     '"total_steps": 10, "arrival_s": 0}\n'
                     '{"job_type": "ResNet-50 (batch size 64)", "scale_factor": 1, '
                     '"total_steps": -5, "arrival_s": 0}\n')
    assert main(["simulate", "--trace", str(trace), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "bad.jsonl:2" in err[0] and "total_steps" in err[0]


@pytest.mark.parametrize("argv, needle", [
    (["--window", "5:2"], "--window"),
    (["--cluster", "v100=x"], "--cluster"),
    (["--policy", "nope"], "nope"),
    (["--trace", "/does/not/exist.jsonl"], "exist"),
    (["--preemption-overhead", "soon"], "--preemption-overhead"),
    (["--preemption-overhead", "inf"], "must be in [0, 1e+07] seconds, got inf"),  # (a
    (["--preemption-overhead", "1e308"], "got 1e308"),   # traceback, and a replay unending)
    (["--policy", "fifo", "--option", "type_choice=best"], "type_choice"),
    (["--option", "colour"], "KEY=VALUE"),
    (["--resolve-period", "0"], "--resolve-period"),
    (["--jobs", "99999999999"], "--jobs: must be between 1 and 1000000"),  # (a MemoryError)
    (["--rate", "inf"], "--rate: must be in [0, 1e+09] jobs/hour, got inf"),
    (["--policy", "max_sum_throughput_normalized_by_cost_perf", "--prices", "v100=nan"],
     "--prices: v100: must be a finite number, got nan"),       # (a NaN price was taken)
    (["--policy", "max_sum_throughput_normalized_by_cost_perf", "--prices", "v100=1e308"],
     "--prices: v100: must be <= 1e+06, got 1e+308"),
    (["--prices", "=2"], "--prices: expected TYPE=PRICE[,...], got '=2'"),   # (no type)
])
def test_bad_arguments_exit_2(argv, needle, capsys):
    assert main(["simulate", "--jobs", "5", "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize("argv, line", [
    (["--json", "/dev/full"], "No space left on device"),
    (["--plot", "/dev/null"], "/dev/null: File exists"),
])
def test_a_result_the_machine_will_not_take_is_one_line_exit_1(argv, line, capsys):
    """(Both were a traceback: an OSError the command did not expect.)"""
    if not Path("/dev/full").exists():
        pytest.skip("needs Linux's /dev/full")
    assert main(["simulate", "--jobs", "5", "--quiet", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gavelsched simulate: error: {line}"]


@pytest.mark.parametrize("argv, needle", [
    (["--jobs", "99999999999"], "--jobs: must be between 1 and 1000000"),
    (["--rates", "1e308"], "--rates: every rate must be in (0, 1e+09] jobs/hour"),
    (["--seeds", "0,-1"], "--seeds: '-1' is not a valid value"),   # (in a worker process)
])
def test_bad_sweep_arguments_exit_2_before_any_point(argv, needle, tmp_path, capsys):
    """(Both were a traceback once the sweep ran: a MemoryError, and its plot's.)"""
    assert main(["simulate", "sweep", "--rates", "10", "--seeds", "0", "--policies", "fifo",
                 "--jobs", "4", "--processes", "1", "--quiet", "-o", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_sweep_point_no_type_can_run_exits_2_in_one_line(processes, tmp_path, capsys):
    """A 4-GPU job of ``--multi-gpu`` on a 1-GPU cluster: ``simulate`` refused it in one
    line, a sweep ended in a worker process's traceback. Now one line names the point, in
    this process and from a pool (whose first point to fail ends the sweep)."""
    assert main(["simulate", "sweep", "--rates", "1,2", "--seeds", "0", "--policies", "fifo",
                 "--jobs", "50", "--multi-gpu", "--cluster", "v100=1", "--processes",
                 processes, "--quiet", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert re.search(r"fifo at rate [12], seed 0: <generated trace>:\d+: field "
                     r"'scale_factor'", err[0]), err       # (a pool's first error, either)
    assert "larger than every worker type of the cluster (v100=1)" in err[0], err


def test_a_sweeps_workers_end_on_sigterm_whatever_handler_its_process_had():
    """``Pool.terminate`` (a point that failed, Ctrl-C) sends the sweep's workers SIGTERM. A
    worker kept the handler its process had: ``local-cluster``, run in the same process
    before, raises SystemExit from one, which a worker could swallow, and the sweep above
    then hung at its terminate (once in CI; by hand, 1 in 166 such sweeps). Each worker now
    takes SIGTERM's default action, and ``local-cluster`` puts back the handler it found."""
    import multiprocessing
    import os

    from simulator.sweep import _pool_worker

    def mine(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with multiprocessing.Pool(1, initializer=_pool_worker) as pool:
            assert pool.apply(signal.getsignal, (signal.SIGTERM,)) == signal.SIG_DFL
            assert pool.apply(signal.getsignal, (signal.SIGINT,)) == signal.SIG_IGN
            worker = pool.apply(os.getpid)
            pool.terminate()                # (it joins the worker: ended, not hung)
        with pytest.raises(ProcessLookupError):
            os.kill(worker, 0)
        assert main(["local-cluster", "--workload", "steps", "--jobs", "0"]) == 2
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sweep_writes_csv_and_plot(tmp_path, capsys):
    code = main(["simulate", "sweep", "--rates", "10,20", "--seeds", "0",
                 "--policies", "max_min_fairness_perf", "--jobs", "8", "--processes", "1",
                 "--cluster", "2:2:2", "-o", str(tmp_path), "--quiet"])
    assert code == 0
    with open(tmp_path / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["rate"]) for r in rows] == [10.0, 20.0]
    assert (tmp_path / "jct_vs_rate.png").stat().st_size > 0


def test_policy_options_reach_the_simulated_policy(capsys):
    """``--option`` configures the policy: fifo's two type choices give different runs."""
    runs = {}
    for choice in ("gavel", "random"):
        assert main(["simulate", "--jobs", "30", "--rate", "0", "--cluster", "4:4:4", "--policy",
                     "fifo", "--option", f"type_choice={choice}", "--quiet", "--json", "-"]) == 0
        runs[choice] = json.loads(capsys.readouterr().out)
    assert runs["gavel"]["avg_jct_s"] != runs["random"]["avg_jct_s"]


def test_resolve_period_adds_periodic_resolves(capsys):
    resolves = []
    for extra in ([], ["--resolve-period", "720"]):
        assert main(["simulate", "--jobs", "10", "--rate", "0", "--cluster", "2:2:2", "--quiet",
                     "--min-resolve-interval", "0", "--json", "-", *extra]) == 0
        resolves.append(json.loads(capsys.readouterr().out)["resolves"])
    assert resolves[1] > resolves[0]


def test_bad_price_trace_exits_2(tmp_path, capsys):
    bad = tmp_path / "p.json"
    bad.write_text('{"v100": 3}')
    assert main(["simulate", "--jobs", "4", "--quiet", "--price-trace", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "p.json" in err[0]


def test_a_reader_that_leaves_early_is_not_an_error():
    """``gavelsched simulate | head -1``: the closed pipe ends the command quietly."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from gavelsched.cli import main; sys.exit(main())",
         "simulate", "--jobs", "5", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before anything is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141 and b"Traceback" not in err


def test_a_window_says_where_the_run_stopped(tmp_path, capsys):
    # issue #29: "completed 1495/1500" without a word that the run stopped at the window's
    # end; jobs 0..1 of 10 finish long before the last ones, which are left unfinished
    out = tmp_path / "result.json"
    assert main(["simulate", "--jobs", "10", "--rate", "20", "--policy", "fifo",
                 "--cluster", "1:1:1", "--window", "0:2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    unfinished = sum(1 for j in data["jobs"] if j["completion_s"] is None)
    assert unfinished > 0
    assert data["stopped"] == {"at_s": pytest.approx(data["stopped"]["at_s"]),
                               "reason": "the window's jobs had all finished",
                               "unfinished": unfinished}
    text = capsys.readouterr().out
    assert "stopped at " in text and f"{unfinished} others had not" in text
