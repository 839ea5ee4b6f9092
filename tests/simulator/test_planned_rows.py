"""``TraceJob.planned`` (issue #29): a daemon plans a job on its priors until a measurement
moves them past noise (``core/online.py``), so a replay of its jobs plans each on the row
the daemon plans it on while it progresses at what it was measured to make."""

from __future__ import annotations

import pytest

from simulator import SimConfig, simulate
from traces import ThroughputTable, TraceJob

TABLE = ThroughputTable({"v100": {}})
WALL = SimConfig(round_ends_at_last_finish=False)     # rounds of 360 s
STEPS = 1080


def finish(planned=None, rate=2.0) -> float:
    job = TraceJob("A", 1, STEPS, 0.0, throughputs={"v100": rate}, planned=planned)
    (record,) = simulate([job], TABLE, {"v100": 1}, "max_min_fairness_perf", sim=WALL).jobs
    return record.completion_s


def test_without_a_planned_row_a_job_plans_on_what_it_makes():
    assert finish() == pytest.approx(STEPS / 2.0)


def test_a_row_within_noise_sizes_every_lease():
    # leases of floor(1.9 x 360) = 684 steps at 2 steps/s: 342 s, then 396 steps in 198 s
    assert finish({"v100": 1.9}) == pytest.approx(360 + 396 / 2.0)


def test_a_row_far_off_is_replaced_by_the_first_measurement():
    # round 1: a lease of 360 steps, made in 180 s; measured at 2 (past the 10% band), the
    # next lease is 720 steps: the rest in 360 s
    assert finish({"v100": 1.0}) == pytest.approx(360 + 720 / 2.0)


def test_planned_rows_need_the_jobs_own_throughputs():
    with pytest.raises(ValueError, match="planned"):
        TraceJob("A", 1, 10, 0.0, planned={"v100": 1.0})
