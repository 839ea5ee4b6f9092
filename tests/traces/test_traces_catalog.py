"""The default catalog: Table 5.2's job types, Table 6.1's speedups, prices, pairs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from traces import build_catalog
from traces.catalog import (
    DEFAULT_CATALOG_JSON_PATH,
    DEFAULT_CATALOG_PATH,
    default_catalog,
    default_prices,
    default_table,
    load_catalog,
)
from traces.throughputs import load_table

WORKERS = ("k80", "p100", "v100")
SCALE_FACTORS = (1, 2, 4, 8)
TABLE_5_2 = {
    "ResNet-50 (batch size {})": (16, 32, 64, 128),
    "ResNet-18 (batch size {})": (16, 32, 64, 128, 256),
    "A3C": (None,),
    "LM (batch size {})": (5, 10, 20, 40, 80),
    "Transformer (batch size {})": (16, 32, 64, 128, 256),
    "CycleGAN": (None,),
    "Recommendation (batch size {})": (512, 1024, 2048, 4096, 8192),
}
EXPECTED_TYPES = [name.format(bs) if bs else name
                  for name, sizes in TABLE_5_2.items() for bs in sizes]
# Table 6.1: (P100, V100) speedup vs K80; we match it at each family's largest batch size.
TABLE_6_1 = {
    "Transformer (batch size 256)": (3.3, 3.3),
    "A3C": (1.2, 2.2),
    "CycleGAN": (4.5, 9.3),
    "ResNet-18 (batch size 256)": (4.0, 6.8),
    "ResNet-50 (batch size 128)": (3.7, 9.6),
}


def test_catalog_has_the_26_job_types_of_table_5_2():
    table = default_table()
    assert len(EXPECTED_TYPES) == 26
    assert list(table.job_types) == EXPECTED_TYPES


def test_every_type_worker_and_scale_factor_has_a_positive_throughput():
    table = default_table()
    assert set(table.worker_types) == set(WORKERS)
    for worker in WORKERS:
        assert len(table.solo[worker]) == 26 * len(SCALE_FACTORS)
        for job_type in EXPECTED_TYPES:
            for sf in SCALE_FACTORS:
                assert table.get(worker, job_type, sf) > 0, (worker, job_type, sf)


def test_v100_at_least_p100_at_least_k80():
    table = default_table()
    for job_type, sf in table.job_keys:
        k80, p100, v100 = (table.get(w, job_type, sf) for w in WORKERS)
        assert v100 >= p100 >= k80, (job_type, sf, k80, p100, v100)


@pytest.mark.parametrize("job_type", sorted(TABLE_6_1))
def test_speedups_match_table_6_1(job_type):
    table = default_table()
    p100, v100 = TABLE_6_1[job_type]
    k80 = table.get("k80", job_type)
    assert table.get("p100", job_type) / k80 == pytest.approx(p100, rel=5e-3)
    assert table.get("v100", job_type) / k80 == pytest.approx(v100, rel=5e-3)


def test_smaller_batches_gain_less_from_a_faster_gpu():
    """Host-bound small batches: speedup never exceeds the family's Table 6.1 value."""
    table = default_table()
    for name, sizes in TABLE_5_2.items():
        if sizes == (None,):
            continue
        speedups = [table.get("v100", name.format(bs)) / table.get("k80", name.format(bs))
                    for bs in sizes]
        assert speedups == sorted(speedups), name


def test_data_parallel_scaling_is_sublinear_but_helps():
    table = default_table()
    for worker in WORKERS:
        for job_type in EXPECTED_TYPES:
            one = table.get(worker, job_type, 1)
            for sf in (2, 4, 8):
                rate = table.get(worker, job_type, sf)
                assert one < rate <= sf * one * (1 + 1e-3), (worker, job_type, sf)


def test_pairs_exist_on_every_type_and_never_speed_a_job_up():
    table = default_table()
    for worker in WORKERS:
        pairs = table.pairs[worker]
        assert len(pairs) > 100
        gains = 0
        for (a, b), (ra, rb) in pairs.items():
            assert a[1] == b[1] == 1
            na, nb = ra / table.get(worker, *a), rb / table.get(worker, *b)
            assert 0 < na <= 1 and 0 < nb <= 1, (worker, a, b)
            gains += na + nb > 1
        assert gains > len(pairs) / 2 or worker == "k80"
        # Two ResNet-50 (batch size 128) jobs cannot share a 16 GB GPU (memory).
        big = ("ResNet-50 (batch size 128)", 1)
        assert table.pair(worker, big, big) is None


def test_pair_lookup_works_in_both_orders():
    table = default_table()
    a, b = ("A3C", 1), ("LM (batch size 5)", 1)
    ab, ba = table.pair("v100", a, b), table.pair("v100", b, a)
    assert ab is not None and ab == (ba[1], ba[0])


def test_prices_are_gcp_on_demand_and_consistent_with_table_6_1():
    prices = default_prices()
    assert prices == {"k80": 0.45, "p100": 1.46, "v100": 2.48}
    # Table 6.1's dollar-normalized V100 speedup of ResNet-50 is 1.8x.
    assert 9.6 / (prices["v100"] / prices["k80"]) == pytest.approx(1.8, abs=0.1)
    catalog = default_catalog()
    assert catalog.price("v100") == 2.48
    assert set(catalog.preemptible_prices) == set(WORKERS)
    with pytest.raises(KeyError, match="a100"):
        catalog.price("a100")


def test_checkpoint_times_are_below_five_seconds_as_in_section_5_7_5():
    catalog = default_catalog()
    assert set(catalog.job_types) == set(EXPECTED_TYPES)
    for job_type in EXPECTED_TYPES:
        save, load = catalog.checkpoint_seconds(job_type)
        assert 0 < load <= save < 5
    with pytest.raises(KeyError, match="nope"):
        catalog.checkpoint_seconds("nope")


def test_committed_catalog_matches_its_build_script():
    assert DEFAULT_CATALOG_PATH.read_text(encoding="utf-8") == build_catalog.render_catalog(), (
        "traces/data/catalog.yaml is stale: run python -m traces.build_catalog")
    assert (DEFAULT_CATALOG_JSON_PATH.read_text(encoding="utf-8")
            == build_catalog.render_catalog_json()), (
        "traces/data/catalog.json is stale: run python -m traces.build_catalog")
    assert build_catalog.main(["--check"]) == 0


def _string_keys(value):
    """JSON's view of a YAML document: mapping keys (scale factors) become strings."""
    if isinstance(value, dict):
        return {str(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


def test_json_twin_holds_exactly_the_yaml_data():
    from_json = json.loads(DEFAULT_CATALOG_JSON_PATH.read_text(encoding="utf-8"))
    from_yaml = yaml.safe_load(DEFAULT_CATALOG_PATH.read_text(encoding="utf-8"))
    assert from_json == _string_keys(from_yaml)
    assert json.dumps(from_json) == json.dumps(_string_keys(from_yaml))   # order kept too
    assert DEFAULT_CATALOG_JSON_PATH.read_text(encoding="utf-8").count("\n") == 1


def test_check_and_build_cover_the_json_twin(tmp_path):
    out = tmp_path / "catalog.yaml"
    assert build_catalog.main(["-o", str(out)]) == 0
    twin = out.with_suffix(".json")
    assert twin.read_text(encoding="utf-8") == DEFAULT_CATALOG_JSON_PATH.read_text(encoding="utf-8")
    assert build_catalog.main(["--check", "-o", str(out)]) == 0
    twin.write_text(twin.read_text(encoding="utf-8").replace("0.45", "0.46", 1), encoding="utf-8")
    assert build_catalog.main(["--check", "-o", str(out)]) == 1
    twin.unlink()
    assert build_catalog.main(["--check", "-o", str(out)]) == 1


def test_default_catalog_read_from_the_twin_equals_the_yaml():
    catalog, from_yaml = default_catalog(), load_catalog(DEFAULT_CATALOG_PATH)
    assert catalog.path == DEFAULT_CATALOG_PATH
    for worker in from_yaml.table.worker_types:
        assert list(catalog.table.solo[worker].items()) == list(from_yaml.table.solo[worker].items())
        assert list(catalog.table.pairs[worker].items()) == list(
            from_yaml.table.pairs[worker].items())
    assert catalog.table == from_yaml.table
    assert catalog.prices == from_yaml.prices
    assert catalog.preemptible_prices == from_yaml.preemptible_prices
    assert catalog.job_types == from_yaml.job_types


def test_default_simulation_never_imports_yaml():
    """``gavelsched simulate`` reads the JSON twin; yaml (~35 ms to import) stays out. A fresh
    interpreter: this test process has yaml already."""
    script = textwrap.dedent("""
        import contextlib, io, json, sys
        from gavelsched.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["simulate", "--jobs", "20", "--quiet"])
        after_simulate = "yaml" in sys.modules
        from traces.catalog import DEFAULT_CATALOG_PATH
        from traces.throughputs import load_table
        load_table(DEFAULT_CATALOG_PATH)            # a YAML file does import it
        print(json.dumps({"code": code, "after_simulate": after_simulate,
                          "after_yaml_read": "yaml" in sys.modules}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"code": 0, "after_simulate": False, "after_yaml_read": True}


def test_catalog_is_a_plain_native_table():
    """The catalog's extra ``meta`` section does not stop it from loading as a table."""
    loaded = load_table(DEFAULT_CATALOG_PATH)
    table = default_table()
    assert dict(loaded.solo) == dict(table.solo)
    assert dict(loaded.pairs) == dict(table.pairs)


def test_every_family_input_names_a_source():
    for family in build_catalog.FAMILIES:
        for note in (family.k80_ms_note, family.host_ms_note, family.params_note,
                     family.activation_note, family.speedup_source):
            assert note.strip()
    for _value, source, note in build_catalog.MODEL.values():
        assert source in build_catalog.SOURCES and note
