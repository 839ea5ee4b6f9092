"""``benchmarks/sim_budget.py``: Clarabel's own time in a run, and the budget a target
leaves the rest of a round."""

from __future__ import annotations

import sys

import clarabel

from tests.benchmark_modules import loaded


def test_clarabel_is_timed_in_a_run_and_put_back(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))       # (the script puts its folder first)
    monkeypatch.delitem(sys.modules, "simulate", raising=False)
    real = clarabel.DefaultSolver
    with loaded("sim_budget") as budget:
        row = budget.timed_run(40, 6.0)
    monkeypatch.delitem(sys.modules, "simulate", raising=False)
    assert clarabel.DefaultSolver is real
    assert row["resolves"] > 0 and row["rounds"] >= row["resolves"]
    assert row["build_s"] > 0 and row["solve_s"] > 0
    assert row["build_s"] + row["solve_s"] < row["wall_s"] and row["imports_s"] >= 0


def test_the_budget_is_what_the_target_leaves_after_clarabel_per_round(capsys):
    with loaded("sim_budget") as budget:
        budget.report({"jobs": 1000, "rate": 4.0, "wall_s": 30.0, "rounds": 2000,
                       "resolves": 400, "peak_rss_mib": 50.0, "build_s": 2.0,
                       "solve_s": 6.0, "imports_s": 0.3}, 10.0)
    out = capsys.readouterr().out
    # rest 22 s (11 ms a round), the target leaves 10 - 8 = 2 s: 1 ms a round, 11x less
    assert "everything else alone is 22.0 s: 2.20x the target of 10 s" in out
    assert "must fit in 2.0 s, 1000 us a round against 11000 us now (11.0x less)" in out
    assert "Clarabel alone takes" not in out
    budget_line = [line for line in out.splitlines() if line.startswith("Clarabel: its solve")]
    assert budget_line and "15000 us" in budget_line[0]          # 6 s over 400 re-solves
