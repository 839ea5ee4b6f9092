"""Launch waves (``gavelsched/core/waves.py``): a start-up grows with the processes its round
starts at once on its machine, by one slope per cluster fitted on the cluster's own
start-ups (issue #29)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gavelsched.core.waves import (MAX_WAVE_SLOPE, MIN_SAMPLES, SLOPES, fit_waves,
                                   machine_of, machines, wave_factor)

# Start-ups measured on a 2-core loopback cluster (issue #29's `steps` runs, seconds, by the
# processes launched at once): the wave sizes' medians.
MEASURED = {1: 0.150, 2: 0.169, 3: 0.236}


def test_a_wave_of_one_is_the_start_up_alone():
    assert wave_factor(0.3, 1) == 1.0 and wave_factor(0.3, 0.5) == 1.0
    assert wave_factor(0.3, 3) == pytest.approx(1.6)
    assert wave_factor(0.0, 10) == 1.0


@settings(max_examples=60, deadline=None)
@given(slope=st.floats(0.0, MAX_WAVE_SLOPE), seed=st.integers(0, 2**31 - 1),
       types=st.integers(1, 4))
@example(slope=1.0, seed=1_711_274_584, types=1)   # fits 0.97: three steps, by a float's ulp
@example(slope=0.875, seed=3945, types=1)          # fits 0.84 (3.4 standard errors off)
def test_the_fit_recovers_the_slope_and_each_type_s_start_up_alone(slope, seed, types):
    rng = random.Random(seed)
    alone = {f"t{k}": rng.uniform(0.1, 5.0) for k in range(types)}
    samples = [(t, w, alone[t] * wave_factor(slope, w) * rng.uniform(0.98, 1.02))
               for t in alone for w in (1, 2, 3, 4) for _ in range(3)]
    fitted, got = fit_waves(samples)
    step = SLOPES[1] - SLOPES[0]
    # three of the fit's grid steps, and five standard errors of a least-squares slope under
    # the samples' noise: with three steps alone, seed 3945 (slope 0.875, one type) fitted
    # 0.84, 3.4 standard errors off: 7 of 20,000 draws failed, one suite run in fifty
    assert fitted == pytest.approx(slope, abs=3 * step + 5 * _slope_error(slope, types) + 1e-12)
    assert set(got) == set(alone)
    for t in alone:
        assert got[t] == pytest.approx(alone[t], rel=0.05)


def _slope_error(slope: float, types: int, waves=(1, 2, 3, 4), each: int = 3) -> float:
    """The standard error of the slope fitted in logs to ``each`` samples per wave and type,
    each with a uniform 2% share of noise (a standard deviation of 0.02 / sqrt(3) in logs):
    the noise over the root of the summed squared deviations of d log f / d slope."""
    sens = [(w - 1) / (1 + slope * (w - 1)) for w in waves]
    mean = sum(sens) / len(sens)
    spread = types * each * sum((x - mean) ** 2 for x in sens)
    return 0.02 / math.sqrt(3) / math.sqrt(spread)


def test_the_measured_start_ups_fit_a_slope_that_charges_each_wave_its_own():
    samples = [("steps", w, s) for w, s in MEASURED.items() for _ in range(4)]
    slope, alone = fit_waves(samples)
    assert 0.15 < slope < 0.35
    for w, s in MEASURED.items():       # each wave charged within 10% of what it took
        assert alone["steps"] * wave_factor(slope, w) == pytest.approx(s, rel=0.1)


def test_start_ups_that_do_not_grow_with_the_wave_fit_no_slope():
    samples = [("a", w, 2.0 / w) for w in (1, 2, 3) for _ in range(4)]   # shorter, if any
    assert fit_waves(samples)[0] == 0.0


def test_too_few_samples_or_one_wave_size_fit_no_slope_and_their_mean():
    few = [("a", 1, 1.0), ("a", 3, 2.0)] * ((MIN_SAMPLES - 1) // 2)
    assert fit_waves(few) == (0.0, {"a": pytest.approx(1.5)})
    one_size = [("a", 2, 1.0), ("a", 2, 3.0)] * MIN_SAMPLES
    assert fit_waves(one_size) == (0.0, {"a": pytest.approx(2.0)})
    assert fit_waves([]) == (0.0, {})


def test_a_type_s_start_up_alone_is_its_samples_mean_over_their_factors():
    """(so that a forecast charging it is as often early as late, not a geometric mean)"""
    samples = [("a", w, s) for w, s in MEASURED.items() for _ in range(4)]
    slope, alone = fit_waves(samples)
    want = sum(s / wave_factor(slope, w) for w, s in MEASURED.items()) / len(MEASURED)
    assert alone["a"] == pytest.approx(want)


def test_a_worker_s_machine_is_its_address_s_host():
    assert machine_of("127.0.0.1:5000") == "127.0.0.1"
    assert machine_of("[::1]:5000") == "[::1]"
    assert machine_of("gpu-7.lab:50061") == "gpu-7.lab"
    assert machine_of("unix-socket") == "unix-socket"
    assert machines(["127.0.0.1:1", "127.0.0.1:2", "10.0.0.2:1"]) == 2
    assert machines(iter(["a:1"])) == 1 and machines([]) == 1
