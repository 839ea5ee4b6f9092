"""``gavelsched solve``: Allocation JSON out, exit 2 and one line for bad input."""

from __future__ import annotations

import json

import pytest

from gavelsched.cli import main

from .test_problem import GOOD


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_solve_prints_allocation(tmp_path, capsys):
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(GOOD))
    code, out, _ = run(capsys, "solve", str(path), "--policy", "max_min_fairness_perf")
    assert code == 0
    result = json.loads(out)
    assert result["policy"] == "max_min_fairness_perf"
    assert set(result["allocation"]) == {"0", "1"} and result["solver"] == "CLARABEL"


def test_solve_writes_json_file_with_partitions(tmp_path, capsys):
    path, out = tmp_path / "problem.json", tmp_path / "alloc.json"
    path.write_text(json.dumps(GOOD))
    code, _, _ = run(capsys, "solve", str(path), "--policy", "max_min_fairness_perf",
                     "--partitions", "2", "--json", str(out))
    assert code == 0 and json.loads(out.read_text())["allocation"]


def test_solve_options_reach_the_policy(tmp_path, capsys):
    data = dict(GOOD, prices={"v100": 2.0, "p100": 1.0, "k80": 0.5})
    path = tmp_path / "problem.json"
    path.write_text(json.dumps(data))
    code, out, _ = run(capsys, "solve", str(path), "--policy", "min_makespan_with_budget",
                       "--option", "budget=100")
    assert code == 0 and json.loads(out)["objective"] > 0


@pytest.mark.parametrize("content,policy,expected", [
    ({"jobs": []}, "max_min_fairness", "problem.json: problem: missing field 'cluster'"),
    ({"cluster": {"v100": -2}}, "max_min_fairness", "problem.json: cluster.v100: must be >= 0"),
    (GOOD, "no_such_policy", "unknown policy 'no_such_policy'"),
    ("{not json", "max_min_fairness", "problem.json: not valid JSON"),
    (dict(GOOD, prices={}), "max_sum_throughput_normalized_by_cost_perf", "needs a price"),
    # (names a print or a write could not take: a JSON "\ud800" escape, a newline)
    (dict(GOOD, cluster={**GOOD["cluster"], "v\ud800": 1}), "max_min_fairness",
     "problem.json: cluster: a name must be UTF-8 text, got 'v\\ud800'"),
    (dict(GOOD, jobs=[dict(GOOD["jobs"][0], id="a\nb")]), "max_min_fairness",
     "problem.json: jobs[0].id: a name must be one line, got 'a\\nb'"),
])
def test_solve_bad_input_exits_2_with_one_line(tmp_path, capsys, content, policy, expected):
    path = tmp_path / "problem.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, out, err = run(capsys, "solve", str(path), "--policy", policy)
    assert code == 2 and out == ""
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_solve_missing_file_exits_2(tmp_path, capsys):
    code, _, err = run(capsys, "solve", str(tmp_path / "nope.json"), "--policy", "fifo")
    assert code == 2 and "nope.json" in err and err.count("\n") == 1


def test_solve_prints_declared_traits(capsys):
    code, out, _ = run(capsys, "solve", "--policy", "max_min_fairness_packed", "--traits")
    traits = json.loads(out)
    assert code == 0 and traits["needs_pairs"] and traits["backfill"]
    assert "pairs" in traits["reads"] and "max_partners" in traits["options"]


@pytest.mark.parametrize("argv,expected", [
    (("--policy", "fifo"), "give a PROBLEM.json file"),
    (("--policy", "fifo", "--solver", "HIGHS", "--traits"),
     "policy 'fifo': unknown option 'solver'; accepted: partitions, processes, seed, type_choice"),
    (("--policy", "max_sum_throughput_perf", "--option", "normalize=sum", "--traits"),
     "normalize must be one of none, fastest, got 'sum'"),
    (("--policy", "min_makespan_with_budget", "--option", "budget=abc", "--traits"),
     "policy 'min_makespan_with_budget': bad option value"),
    # (each below was a traceback: at the solve, in a process pool, or in numpy)
    (("--policy", "fifo", "--option", "partitions=x", "--traits"),
     "option partitions: must be an integer in [1, 4096], got 'x'"),
    (("--policy", "fifo", "--option", "processes=99999999999", "--traits"),
     "option processes: must be an integer in [1, 4096], got 99999999999"),
    (("--policy", "max_min_fairness", "--option", "partitions=2", "--option", "seed=x",
      "--traits"), "option seed: must be an integer >= 0 within 64 bits, got 'x'"),
    (("--policy", "max_min_fairness", "--option", "solver=2", "--traits"),
     "bad option value (solver must be a solver's name, got 2)"),
    (("--policy", "max_min_fairness_water_filling", "--option", "max_iterations=-1",
      "--traits"), "max_iterations: must be an integer >= 1 within 64 bits, got -1"),
])
def test_solve_bad_traits_requests_are_one_line(capsys, argv, expected):
    code, _, err = run(capsys, "solve", *argv)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1
