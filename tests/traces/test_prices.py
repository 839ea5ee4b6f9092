"""Price trace files (``traces/prices.py``, thesis chapter 6): read by the simulator's
``--price-trace`` and the scheduler's ``prices``; a bad file is one line naming it."""

from __future__ import annotations

import pytest

from traces.prices import PriceTrace, PriceTraceError


@pytest.mark.parametrize("name, content, says", [
    ("nan.json", b'{"v100": [[0, NaN]]}', "v100[0]: price: must be a finite number"),
    ("inf.json", b'{"v100": [[Infinity, 1.0]]}', "v100[0]: time_s: must be a finite number"),
    ("inf.yaml", b"v100: [[0, -.inf]]\n", "v100[0]: price: must be a finite number"),
    ("negative.json", b'{"v100": [[-5, 1.0]]}', "v100[0]: time_s: must be >= 0"),
    ("huge.json", b'{"v100": [[0, 1e308]]}', "v100[0]: price: must be <= 1e+06"),
    ("string.json", b'{"v100": [[0, "cheap"]]}', "v100[0]: price: must be a number"),
    ("bool.json", b'{"v100": [[0, true]]}', "v100[0]: price: must be a number"),
    ("short.json", b'{"v100": [[0]]}', "v100[0]: must be [time_s, price]"),
    ("empty.json", b'{"v100": []}', "v100: needs a non-empty list"),
    ("list.json", b"[[0, 1.0]]", "must map worker type"),
    ("twice.json", b'{"v100": [[0, 1.0], [0, 2.0]]}', "two prices at time_s 0"),
    ("latin1.json", b'{"caf\xe9": [[0, 1.0]]}', "not UTF-8 text"),
    ("bad.json", b'{"v100": [[0, 1.0]', "not valid JSON"),
    ("bad.yaml", b"v100: [[0, 1.0]\n", "not valid YAML"),
    ("missing.json", None, "cannot read"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, name, content, says):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(PriceTraceError) as err:
        PriceTrace.load(path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(path)) and says in line, line


def test_prices_in_force_over_time(tmp_path):
    path = tmp_path / "spot.yaml"
    path.write_text("v100: [[3600, 3.0], [0, 2.0]]\nk80: [[100, 0.5]]\n")
    trace = PriceTrace.load(path)
    assert trace.at(0.0, {"k80": 0.4}) == {"v100": 2.0, "k80": 0.4}
    assert trace.at(3600.0) == {"v100": 3.0, "k80": 0.5}
    assert trace.next_change_after(100.0) == 3600.0 and trace.next_change_after(3600.0) is None
    assert trace.changes_after(0.0, 5) == {"v100": ((3600.0, 3.0),), "k80": ((100.0, 0.5),)}
    assert trace.changes_after(100.0, 5) == {"v100": ((3600.0, 3.0),)}
    assert trace.changes_after(-1.0, 1) == {"v100": ((0.0, 2.0),), "k80": ((100.0, 0.5),)}


def test_the_simulator_reads_the_same_class():
    import simulator
    import simulator.prices

    assert simulator.PriceTrace is PriceTrace is simulator.prices.PriceTrace
    assert simulator.PriceTraceError is PriceTraceError
