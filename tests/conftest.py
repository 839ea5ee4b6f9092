"""Suite-wide: tests marked ``gpu`` need a CUDA device and are skipped, with the reason,
on machines without one (CI has none; ``benchmarks/gpu_check.py`` is the GPU check)."""

from __future__ import annotations

import pytest


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
