"""cvxpy, scipy.sparse and scipy.optimize are imported only when first used
(policies/_lazy.py): a policy's direct LP path and a simulation on it import none of them.

Each check runs in a fresh interpreter (a real subprocess): ``sys.modules`` of the test
process already holds cvxpy from other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBLEM = {"cluster": {"v100": 2, "k80": 2},
           "jobs": [{"id": str(i), "throughputs": {"v100": 4.0 + i, "k80": 1.0 + i / 2}}
                    for i in range(5)]}


# What a direct-path solve or a simulation on it never needs (together ~0.35 s to import).
HEAVY = ("scipy.sparse", "scipy.optimize")


def _run(script: str, tmp_path) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON line."""
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(PROBLEM))
    script = f"HEAVY = {HEAVY!r}\n" + textwrap.dedent(script)
    out = subprocess.run([sys.executable, "-c", script, str(path)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_direct_path_solves_never_import_cvxpy(tmp_path):
    got = _run("""
        import json, sys
        import policies
        after_import = "cvxpy" in sys.modules
        problem = policies.Problem.from_dict(json.load(open(sys.argv[1])))
        shares = {}
        scipy = None
        for name in ("max_min_fairness_perf", "max_min_fairness_water_filling_perf"):
            allocation = policies.get_policy(name).solve(problem)
            shares[name] = sum(sum(row.values()) for row in allocation.allocation.values())
            if scipy is None:   # max-min's path makes no scipy object (water filling does)
                scipy = [m for m in HEAVY if m in sys.modules]
        print(json.dumps({"after_import": after_import, "after_solve": "cvxpy" in sys.modules,
                          "scipy": scipy, "shares": shares}))
    """, tmp_path)
    assert got["after_import"] is False
    assert got["after_solve"] is False
    assert got["scipy"] == []
    assert all(total > 0 for total in got["shares"].values())  # the solves did allocate


def test_cli_solve_on_the_direct_path_never_imports_cvxpy(tmp_path):
    got = _run("""
        import contextlib, io, json, sys
        from gavelsched.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["solve", sys.argv[1], "--policy", "max_min_fairness_perf"])
        print(json.dumps({"code": code, "cvxpy": "cvxpy" in sys.modules,
                          "solver": json.loads(out.getvalue())["solver"]}))
    """, tmp_path)
    assert got == {"code": 0, "cvxpy": False, "solver": "CLARABEL"}


def test_a_cvxpy_program_imports_cvxpy_on_first_use(tmp_path):
    got = _run("""
        import json, sys
        import policies
        problem = policies.Problem.from_dict(json.load(open(sys.argv[1])))
        before = "cvxpy" in sys.modules
        policy = policies.get_policy("max_min_fairness_perf", backend="cvxpy")
        allocation = policy.solve(problem)
        print(json.dumps({"before": before, "after": "cvxpy" in sys.modules,
                          "objective": allocation.objective}))
    """, tmp_path)
    assert got["before"] is False and got["after"] is True
    assert got["objective"] > 0


def test_a_simulation_on_the_direct_path_imports_neither_cvxpy_nor_scipy(tmp_path):
    got = _run("""
        import contextlib, io, json, sys
        from gavelsched.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["simulate", "--jobs", "20", "--quiet"])
        print(json.dumps({"code": code,
                          "loaded": [m for m in ("cvxpy",) + HEAVY if m in sys.modules]}))
    """, tmp_path)
    assert got == {"code": 0, "loaded": []}


def test_scipy_sparse_is_imported_on_first_use(tmp_path):
    got = _run("""
        import json, sys
        import numpy as np
        from policies.sparse import Compressed, as_scipy
        before = [m for m in HEAVY if m in sys.modules]
        A = as_scipy(Compressed(np.ones(2), np.array([0, 1], np.int32),
                                np.array([0, 1, 2], np.int32), (2, 2), "csr"))
        print(json.dumps({"before": before, "after": "scipy.sparse" in sys.modules,
                          "dense": A.toarray().tolist()}))
    """, tmp_path)
    assert got == {"before": [], "after": True, "dense": [[1.0, 0.0], [0.0, 1.0]]}
