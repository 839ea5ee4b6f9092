"""The §5.7.1 trace generator: distributions, arrivals, determinism."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from traces import ThroughputTable, TraceJob, generate_trace
from traces.catalog import default_table

N = 20_000


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return default_table()


@pytest.fixture(scope="module")
def multi(table) -> list[TraceJob]:
    return generate_trace(N, 4.0, table=table, seed=11, multi_gpu=True, priorities=True,
                          slos=True)


def v100_minutes(job: TraceJob, table: ThroughputTable) -> float:
    return job.total_steps / table.get("v100", job.job_type, job.scale_factor) / 60


def test_durations_follow_section_5_7_1(multi, table):
    minutes = np.array([v100_minutes(j, table) for j in multi])
    log10 = np.log10(minutes)
    assert log10.min() >= 1.5 - 1e-3 and log10.max() <= 4 + 1e-3
    long = log10 > 3
    assert long.mean() == pytest.approx(0.2, abs=0.015)
    # Uniform exponents: the short ones average 2.25, the long ones 3.5.
    assert log10[~long].mean() == pytest.approx(2.25, abs=0.02)
    assert log10[long].mean() == pytest.approx(3.5, abs=0.02)


def test_job_types_are_uniform_over_the_catalog(multi, table):
    counts = Counter(j.job_type for j in multi)
    assert set(counts) == set(table.job_types)
    expected = N / len(table.job_types)
    assert all(abs(c - expected) < 0.15 * expected for c in counts.values())


def test_scale_factor_mix(multi):
    counts = Counter(j.scale_factor for j in multi)
    for sf, share in {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}.items():
        assert counts[sf] / N == pytest.approx(share, abs=0.015)


def test_single_gpu_by_default(table):
    assert {j.scale_factor for j in generate_trace(500, 1.0, table=table)} == {1}


def test_poisson_arrivals(table):
    rate = 2.5
    jobs = generate_trace(N, rate, table=table, seed=3)
    arrivals = np.array([j.arrival_s for j in jobs])
    assert arrivals[0] == 0.0
    assert np.all(np.diff(arrivals) >= 0)
    gaps = np.diff(arrivals)
    assert gaps.mean() == pytest.approx(3600 / rate, rel=0.03)
    # Exponential gaps: standard deviation equals the mean.
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.05)


def test_rate_zero_is_a_static_trace(table):
    jobs = generate_trace(100, 0, table=table, seed=1)
    assert len(jobs) == 100 and all(j.arrival_s == 0.0 for j in jobs)


def test_priorities(multi):
    weights = Counter(j.priority_weight for j in multi)
    assert set(weights) == {1.0, 5.0}
    assert weights[5.0] / N == pytest.approx(0.2, abs=0.015)


def test_slos_are_multiples_of_the_v100_duration(multi, table):
    factors = Counter()
    for job in multi:
        ratio = job.slo_s / (v100_minutes(job, table) * 60)
        nearest = min((1.2, 2.0, 10.0), key=lambda f: abs(f - ratio))
        assert ratio == pytest.approx(nearest, rel=1e-3)
        factors[nearest] += 1
    assert all(c / N == pytest.approx(1 / 3, abs=0.02) for c in factors.values())


def test_no_priorities_or_slos_unless_asked(table):
    jobs = generate_trace(200, 1.0, table=table)
    assert all(j.priority_weight == 1.0 and j.slo_s is None for j in jobs)


def test_deterministic_per_seed(table):
    a = generate_trace(300, 3.0, table=table, seed=5, multi_gpu=True, slos=True)
    assert a == generate_trace(300, 3.0, table=table, seed=5, multi_gpu=True, slos=True)
    assert a != generate_trace(300, 3.0, table=table, seed=6, multi_gpu=True, slos=True)


def test_options_do_not_perturb_other_attributes(table):
    """Each attribute has its own random stream."""
    plain = generate_trace(300, 3.0, table=table, seed=9, multi_gpu=True)
    fancy = generate_trace(300, 3.0, table=table, seed=9, multi_gpu=True, priorities=True,
                           slos=True, entities=("a", "b"), mixed_fraction=0.5,
                           elastic_fraction=0.5)
    key = [(j.job_type, j.scale_factor, j.total_steps, j.arrival_s) for j in plain]
    assert key == [(j.job_type, j.scale_factor, j.total_steps, j.arrival_s) for j in fancy]


def test_elastic_jobs_have_a_power_of_two_floor_below_their_scale_factor(table):
    jobs = generate_trace(3000, 3.0, table=table, seed=4, multi_gpu=True,
                          elastic_fraction=0.4)
    multi = [j for j in jobs if j.scale_factor > 1]
    elastic = [j for j in multi if j.min_scale_factor is not None]
    assert all(j.min_scale_factor is None for j in jobs if j.scale_factor == 1)
    assert abs(len(elastic) / len(multi) - 0.4) < 0.05
    for j in elastic:
        assert j.min_scale_factor < j.scale_factor
        assert j.min_scale_factor & (j.min_scale_factor - 1) == 0     # a power of two
    eights = Counter(j.min_scale_factor for j in elastic if j.scale_factor == 8)
    assert set(eights) == {1, 2, 4}                                   # every floor is drawn


def test_entities_are_drawn_uniformly(table):
    jobs = generate_trace(3000, 3.0, table=table, seed=2, entities=("a", "b", "c"))
    counts = Counter(j.entity for j in jobs)
    assert set(counts) == {"a", "b", "c"}
    assert all(abs(n / 3000 - 1 / 3) < 0.03 for n in counts.values())
    assert all(j.entity is None for j in generate_trace(10, 3.0, table=table, seed=2))


def test_default_table_is_the_catalog(table):
    assert generate_trace(50, 1.0, seed=4) == generate_trace(50, 1.0, table=table, seed=4)


def test_job_type_subset_and_fallback_scale_factor():
    small = ThroughputTable(solo={"v100": {("A3C", 1): 20.0, ("CycleGAN", 1): 5.0,
                                           ("CycleGAN", 8): 30.0}})
    jobs = generate_trace(2000, 1.0, table=small, seed=0, multi_gpu=True)
    assert {j.scale_factor for j in jobs if j.job_type == "A3C"} == {1}
    assert {j.scale_factor for j in jobs if j.job_type == "CycleGAN"} == {1, 8}
    only = generate_trace(50, 1.0, table=small, job_types=["CycleGAN"])
    assert {j.job_type for j in only} == {"CycleGAN"}


@pytest.mark.parametrize("kwargs, words", [
    ({"num_jobs": -1}, "num_jobs"),
    ({"rate_per_hour": -2.0}, "rate_per_hour"),
    ({"rate_per_hour": float("nan")}, "rate_per_hour"),
    ({"num_jobs": 10**11}, r"num_jobs must be an integer in \[0, 1000000\]"),  # (745 GiB)
    ({"rate_per_hour": 1e308}, r"rate_per_hour must be in \[0, 1e\+09\]"),   # (a plot's)
    ({"job_types": ["BERT"]}, "BERT"),
    ({"reference_worker": "a100"}, "a100"),
    ({"elastic_fraction": -0.1}, "elastic_fraction must be between 0 and 1"),
])
def test_bad_arguments(kwargs, words):
    args = {"num_jobs": 10, "rate_per_hour": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=words):
        generate_trace(args.pop("num_jobs"), args.pop("rate_per_hour"), **args)


def test_zero_jobs(table):
    assert generate_trace(0, 1.0, table=table) == []
