"""Trace files: .jsonl and Gavel's .trace, round trips, and errors naming file:line field."""

from __future__ import annotations

import json
import logging

import pytest

from traces import (
    ThroughputTable,
    TraceError,
    TraceJob,
    generate_trace,
    load_trace,
    read_trace,
    sort_by_arrival,
    validate_trace,
    write_trace,
)
from traces.catalog import default_table

GOOD_JSONL = json.dumps({"job_type": "A3C", "scale_factor": 1, "total_steps": 1000,
                         "arrival_s": 0.0})
GOOD_TRACE = "A3C\tpython3 main.py\tcode/a3c\t--max-steps\t1\t1000\t1\t1.0\t-1\t0"


def write(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_jsonl_minimal_and_full_lines(tmp_path):
    full = {"job_type": "LM (batch size 5)", "scale_factor": 4, "total_steps": 5e4,
            "arrival_s": 12.5, "priority_weight": 5, "slo_s": 3600, "entity": "research",
            "command": "python3 main.py", "needs_data_dir": True}
    path = write(tmp_path, "t.jsonl", [GOOD_JSONL, "", json.dumps(full)])
    first, second = load_trace(path)
    assert first == TraceJob("A3C", 1, 1000, 0.0)
    assert (second.scale_factor, second.total_steps, second.priority_weight) == (4, 50000, 5.0)
    assert (second.slo_s, second.entity, second.needs_data_dir) == (3600.0, "research", True)
    assert [line for line, _ in read_trace(path)] == [1, 3]  # blank lines are skipped


def test_gavel_trace_line(tmp_path):
    path = write(tmp_path, "t.trace", [
        GOOD_TRACE,
        "ResNet-50 (batch size 64)\tcmd\t\t--num_steps\t0\t250\t8\t5\t7200.5\t3600",
    ])
    a3c, resnet = load_trace(path)
    assert a3c == TraceJob("A3C", 1, 1000, 0.0, command="python3 main.py",
                           working_dir="code/a3c", num_steps_arg="--max-steps",
                           needs_data_dir=True)
    assert a3c.slo_s is None  # -1 means no SLO
    assert (resnet.scale_factor, resnet.priority_weight, resnet.slo_s, resnet.arrival_s) == (
        8, 5.0, 7200.5, 3600.0)


def _jobs() -> list[TraceJob]:
    jobs = generate_trace(50, 4.0, seed=7, multi_gpu=True, priorities=True, slos=True)
    extra = TraceJob("CycleGAN", 1, 77, 1e6, command="python3 cyclegan.py --x 1",
                     working_dir="image_translation", num_steps_arg="--n_steps",
                     needs_data_dir=True)
    return jobs + [extra]


@pytest.mark.parametrize("suffix", [".jsonl", ".trace"])
def test_round_trip(tmp_path, suffix):
    jobs = _jobs()
    path = tmp_path / f"t{suffix}"
    write_trace(path, jobs)
    assert load_trace(path) == jobs


def test_entity_round_trips_in_jsonl_and_is_dropped_from_trace_with_a_warning(tmp_path, caplog):
    jobs = [TraceJob("A3C", 1, 10, 0.0, entity="team-a"), TraceJob("A3C", 1, 10, 5.0)]
    write_trace(tmp_path / "t.jsonl", jobs)
    assert load_trace(tmp_path / "t.jsonl") == jobs
    with caplog.at_level(logging.WARNING):
        write_trace(tmp_path / "t.trace", jobs)
    assert "entity" in caplog.text
    assert [j.entity for j in load_trace(tmp_path / "t.trace")] == [None, None]


def test_file_order_is_kept_and_sorting_is_stable(tmp_path):
    jobs = [TraceJob("A3C", 1, 1, 50.0), TraceJob("CycleGAN", 1, 1, 10.0),
            TraceJob("LM (batch size 5)", 1, 1, 10.0)]
    write_trace(tmp_path / "t.jsonl", jobs)
    loaded = load_trace(tmp_path / "t.jsonl")
    assert loaded == jobs
    assert [j.job_type for j in sort_by_arrival(loaded)] == [
        "CycleGAN", "LM (batch size 5)", "A3C"]


def test_write_refuses_tabs_in_a_gavel_trace(tmp_path):
    with pytest.raises(TraceError, match=r"t\.trace:2: field 'command'"):
        write_trace(tmp_path / "t.trace", [TraceJob("A3C", 1, 1, 0.0),
                                           TraceJob("A3C", 1, 1, 0.0, command="a\tb")])


def test_unknown_extension(tmp_path):
    with pytest.raises(TraceError, match=r"t\.csv: unknown trace format"):
        load_trace(write(tmp_path, "t.csv", [GOOD_JSONL]))
    assert load_trace(write(tmp_path, "t.txt", [GOOD_JSONL]), fmt="jsonl")


def _jsonl(**changes):
    row = {"job_type": "A3C", "scale_factor": 1, "total_steps": 1000, "arrival_s": 0.0}
    row.update(changes)
    return json.dumps({k: v for k, v in row.items() if v is not ...})


def _trace(**changes):
    fields = {"job_type": "A3C", "command": "cmd", "working_dir": "dir",
              "num_steps_arg": "--steps", "needs_data_dir": "0", "total_steps": "1000",
              "scale_factor": "1", "priority_weight": "1", "SLO": "-1", "arrival_s": "0"}
    fields.update(changes)
    return "\t".join(v for v in fields.values() if v is not ...)


BAD_LINES = [
    # (case id, suffix, bad line, field named in the error)
    ("jsonl missing steps", ".jsonl", _jsonl(total_steps=...), "total_steps"),
    ("jsonl missing type", ".jsonl", _jsonl(job_type=...), "job_type"),
    ("jsonl text steps", ".jsonl", _jsonl(total_steps="many"), "total_steps"),
    ("jsonl zero steps", ".jsonl", _jsonl(total_steps=0), "total_steps"),
    ("jsonl negative steps", ".jsonl", _jsonl(total_steps=-5), "total_steps"),
    ("jsonl fractional steps", ".jsonl", _jsonl(total_steps=10.5), "total_steps"),
    ("jsonl negative arrival", ".jsonl", _jsonl(arrival_s=-1), "arrival_s"),
    ("jsonl text arrival", ".jsonl", _jsonl(arrival_s="noon"), "arrival_s"),
    ("jsonl zero sf", ".jsonl", _jsonl(scale_factor=0), "scale_factor"),
    ("jsonl fractional sf", ".jsonl", _jsonl(scale_factor=1.5), "scale_factor"),
    ("jsonl bool sf", ".jsonl", _jsonl(scale_factor=True), "scale_factor"),
    ("jsonl text sf", ".jsonl", _jsonl(scale_factor="two"), "scale_factor"),
    ("jsonl zero weight", ".jsonl", _jsonl(priority_weight=0), "priority_weight"),
    ("jsonl negative slo", ".jsonl", _jsonl(slo_s=-1), "slo_s"),
    ("jsonl empty type", ".jsonl", _jsonl(job_type=""), "job_type"),
    ("jsonl entity", ".jsonl", _jsonl(entity=3), "entity"),
    # (a JSON "\ud800" escape: a str that no file or terminal takes, once a traceback at
    # the first print or write)
    ("jsonl surrogate entity", ".jsonl", _jsonl(entity="a\ud800"), "entity"),
    ("jsonl surrogate type", ".jsonl", _jsonl(job_type="A3C\udfff"), "job_type"),
    ("jsonl surrogate command", ".jsonl", _jsonl(command="run \ud800"), "command"),
    ("jsonl NUL command", ".jsonl", _jsonl(command="run\u0000"), "command"),
    ("jsonl typo", ".jsonl", _jsonl(prority_weight=5), "prority_weight"),
    ("trace missing arrival", ".trace", _trace(arrival_s=...), "arrival_s"),
    ("trace missing many", ".trace", "A3C\tcmd\tdir", "num_steps_arg"),
    ("trace text steps", ".trace", _trace(total_steps="lots"), "total_steps"),
    ("trace zero steps", ".trace", _trace(total_steps="0"), "total_steps"),
    ("trace negative steps", ".trace", _trace(total_steps="-3"), "total_steps"),
    ("trace negative arrival", ".trace", _trace(arrival_s="-10"), "arrival_s"),
    ("trace text arrival", ".trace", _trace(arrival_s="x"), "arrival_s"),
    ("trace zero sf", ".trace", _trace(scale_factor="0"), "scale_factor"),
    ("trace fractional sf", ".trace", _trace(scale_factor="2.5"), "scale_factor"),
    ("trace bad slo", ".trace", _trace(SLO="-5"), "SLO"),
    ("trace bad flag", ".trace", _trace(needs_data_dir="maybe"), "needs_data_dir"),
    ("trace text weight", ".trace", _trace(priority_weight="high"), "priority_weight"),
]


@pytest.mark.parametrize("suffix, bad, field", [case[1:] for case in BAD_LINES],
                         ids=[case[0] for case in BAD_LINES])
def test_bad_lines_name_file_line_and_field(tmp_path, suffix, bad, field):
    good = GOOD_JSONL if suffix == ".jsonl" else GOOD_TRACE
    path = write(tmp_path, f"bad{suffix}", [good, "", bad, good])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    message = str(info.value)
    assert f"bad{suffix}:3: field '{field}'" in message
    assert "\n" not in message
    assert (info.value.line, info.value.field) == (3, field)


@pytest.mark.parametrize("suffix, bad, expected", [
    (".jsonl", "{not json", "bad.jsonl:2: not valid JSON"),
    (".jsonl", "[1, 2]", "bad.jsonl:2: expected a JSON object"),
    (".trace", _trace() + "\textra", "bad.trace:2: 11 tab-separated fields"),
])
def test_malformed_lines(tmp_path, suffix, bad, expected):
    good = GOOD_JSONL if suffix == ".jsonl" else GOOD_TRACE
    with pytest.raises(TraceError, match=expected.replace(".", r"\.")):
        load_trace(write(tmp_path, f"bad{suffix}", [good, bad]))


# ----------------------------------------------------------------------------- validation

SMALL = ThroughputTable(solo={
    "v100": {("A3C", 1): 20.0, ("A3C", 2): 38.0, ("CycleGAN", 1): 5.0},
    "k80": {("A3C", 1): 9.0, ("A3C", 2): 17.0, ("CycleGAN", 1): 0.0},
})


@pytest.mark.parametrize("job, cluster, field, words", [
    (TraceJob("BERT", 1, 10, 0.0), None, "job_type", "unknown job type 'BERT'"),
    (TraceJob("CycleGAN", 2, 10, 0.0), None, "scale_factor", "no throughput at scale factor 2"),
    (TraceJob("A3C", 2, 10, 0.0), {"v100": 1, "k80": 1}, "scale_factor",
     "larger than every worker type"),
    (TraceJob("CycleGAN", 1, 10, 0.0), {"k80": 4}, "job_type",
     "cannot run on any worker type"),
    (TraceJob("A3C", 2, 10, 0.0), {"v100": 1, "k80": 2, "p100": 8}, None, None),
])
def test_validate_trace(job, cluster, field, words):
    jobs = [TraceJob("A3C", 1, 10, 0.0), job]
    if field is None:
        validate_trace(jobs, SMALL, cluster, "x.jsonl")
        return
    with pytest.raises(TraceError) as info:
        validate_trace(jobs, SMALL, cluster, "x.jsonl")
    assert f"x.jsonl:2: field '{field}'" in str(info.value)
    assert words in str(info.value)


def test_load_trace_validates_with_true_line_numbers(tmp_path):
    path = write(tmp_path, "t.jsonl", [GOOD_JSONL, "", "", _jsonl(job_type="BERT")])
    assert len(load_trace(path)) == 2  # no table: no validation
    with pytest.raises(TraceError, match=r"t\.jsonl:4: field 'job_type'"):
        load_trace(path, table=default_table(), cluster={"v100": 4})


def test_generated_trace_is_valid_on_the_simulated_cluster():
    jobs = generate_trace(300, 3.0, seed=2, multi_gpu=True)
    validate_trace(jobs, default_table(), {"v100": 36, "p100": 36, "k80": 36})
