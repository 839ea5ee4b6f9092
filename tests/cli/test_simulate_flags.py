"""The re-solve flags of ``simulate`` and ``simulate sweep`` (``gavelsched/cli/simulate_flags.py``;
issue #18): the modes the parser offers are the core's, and a sweep hands them to the core."""

from __future__ import annotations

from dataclasses import replace

from gavelsched.cli import build_parser
from gavelsched.cli.simulate_flags import RESOLVE_MODES as CLI_MODES
from gavelsched.cli.simulate_flags import resolve_options
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
    options = resolve_options(args)
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
