"""The emulated pace of a job (``workers/daemon/emulation.py``, docs/runtime.md
"Emulation"): the table's rate x speed; at a GPU count the table lacks, the scaling model's
rate, which is what the scheduler prices that count at, and not the scheduler's own figure
scaled again."""

from __future__ import annotations

import pytest

from traces.catalog import default_table
from traces.scaling import table_rate
from workers.daemon.emulation import Emulation

JOB = "Transformer (batch size 16)"   # the catalog has it on 1, 2, 4 and 8 GPUs, not on 3
SPEED = 0.1


@pytest.fixture(scope="module")
def v100():
    return Emulation("v100", default_table(), SPEED)


def test_a_count_the_table_has_runs_at_the_tables_rate_times_the_speed(v100):
    assert v100.steps_per_s(JOB, 4, expected=123.0) == pytest.approx(
        default_table().get("v100", JOB, 4) * SPEED)


def test_a_count_the_table_lacks_runs_at_what_the_scheduler_prices_it(v100):
    table = default_table()
    assert table.get("v100", JOB, 3) == 0.0
    # the local cluster's scheduler plans on the table x speed, and so sends that figure
    scheduler_prices = table_rate(table.scaled(SPEED), "v100", JOB, 3)
    between = (table.get("v100", JOB, 2) * SPEED, table.get("v100", JOB, 4) * SPEED)
    assert between[0] < scheduler_prices < between[1]
    assert v100.steps_per_s(JOB, 3, expected=scheduler_prices) == pytest.approx(
        scheduler_prices)
    # whatever the scheduler sends: the pace is the table's model, not a figure it learnt
    assert v100.steps_per_s(JOB, 3, expected=0.01) == pytest.approx(scheduler_prices)


def test_past_the_model_or_for_an_unknown_job_type_the_schedulers_figure_stands_in(v100):
    # the model goes no further than 2x the largest count the table has (8); the figure
    # is taken as sent, as the modelled count's is (the local cluster's is dilated already)
    assert v100.steps_per_s(JOB, 32, expected=5.0) == pytest.approx(5.0)
    assert v100.steps_per_s("no such job", 2, expected=5.0) == pytest.approx(5.0)
    assert v100.steps_per_s("no such job", 2) is None


def test_a_job_paced_on_the_schedulers_figure_keeps_its_pace_once_measured(v100):
    """The scheduler sends what it plans a job on, its measurement once it has one: the
    next run's pace is that measurement, not it x speed again (before: each run's pace was
    the last one's x 0.1 here, towards 0)."""
    pace = v100.steps_per_s("no such job", 1, expected=5.0)
    for _ in range(3):       # each run measured at its pace, which the next run is sent
        pace, before = v100.steps_per_s("no such job", 1, expected=pace), pace
        assert pace == before == 5.0
