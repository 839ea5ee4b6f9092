"""``gavelsched vn check``: real gloo processes, every mapping and a resize sequence on the
same trajectory as one process (VirtualFlow §3, §4.1, §6.2)."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main
from workers.virtual.reference import ReferenceJob


def test_check_all_mappings_and_resizes_match_one_process(capsys):
    # the reference model has dropout and batch norm, so this also proves the RNG and BN claims
    assert ReferenceJob().dropout > 0 and ReferenceJob().batchnorm
    code = main(["vn", "check", "--mappings", "1x8,2x4,4x2,8x1,6:2", "--steps", "5",
                 "--dtype", "float64", "--json", "--resize", "4,2,3"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(out["mappings"]) == {"1x8", "2x4", "4x2", "8x1", "6:2"}
    assert all(0 <= diff <= 1e-9 for diff in out["mappings"].values()), out
    phases = out["resize"]
    assert [p["processes"] for p in phases] == [4, 2, 3]
    assert [p["nodes_per_process"] for p in phases] == [[2, 2, 2, 2], [4, 4], [3, 3, 2]]
    assert [p["after_step"] for p in phases] == [5, 10, 15]
    assert all(p["max_abs_diff"] <= 1e-9 for p in phases), phases


@pytest.mark.parametrize("argv, fragment", [
    (["--mappings", "3x3"], "'3x3'"),
    (["--mappings", "6:1"], "'6:1'"),
    (["--resize", "4,x"], "'x'"),
    (["--resize", "9"], "9 processes"),
    (["--steps", "0"], "--steps 0"),
    (["--node-batch", "1"], "--node-batch 1"),
    (["--mappings", "", "--resize", ""], "nothing to check"),
])
def test_check_bad_input(argv, fragment, capsys):
    assert main(["vn", "check", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
