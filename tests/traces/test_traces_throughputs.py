"""Throughput table files: native YAML/JSON, Gavel's JSON, round trips and errors."""

from __future__ import annotations

import json
import logging
import textwrap

import pytest

from traces import ThroughputTable, TraceError
from traces.catalog import default_table
from traces.throughputs import (
    dump_table,
    is_gavel_format,
    load_table,
    parse_gavel_key,
    table_to_gavel_dict,
    table_to_native_dict,
)

# A tiny file in Gavel's format, with our own numbers.
GAVEL_DOC = {
    "v100": {
        "('ResNet-50 (batch size 64)', 1)": {
            "null": 10.5,
            "('ResNet-50 (batch size 64)', 1)": [0.0, 0.0],
            "('A3C', 1)": [8.25, 20.0],
        },
        "('A3C', 1)": {
            "null": 25.0,
            "('ResNet-50 (batch size 64)', 1)": [20.0, 8.25],
            "('A3C', 1)": [15.0, 15.0],
        },
        "('ResNet-50 (batch size 64)', 2)": {"null": 19.0},
        "(\"Bob's model\", 1)": {"null": 3.0},
    },
    "k80": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 1.1},
        "('A3C', 1)": {"null": 11.0},
    },
}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_same(a: ThroughputTable, b: ThroughputTable) -> None:
    assert {w: dict(t) for w, t in a.solo.items()} == {w: dict(t) for w, t in b.solo.items()}
    assert ({w: dict(t) for w, t in a.pairs.items() if t}
            == {w: dict(t) for w, t in b.pairs.items() if t})


def test_gavel_json_loads_unchanged(tmp_path):
    path = write(tmp_path, "simulation_throughputs.json", json.dumps(GAVEL_DOC, indent=4))
    table = load_table(path)
    assert table.get("v100", "ResNet-50 (batch size 64)") == 10.5
    assert table.get("v100", "ResNet-50 (batch size 64)", 2) == 19.0
    assert table.get("k80", "A3C") == 11.0
    assert table.has("Bob's model")
    a3c, r50 = ("A3C", 1), ("ResNet-50 (batch size 64)", 1)
    assert table.pair("v100", r50, a3c) == (8.25, 20.0)
    assert table.pair("v100", a3c, r50) == (20.0, 8.25)
    assert table.pair("v100", a3c, a3c) == (15.0, 15.0)
    assert table.pair("v100", r50, r50) is None  # [0, 0]: cannot co-locate
    assert len(table.pairs["v100"]) == 2  # listed under both jobs, stored once


@pytest.mark.parametrize("key, expected", [
    ("('A3C', 1)", ("A3C", 1)),
    ("('ResNet-50 (batch size 64)', 8)", ("ResNet-50 (batch size 64)", 8)),
    ("(\"Bob's model\", 2)", ("Bob's model", 2)),
    ("('it\\'s', 1)", ("it's", 1)),
    (" ( 'A3C' , 4 ) ", ("A3C", 4)),
    ("A3C", None),
    ("('A3C', -1)", None),
    ("('A3C', 1, 2)", None),
    ("(__import__('os').getcwd(), 1)", None),
])
def test_gavel_keys_are_parsed_without_eval(key, expected):
    assert parse_gavel_key(key) == expected


def test_native_yaml_with_shorthand_and_pairs(tmp_path):
    path = write(tmp_path, "table.yaml", textwrap.dedent("""\
        meta: {note: ignored}
        v100:
          "ResNet-50 (batch size 64)": {1: 10.0, 2: 19.5}
          A3C: 25            # a bare number is scale factor 1
        k80:
          "ResNet-50 (batch size 64)": {1: 1.0}
          A3C: 0             # cannot run here
        pairs:
          v100:
            - {a: A3C, b: "ResNet-50 (batch size 64)", steps_per_s: [20, 8]}
            - {a: "ResNet-50 (batch size 64)", a_sf: 2, b: "ResNet-50 (batch size 64)",
               b_sf: 2, steps_per_s: [9.0, 9.0]}
        """))
    table = load_table(path)
    assert table.worker_types == ("v100", "k80")
    assert table.get("v100", "A3C") == 25.0
    assert table.get("k80", "A3C") == 0.0
    assert table.get("v100", "ResNet-50 (batch size 64)", 2) == 19.5
    assert table.pair("v100", ("ResNet-50 (batch size 64)", 1), ("A3C", 1)) == (8.0, 20.0)
    big = ("ResNet-50 (batch size 64)", 2)
    assert table.pair("v100", big, big) == (9.0, 9.0)


def test_native_json_with_string_scale_factors(tmp_path):
    doc = {"v100": {"A3C": {"1": 25.0, "2": 48.0}}}
    table = load_table(write(tmp_path, "t.json", json.dumps(doc)))
    assert table.get("v100", "A3C", 2) == 48.0
    assert not is_gavel_format(doc)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_native_round_trip(tmp_path, suffix):
    table = default_table()
    path = tmp_path / f"copy{suffix}"
    dump_table(table, path)
    assert_same(load_table(path), table)


def test_gavel_round_trip_of_the_catalog(tmp_path):
    table = default_table()
    path = tmp_path / "gavel.json"
    dump_table(table, path, fmt="gavel")
    doc = json.loads(path.read_text())
    assert is_gavel_format(doc)
    # Gavel lists each pair under both jobs and marks impossible pairs [0, 0].
    r128 = repr(("ResNet-50 (batch size 128)", 1))
    assert doc["v100"][r128][r128] == [0.0, 0.0]
    assert_same(load_table(path), table)


def test_gavel_round_trip_of_a_gavel_file(tmp_path):
    src = write(tmp_path, "in.json", json.dumps(GAVEL_DOC))
    table = load_table(src)
    out = tmp_path / "out.json"
    dump_table(table, out, fmt="gavel")
    assert_same(load_table(out), table)


def test_native_dict_is_plain_data():
    doc = table_to_native_dict(default_table())
    assert set(doc) == {"k80", "p100", "v100", "pairs"}
    assert doc["v100"]["A3C"][1] > 0
    assert "null" in table_to_gavel_dict(default_table())["k80"]["('A3C', 1)"]


def test_inconsistent_gavel_pair_listings_warn(tmp_path, caplog):
    doc = json.loads(json.dumps(GAVEL_DOC))
    doc["v100"]["('A3C', 1)"]["('ResNet-50 (batch size 64)', 1)"] = [19.0, 8.0]
    with caplog.at_level(logging.WARNING):
        table = load_table(write(tmp_path, "t.json", json.dumps(doc)))
    assert "disagree" in caplog.text
    assert table.pair("v100", ("A3C", 1), ("ResNet-50 (batch size 64)", 1)) == (20.0, 8.25)


BAD_DOCUMENTS = [
    ("list.json", "[1, 2]", "expected a mapping"),
    ("empty.yaml", "meta: {}\n", "no worker types"),
    ("neg.yaml", "v100: {A3C: {1: -2.0}}\n", "v100/A3C/1"),
    ("text.yaml", "v100: {A3C: {1: fast}}\n", "v100/A3C/1"),
    ("nan.json", '{"v100": {"A3C": {"1": NaN}}}', "v100/A3C/1"),
    ("sf.yaml", "v100: {A3C: {x: 1.0}}\n", "v100/A3C/x"),
    ("sf0.yaml", "v100: {A3C: {0: 1.0}}\n", "v100/A3C/0"),
    ("jobs.yaml", "v100: [1, 2]\n", "v100"),
    ("pair_unknown.yaml", ("v100: {A3C: 1}\npairs: {v100: [{a: A3C, b: CycleGAN, "
                          "steps_per_s: [1, 1]}]}\n"), "pairs/v100[0]/b"),
    ("pair_len.yaml", "v100: {A3C: 1}\npairs: {v100: [{a: A3C, b: A3C, steps_per_s: [1]}]}\n",
     "pairs/v100[0]/steps_per_s"),
    ("pair_dup.yaml", ("v100: {A3C: 1, B: 1}\npairs: {v100: [{a: A3C, b: B, steps_per_s: [1, 1]},"
                      " {a: B, b: A3C, steps_per_s: [1, 1]}]}\n"), "pairs/v100[1]"),
    ("pair_worker.yaml", "v100: {A3C: 1}\npairs: {k80: []}\n", "pairs/k80"),
    ("pair_key.yaml", ("v100: {A3C: 1}\npairs: {v100: [{a: A3C, b: A3C, steps_per_s: [1, 1], "
                      "c: 1}]}\n"), "pairs/v100[0]/c"),
    ("gavel_null.json", json.dumps({"v100": {"('A3C', 1)": {"('A3C', 1)": [1, 1]}}}),
     "v100/('A3C', 1)"),
    ("gavel_key.json", json.dumps({"v100": {"('A3C', 1)": {"null": 1.0},
                                            "A3C": {"null": 1.0}}}), "v100/A3C"),
    ("gavel_pair.json", json.dumps({"v100": {"('A3C', 1)": {"null": 1.0,
                                                            "('A3C', 1)": 3.0}}}),
     "v100/('A3C', 1)/('A3C', 1)"),
]


@pytest.mark.parametrize("name, text, field", BAD_DOCUMENTS,
                         ids=[case[0] for case in BAD_DOCUMENTS])
def test_bad_tables_name_file_and_key(tmp_path, name, text, field):
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError) as info:
        load_table(path)
    message = str(info.value)
    assert name in message and field in message
    assert "\n" not in message


@pytest.mark.parametrize("name, text, line", [
    ("broken.json", '{\n  "v100": {\n    "A3C": {1: 2}\n  }\n}', 3),
    ("broken.yaml", "v100:\n  A3C: {1: 2\n  CycleGAN: 1\n", 3),
])
def test_syntax_errors_name_the_line(tmp_path, name, text, line):
    with pytest.raises(TraceError, match=rf"{name}:{line}: not valid"):
        load_table(write(tmp_path, name, text))
