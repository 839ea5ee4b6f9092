"""The job side of ``benchmarks/gpu_check.py``: one reference workload trained on this
process's device exactly as its job trains it under a worker, in child processes.

``python benchmarks/gpu_runner.py calibrate NAME JOB_TYPE`` prints JSON: start-up (process
start to the first step done, imports and CUDA context included), seconds per step,
checkpoint save and load seconds (the thesis Table 5.4's per-round costs, §5.7.2).
``python benchmarks/gpu_runner.py reference NAME JOB_TYPE STEPS DIR`` trains STEPS steps
without a scheduler (the uninterrupted run) and saves them to DIR as the job would.
``python benchmarks/gpu_runner.py paths`` runs the CUDA paths that one GPU can run and
prints what each did (JSON). ``python benchmarks/gpu_runner.py two-ranks [LOGDIR]`` tries
a data-parallel job's two ranks on the one GPU (nccl; gloo on a CPU), prints what happened
and keeps the ranks' logs in LOGDIR.

Every mode runs with deterministic kernels, as the check's jobs do.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from gavelsched.daemon.leases import free_port as _free_port  # noqa: E402
from gavelsched.jobenv import process_elapsed_s  # noqa: E402
from workers.workloads import common  # noqa: E402

TIMED_STEPS = 20
TWO_RANKS_TIMEOUT_S = 120.0


class Runner:
    """A workload's model, optimizer and data on this process's device; ``step(k)``
    trains step k as the job's k-th step, ``save``/``load`` are the job's own."""

    def __init__(self, name: str, job_type: str) -> None:
        self.name = name
        if name == "gpt":
            from workers.pipeline.executor import StageRuntime
            from workers.pipeline.morph import config_for_plan
            from workers.workloads import gpt

            common.make_deterministic()
            self.device = common.device_for_rank()
            self.options = gpt.GptOptions(deterministic=True)
            self.plan = gpt.agreed_plan(1, 0, self.options)
            cfg = config_for_plan(self.plan, self.options.spec, self.options.kind,
                                  self.options.lr)
            self.runtime = StageRuntime(cfg, 0)
        else:
            import importlib

            self.workload = importlib.import_module(f"workers.workloads.{name}").WORKLOAD
            size = common.batch_size_for(self.workload, job_type)
            self.state = common.setup(self.workload, size, deterministic=True)
            self.device = self.state.device

    def step(self, k: int) -> None:
        if self.name == "gpt":
            self.runtime.minibatch(k)
        else:
            batches = self.state.batches
            common.train_step(self.workload, self.state, batches[k % len(batches)])

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def save(self, directory: Path, steps: int) -> None:
        if self.name == "gpt":
            from workers.pipeline.morph import save_layers, write_meta
            from workers.workloads.gpt import LAYERS_DIR

            folder = directory / LAYERS_DIR
            save_layers(folder, self.runtime.layer_state())
            write_meta(folder, steps, self.options.spec.layers)
        else:
            common.save_checkpoint(directory / common.CHECKPOINT_FILE, self.state.model,
                                   self.state.optimizer, steps)

    def load(self, directory: Path) -> None:
        if self.name == "gpt":
            from workers.workloads.gpt import LAYERS_DIR

            self.runtime.load_layers(directory / LAYERS_DIR)
        else:
            common.load_checkpoint(directory / common.CHECKPOINT_FILE, self.state.model,
                                   self.state.optimizer)


def saved_parameters(directory: Path) -> dict[str, torch.Tensor]:
    """The parameters a job's (or ``Runner.save``'s) checkpoint directory holds."""
    single = directory / common.CHECKPOINT_FILE
    if single.exists():
        return torch.load(single, map_location="cpu", weights_only=True)["model"]
    from workers.workloads.gpt import LAYERS_DIR

    out = {}
    for path in sorted((directory / LAYERS_DIR).glob("layer_*.pt")):
        for key, value in torch.load(path, map_location="cpu", weights_only=True).items():
            out[f"{path.stem}.{key}"] = value
    return out


def calibrate(name: str, job_type: str) -> dict[str, Any]:
    runner = Runner(name, job_type)
    runner.step(0)
    runner.sync()
    startup = process_elapsed_s()
    for k in range(1, 4):
        runner.step(k)
    runner.sync()
    times = []
    for k in range(4, 4 + TIMED_STEPS):
        start = time.perf_counter()
        runner.step(k)
        runner.sync()
        times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        runner.save(Path(tmp), 4 + TIMED_STEPS)
        save_s = time.perf_counter() - start
        start = time.perf_counter()
        runner.load(Path(tmp))
        runner.sync()
        load_s = time.perf_counter() - start
    return {"workload": name, "startup_s": startup, "step_s": statistics.median(times),
            "save_s": save_s, "load_s": load_s, "device": str(runner.device),
            **({"plan": str(runner.plan)} if name == "gpt" else {})}


def reference(name: str, job_type: str, steps: int, directory: Path) -> dict[str, Any]:
    runner = Runner(name, job_type)
    for k in range(steps):
        runner.step(k)
    runner.sync()
    directory.mkdir(parents=True, exist_ok=True)
    runner.save(directory, steps)
    return {"workload": name, "steps": steps,
            **({"plan": str(runner.plan)} if name == "gpt" else {})}



def paths() -> list[dict[str, str]]:
    """Each CUDA path one GPU can run, run here: a world-size-1 nccl group under the
    reference workloads' DDP set-up, nccl's MAX all-reduce of float64 (the iterator's
    agreement primitive), the checkpoint's CUDA generators, bf16 autocast."""
    import torch.distributed as dist

    done = []
    device = common.device_for_rank()
    assert device.type == "cuda", device
    done.append({"path": "workers.workloads.common.device_for_rank", "result": str(device)})
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0,
                            world_size=1)
    assert common.init_distributed() and dist.get_backend() == "nccl"
    wl = __import__("workers.workloads.resnet", fromlist=["WORKLOAD"]).WORKLOAD
    state = common.setup(wl, 8, deterministic=True)
    assert isinstance(state.model, torch.nn.parallel.DistributedDataParallel)
    loss = common.train_step(wl, state, state.batches[0])
    done.append({"path": "common.setup + train_step: DDP(device_ids=[cuda]) over a "
                         "world-size-1 nccl group", "result": f"loss {loss:.4f}"})
    agreed = torch.tensor([3.0, 1.5], dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    done.append({"path": "nccl all_reduce MAX of float64 on CUDA (GavelIterator's agreement "
                         "primitive)", "result": str(agreed.cpu().tolist())})
    with tempfile.TemporaryDirectory() as tmp:
        torch.cuda.manual_seed(11)
        path = common.save_checkpoint(Path(tmp) / "c.pt", state.model, state.optimizer, 1)
        expected = torch.rand(4, device=device)
        torch.rand(7, device=device)
        common.load_checkpoint(path, state.model, state.optimizer)
        same = torch.equal(torch.rand(4, device=device), expected)
    assert same, "the checkpoint did not restore the CUDA generator"
    done.append({"path": "checkpoint save/load of CUDA tensors and CUDA generators",
                 "result": "generator restored"})
    common.leave_distributed()
    done.append({"path": "common.leave_distributed: nccl barrier + destroy",
                 "result": "left"})
    torch.use_deterministic_algorithms(False)
    for name in ("resnet", "lstm", "transformer", "recoder"):
        wl = __import__(f"workers.workloads.{name}", fromlist=["WORKLOAD"]).WORKLOAD
        state = common.setup(wl, 8, amp="bf16")
        loss = common.train_step(wl, state, state.batches[0])
        done.append({"path": f"{name}: --amp bf16 step (autocast on CUDA)",
                     "result": f"loss {loss:.4f}"})
    return done


def two_ranks(keep: Path | None = None) -> dict[str, Any]:
    """A data-parallel job's two ranks on the one GPU, tried: two processes with the
    torchrun-style environment a worker gives a job's ranks, both on device 0
    (``LOCAL_RANK`` 0), each joining through ``common.init_distributed`` (nccl with CUDA,
    gloo on a CPU) and making one DDP step of resnet and the iterator's MAX agreement
    (``rank``). NCCL has refused two ranks on one device ("Duplicate GPU detected") in the
    versions we know; whatever this one does is the result: ``ran`` (both exit 0),
    ``failed`` (a rank exited otherwise) or ``hung`` (killed after ``TWO_RANKS_TIMEOUT_S``),
    with each rank's exit, the result it printed and its last error line (``ranks``).
    ``keep``: a folder for the ranks' own logs (NCCL's warnings among them)."""
    path = "a data-parallel job's two ranks on the one GPU (common.init_distributed)"
    env = {**os.environ, "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "NCCL_DEBUG": "WARN"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        logs = [(folder / f"rank{r}.out", folder / f"rank{r}.err") for r in range(2)]
        ranks = []
        for r, (out, err) in enumerate(logs):
            with out.open("w") as stdout, err.open("w") as stderr:
                ranks.append(subprocess.Popen([sys.executable, __file__, "rank"],
                                              env={**env, "RANK": str(r)}, stdout=stdout,
                                              stderr=stderr))
        deadline = time.monotonic() + TWO_RANKS_TIMEOUT_S
        # until both end, one fails (its peer would wait for it) or the time is up
        while time.monotonic() < deadline:
            codes = [proc.poll() for proc in ranks]
            if all(code is not None for code in codes) or any(codes):
                break
            time.sleep(0.2)
        if any(codes) and None in codes:   # a failed rank's peer: a moment to end on its own
            time.sleep(1.0)
        codes = [proc.poll() for proc in ranks]      # as they ended, before the kill below
        for proc in ranks:
            proc.kill()
            proc.wait()
        outcomes = [_outcome(r, code, out.read_text(), err.read_text())
                    for r, (code, (out, err)) in enumerate(zip(codes, logs))]
    if codes == [0, 0]:
        verdict = "ran"
    elif any(code not in (0, None) for code in codes):
        verdict = "failed"
    else:
        verdict = f"hung (killed after {TWO_RANKS_TIMEOUT_S:.0f} s)"
    return {"path": path, "result": f"{verdict}: " + "; ".join(map(_said, outcomes)),
            "ranks": outcomes}


def _outcome(rank_id: int, code: int | None, out: str, err: str) -> dict[str, Any]:
    """One rank of ``two_ranks``: its exit (``None``: still running when stopped), the
    result it printed (or ``None``) and its last error line that is not one of torch's
    warnings (``[rankN]:[W...``)."""
    printed = [line for line in out.splitlines() if line.startswith("{")]   # not NCCL's
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if not line.startswith(f"[rank{rank_id}]:[W")]
    signal_name = signal.Signals(-code).name if code is not None and code < 0 else ""
    return {"rank": rank_id, "exit": code, "signal": signal_name,
            "result": json.loads(printed[-1]) if printed else None,
            "error": (errors or lines or [""])[-1][:300]}


def _said(rank_outcome: dict[str, Any]) -> str:
    """A rank's outcome in words."""
    r, code, ran = rank_outcome["rank"], rank_outcome["exit"], rank_outcome["result"]
    words = (f"rank {r} {ran['backend']} on {ran['device']}, loss {ran['loss']:.4f}, "
             f"agreed {ran['agreed']:g}" if ran else f"rank {r} printed no result")
    if code is None:
        return words + ", still running when stopped"
    if code != 0:
        words += f", then exit {code}" + (f" ({rank_outcome['signal']})"
                                          if rank_outcome["signal"] else "")
        if rank_outcome["error"]:
            words += f": {rank_outcome['error']}"
    return words


def rank() -> dict[str, Any]:
    """One rank of ``two_ranks``."""
    import torch.distributed as dist

    device = common.device_for_rank()
    assert common.init_distributed(), "no process group"
    wl = __import__("workers.workloads.resnet", fromlist=["WORKLOAD"]).WORKLOAD
    state = common.setup(wl, 8, deterministic=True)
    loss = common.train_step(wl, state, state.batches[0])
    agreed = torch.tensor([float(dist.get_rank())], dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    backend = dist.get_backend()
    common.leave_distributed()
    return {"rank": int(os.environ["RANK"]), "backend": backend, "device": str(device),
            "loss": loss, "agreed": agreed.item()}


def main(argv: list[str]) -> int:
    mode, *rest = argv
    if mode == "calibrate":
        print(json.dumps(calibrate(rest[0], rest[1])))
    elif mode == "reference":
        print(json.dumps(reference(rest[0], rest[1], int(rest[2]), Path(rest[3]))))
    elif mode == "paths":
        print(json.dumps(paths()))
    elif mode == "two-ranks":
        print(json.dumps(two_ranks(Path(rest[0]) if rest else None)))
    elif mode == "rank":
        print(json.dumps(rank()))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", common.CUBLAS_DETERMINISTIC)
    common.exit_process(main(sys.argv[1:]))
