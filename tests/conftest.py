"""Suite-wide: tests marked ``gpu`` need a CUDA device and are skipped, with the reason,
on machines without one (CI has none; ``benchmarks/gpu_check.py`` is the GPU check); and
hypothesis runs without its per-example deadline (200 ms by default), which is a timed
assertion: on a loaded 2-core CI machine an example can outlast it and fail a test that
asserts nothing about time (most of the suite's ``@settings`` turned it off one by one)."""

from __future__ import annotations

import pytest
from hypothesis import settings

settings.register_profile("gavelsched", deadline=None)
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
