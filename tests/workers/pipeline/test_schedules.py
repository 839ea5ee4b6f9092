"""Schedules as data: every kind over a table of shapes, the validator, the simulator's
bubble and memory figures (thesis §2.4, §3.2, §4.2.2; Breadth-First Pipeline Parallelism §3)."""

from __future__ import annotations

import itertools

import pytest

from workers.pipeline.ops import Op, PipeOp, ScheduleError, format_grid, schedule_to_json
from workers.pipeline.kinds import KINDS, build_schedule
from workers.pipeline.simulate import simulate, validate
from workers.pipeline.versions import check_versions, weight_version

SHAPES = [(p, m) for p in (1, 2, 3, 4, 5) for m in (1, 2, 3, 4, 6, 8, 9)]


def _cases():
    for kind, (p, m) in itertools.product(KINDS, SHAPES):
        if kind == "interleaved":
            if m % p == 0:
                for v in (2, 3):
                    yield kind, p, m, v
        elif kind == "breadth_first":
            for v in (1, 2, 3):
                yield kind, p, m, v
        elif kind == "2bw":
            if m >= p:
                yield kind, p, m, 1
        else:
            yield kind, p, m, 1


CASES = list(_cases())


def _total_mb(kind: str, m: int) -> int:
    return 2 * m if kind == "2bw" else m


@pytest.mark.parametrize("kind,p,m,v", CASES)
def test_every_action_once_dependencies_hold_no_deadlock(kind, p, m, v):
    schedule = build_schedule(kind, p, m, v)
    result = validate(schedule, _total_mb(kind, m), v)  # raises on any violation
    actions = [a for acts in schedule.values() for a in acts if a is not None]
    keys = [(a.op, a.mb, a.chunk) for a in actions]
    assert len(keys) == len(set(keys))
    n = _total_mb(kind, m)
    for c, i in itertools.product(range(p * v), range(n)):
        assert (Op.F, i, c) in keys and (Op.B, i, c) in keys
    finish = {(t.action.op, t.action.mb, t.action.chunk): t for t in result.timeline}
    for t in result.timeline:
        a = t.action
        if a.op is Op.F and a.chunk > 0:
            assert finish[(Op.F, a.mb, a.chunk - 1)].finish <= t.start
        if a.op is Op.B:
            assert finish[(Op.F, a.mb, a.chunk)].finish <= t.start
            if a.chunk < p * v - 1:
                assert finish[(Op.B, a.mb, a.chunk + 1)].finish <= t.start
    for d, acts in schedule.items():
        assert all(a.chunk % p == d for a in acts if a is not None)


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(p, m) for p, m in SHAPES])
def test_bubble_fraction_gpipe_and_1f1b(kind, p, m):
    result = validate(build_schedule(kind, p, m), m)
    assert result.bubble_fraction == pytest.approx((p - 1) / m)


@pytest.mark.parametrize("p,m,v", [(p, m, v) for p, m in SHAPES for v in (2, 3, 4) if m % p == 0])
def test_bubble_fraction_interleaved(p, m, v):
    result = validate(build_schedule("interleaved", p, m, v), m, v)
    assert result.bubble_fraction == pytest.approx((p - 1) / (v * m))


@pytest.mark.parametrize("p,m,v", [(p, m, v) for p, m in SHAPES for v in (1, 2, 3) if m >= p])
def test_bubble_fraction_breadth_first(p, m, v):
    result = validate(build_schedule("breadth_first", p, m, v), m, v)
    assert result.bubble_fraction == pytest.approx((p - 1) / (v * m))


def test_backward_twice_forward_is_the_default():
    result = simulate(build_schedule("gpipe", 1, 1), 1)
    durations = {t.action.op: t.finish - t.start for t in result.timeline}
    assert durations == {Op.F: 1.0, Op.B: 2.0}


@pytest.mark.parametrize("p,m", SHAPES)
def test_peak_stash_gpipe_m_and_1f1b_min_p_minus_d(p, m):
    assert validate(build_schedule("gpipe", p, m), m).peak_stash == tuple([m] * p)
    peaks = validate(build_schedule("1f1b", p, m), m).peak_stash
    assert peaks == tuple(min(p - d, m) for d in range(p))


@pytest.mark.parametrize("p,m", [(p, m) for p, m in SHAPES if m >= p])
def test_advance_forward_sits_between_1f1b_and_gpipe(p, m):
    one = validate(build_schedule("1f1b", p, m), m)
    for extra in range(m + 1):
        adv = validate(build_schedule("advance_forward", p, m, advance_num=p - 1 + extra), m)
        assert adv.peak_stash == tuple(min(p - d + extra, m) for d in range(p))
        assert adv.makespan <= one.makespan
    assert build_schedule("advance_forward", p, m) == build_schedule("1f1b", p, m)
    assert build_schedule("advance_forward", p, m, advance_num=m + p - 1) == \
        build_schedule("gpipe", p, m)


@pytest.mark.parametrize("k,m,want", [(1, 4, 0), (4, 4, 0), (5, 4, 0), (8, 4, 0), (9, 4, 1),
                                      (12, 4, 1), (13, 4, 2), (1, 1, 0), (2, 1, 0), (3, 1, 1)])
def test_2bw_weight_version_formula(k, m, want):
    assert weight_version(k, m) == want


@pytest.mark.parametrize("p,m,batches", [(p, m, n) for p, m in SHAPES if m >= p for n in (1, 3)])
def test_2bw_versions_used_and_at_most_two_held(p, m, batches):
    schedule = build_schedule("2bw", p, m, batches=batches)
    report = check_versions(validate(schedule, m * batches), m)
    assert max(report.max_held) <= 2
    for d in range(p):
        assert report.used[d] == {k: max((k - 1) // m - 1, 0) for k in range(1, m * batches + 1)}


def test_2bw_refuses_fewer_microbatches_than_stages():
    with pytest.raises(ScheduleError, match="microbatches=2 < stages=3"):
        build_schedule("2bw", 3, 2)


@pytest.mark.parametrize("p,m", [(2, 3), (4, 6), (3, 4)])
def test_interleaved_refuses_m_not_multiple_of_p(p, m):
    with pytest.raises(ScheduleError) as err:
        build_schedule("interleaved", p, m, 2)
    assert str(err.value) == (f"interleaved: microbatches={m} is not a multiple of stages={p}")


@pytest.mark.parametrize("p,m", [(p, m) for p, m in SHAPES if p > 1])
def test_varuna_recomputes_all_but_last_stage(p, m):
    schedule = build_schedule("varuna", p, m)
    validate(schedule, m)
    for d in range(p):
        recomputed = {a.mb for a in schedule[d] if a.op is Op.R}
        assert recomputed == (set() if d == p - 1 else set(range(m)))
        # rule 2: after a recompute comes the backward of the same micro-batch
        for a, b in zip(schedule[d], schedule[d][1:]):
            if a.op is Op.R:
                assert b == PipeOp(Op.B, a.mb, a.chunk)


@pytest.mark.parametrize("bad", [
    {"kind": "nope", "stages": 2, "microbatches": 2},
    {"kind": "gpipe", "stages": 0, "microbatches": 2},
    {"kind": "1f1b", "stages": 2, "microbatches": -1},
    {"kind": "gpipe", "stages": 2, "microbatches": 2, "chunks": 2},
    {"kind": "advance_forward", "stages": 3, "microbatches": 2, "advance_num": 1},
])
def test_bad_arguments_are_one_line_errors(bad):
    with pytest.raises(ScheduleError) as err:
        build_schedule(**bad)
    assert "\n" not in str(err.value)


def test_pipeop_string_round_trip():
    for op in Op:
        for mb, chunk in ((0, 0), (3, 1), (12, 7)):
            action = PipeOp(op, mb, chunk)
            assert PipeOp.parse(str(action)) == action
    assert PipeOp.parse("B4") == PipeOp(Op.B, 4, 0)
    with pytest.raises(ScheduleError, match="'X1' is not a pipeline action"):
        PipeOp.parse("X1")


def _gpipe_2x2():
    return build_schedule("gpipe", 2, 2)


def test_validator_catches_duplicate_with_grid():
    schedule = _gpipe_2x2()
    schedule[0][1] = PipeOp(Op.F, 0, 0)
    with pytest.raises(ScheduleError) as err:
        validate(schedule, 2)
    assert "F0c0 appears twice" in str(err.value)
    assert "<-- ERROR HERE" in str(err.value) and "rank0" in str(err.value)


def test_validator_catches_missing_action():
    schedule = _gpipe_2x2()
    schedule[1] = [a for a in schedule[1] if a != PipeOp(Op.B, 1, 1)]
    with pytest.raises(ScheduleError, match="B1c1 is missing"):
        validate(schedule, 2)


def test_validator_catches_wrong_device():
    schedule = _gpipe_2x2()
    schedule[0][0] = PipeOp(Op.F, 0, 1)
    schedule[1][0] = PipeOp(Op.F, 0, 0)
    with pytest.raises(ScheduleError, match="chunk 1 runs on rank 1"):
        validate(schedule, 2)


def test_deadlock_is_reported_with_the_grid():
    # device 0 runs B0 before F1, device 1 waits for F1 before its B0: a cycle
    schedule = {0: [PipeOp(Op.F, 0, 0), PipeOp(Op.B, 0, 0), PipeOp(Op.F, 1, 0),
                    PipeOp(Op.B, 1, 0)],
                1: [PipeOp(Op.F, 0, 1), PipeOp(Op.F, 1, 1), PipeOp(Op.B, 0, 1),
                    PipeOp(Op.B, 1, 1)]}
    with pytest.raises(ScheduleError) as err:
        validate(schedule, 2)
    text = str(err.value)
    assert text.startswith("deadlock: rank 0 waits at B0c0, rank 1 waits at F1c1")
    assert "<-- ERROR HERE" in text


def test_recompute_out_of_place_is_rejected():
    schedule = _gpipe_2x2()
    schedule[0].insert(0, PipeOp(Op.R, 0, 0))
    with pytest.raises(ScheduleError, match="R0c0 must come after F"):
        validate(schedule, 2)


def test_json_form_and_grid():
    schedule = build_schedule("interleaved", 2, 2, 2)
    data = schedule_to_json(schedule)
    assert len(data["stages"]) == 2
    assert data["stages"][1][0] == {"op": "F", "mb": 0, "chunk": 1}
    assert all(e["chunk"] % 2 == d for d, acts in enumerate(data["stages"]) for e in acts)
    grid = format_grid(schedule, 1)
    assert grid.splitlines()[2].endswith("<-- ERROR HERE")
