"""Suite-wide: tests marked ``gpu`` need a CUDA device and are skipped, with the reason,
on machines without one (CI has none; ``benchmarks/gpu_check.py`` is the GPU check); and
hypothesis runs without its checks of time: the per-example deadline (200 ms by default)
and the health check of slow data generation. Both are timed assertions: on a loaded
2-core CI machine an example can outlast them and fail a test that asserts nothing about
time (most of the suite's ``@settings`` turned them off one by one)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("gavelsched", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gavelsched")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    gpu = [item for item in items if "gpu" in item.keywords]
    if gpu and not _cuda():
        skip = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
        for item in gpu:
            item.add_marker(skip)
