"""``gavelsched pipeline``: schedule JSON, the check's JSON, plan, and one-line errors."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main


def test_schedule_json(capsys):
    assert main(["pipeline", "schedule", "--kind", "interleaved", "--stages", "2",
                 "--microbatches", "4", "--chunks", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["stages"]) == 2
    assert all(set(e) == {"op", "mb", "chunk"} and e["chunk"] % 2 == d
               for d, acts in enumerate(data["stages"]) for e in acts)
    assert sum(len(acts) for acts in data["stages"]) == 2 * 4 * 4  # F and B of 4 mb × 4 chunks


@pytest.mark.parametrize("argv,match", [
    (["schedule", "--kind", "interleaved", "--stages", "2", "--microbatches", "3"],
     "interleaved: microbatches=3 is not a multiple of stages=2"),
    (["schedule", "--kind", "gpipe", "--stages", "0", "--microbatches", "3"], "stages=0"),
    (["check", "--kind", "1f1b", "--stages", "2", "--microbatches", "3", "--replicas", "0"],
     "replicas=0"),
    (["plan", "--profile", "/nonexistent.json", "--gpus", "2", "--batch", "4",
      "--memory-gb", "1"], "/nonexistent.json"),
])
def test_bad_input_is_one_line_exit_2(argv, match, capsys):
    assert main(["pipeline", *argv]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1 and "Traceback" not in err


def test_check_json(capsys):
    assert main(["pipeline", "check", "--kind", "1f1b", "--stages", "2", "--microbatches", "2",
                 "--steps", "2", "--dtype", "float64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_abs_diff"] <= 1e-9


def test_plan_json(tmp_path, capsys):
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"microbatch_size": 1, "layers": [
        {"forward_s": 1e-3, "backward_s": 2e-3, "activation_bytes": 1e6, "output_bytes": 1e5,
         "weight_bytes": 1e8}] * 6}))
    assert main(["pipeline", "plan", "--profile", str(profile), "--gpus", "4", "--batch", "8",
                 "--memory-gb", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stages"] * out["replicas"] <= 4
    assert out["replicas"] * out["microbatch_size"] * out["microbatches"] == 8
    assert out["predicted_memory_bytes"] <= 0.5 * 2**30
    assert out["predicted_time_per_minibatch_s"] > 0
    # the simulated timing (Varuna §4.4) is a choice of the same command
    assert main(["pipeline", "plan", "--profile", str(profile), "--gpus", "4", "--batch", "8",
                 "--memory-gb", "0.5", "--timing", "simulated", "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert simulated["predicted_time_per_minibatch_s"] > 0
    assert simulated["replicas"] * simulated["microbatch_size"] * simulated["microbatches"] == 8


def test_schedule_grid_shows_simulated_time_and_bubble(capsys):
    assert main(["pipeline", "schedule", "--kind", "gpipe", "--stages", "2",
                 "--microbatches", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["time", "rank0", "rank1"]
    assert out[1].split() == ["0", "F0c0", "."]          # rank 1 waits for the first forward
    assert out[-1].startswith("makespan 9 units") and "bubble fraction 0.5000" in out[-1]


def test_check_refuses_a_bad_schedule_before_starting_processes(capsys):
    assert main(["pipeline", "check", "--kind", "interleaved", "--stages", "2",
                 "--microbatches", "3", "--steps", "1"]) == 2
    assert "microbatches=3 is not a multiple of stages=2" in capsys.readouterr().err


def test_profile_writes_what_plan_reads(tmp_path, capsys):
    """``pipeline profile`` measures the reference model (and the link between two real
    processes) and writes a profile that ``pipeline plan`` accepts."""
    out = tmp_path / "profile.json"
    assert main(["pipeline", "profile", "-o", str(out), "--vocab", "32", "--hidden", "16",
                 "--blocks", "2", "--seq", "8", "--repeats", "3"]) == 0
    assert "wrote" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert len(data["layers"]) == 4 and data["tied_weight_bytes"] == 32 * 16 * 4
    assert 0 < data["bandwidth_bytes_per_s"] < float("inf")
    assert main(["pipeline", "plan", "--profile", str(out), "--gpus", "2", "--batch", "8",
                 "--memory-gb", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predicted_time_per_minibatch_s"] > 0
    assert main(["pipeline", "profile", "-o", str(out), "--blocks", "0"]) == 2
    err = capsys.readouterr().err
    assert "--blocks: must be >= 1, got 0" in err and err.count("\n") == 1
    assert main(["pipeline", "profile", "-o", str(out), "--blocks", "3", "--calibrate"]) == 2
    assert "--calibrate: the 5 layers" in capsys.readouterr().err


def test_profile_calibrate_writes_a_calibrated_profile_plan_can_read(tmp_path, capsys):
    """``--calibrate`` (Varuna §4.3) writes a whole profile, with the link from the ranks'
    boundary trip, that ``pipeline plan`` reads (that each layer's F and B are the ranks'
    own is tested on ``calibrate_profile`` in test_calibrate.py)."""
    out = tmp_path / "calibrated.json"
    assert main(["pipeline", "profile", "-o", str(out), "--vocab", "32", "--hidden", "16",
                 "--blocks", "2", "--seq", "8", "--repeats", "3", "--calibrate"]) == 0
    assert "(calibrated)" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert len(data["layers"]) == 4
    assert all(row["forward_s"] > 0 and row["backward_s"] > 0 for row in data["layers"])
    assert data["layers"][-1]["weight_bytes"] == 0 and data["tied_weight_bytes"] > 0
    assert 0 < data["bandwidth_bytes_per_s"] < float("inf")
    assert main(["pipeline", "plan", "--profile", str(out), "--gpus", "2", "--batch", "8",
                 "--memory-gb", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["predicted_time_per_minibatch_s"] > 0


def test_a_failed_rank_is_one_line_exit_1(tmp_path, monkeypatch, capsys):
    """A rank that dies (not bad input) ends ``check`` and ``profile`` with one line, no
    traceback, and exit 1; no profile file is left half-written."""
    from workers.pipeline import launch

    def dead(*args, **kwargs):
        raise launch.PipelineFailed("rank 1: RuntimeError: connection reset\ntraceback...")

    monkeypatch.setattr(launch, "run_pipeline", dead)
    monkeypatch.setattr(launch, "measure_link", dead)
    assert main(["pipeline", "check", "--kind", "1f1b", "--stages", "2",
                 "--microbatches", "2", "--steps", "1"]) == 1
    out = tmp_path / "p.json"
    assert main(["pipeline", "profile", "-o", str(out), "--vocab", "32", "--hidden", "16",
                 "--blocks", "2", "--seq", "8", "--repeats", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("rank 1: RuntimeError: connection reset") == 2
    assert err.count("\n") == 2 and "Traceback" not in err
    assert not out.exists()
