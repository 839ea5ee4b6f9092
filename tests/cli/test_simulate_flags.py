"""The core's flags of ``simulate`` and ``simulate sweep`` (``gavelsched/cli/simulate_flags.py``;
issue #18): the re-solve modes the parser offers are the core's, and a sweep hands them and
the pair partners to the core."""

from __future__ import annotations

from dataclasses import replace

from gavelsched.cli import build_parser
from gavelsched.cli.simulate_flags import RESOLVE_MODES as CLI_MODES
from gavelsched.cli.simulate_flags import core_options
from gavelsched.core.resolving import RESOLVE_MODES
from gavelsched.core.restarts import RESTART_RULES
from simulator.sweep import SweepPoint, SweepSpec, run_point


def test_the_flag_names_the_cores_modes():
    assert CLI_MODES == RESOLVE_MODES


def test_the_restart_flag_names_the_cores_rules():
    parser = build_parser(["simulate"])
    action = next(a for a in parser._subparsers._group_actions[0].choices["simulate"]._actions
                  if a.dest == "restart_rule")
    assert tuple(action.choices) == RESTART_RULES


def test_a_sweep_passes_the_mode_to_the_core():
    args = build_parser(["simulate", "sweep"]).parse_args(
        ["simulate", "sweep", "--rates", "1", "--resolve", "responsive", "-o", "x"])
    options = core_options(args)
    assert options == {"resolve": "responsive", "min_resolve_interval_s": 1920.0,
                       "refill_freed": False, "restart_rule": "tenure"}
    spec = SweepSpec(jobs=20, cluster={"v100": 2, "p100": 2, "k80": 2})
    point = SweepPoint("max_min_fairness_perf", 10.0, 0)
    gavel = run_point(point, spec)
    responsive = run_point(point, replace(spec, core_options=options))
    assert responsive["resolves"] > gavel["resolves"]


def test_a_replay_of_more_rounds_than_anyone_waits_for_is_warned_of(monkeypatch, caplog):
    """``--round-seconds 0.1`` on hours-long jobs ran millions of rounds with no word;
    now the least count of rounds is warned of before the replay starts (the threshold
    lowered here, so that the replay stays short)."""
    from gavelsched.cli import main, simulate

    generated = ["simulate", "--jobs", "3", "--rate", "6", "--cluster", "2:2:2"]
    assert main(generated) == 0
    assert "this replay runs at least" not in caplog.text
    monkeypatch.setattr(simulate, "LONG_REPLAY_ROUNDS", 10)
    assert main(generated) == 0
    assert "--round-seconds 360: this replay runs at least 93 rounds" in caplog.text


def test_pair_partners_reach_the_core_and_a_negative_count_exits_2(capsys):
    """``--pair-partners K``: a space-sharing replay lists each job's K best partners
    (``CoreConfig.pair_partners``), in a sweep too; a negative K is one line, exit 2."""
    from gavelsched.cli import main

    args = build_parser(["simulate", "sweep"]).parse_args(
        ["simulate", "sweep", "--rates", "1", "--pair-partners", "4", "-o", "x"])
    assert core_options(args)["pair_partners"] == 4
    packed = ["simulate", "--policy", "max_min_fairness_packed", "--jobs", "12",
              "--rate", "100000", "--cluster", "2:2:2", "--quiet"]
    assert main([*packed, "--pair-partners", "2"]) == 0
    assert "average JCT" in capsys.readouterr().out
    assert main([*packed, "--pair-partners", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--pair-partners: must be >= 0 (0: every pair), got -1")
    assert len(err.splitlines()) == 1
