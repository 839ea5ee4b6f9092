"""Profiles of one worker type (``traces.profiles``, issue #19): the door of a profile file,
the priors a profile adds to a throughput table (the table wins; sf k > 1 scales like the
fastest known type), the shipped measured rows and filling a cluster's types from them."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces import ThroughputTable, TraceError
from traces import profiles
from traces.catalog import default_table
from traces.profiles import (
    MAX_JOB_TYPES,
    SCHEMA,
    Profile,
    profile_from_dict,
    profile_to_dict,
    read_profile,
    shipped_profiles,
    table_for_types,
    with_profile,
)

A3C, RESNET = "A3C", "ResNet-50 (batch size 64)"


def doc(**changes) -> dict:
    """A valid profile document, as ``gavelsched profile`` writes it, with ``changes``."""
    base = {"schema": SCHEMA, "worker_type": "h100", "device": "NVIDIA H100 80GB HBM3",
            "precision": "fp32", "reduced": False, "torch": "2.11.0+cu130", "cuda": "13.0",
            "measured_at": "2026-11-26T13:45:00+00:00", "seconds": 71.2,
            "steps_per_s": {A3C: 50.0, RESNET: 30.0, "Brand-new model": 4.0},
            "skipped": {"CycleGAN": "needs a dataset"},
            "architectures": {"ResNet-50": "a residual CNN"}}
    return {**base, **changes}


def write(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


# ---- the door ---------------------------------------------------------------------------
def test_a_profile_file_reads_back_what_was_written(tmp_path):
    profile = read_profile(write(tmp_path / "p.json", doc()))
    assert profile.worker_type == "h100" and profile.precision == "fp32"
    assert dict(profile.steps_per_s) == {A3C: 50.0, RESNET: 30.0, "Brand-new model": 4.0}
    assert profile.cuda == "13.0" and profile.seconds == 71.2 and not profile.reduced
    assert profile.describe() == "3 job types (fp32, NVIDIA H100 80GB HBM3)"
    again = read_profile(write(tmp_path / "q.json", profile_to_dict(profile)))
    assert again == profile
    # a CPU run: no CUDA, and only the required keys
    bare = profile_from_dict({"schema": SCHEMA, "worker_type": "cpu", "precision": "bf16",
                              "steps_per_s": {A3C: 1}})
    assert (bare.cuda, bare.device, bare.reduced, dict(bare.skipped)) == (None, "", False, {})


def many(n: int) -> dict:
    return {f"job {i}": 1.0 for i in range(n)}


@pytest.mark.parametrize("data, field, words", [
    ([], None, "must be a JSON object"),
    (doc(schema="gavelsched-profile/2"), "schema", "gavelsched-profile/1"),
    ({k: v for k, v in doc().items() if k != "schema"}, "schema", "must be"),
    ({k: v for k, v in doc().items() if k != "worker_type"}, "worker_type", "string"),
    (doc(worker_type=""), "worker_type", "must not be empty"),
    (doc(worker_type="   "), "worker_type", "blank"),
    (doc(worker_type="h1\n00"), "worker_type", "control"),
    (doc(worker_type=7), "worker_type", "string"),
    (doc(precision="fp16"), "precision", "fp32, bf16"),
    (doc(precision=None), "precision", "fp32, bf16"),
    ({k: v for k, v in doc().items() if k != "steps_per_s"}, "steps_per_s", "missing"),
    (doc(steps_per_s={}), "steps_per_s", "at least one"),
    (doc(steps_per_s=[1.0]), "steps_per_s", "object"),
    (doc(steps_per_s={A3C: 0}), "steps_per_s/A3C", "> 0"),
    (doc(steps_per_s={A3C: -3.5}), "steps_per_s/A3C", "> 0"),
    (doc(steps_per_s={A3C: float("nan")}), "steps_per_s/A3C", "finite"),
    (doc(steps_per_s={A3C: float("inf")}), "steps_per_s/A3C", "finite"),
    (doc(steps_per_s={A3C: True}), "steps_per_s/A3C", "number"),
    (doc(steps_per_s={A3C: "12"}), "steps_per_s/A3C", "number"),
    (doc(steps_per_s={A3C: 10**400}), "steps_per_s/A3C", "finite"),
    (doc(steps_per_s={"": 1.0}), "steps_per_s/", "empty"),
    (doc(steps_per_s={"a\tb": 1.0}), "steps_per_s/a\tb", "control"),
    (doc(steps_per_s=many(MAX_JOB_TYPES + 1)), "steps_per_s", f"at most {MAX_JOB_TYPES}"),
    (doc(reduced="no"), "reduced", "true or false"),
    (doc(seconds=-1), "seconds", ">= 0"),
    (doc(cuda=13), "cuda", "string"),
    (doc(device=["a"]), "device", "string"),
    (doc(skipped={"X": 3}), "skipped/X", "string"),
    (doc(architectures="ResNet"), "architectures", "object"),
])
def test_a_malformed_profile_is_refused_in_one_line_naming_file_and_field(tmp_path, data,
                                                                        field, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))    # (json writes NaN and Infinity, as Python reads them)
    with pytest.raises(TraceError) as err:
        read_profile(path)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and len(message) < 300, message
    assert message.startswith(f"{path}: ") and words in message, message
    assert err.value.field == field


def test_a_long_job_type_is_cut_in_the_error(tmp_path):
    with pytest.raises(TraceError) as err:
        profile_from_dict(doc(steps_per_s={"x" * 5000: -1.0}), "p.json")
    assert len(str(err.value)) < 200 and "x" * 50 in str(err.value)


def test_bytes_that_are_not_json_or_utf8_are_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema": "gavelsched-profile/1", "worker_type": "h\xff100"}')
    with pytest.raises(TraceError, match=r"bad.json:1: not UTF-8 text"):
        read_profile(bad)
    bad.write_text('{"schema": "gavelsched-profile/1",\n "worker_type": }')
    with pytest.raises(TraceError, match=r"bad.json:2: not valid JSON"):
        read_profile(bad)


# ---- priors ------------------------------------------------------------------------------
def test_a_new_type_gets_sf1_measured_and_sf_k_scaled_like_the_fastest_type():
    table = default_table()
    filled = with_profile(table, profile_from_dict(doc()))
    assert filled.worker_types == (*table.worker_types, "h100")
    assert filled.get("h100", A3C) == 50.0 and filled.get("h100", RESNET) == 30.0
    for job, measured in ((A3C, 50.0), (RESNET, 30.0)):
        ref = max(table.worker_types, key=lambda t: table.get(t, job))    # v100 here
        for k in (2, 4, 8):
            assert filled.get("h100", job, k) == pytest.approx(
                measured * table.get(ref, job, k) / table.get(ref, job, 1))
    # a job type the table lacks: scale factor 1 only; no pairs for the new type
    assert filled.get("h100", "Brand-new model") == 4.0
    assert filled.get("h100", "Brand-new model", 2) == 0.0
    assert "h100" not in filled.pairs and filled.pairs == table.pairs
    assert filled.solo["v100"] == table.solo["v100"]


def test_the_table_wins_over_a_profile_of_a_type_it_has():
    table = ThroughputTable(solo={"v100": {(A3C, 1): 24.0, (A3C, 2): 40.0, (RESNET, 1): 10.0,
                                           (RESNET, 4): 30.0},
                                  "k80": {(A3C, 1): 11.0, (A3C, 4): 33.0, (RESNET, 1): 2.0,
                                          (RESNET, 2): 3.0}})
    profile = profile_from_dict(doc(worker_type="k80", steps_per_s={A3C: 99.0, "New": 5.0}))
    filled = with_profile(table, profile)
    assert filled.get("k80", A3C) == 11.0          # the table's, not the measured 99
    assert filled.get("k80", A3C, 4) == 33.0       # the table's
    # A3C at sf 2, missing on k80: the table's sf-1 rate x v100's ratio (the fastest at sf 1)
    assert filled.get("k80", A3C, 2) == pytest.approx(11.0 * 40.0 / 24.0)
    # the fastest type lacks sf 8: no estimate at all
    assert filled.get("k80", A3C, 8) == 0.0
    assert filled.get("k80", "New") == 5.0
    # a job type the profile did not measure stays as the table has it
    assert filled.get("k80", RESNET, 2) == 3.0 and filled.get("k80", RESNET, 4) == 0.0
    assert dict(filled.solo["v100"]) == dict(table.solo["v100"])


job_types = st.sampled_from(["A", "B", "C", "D"])
worker_types = st.sampled_from(["k80", "p100", "v100", "a100"])
rates = st.floats(min_value=0.01, max_value=1e4, allow_nan=False, allow_infinity=False)
solo_tables = st.dictionaries(
    worker_types, st.dictionaries(st.tuples(job_types, st.sampled_from([1, 2, 4, 8])),
                                  st.one_of(rates, st.just(0.0)), max_size=12),
    min_size=1, max_size=4)
measured = st.dictionaries(st.sampled_from(["A", "B", "C", "D", "E"]), rates, min_size=1)


@settings(max_examples=200, deadline=None)
@given(solo=solo_tables, steps=measured, worker=st.sampled_from(["h100", "k80", "v100"]))
def test_with_profile_never_changes_an_entry_the_table_has(solo, steps, worker):
    table = ThroughputTable(solo=solo)
    filled = with_profile(table, profile_from_dict(doc(worker_type=worker, steps_per_s=steps)))
    for t, jobs in table.solo.items():
        for key, rate in jobs.items():
            assert filled.solo[t][key] == rate
        if t != worker:
            assert dict(filled.solo[t]) == dict(jobs)
    assert set(filled.worker_types) == {*table.worker_types, worker}
    for job, rate in steps.items():                     # sf 1: the table's, else measured
        assert filled.get(worker, job) == table.solo.get(worker, {}).get((job, 1), rate)


@settings(max_examples=200, deadline=None)
@given(solo=solo_tables, steps=measured)
def test_a_new_types_sf_k_over_sf_1_is_the_fastest_types(solo, steps):
    table = ThroughputTable(solo=solo)
    filled = with_profile(table, profile_from_dict(doc(worker_type="h100", steps_per_s=steps)))
    for job, rate in steps.items():
        best = max((table.get(t, job) for t in table.worker_types), default=0.0)
        refs = [t for t in table.worker_types if best > 0 and table.get(t, job) == best]
        for (j, k), value in filled.solo["h100"].items():
            if j != job or k == 1:
                continue
            assert refs, "an sf-k estimate needs a type that runs the job at sf 1"
            ratio = value / rate
            assert any(math.isclose(ratio, table.get(r, job, k) / table.get(r, job, 1),
                                    rel_tol=1e-9) for r in refs)
        assert filled.get("h100", job) == rate
        for k in {k for (j, k) in table.job_keys if j == job and k > 1}:
            if refs and all(table.get(r, job, k) > 0 for r in refs):
                assert filled.get("h100", job, k) > 0       # every k the fastest type has
            elif all(table.get(r, job, k) == 0 for r in refs):
                assert (job, k) not in filled.solo["h100"]  # no ratio, no estimate


# ---- shipped rows -----------------------------------------------------------------------
def test_shipped_profiles_take_one_fp32_row_per_type(tmp_path, monkeypatch):
    monkeypatch.setattr(profiles, "MEASURED_DIR", tmp_path / "missing")
    assert shipped_profiles() == {}
    monkeypatch.setattr(profiles, "MEASURED_DIR", tmp_path)
    write(tmp_path / "h100-fp32.json", doc())
    write(tmp_path / "h100-bf16.json", doc(precision="bf16", steps_per_s={A3C: 90.0}))
    write(tmp_path / "h100-reduced.json", doc(reduced=True, steps_per_s={A3C: 1.0}))
    write(tmp_path / "a100-fp32.json", doc(worker_type="a100", steps_per_s={A3C: 40.0}))
    (tmp_path / "notes.txt").write_text("not a profile")
    shipped = shipped_profiles()
    assert set(shipped) == {"h100", "a100"}
    assert shipped["h100"].steps_per_s[A3C] == 50.0 and shipped["h100"].precision == "fp32"
    write(tmp_path / "h100-again.json", doc())
    with pytest.raises(TraceError, match="second fp32 row of 'h100'"):
        shipped_profiles()
    (tmp_path / "h100-again.json").write_text("{")
    with pytest.raises(TraceError, match="h100-again.json"):
        shipped_profiles()


def test_table_for_types_fills_the_types_it_lacks_from_the_shipped_rows(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr(profiles, "MEASURED_DIR", tmp_path)
    table = default_table()
    assert table_for_types(table, ["v100", "k80"]) is table
    with pytest.raises(TraceError) as err:
        table_for_types(table, ["v100", "h100"])
    message = str(err.value)
    assert len(message.splitlines()) == 1
    assert "'h100'" in message and "known: k80, p100, v100" in message
    write(tmp_path / "h100-fp32.json", doc())
    filled = table_for_types(table, ["h100", "v100"])
    assert filled.get("h100", A3C) == 50.0 and filled.solo["v100"] == table.solo["v100"]
    with pytest.raises(TraceError, match=r"'t4'.*known: k80, p100, v100, h100"):
        table_for_types(table, ["t4"])


def test_profile_is_a_frozen_value():
    profile = Profile("h100", "fp32", {A3C: 1.0})
    with pytest.raises(AttributeError):
        profile.worker_type = "a100"          # type: ignore[misc]
    with pytest.raises(TypeError):
        profile.steps_per_s[A3C] = 2.0        # type: ignore[index]
