"""The reference workloads train real steps, checkpoint model + optimizer + step, and run
under GavelIterator's leases (thesis §5.6, Table 5.2)."""

from __future__ import annotations

import importlib
import math

import pytest
import torch

from gavelsched import checkpoints

from tests.workers.fake_scheduler import FakeJob, FakeScheduler, job_environment, steps_lease
from traces.workloads import WORKLOADS
from workers.workloads import common

TORCH_WORKLOADS = [name for name in WORKLOADS if name != "steps"]


def workload(name: str) -> common.Workload:
    return importlib.import_module(f"workers.workloads.{name}").WORKLOAD


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch):
    for var in ("GAVEL_SCHEDULER", "GAVEL_CHECKPOINT_DIR", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("name", TORCH_WORKLOADS)
def test_workload_trains_real_steps_with_finite_loss(name):
    result = common.train(workload(name), steps=3)
    assert result.steps == 3 and len(result.losses) == 3
    assert all(math.isfinite(v) for v in result.losses)


def test_every_workload_name_has_a_module():
    for name in WORKLOADS:
        assert importlib.import_module(f"workers.workloads.{name}")


def test_batch_size_follows_the_job_type():
    resnet = workload("resnet")
    assert common.batch_size_for(resnet, "ResNet-18 (batch size 256)") == 16
    assert common.batch_size_for(resnet, "ResNet-18 (batch size 16)") == 1
    assert common.batch_size_for(resnet, None) == resnet.default_batch


def test_checkpoint_round_trip_model_optimizer_step(tmp_path):
    wl = workload("recoder")
    torch.manual_seed(0)
    model = wl.build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    for _ in range(2):
        opt.zero_grad()
        wl.loss(model, wl.batch(gen, 4)).backward()
        opt.step()
    path = common.save_checkpoint(tmp_path / "c.pt", model, opt, 17)
    fresh = wl.build()
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    assert common.load_checkpoint(path, fresh, fresh_opt) == 17
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert torch.equal(a, b)
    momentum = [s["momentum_buffer"] for s in opt.state_dict()["state"].values()]
    loaded = [s["momentum_buffer"] for s in fresh_opt.state_dict()["state"].values()]
    assert len(momentum) == len(loaded) > 0
    assert all(torch.equal(a, b) for a, b in zip(momentum, loaded))
    assert not list(tmp_path.glob(".*tmp"))     # written through a temp file + rename


def test_corrupt_checkpoint_is_a_one_line_error(tmp_path):
    wl = workload("recoder")
    model = wl.build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = common.save_checkpoint(tmp_path / "c.pt", model, opt, 1)
    path.write_bytes(path.read_bytes()[:100])      # truncated
    with pytest.raises(common.CheckpointError) as err:
        common.load_checkpoint(path, model, opt)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "corrupt" in message
    with pytest.raises(common.CheckpointError, match="missing"):
        common.load_checkpoint(tmp_path / "nope.pt", model, opt)


def test_workload_under_leases_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    sched = FakeScheduler()
    sched.start()
    try:
        sched.jobs["lm"] = FakeJob(total_steps=7, lease=steps_lease(sched, 4))
        for var, value in job_environment(sched.address, "lm", tmp_path).items():
            monkeypatch.setenv(var, value)
        first = common.train(workload("lstm"))
        assert (first.steps, len(first.losses), first.finished) == (4, 4, False)
        assert (checkpoints.latest(tmp_path).path / common.CHECKPOINT_FILE).exists()
        second = common.train(workload("lstm"))
        assert (second.steps, len(second.losses), second.finished) == (7, 3, True)
        assert sched.jobs["lm"].steps_done == 7
        # The resumed model continued from the saved one: its checkpoint holds step 7.
        model = workload("lstm").build()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        newest = checkpoints.latest(tmp_path).path
        assert common.load_checkpoint(newest / common.CHECKPOINT_FILE, model, opt) == 7
    finally:
        sched.stop()


def test_a_rendezvous_port_taken_ends_the_run_not_the_job(monkeypatch, capfd):
    # CI: a mixed job's rank 0 found the port the scheduler chose taken (EADDRINUSE) and the
    # job failed for good; no fault of the job's, so only its run ends (the daemon relaunches)
    import socket

    from gavelsched.jobenv import EXIT_RUN_LOST

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(taken.getsockname()[1]))
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(SystemExit) as exc:
            common.init_distributed()
    assert exc.value.code == EXIT_RUN_LOST
    last = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()][-1]
    assert last.startswith("gavel: its rendezvous failed:") and "EADDRINUSE" in last, last


def test_two_ranks_exit_zero_with_their_last_line_written(tmp_path):
    # a rank ends by os._exit once its work is done (common.exit_process: the interpreter's
    # clean-up after a gloo group aborted a rank once in CI); its output is still flushed
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAVEL_")}
    env.update(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               CUDA_VISIBLE_DEVICES="")
    ranks = [subprocess.Popen([sys.executable, "-m", "workers.workloads.resnet", "--steps", "2"],
                              env={**env, "RANK": str(r), "LOCAL_RANK": "0"},
                              cwd=Path(__file__).resolve().parents[3],
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    for rank in ranks:
        _, err = rank.communicate(timeout=120)
        assert rank.returncode == 0, err[-2000:]
        last = [ln for ln in err.splitlines() if ln.strip()][-1]
        assert "resnet: at step 2, 2 steps this run, last loss" in last, last
