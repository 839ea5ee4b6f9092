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


def _runner():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_runner
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return gpu_runner


def test_a_failed_rank_is_told_by_its_exit_and_its_error_not_by_torchs_warning():
    """As NCCL 2.28 refused the trial on an H200: the last line a rank wrote is torch's
    exit warning, and NCCL's own lines precede any result on stdout."""
    runner = _runner()
    err = ("[rank0]: Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60\n"
           "[rank0]:[W1204 15:44:15 ProcessGroupNCCL.cpp:1575] Warning: WARNING: "
           "destroy_process_group() was not called before program exit\n")
    failed = runner._outcome(0, 1, "NCCL version 2.28.9+cuda13.0\n", err)
    assert failed["result"] is None and failed["exit"] == 1
    assert failed["error"].endswith("both on CUDA device 60")
    said = runner._said(failed)
    assert said.startswith("rank 0 printed no result, then exit 1: ") and "Duplicate" in said
    killed = runner._said(runner._outcome(1, -6, 'NCCL version\n{"rank": 1, "backend": '
                                          '"nccl", "device": "cuda:0", "loss": 2.5, '
                                          '"agreed": 1.0}\n', "terminate called\n"))
    assert killed == ("rank 1 nccl on cuda:0, loss 2.5000, agreed 1, then exit -6 "
                      "(SIGABRT): terminate called")
    assert runner._said(runner._outcome(0, None, "", "")).endswith("still running when stopped")
