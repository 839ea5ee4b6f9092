"""The core's flags of ``simulate`` and ``simulate sweep`` (``gavelsched/cli/simulate_flags.py``;
issue #18): the re-solve modes the parser offers are the core's, and a sweep hands them and
the pair partners to the core."""

from __future__ import annotations

from dataclasses import replace

import pytest

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
    from gavelsched.cli import main, simulate_flags

    generated = ["simulate", "--jobs", "3", "--rate", "6", "--cluster", "2:2:2"]
    assert main(generated) == 0
    assert "this replay runs at least" not in caplog.text
    monkeypatch.setattr(simulate_flags, "LONG_REPLAY_ROUNDS", 10)
    assert main(generated) == 0
    assert "--round-seconds 360: this replay runs at least 93 rounds (each" in caplog.text


@pytest.mark.parametrize("flag, value, needle", [
    ("--round-seconds", "inf", "--round-seconds: must be a finite number > 0, got inf"),
    ("--round-seconds", "nan", "--round-seconds: must be a finite number > 0, got nan"),
    ("--round-seconds", "0", "--round-seconds: must be a finite number > 0, got 0.0"),
    ("--min-resolve-interval", "nan", "--min-resolve-interval: must be >= 0, got nan"),
    ("--min-resolve-interval", "-5", "--min-resolve-interval: must be >= 0, got -5.0"),
])
@pytest.mark.parametrize("command", [["simulate"], ["simulate", "sweep", "--rates", "5"]])
def test_a_round_or_resolve_interval_that_is_no_length_exits_2(command, flag, value, needle,
                                                               tmp_path, capsys):
    """``--round-seconds inf`` replayed with NaN leases (numpy warnings, a meaningless
    result), and ``--min-resolve-interval nan`` was taken: both are one line, exit 2, in
    ``simulate`` and ``sweep`` alike, before anything runs. (An infinite interval stays:
    it means never.)"""
    from gavelsched.cli import main

    out = ["-o", str(tmp_path / "out")] if "sweep" in command else []
    assert main([*command, "--jobs", "5", "--quiet", flag, value, *out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(needle), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag, value, needle", [
    ("--prices", "v100=-1", "--prices: v100: must be >= 0, got -1.0"),
    ("--gpus-per-server", "v100=0", "--gpus-per-server: the count of 'v100' must be a whole "
                                    "number >= 1, got '0'"),
])
def test_a_bad_price_or_server_size_exits_before_the_trace_is_made(flag, value, needle, capsys):
    """Both were read only once the trace was generated and announced: the error came
    after a line of work done. Now they are read at the door, with the cluster."""
    from gavelsched.cli import main

    assert main(["simulate", "--jobs", "5", flag, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(needle), err


def test_rounds_at_least_count_only_the_time_some_job_is_unfinished():
    """The replay jumps over an idle cluster: two jobs of 10 rounds alone on their fastest
    type, a year apart, take at least 20 rounds, not a year's; overlapping, their union."""
    from gavelsched.cli.simulate_flags import rounds_at_least
    from traces.types import TraceJob

    def job(arrival_s: float) -> TraceJob:    # 1 step/s on "fast", 3,600 steps
        return TraceJob("x", 1, 3600, arrival_s, throughputs={"fast": 1.0, "slow": 0.5})

    cluster = {"fast": 1, "slow": 1}
    assert rounds_at_least([job(0.0), job(3.15e7)], None, cluster, 360.0) == 20.0
    assert rounds_at_least([job(0.0), job(1800.0)], None, cluster, 360.0) == 15.0


def test_a_sweeps_long_replays_are_warned_of_before_any_run(monkeypatch, caplog, tmp_path):
    """A sweep ran its replays with no word of how many rounds they take: when the replay
    at its lowest rate (its jobs overlap least, so it runs the most rounds) runs more than
    ``LONG_REPLAY_ROUNDS``, one warning says so before the first run starts (the threshold
    set here between the two rates' counts, so that the replays stay short)."""
    from gavelsched.cli import main, simulate_flags
    from gavelsched.cli.simulate_flags import rounds_at_least
    from simulator import sweep

    spec = SweepSpec(jobs=3, cluster={"v100": 2, "p100": 2, "k80": 2})
    table = sweep.spec_table(spec)
    low, high = (rounds_at_least(sweep.point_jobs(rate, 0, spec, table), table, spec.cluster,
                                 spec.round_seconds) for rate in (0.5, 600.0))
    assert low > high + 1
    monkeypatch.setattr(simulate_flags, "LONG_REPLAY_ROUNDS", (low + high) / 2)
    warned_first = []
    real = sweep.run_points
    monkeypatch.setattr(sweep, "run_points", lambda *a, **k: warned_first.append(
        "rounds (each job alone" in caplog.text) or real(*a, **k))
    assert main(["simulate", "sweep", "--rates", "600,0.5", "--jobs", "3", "--cluster",
                 "2:2:2", "--policies", "fifo", "--processes", "1", "--quiet",
                 "-o", str(tmp_path)]) == 0
    warnings = [r.getMessage() for r in caplog.records if "rounds (each job" in r.getMessage()]
    assert warnings == [(f"--round-seconds 360: the replays at rate 0.5 run at least "
                         f"{int(low):,} rounds (each job alone on its fastest type from its "
                         "arrival); a longer round replays it sooner")]
    assert warned_first == [True]


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
