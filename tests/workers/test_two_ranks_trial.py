"""The GPU check's trial of a data-parallel job's two ranks on one device
(``benchmarks/gpu_runner.py two-ranks``, issue #31), rehearsed on the CPU: the same two
processes and job code, under gloo, where they must run. On a GPU the check records
whatever nccl does with them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def test_two_ranks_on_one_device_run_under_gloo_on_the_cpu():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_runner.py"),
                           "two-ranks"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["result"].startswith("ran: "), got
    for rank in (0, 1):     # each rank joined the group, stepped and agreed on the max rank
        assert f"rank {rank} gloo on cpu" in got["result"]
    assert got["result"].count("agreed 1") == 2
