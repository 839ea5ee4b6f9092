"""``gavelsched trace ...`` through ``gavelsched.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gavelsched.cli import main
from traces import load_trace

SAMPLE = Path(__file__).with_name("data") / "philly_cluster_job_log.json"


@pytest.mark.parametrize("suffix", [".jsonl", ".trace"])
def test_generate_writes_a_loadable_trace(tmp_path, capsys, suffix):
    out = tmp_path / f"t{suffix}"
    assert main(["trace", "generate", "--jobs", "40", "--rate", "3", "--multi-gpu",
                 "--priorities", "--slos", "--seed", "4", "-o", str(out)]) == 0
    jobs = load_trace(out)
    assert len(jobs) == 40
    assert "wrote 40 jobs" in capsys.readouterr().out


def test_generate_is_deterministic_and_static_at_rate_zero(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        assert main(["trace", "generate", "--jobs", "25", "--rate", "0", "--seed", "9",
                     "-o", str(path)]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert all(j.arrival_s == 0 for j in load_trace(a))


def test_generate_with_a_gavel_throughputs_file(tmp_path):
    table = tmp_path / "gavel.json"
    table.write_text(json.dumps({"v100": {"('A3C', 1)": {"null": 20.0}},
                                 "k80": {"('A3C', 1)": {"null": 9.0}}}))
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--jobs", "10", "--rate", "1", "--throughputs",
                 str(table), "-o", str(out)]) == 0
    assert {j.job_type for j in load_trace(out)} == {"A3C"}


def test_generate_with_entities(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["trace", "generate", "--jobs", "40", "--rate", "2", "--entities", "lab,prod",
                 "-o", str(out)]) == 0
    assert {j.entity for j in load_trace(out)} == {"lab", "prod"}
    assert main(["trace", "generate", "--jobs", "4", "--rate", "2", "--entities", "lab",
                 "-o", str(tmp_path / "t.trace")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--entities" in err and ".trace" in err and "\n" not in err


def test_show_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    main(["trace", "generate", "--jobs", "30", "--rate", "2", "-o", str(out)])
    capsys.readouterr()
    assert main(["trace", "show", str(out), "--cluster", "v100=4,p100=4,k80=4"]) == 0
    text = capsys.readouterr().out
    for words in ("jobs", "30", "arrivals", "job types", "scale factors", "1: 30 (100%)",
                  "every job can run"):
        assert words in text


def test_import_philly(tmp_path, capsys):
    out = tmp_path / "philly.trace"
    assert main(["trace", "import", "--format", "philly", str(SAMPLE), "-o", str(out),
                 "--seed", "3"]) == 0
    assert len(load_trace(out)) == 7
    assert "skipped" in capsys.readouterr().out


def _bad_trace(tmp_path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"job_type": "A3C", "scale_factor": 1, "total_steps": 5,
                                "arrival_s": 0}) + "\n"
                    + json.dumps({"job_type": "A3C", "scale_factor": 1, "total_steps": -5,
                                  "arrival_s": 0}) + "\n")
    return path


@pytest.mark.parametrize("sub", [["generate", "--jobs", "3", "--rate", "1"],
                                 ["import", "--format", "philly", str(SAMPLE)]])
def test_a_negative_seed_is_refused_by_the_parser(tmp_path, capsys, sub):
    """(It was numpy's "expected non-negative integer", naming no flag.)"""
    with pytest.raises(SystemExit) as exit_:
        main(["trace", *sub, "--seed", "-1", "-o", str(tmp_path / "t.jsonl")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gavelsched trace {sub[0]}: error: argument --seed: invalid seed value: "
                   f"'-1' (see gavelsched trace {sub[0]} --help)"]          # one line
    assert not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("argv, words", [
    (["trace", "show", "{bad}"], "bad.jsonl:2: field 'total_steps'"),
    (["trace", "show", "{tmp}/missing.jsonl"], "missing.jsonl"),
    (["trace", "show", "{good}", "--cluster", "v100=1", "--throughputs", "{gavel}"],
     "unknown job type"),
    (["trace", "show", "{good}", "--cluster", "v100=four"], "--cluster"),
    (["trace", "generate", "--jobs", "3", "--rate", "1", "-o", "{tmp}/t.csv"],
     "unknown trace format"),
    (["trace", "generate", "--jobs", "3", "--rate", "-1", "-o", "{tmp}/t.jsonl"], "--rate"),
    (["trace", "generate", "--jobs", "99999999999", "--rate", "1", "-o", "{tmp}/t.jsonl"],
     "--jobs must be between 0 and 1000000"),                   # (was a MemoryError)
    (["trace", "generate", "--jobs", "3", "--rate", "1e308", "-o", "{tmp}/t.jsonl"],
     "--rate must be in [0, 1e+09] jobs per hour"),
    (["trace", "generate", "--jobs", "3", "--rate", "1", "--throughputs", "{bad}",
      "-o", "{tmp}/t.jsonl"], "bad.jsonl"),
    (["trace", "import", "--format", "philly", "{bad}", "-o", "{tmp}/t.jsonl"],
     "not valid JSON"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, words):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"job_type": "CycleGAN", "scale_factor": 1, "total_steps": 5,
                                "arrival_s": 0}) + "\n")
    gavel = tmp_path / "gavel.json"
    gavel.write_text(json.dumps({"v100": {"('A3C', 1)": {"null": 20.0}}}))
    names = {"bad": _bad_trace(tmp_path), "tmp": tmp_path, "good": good, "gavel": gavel}
    assert main([arg.format(**names) for arg in argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert words in lines[0] and "Traceback" not in captured.err


@pytest.mark.parametrize("sub, words", [
    ("generate", "--multi-gpu"), ("import", "--format"), ("show", "--cluster"),
])
def test_help(capsys, sub, words):
    with pytest.raises(SystemExit) as info:
        main(["trace", sub, "--help"])
    assert info.value.code == 0
    assert words in capsys.readouterr().out
