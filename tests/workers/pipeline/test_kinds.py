"""Schedule kinds as data (issue #16): every declared kind's traits agree with what its
generator produces, and every kind the CLI offers is declared."""

from __future__ import annotations

import argparse
import inspect

import pytest

from workers.pipeline.kinds import KINDS, ScheduleKind, build_schedule
from workers.pipeline.ops import Op, ScheduleError
from workers.pipeline.planner import SCHEDULES, PlanInfeasible, predict
from workers.pipeline.profile import profile_from_dict
from workers.pipeline.schedules import chunks_of
from workers.pipeline.simulate import validate
from workers.pipeline.versions import check_versions

# m is a multiple of p (interleaved) and m ≥ p (2bw)
SHAPES = [(1, 1), (1, 3), (2, 2), (2, 4), (3, 3), (3, 6), (4, 8)]
BATCHES = 3   # mini-batches a no-flush schedule spans here


def _build(kind: ScheduleKind, p: int, m: int):
    """The kind's schedule with its default chunks; a no-flush one over BATCHES."""
    options = {} if kind.flush else {"batches": BATCHES}
    return build_schedule(kind.name, p, m, **options)


def _cases():
    return [(name, p, m) for name in KINDS for p, m in SHAPES]


def test_each_kind_is_declared_once_under_its_name():
    for name, kind in KINDS.items():
        assert kind.name == name
        assert kind.description and "\n" not in kind.description
        assert kind.source and "§" in kind.source


@pytest.mark.parametrize("name", list(KINDS))
def test_options_and_chunks_are_the_generators(name):
    kind = KINDS[name]
    params = inspect.signature(kind.generator).parameters
    assert list(params)[:3] == ["stages", "microbatches", "chunks"]
    assert tuple(list(params)[3:]) == kind.options
    assert params["chunks"].default == kind.default_chunks


@pytest.mark.parametrize("name,p,m", _cases())
def test_flush_and_multi_chunk_match_the_schedule(name, p, m):
    kind = KINDS[name]
    schedule = _build(kind, p, m)
    assert chunks_of(schedule) == kind.default_chunks
    spanned = m if kind.flush else m * BATCHES
    result = validate(schedule, spanned, kind.default_chunks)
    # a flush kind's schedule is exactly one mini-batch: the executor's update after it
    # finds every rank idle; a no-flush one spans BATCHES mini-batches in one list
    assert {t.action.mb for t in result.timeline} == set(range(spanned))
    if not kind.flush and p > 1:
        # no flush: some forward of mini-batch 1 starts before mini-batch 0 has drained
        drained = max(t.finish for t in result.timeline
                      if t.action.op is Op.B and t.action.mb < m)
        assert any(t.start < drained for t in result.timeline
                   if t.action.op is Op.F and t.action.mb >= m)
    if not kind.multi_chunk:
        with pytest.raises(ScheduleError, match="one chunk per device"):
            build_schedule(name, p, m, 2)


@pytest.mark.parametrize("name,p,m", _cases())
def test_weight_versions_match_the_schedule(name, p, m):
    kind = KINDS[name]
    assert kind.delay == kind.weight_versions - 1 == (0 if kind.flush else 1)
    if kind.flush:
        return
    report = check_versions(validate(_build(kind, p, m), m * BATCHES), m)
    assert max(report.max_held) == kind.weight_versions


@pytest.mark.parametrize("name,p,m", [c for c in _cases() if c[1] > 1])
def test_recomputes_matches_the_r_actions(name, p, m):
    kind = KINDS[name]
    schedule = _build(kind, p, m)
    for d in range(p):
        recomputed = {a.mb for a in schedule[d] if a is not None and a.op is Op.R}
        want = set(range(m)) if kind.recomputes and d < p - 1 else set()
        assert recomputed == want


def test_the_planner_takes_its_kinds_and_their_weight_versions():
    layers = [{"forward_s": 1.0, "backward_s": 2.0, "activation_bytes": 10.0,
               "output_bytes": 1.0, "weight_bytes": 100.0}] * 4
    profile = profile_from_dict({"layers": layers})
    assert SCHEDULES == tuple(name for name, kind in KINDS.items() if kind.planner)
    for name, kind in KINDS.items():
        if not kind.planner:
            with pytest.raises(PlanInfeasible):
                predict(profile, 2, 1, 1, 2, False, name)
            continue
        pred = predict(profile, 2, 1, 1, 2, False, name)
        # MEMORY(.) holds weight_versions copies of each stage's 2 layers' weights
        assert [m - a for m, a in zip(pred.stage_memory_bytes, pred.stage_activation_bytes)] \
            == [kind.weight_versions * 200.0] * 2


def test_declarations_refuse_inconsistent_traits():
    with pytest.raises(ValueError, match="weight version"):
        ScheduleKind("x", KINDS["1f1b"].generator, "d", "§0", weight_versions=2)
    with pytest.raises(ValueError, match="batches"):
        ScheduleKind("x", KINDS["1f1b"].generator, "d", "§0", flush=False, weight_versions=2)


def _choices(parser: argparse.ArgumentParser, flag: str, found: dict) -> dict:
    """``found[(subcommand path, flag)] = choices`` over every sub-parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _choices(sub, flag, found)
        elif flag in action.option_strings:
            found[(parser.prog, flag)] = list(action.choices)
    return found


def test_every_kind_the_cli_offers_is_declared():
    from gavelsched.cli import build_parser

    parser = build_parser(["pipeline"])
    offered = _choices(parser, "--kind", {})
    assert len(offered) >= 2   # schedule and check
    for choices in offered.values():
        assert choices == list(KINDS)
    planned = _choices(parser, "--schedule", {})
    assert list(planned.values()) == [list(SCHEDULES)]
    assert set(SCHEDULES) <= set(KINDS)
