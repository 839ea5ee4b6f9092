"""Exact preemption of the reference workloads (thesis §5.6): a job stopped at two lease
ends and resumed from its checkpoints ends bit for bit where an uninterrupted run does.

Runs in-process against a fake scheduler over real gRPC, on the CPU; the same check on
CUDA, through a real scheduler and worker daemon, is ``benchmarks/gpu_check.py``."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

from gavelsched import checkpoints
from tests.workers.fake_scheduler import FakeJob, FakeScheduler, job_environment, steps_lease
from workers.workloads import common

TOTAL, PER_LEASE = 19, 7     # three runs: 7 + 7 + 5 steps; resumes at steps 7 and 14
BATCH = 4


@pytest.fixture(autouse=True)
def _kernels_as_they_were(monkeypatch):
    """``make_deterministic`` is process-wide: leave the process as it was."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", common.CUBLAS_DETERMINISTIC)
    before = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(before)


def _workload(name: str) -> common.Workload:
    return importlib.import_module(f"workers.workloads.{name}").WORKLOAD


def reference(workload: common.Workload, steps: int, *, restart_data_at: int = -1
              ) -> dict[str, torch.Tensor]:
    """The uninterrupted run (step k on batch k mod n); with ``restart_data_at`` the data
    order starts over there, as a resumed run that lost its position would."""
    state = common.setup(workload, BATCH, deterministic=True)
    for k in range(steps):
        at = k if restart_data_at < 0 or k < restart_data_at else k - restart_data_at
        common.train_step(workload, state, state.batches[at % len(state.batches)])
    return {n: t.detach().clone() for n, t in state.model.state_dict().items()}


def run_preempted(workload: common.Workload, sched: FakeScheduler, ckpt: Path,
                  monkeypatch) -> tuple[list[int], dict[str, torch.Tensor]]:
    sched.jobs["j"] = FakeJob(total_steps=TOTAL, lease=steps_lease(sched, PER_LEASE))
    for name, value in job_environment(sched.address, "j", ckpt).items():
        monkeypatch.setenv(name, value)
    ends = []
    for _ in range(3):       # three processes' worth of runs, each from the last commit
        result = common.train(workload, batch_size=BATCH, deterministic=True)
        ends.append(result.steps)
    commit = checkpoints.latest(ckpt)
    state = torch.load(commit.path / common.CHECKPOINT_FILE, weights_only=True)
    return ends, state["model"]


@pytest.mark.parametrize("name", ["resnet", "lstm", "transformer", "recoder"])
def test_a_twice_preempted_job_ends_bit_for_bit_where_an_uninterrupted_run_does(
        name, sched, tmp_path, monkeypatch):
    workload = _workload(name)
    ends, params = run_preempted(workload, sched, tmp_path, monkeypatch)
    assert ends == [PER_LEASE, 2 * PER_LEASE, TOTAL]
    expected = reference(workload, TOTAL)
    assert params.keys() == expected.keys()
    different = [n for n in expected if not torch.equal(params[n], expected[n])]
    assert different == []
    # the check can fail: a resumed run that restarted its data order would differ
    lost = reference(workload, TOTAL, restart_data_at=PER_LEASE)
    assert any(not torch.equal(lost[n], expected[n]) for n in expected)


def test_a_checkpoint_restores_the_random_generators(tmp_path):
    workload = _workload("recoder")
    state = common.setup(workload, BATCH)
    torch.manual_seed(7)
    torch.rand(3)
    path = common.save_checkpoint(tmp_path / "c.pt", state.model, state.optimizer, 3)
    expected = torch.rand(5)          # what the run would draw next
    torch.rand(11)                    # a later process's generator is elsewhere
    assert common.load_checkpoint(path, state.model, state.optimizer) == 3
    assert torch.equal(torch.rand(5), expected)


def test_bf16_autocast_trains_and_refuses_float64(monkeypatch):
    workload = _workload("resnet")
    state = common.setup(workload, BATCH, amp="bf16")
    assert state.amp == "bf16"
    loss = common.train_step(workload, state, state.batches[0])
    assert loss == loss                       # finite (train_step raises otherwise)
    with pytest.raises(ValueError, match="needs float32 parameters"):
        common.check_precision(torch.float64, "bf16")
    monkeypatch.setenv("GAVEL_WORKLOAD_AMP", "fp16")
    with pytest.raises(ValueError, match="expected one of fp32, bf16"):
        common.amp_from_env()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["resnet", "lstm", "transformer", "recoder"])
def test_on_cuda_too(name, sched, tmp_path, monkeypatch):
    """The same check where CUDA is present (``setup`` then trains on cuda:0)."""
    assert common.device_for_rank().type == "cuda"
    test_a_twice_preempted_job_ends_bit_for_bit_where_an_uninterrupted_run_does(
        name, sched, tmp_path, monkeypatch)
