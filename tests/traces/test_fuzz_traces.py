"""Refused at the door (issue #17): the trace parsers (``.jsonl`` and Gavel's ``.trace``) and
the throughput tables (native YAML/JSON and Gavel's JSON), fuzzed through ``gavelsched trace
show`` with random bytes, random structures and random values.

The property, for every input: no traceback, and either success or exit code 2 with exactly
one line on stderr naming the file (and the line, for a trace). A trace that passes the door
holds only finite numbers in range and integers within 64 bits. ``GAVEL_FUZZ_EXAMPLES=5000``
searches deeper.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gavelsched.cli import main
from traces import read_trace
from traces.formats import GAVEL_FIELDS, JSONL_OPTIONAL, JSONL_REQUIRED

FUZZ = settings(max_examples=int(os.environ.get("GAVEL_FUZZ_EXAMPLES", "60")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
FIELDS = JSONL_REQUIRED + JSONL_OPTIONAL
WHOLE_FILE = ("unknown trace format", "not UTF-8", "not valid", "expected a mapping",
              "no worker types")

EDGES = st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**63, 10**30, 10**400, 0.0, -0.0,
                         1e-7, 1e308, math.nan, math.inf, -math.inf, "", "A3C", "1", "2.0",
                         "nan", "1e999", "\u00b2", "a\nb", "a\tb", "x\0y", True, False, None])
VALUES = st.one_of(EDGES, st.integers(), st.floats(), st.text(max_size=10),
                   st.lists(st.integers(), max_size=2),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def show(path: Path, capsys, *extra: str) -> tuple[int, str]:
    rc = main(["trace", "show", str(path), *extra])
    return rc, capsys.readouterr().err


def assert_door(rc: int, err: str, path: Path, *, per_line: bool = True) -> None:
    """Success, or exit 2 with one line naming the file and its line (``path:N:``) or what
    is wrong with the file as a whole."""
    assert "Traceback" not in err
    assert rc in (0, 2), err
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert str(path) in lines[0]
        at_line = re.search(re.escape(str(path)) + r":\d+: ", lines[0]) is not None
        assert (at_line and per_line) or any(w in lines[0] for w in WHOLE_FILE) \
            or (not per_line and "field" in lines[0]), lines[0]


def assert_jobs_in_range(path: Path) -> None:
    for _, job in read_trace(path):
        assert 1 <= job.scale_factor < 2**31 and 1 <= job.total_steps <= 2**53
        for value in (job.arrival_s, job.priority_weight, job.slo_s or 1.0):
            assert math.isfinite(value) and value >= 0
        if job.min_scale_factor is not None:
            assert 1 <= job.min_scale_factor <= job.scale_factor


# ----------------------------------------------------------------------------- .jsonl

GOOD_ROWS = st.fixed_dictionaries(
    {"job_type": st.just("A3C"), "scale_factor": st.integers(1, 8),
     "total_steps": st.integers(1, 2**53), "arrival_s": st.floats(0, 1e9)},
    optional={"priority_weight": st.floats(1e-6, 1e6), "slo_s": st.floats(1, 1e9) | st.none(),
              "entity": st.text("abc", min_size=1, max_size=4), "command": st.text(max_size=6),
              "needs_data_dir": st.booleans(), "mixed": st.booleans(),
              "min_scale_factor": st.integers(1, 2)})
ROWS = st.one_of(
    GOOD_ROWS,
    st.tuples(GOOD_ROWS, st.sampled_from(FIELDS) | st.text(max_size=5), VALUES).map(
        lambda t: {**t[0], t[1]: t[2]}),
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=5), VALUES, max_size=5),
    VALUES)


def jsonl_line(row) -> str:
    try:
        return json.dumps(row)          # NaN and ±inf become NaN / Infinity literals
    except ValueError:                  # an int of more than 4300 digits
        return "{" + '"total_steps": ' + "9" * 5000 + "}"


@FUZZ
@given(rows=st.lists(ROWS, min_size=1, max_size=4), blank=st.booleans())
@example(rows=[{"job_type": "A3C", "scale_factor": 1, "total_steps": 10**30,
                "arrival_s": 0}], blank=False)
@example(rows=[{"job_type": "A3C", "scale_factor": "2.0", "total_steps": 1, "arrival_s": 0,
                "min_scale_factor": 1}], blank=False)
@example(rows=[{"job_type": "A3C", "scale_factor": 1, "total_steps": 1, "arrival_s": 10**400}],
         blank=False)
def test_jsonl_values(rows, blank, capsys, scratch):
    path = scratch / "t.jsonl"
    path.write_text(("\n\n" if blank else "\n").join(map(jsonl_line, rows)) + "\n")
    rc, err = show(path, capsys)
    assert_door(rc, err, path)
    if rc == 0:
        assert_jobs_in_range(path)


@FUZZ
@given(raw=st.binary(max_size=300), suffix=st.sampled_from([".jsonl", ".trace"]),
       keep=st.booleans())
@example(raw=b'{"job_type": "A\xff"}\n', suffix=".jsonl", keep=True)
@example(raw=b"[" * 100000, suffix=".jsonl", keep=False)
def test_trace_bytes(raw, suffix, keep, capsys, scratch):
    """Random bytes, alone or after a good line."""
    good = {".jsonl": b'{"job_type": "A3C", "scale_factor": 1, "total_steps": 5, '
                      b'"arrival_s": 0}\n',
            ".trace": b"A3C\tcmd\tdir\t--steps\t0\t5\t1\t1\t-1\t0\n"}[suffix]
    path = scratch / f"t{suffix}"
    path.write_bytes(good + raw if keep else raw)
    rc, err = show(path, capsys)
    assert_door(rc, err, path)


def test_non_utf8_names_the_line_and_offset(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"job_type": "A3C", "scale_factor": 1, "total_steps": 5, '
                     b'"arrival_s": 0}\n{"job_type": "A\xff3C"}\n')
    rc, err = show(path, capsys)
    assert rc == 2 and f"{path}:2: not UTF-8 text (byte offset 88: 0xff)" in err, err


# ----------------------------------------------------------------------------- .trace

GOOD_TRACE_FIELDS = ("A3C", "cmd", "dir", "--steps", "0", "5", "1", "1", "-1", "0")
CELLS = st.one_of(st.sampled_from(["", "0", "1", "-1", "2.5", "nan", "inf", "-inf", "1e999",
                                   str(2**63), str(10**30), "٣", "1_0", " 7 "]),
                  st.text(max_size=8))


@FUZZ
@given(changes=st.dictionaries(st.integers(0, len(GAVEL_FIELDS) - 1), CELLS, max_size=3),
       count=st.sampled_from([9, 10, 10, 10, 11]))
@example(changes={5: str(10**30)}, count=10)
@example(changes={7: "nan"}, count=10)
def test_gavel_trace_values(changes, count, capsys, scratch):
    cells = list(GOOD_TRACE_FIELDS) + ["extra"]
    for i, cell in changes.items():
        cells[i] = cell
    path = scratch / "t.trace"
    path.write_text("\t".join(cells[:count]) + "\n")
    rc, err = show(path, capsys)
    assert_door(rc, err, path)
    if rc == 0:
        assert_jobs_in_range(path)


# ----------------------------------------------------------------------------- tables

RATES = st.one_of(st.floats(0, 100), VALUES)
NATIVE = st.dictionaries(
    st.sampled_from(["v100", "k80"]) | VALUES.filter(lambda v: isinstance(v, str)),
    st.dictionaries(st.just("A3C") | st.text(max_size=4),
                    st.one_of(RATES, st.dictionaries(st.integers(-1, 4) | st.text(max_size=3),
                                                     RATES, max_size=2)), max_size=2)
    | VALUES, max_size=2)
GAVEL = st.dictionaries(
    st.sampled_from(["v100", "k80"]),
    st.dictionaries(st.sampled_from(["('A3C', 1)", "('A3C', 0)", "('A3C', 99999999999)",
                                     "('A3C', \u0663)", "(A3C, 1)"]) | st.text(max_size=6),
                    st.fixed_dictionaries({"null": RATES}, optional={
                        "('A3C', 1)": st.lists(RATES, max_size=3) | VALUES}) | VALUES,
                    max_size=2), max_size=2)


def table_text(doc, suffix: str) -> str:
    if suffix == ".yaml":
        return yaml.safe_dump(doc, allow_unicode=True)
    try:
        return json.dumps(doc)
    except (TypeError, ValueError):     # keys JSON cannot hold: fall back to YAML text
        return yaml.safe_dump(doc, allow_unicode=True)


def assert_table_read_or_refused(table: Path, capsys, scratch: Path) -> None:
    """``trace show`` of a one-job trace with ``table``: no traceback; either it reads, or
    exit 2 with one line naming the table (or the trace)."""
    trace = scratch / "t.jsonl"
    trace.write_text('{"job_type": "A3C", "scale_factor": 1, "total_steps": 5, '
                     '"arrival_s": 0}\n')
    rc, err = show(trace, capsys, "--throughputs", str(table))
    assert "Traceback" not in err and rc in (0, 2), err
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and (str(table) in lines[0] or str(trace) in lines[0]), err


@FUZZ
@given(doc=NATIVE | GAVEL, suffix=st.sampled_from([".json", ".yaml", ".table"]))
@example(doc={"v100": {"A3C": {1: math.nan}}}, suffix=".json")
@example(doc={"v100": {"A3C": {"\u00b2": 1.0}}}, suffix=".yaml")
@example(doc={"v100": {"A3C": {1: 10**400}}}, suffix=".yaml")
@example(doc={"v100": {"('A3C', 1)": {"null": 1.0, "('A3C', 1)": [math.inf, 1.0]}}},
         suffix=".json")
def test_table_values(doc, suffix, capsys, scratch):
    table = scratch / f"table{suffix}"
    table.write_text(table_text(doc, suffix))
    assert_table_read_or_refused(table, capsys, scratch)


@FUZZ
@given(raw=st.binary(max_size=300), suffix=st.sampled_from([".json", ".yaml", ".table"]))
@example(raw=b'{"v100": {"A3C": 1.0}} # \xff', suffix=".yaml")
def test_table_bytes(raw, suffix, capsys, scratch):
    table = scratch / f"table{suffix}"
    table.write_bytes(raw)
    assert_table_read_or_refused(table, capsys, scratch)
