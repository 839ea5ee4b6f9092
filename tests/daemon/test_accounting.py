"""Accounting (``gavelsched/daemon/accounting.py``): GPU-hours and cost by user, entity and
worker type, a run's part after ``since``, totals that are the sum over the runs (for every
``by``), lines that partition the runs, the wire form, and ``--since``'s forms."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched.daemon.accounting import (BY, NONE, PAIR_SHARE, UsageError, UsageLine, UsageReport,
                                          UsageRun, parse_since, usage_report)

H = 3600.0
T0 = 1_800_000_000.0


def run(job, user, entity, kind, gpus, start_h, end_h, price=0.0) -> UsageRun:
    return UsageRun(job, user, entity, kind, gpus, T0 + start_h * H, T0 + end_h * H, price)


RUNS = [run("1", "ann", "vision", "v100", 4, 0, 2, 3.0),      # 8 GPU-h, $24
        run("1", "ann", "vision", "k80", 4, 2, 3, 1.0),       # 4 GPU-h, $4
        run("2", "bob", "nlp", "v100", 1, 0, 6, 3.0),         # 6 GPU-h, $18
        run("3", "bob", "", "k80", 2, 1, 2, 0.0),             # 2 GPU-h, unpriced
        run("4", "cy", "nlp", "v100", 3, 5, 5)]               # no time at all


def lines(report) -> list[tuple]:
    return [(x.key, x.gpu_hours, x.cost, x.runs, x.jobs) for x in report.lines]


@pytest.mark.parametrize("by, want", [
    ("user", [("ann", 12.0, 28.0, 2, 1), ("bob", 8.0, 18.0, 2, 2), ("cy", 0.0, 0.0, 1, 1)]),
    ("entity", [("vision", 12.0, 28.0, 2, 1), ("nlp", 6.0, 18.0, 2, 2),
                (NONE, 2.0, 0.0, 1, 1)]),
    ("type", [("v100", 14.0, 42.0, 3, 3), ("k80", 6.0, 4.0, 2, 2)]),
])
def test_a_report_by_each_key(by, want):
    report = usage_report(RUNS, by)
    assert report.by == by and lines(report) == want
    assert (report.gpu_hours, report.cost, report.runs) == (20.0, 46.0, 5)


def test_lines_are_sorted_by_gpu_hours_then_key():
    runs = [run("1", u, "", "v100", 1, 0, h) for u, h in (("b", 1), ("a", 1), ("c", 2))]
    assert [x.key for x in usage_report(runs).lines] == ["c", "a", "b"]


@pytest.mark.parametrize("since_h, want", [
    (None, (20.0, 46.0, 5)),
    (1, (15.0, 31.0, 5)),                          # ann's first run and bob's v100 clipped
    (2, (4.0 + 4.0, 4.0 + 12.0, 3)),               # ann's k80 run, bob's v100, cy's
    (3, (3.0, 9.0, 2)),                            # bob's v100 run (ann's ended at 3)
    (6, (0.0, 0.0, 0)),                            # nothing ran after the last end
])
def test_since_counts_only_the_part_after_it(since_h, want):
    since = 0.0 if since_h is None else T0 + since_h * H
    report = usage_report(RUNS, "user", since)
    assert (report.gpu_hours, report.cost, report.runs) == want
    assert report.since_unix == since


def test_a_run_clipped_by_since():
    r = run("1", "ann", "", "v100", 2, 1, 3, 2.5)
    assert r.gpu_hours() == 4.0 and r.cost() == 10.0
    assert r.gpu_hours(T0 + 2 * H) == 2.0 and r.cost(T0 + 2 * H) == 5.0
    assert r.gpu_hours(T0 + 5 * H) == 0.0 and not r.counts(T0 + 5 * H)
    assert r.counts(0.0) and r.counts(T0 + 2.9 * H)
    backwards = UsageRun("2", "ann", "", "v100", 2, T0 + 10, T0, 1.0)    # a clock step back
    assert backwards.gpu_hours() == 0.0 == backwards.cost()


def test_a_co_located_pairs_runs_count_their_gpu_once_between_them():
    # thesis §5.3.1: the two jobs share one GPU; each is metered half of its time
    pair = [UsageRun(j, "ann", "", "v100", 1, T0, T0 + H, 2.0, PAIR_SHARE) for j in "ab"]
    assert [r.gpu_hours() for r in pair] == [0.5, 0.5] and pair[0].cost() == 1.0
    assert usage_report(pair, "user").gpu_hours == 1.0


@pytest.mark.parametrize("field, value, match", [
    ("gpus", -1, "gpus must be a whole number >= 0"), ("gpus", 1.5, "gpus"),
    ("start_unix", math.nan, "start_unix must be a finite number"),
    ("end_unix", math.inf, "end_unix"), ("price", -0.5, "price must be >= 0"),
    ("price", "1", "price must be a finite number"), ("share", 0.0, r"share must be in \(0, 1\]"),
    ("share", 1.5, "share must be in"), ("share", math.nan, "share must be a finite number"),
])
def test_a_bad_run_is_refused_in_one_line(field, value, match):
    fields = dict(job_id="7", user="ann", entity="", worker_type="v100", gpus=1,
                  start_unix=0.0, end_unix=1.0, price=0.0)
    with pytest.raises(UsageError, match=f"job 7: {match}") as err:
        UsageRun(**{**fields, field: value})
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("by", ["", "users", "job", "USER"])
def test_a_bad_by_is_one_line(by):
    with pytest.raises(ValueError, match=r"must be one of user, entity, type$"):
        usage_report(RUNS, by)


def test_the_wire_and_json_forms():
    report = usage_report(RUNS, "entity", T0 + H)
    again = UsageReport.from_pb(report.to_pb(), T0 + H)
    assert again == report
    assert type(again.lines) is tuple and all(type(x) is UsageLine for x in again.lines)
    data = report.to_dict()
    assert data == {"by": "entity", "since_unix": T0 + H,
                    "lines": [{"key": x.key, "gpu_hours": x.gpu_hours, "cost": x.cost,
                               "runs": x.runs, "jobs": x.jobs} for x in report.lines],
                    "gpu_hours": report.gpu_hours, "cost": report.cost, "runs": report.runs}
    empty = usage_report([], "type")
    assert empty.lines == () and (empty.gpu_hours, empty.cost, empty.runs) == (0.0, 0.0, 0)
    assert UsageReport.from_pb(empty.to_pb()) == empty


NAMES = st.sampled_from(["", "ann", "bob", "cy"])
RUN = st.builds(
    UsageRun, job_id=st.sampled_from("123456"), user=NAMES, entity=NAMES,
    worker_type=st.sampled_from(["", "v100", "k80", "k80:1+v100:1"]),
    gpus=st.integers(0, 64),
    start_unix=st.floats(0, 1e9, allow_nan=False), end_unix=st.floats(0, 1e9, allow_nan=False),
    price=st.floats(0, 100, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(RUN, max_size=30), st.one_of(st.just(0.0), st.floats(0, 1e9)))
def test_totals_are_the_sum_over_the_runs_and_lines_partition_them(runs, since):
    counted = [r for r in runs if since <= 0 or r.end_unix > since]
    hours = math.fsum(r.gpu_hours(since) for r in counted)
    dollars = math.fsum(r.gpu_hours(since) * r.price for r in counted)
    for by in BY:
        report = usage_report(runs, by, since)
        # the totals: exactly the sum over the runs, whatever the lines are keyed by
        assert (report.gpu_hours, report.cost, report.runs) == (hours, dollars, len(counted))
        # the lines: each run in the line of its key, and they add up to the totals
        keys = [x.key for x in report.lines]
        assert len(keys) == len(set(keys))
        assert sorted(keys) == sorted({r.key(by) for r in counted})
        for x in report.lines:
            mine = [r for r in counted if r.key(by) == x.key]
            assert x.runs == len(mine) and x.jobs == len({r.job_id for r in mine})
            assert x.gpu_hours == math.fsum(r.gpu_hours(since) for r in mine)
        assert sum(x.runs for x in report.lines) == report.runs
        assert math.isclose(math.fsum(x.gpu_hours for x in report.lines), report.gpu_hours,
                            rel_tol=1e-12, abs_tol=1e-9)
        assert math.isclose(math.fsum(x.cost for x in report.lines), report.cost,
                            rel_tol=1e-12, abs_tol=1e-9)
        assert [(-x.gpu_hours, x.key) for x in report.lines] == sorted(
            (-x.gpu_hours, x.key) for x in report.lines)


NOW = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc).timestamp()


def utc(*args) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("text, want", [
    ("2026-11-01", utc(2026, 11, 1)),
    ("2026-11-01T12:00", utc(2026, 11, 1, 12)),
    ("2026-11-01 12:00:30", utc(2026, 11, 1, 12, 0, 30)),
    ("2026-11-01T12:00Z", utc(2026, 11, 1, 12)),
    ("2026-11-01T12:00+02:00", utc(2026, 11, 1, 10)),
    ("1793491200", 1793491200.0),
    ("1793491200.5", 1793491200.5), ("7", 7.0),     # a bare number is a Unix time
    ("7d", NOW - 7 * 86400), ("12h", NOW - 12 * 3600), ("30m", NOW - 1800),
    ("45s", NOW - 45), ("2w", NOW - 14 * 86400), ("1.5h", NOW - 5400),
    (" 7d ", NOW - 7 * 86400), ("0d", NOW),
    ("1969-12-31", 0.0),                            # before the epoch: everything
    ("999999999d", 0.0),
])
def test_since_accepts_dates_unix_times_and_ages(text, want):
    assert parse_since(text, NOW) == want


@pytest.mark.parametrize("text", ["", "yesterday", "7 d", "7D", "-7d", "d", "-5", "nan",
                                  "inf", "2026-13-01", "2026-11-01T25:00", "1e9",
                                  "9" * 400])
def test_a_bad_since_is_one_line(text):
    with pytest.raises(ValueError, match=r"since .*: not a date \(2026-11-01, "
                                         r"2026-11-01T12:00\), a Unix time or an age") as err:
        parse_since(text, NOW)
    assert "\n" not in str(err.value) and len(str(err.value)) < 160


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40),
                 st.from_regex(r"\d{1,400}(\.\d+)?[smhdw]?", fullmatch=True),
                 st.datetimes().map(lambda d: d.isoformat())))
def test_since_is_a_unix_time_or_one_line(text):
    try:
        value = parse_since(text, NOW)
    except ValueError as err:
        assert "\n" not in str(err)
    else:
        assert math.isfinite(value) and value >= 0
