"""The daemon re-solves responsively by default (issue #18; ``gavelsched/core/resolving.py``):
a job's completion re-solves the policy at the next round boundary, where Gavel's interval
(1,920 s scaled to the round: 53 s at 10 s rounds) would wait. ``resolve: gavel`` in the
cluster YAML keeps Gavel's rule. The real ``DaemonExecutor`` on a hand-moved clock
(``test_round_aligned.Scheduler``)."""

from __future__ import annotations

import pytest

from gavelsched.daemon.config import ConfigError, DaemonConfig, parse_config

from .test_round_aligned import R, Scheduler

pytestmark = pytest.mark.skipif(
    "resolve" not in DaemonConfig.__dataclass_fields__,
    reason="waits for the `resolve` key of gavelsched/daemon/config.py (issue #18)")

GOOD = {"listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 10,
        "state_dir": "state"}


def test_the_key_defaults_to_responsive_and_is_checked(tmp_path):
    assert parse_config(GOOD, base=tmp_path).resolve == "responsive"
    assert parse_config({**GOOD, "resolve": "gavel"}, base=tmp_path).resolve == "gavel"
    for bad in ("sometimes", 1, ["gavel"]):
        with pytest.raises(ConfigError, match="resolve"):
            parse_config({**GOOD, "resolve": bad}, base=tmp_path)


def resolves_after_a_completion(tmp_path, **config) -> bool:
    """Two jobs on a 2-GPU server; the short one finishes in round 1. Is the policy
    re-solved when round 2 is planned (17 s after the first solve)?"""
    sched = Scheduler(tmp_path, gpus=2, min_resolve_interval_s=None, **config)
    try:
        short, _ = sched.submit(steps=50), sched.submit()
        lead = sched.x.config.plan_lead
        sched.at(1.0)                                   # round 0: both run; first solve
        first = sched.x.core.last_resolve_s
        sched.at(1.0 + R - lead)                        # round 1 planned: nothing changed
        assert sched.x.core.last_resolve_s == first
        sched.at(1.0 + R)
        sched.t = 1.0 + R + 2.0
        sched.exited(short, 50)                         # the short job is done
        assert sched.x.jobs[short].state == "done"
        sched.at(1.0 + 2 * R - lead)                    # round 2 planned
        return sched.x.core.last_resolve_s != first
    finally:
        sched.close()


def test_a_completion_re_solves_at_the_next_boundary_by_default(tmp_path):
    assert resolves_after_a_completion(tmp_path)


def test_gavel_waits_for_its_interval(tmp_path):
    assert not resolves_after_a_completion(tmp_path, resolve="gavel")
