"""Offline profiles (VirtualFlow §5.1.1): the batch sizes swept, the timing, emulation."""

from __future__ import annotations

import itertools

import pytest
import torch

from traces.catalog import default_table
from workers.virtual.profiler import (
    catalog_profiles,
    emulate_profiles,
    measure_comm_s,
    model_step_factory,
    profile_batches,
    profile_step_times,
)
from workers.virtual.reference import ReferenceJob, reference_data, reference_model
from gavelsched.virtual.split import parse_profiles, plan_split


def test_batches_are_powers_of_two_and_midpoints():
    assert profile_batches(100) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]
    assert profile_batches(1) == [1]
    with pytest.raises(ValueError):
        profile_batches(0)


def test_step_times_are_medians_after_warmup():
    calls: list[int] = []
    ticks = itertools.count()
    clock = lambda: float(next(ticks))  # every call one second later

    def make_step(batch):
        return lambda: calls.append(batch)
    times = profile_step_times(make_step, [1, 2], steps=3, warmup=2, clock=clock)
    assert times == {1: 1.0, 2: 1.0}
    assert calls == [1] * 5 + [2] * 5


def test_sweep_stops_at_out_of_memory():
    def make_step(batch):
        def step():
            if batch > 4:
                raise torch.OutOfMemoryError("CUDA out of memory")
        return step
    assert list(profile_step_times(make_step, [1, 2, 4, 8, 16], steps=1)) == [1, 2, 4]


def test_real_cpu_profile_emulated_types_and_a_plan():
    """Profile the reference model on this CPU, scale it to the catalog's GPU types by
    their throughput ratios, and plan a mixed split from it."""
    job = ReferenceJob(dataset_size=64)
    model = reference_model(job)
    inputs, labels = reference_data(job)
    factory = model_step_factory(model, torch.optim.SGD(model.parameters(), lr=0.01),
                                 torch.nn.functional.cross_entropy,
                                 lambda b: (inputs[:b], labels[:b]))
    batches = profile_batches(16)[1:]  # batch norm needs two samples in training
    measured = profile_step_times(factory, batches, steps=2)
    assert list(measured) == batches == [2, 3, 4, 6, 8, 12, 16]
    assert all(t > 0 for t in measured.values())
    job_type = "ResNet-18 (batch size 128)"
    profiles = catalog_profiles(measured, job_type, base_type="k80", comm_s=1e-3)
    table = default_table()
    ratio = table.get("k80", job_type) / table.get("v100", job_type)
    for batch, seconds in measured.items():
        assert profiles["v100"]["step_s"][str(batch)] == pytest.approx(seconds * ratio)
        assert profiles["k80"]["step_s"][str(batch)] == pytest.approx(seconds)
    assert profiles["k80"]["memory_gb"] == 12.0 and profiles["v100"]["memory_gb"] == 16.0
    plan = plan_split(parse_profiles(profiles), 64, {"v100": 1, "p100": 1, "k80": 1})
    assert plan.batch == 64


def test_emulation_errors_name_the_type():
    with pytest.raises(ValueError, match="'a100'"):
        emulate_profiles({1: 0.1}, "a100", {"v100": 1.0}, {"v100": 16})
    with pytest.raises(ValueError, match="'p100'"):
        emulate_profiles({1: 0.1}, "v100", {"v100": 1.0, "p100": 0.5}, {"v100": 16})
    with pytest.raises(ValueError, match="not in the catalog"):
        catalog_profiles({1: 0.1}, "no such job")


def test_comm_is_a_real_all_reduce_timing():
    seconds = measure_comm_s(4096, processes=2, repeats=3)
    assert 0 < seconds < 60
    with pytest.raises(ValueError, match="processes >= 2"):
        measure_comm_s(10, processes=1)
