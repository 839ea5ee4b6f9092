"""What every reference workload shares (thesis §5.6, §5.7.1): process-group setup, device,
checkpoint I/O, synthetic batches and the training loop around GavelIterator.

A workload module only defines a ``Workload``: its model, one synthetic batch, its loss and
how the catalog's batch size shrinks to keep a CPU step in the milliseconds.

With ``GAVEL_VN_LAYOUT`` in the environment (a job split across GPU types, VirtualFlow
§5.1.2) a rank runs its virtual nodes instead of a DDP step (``workers.virtual.workload``).
``GAVEL_WORKLOAD_DTYPE`` (float32, the default, or float64) sets the model's and the data's
floating-point type; ``GAVEL_WORKLOAD_AMP=bf16`` (``--amp bf16``) runs forward and loss
under bfloat16 autocast; ``GAVEL_WORKLOAD_DETERMINISTIC=1`` (``--deterministic``) asks for
deterministic kernels.

Preemption is exact (thesis §5.6: a preempted job resumes where it stopped): step k trains
on synthetic batch k mod n whatever runs it, and a checkpoint holds the model, the
optimizer, the step and the CPU and CUDA random generators. With deterministic kernels a
job preempted any number of times ends bit for bit where an uninterrupted run does
(``benchmarks/gpu_check.py`` checks it on CUDA).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from torch import nn

from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import (CHECKPOINT_DIR_VAR, EXIT_RUN_LOST, JOB_TYPE_VAR, SCHEDULER_VAR,
                               WORKLOAD_AMP_VAR, WORKLOAD_DETERMINISTIC_VAR, WORKLOAD_DTYPE_VAR,
                               fail_job)
from traces.workloads import CPU_BATCH, cpu_batch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.pt"
SYNTHETIC_BATCHES = 8   # distinct batches in one synthetic epoch
DTYPE_VAR = WORKLOAD_DTYPE_VAR   # gavelsched.jobenv owns the name
DTYPES = {"float32": torch.float32, "float64": torch.float64}
AMP_MODES = ("fp32", "bf16")   # fp32: no autocast; bf16: bfloat16 autocast of forward + loss
CUBLAS_DETERMINISTIC = ":4096:8"   # CUBLAS_WORKSPACE_CONFIG for deterministic cuBLAS


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be read; the message names the file."""


@dataclass(frozen=True)
class Workload:
    """One reference workload: a tiny model of its family on synthetic data. Its CPU batch
    rule is ``traces.workloads.CPU_BATCH[name]``."""

    name: str
    build: Callable[[], nn.Module]
    batch: Callable[[torch.Generator, int], tuple[torch.Tensor, ...]]
    loss: Callable[[nn.Module, tuple[torch.Tensor, ...]], torch.Tensor]
    lr: float = 0.01

    @property
    def default_batch(self) -> int:
        return CPU_BATCH[self.name][0]


@dataclass(frozen=True)
class TrainResult:
    """What one run of a workload did: absolute steps at exit, and this run's losses."""

    steps: int
    losses: tuple[float, ...]
    finished: bool
    done: bool


def dtype_from_env(env: Mapping[str, str] | None = None) -> torch.dtype:
    """The floating-point type named by ``GAVEL_WORKLOAD_DTYPE`` (default float32)."""
    name = (os.environ if env is None else env).get(DTYPE_VAR, "") or "float32"
    if name not in DTYPES:
        raise ValueError(f"{DTYPE_VAR}={name!r}: expected one of {', '.join(DTYPES)}")
    return DTYPES[name]


def amp_from_env(env: Mapping[str, str] | None = None) -> str:
    """The mixed precision named by ``GAVEL_WORKLOAD_AMP`` (default fp32: none)."""
    name = (os.environ if env is None else env).get(WORKLOAD_AMP_VAR, "") or "fp32"
    if name not in AMP_MODES:
        raise ValueError(f"{WORKLOAD_AMP_VAR}={name!r}: expected one of {', '.join(AMP_MODES)}")
    return name


def deterministic_from_env(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``GAVEL_WORKLOAD_DETERMINISTIC`` asks for deterministic kernels (1/0)."""
    value = (os.environ if env is None else env).get(WORKLOAD_DETERMINISTIC_VAR, "") or "0"
    if value not in ("0", "1"):
        raise ValueError(f"{WORKLOAD_DETERMINISTIC_VAR}={value!r}: expected 0 or 1")
    return value == "1"


def make_deterministic() -> None:
    """Deterministic kernels from here on: the same inputs give the same bits, so a
    preempted job retraces an uninterrupted one exactly. cuBLAS needs its workspace
    setting before its first handle, so this runs before any CUDA work; an op with no
    deterministic kernel then raises instead of drifting silently."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False


def autocast(amp: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bfloat16 autocast on ``device`` for ``amp == "bf16"``; nothing for fp32."""
    if amp == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def check_precision(dtype: torch.dtype, amp: str, *, virtual: bool = False) -> None:
    """ValueError (one line) for a mixed precision that cannot apply: bf16 autocast over a
    float64 model (autocast leaves float64 alone), or under virtual nodes."""
    if amp == "fp32":
        return
    if dtype == torch.float64:
        raise ValueError("--amp bf16 needs float32 parameters, not float64")
    if virtual:
        raise ValueError("--amp bf16 does not apply to virtual nodes (their trajectory must "
                         "not depend on the mapping): run them in fp32")


def batch_size_for(workload: Workload, job_type: str | None) -> int:
    """The CPU batch size for ``job_type`` (from the catalog's batch size), or the default."""
    return cpu_batch(workload.name, job_type)


# ---- distributed setup ----------------------------------------------------------------------

def device_for_rank() -> torch.device:
    """cuda:LOCAL_RANK when CUDA is present, else the CPU."""
    if torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device("cpu")


def init_distributed() -> bool:
    """Join the job's process group (torchrun-style env; nccl with CUDA, else gloo) when
    WORLD_SIZE > 1. Returns whether a group was made. A rendezvous the network refuses (the
    port the scheduler chose taken meanwhile by another process) loses this run, not the
    job: it exits ``EXIT_RUN_LOST`` and the scheduler launches it again."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return dist.is_initialized()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    try:
        dist.init_process_group(backend=backend, init_method="env://")
    except dist.DistNetworkError as err:
        fail_job(f"its rendezvous failed: {err}", EXIT_RUN_LOST)
    return True


def leave_distributed(wait_for_peers: bool = True) -> None:
    """Leave the job's process group, after every rank has reached this point unless
    ``wait_for_peers`` is false (a failing rank must not wait). A rank that tore its gloo
    connections down while a peer was still finishing could abort that peer ("terminate
    called without an active exception", exit -6): a rank returns from a gloo barrier
    before its peers have read all of its messages, so the ranks then also meet on the
    group's store, which no gloo connection carries (``_leave_together``)."""
    if wait_for_peers:
        dist.barrier()
        _leave_together()
    dist.destroy_process_group()


LEAVE_TIMEOUT_S = 30.0


def _leave_together() -> None:
    """Every rank counts itself out on the group's TCP store, and waits until all have:
    then no rank is inside a gloo operation. Rank 0 serves the store, so it leaves last,
    once the others have stopped reading it. A peer that never arrives (it died) is
    waited for ``LEAVE_TIMEOUT_S`` at most: leaving then is no worse than before."""
    import time

    from torch.distributed import distributed_c10d

    try:
        store = distributed_c10d._get_default_store()
    except (AttributeError, RuntimeError, ValueError):
        return
    rank, world = dist.get_rank(), dist.get_world_size()

    def until(key: str, count: int) -> None:
        deadline = time.monotonic() + LEAVE_TIMEOUT_S
        while int(store.add(key, 0)) < count:
            if time.monotonic() > deadline:
                log.warning("rank %d: leaving the group without %d peer%s", rank,
                            count - int(store.add(key, 0)), "s" if world > 2 else "")
                return
            time.sleep(0.005)

    store.add("gavel/out", 1)
    until("gavel/out", world)
    if rank == 0:
        until("gavel/gone", world - 1)
    else:
        store.add("gavel/gone", 1)


def exit_process(code: int) -> NoReturn:
    """End a job process with ``code`` once its work is done: flush its output, then exit
    without the interpreter's clean-up (``os._exit``). A rank of a gloo group aborted once
    in CI at its end ("terminate called without an active exception", exit -6), after the
    ranks had left the group together; the likeliest place is that clean-up of the group's
    C++ threads, which this skips. A run that finished must not report a crash."""
    sys.stdout.flush()
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


# ---- checkpoints ---------------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    """The CPU generator's state and, once CUDA is in use, every CUDA device's."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
    return {"cpu": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore ``rng_state()``'s generators (CUDA ones when this process has as many)."""
    torch.set_rng_state(state["cpu"])
    cuda = list(state.get("cuda") or [])
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def save_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
                    step: int) -> Path:
    """torch.save model + optimizer + step + random generators to a temp file, then
    rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"model": _unwrap(model).state_dict(), "optimizer": optimizer.state_dict(),
                "step": int(step), "rng": rng_state()}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | os.PathLike, model: nn.Module,
                    optimizer: torch.optim.Optimizer) -> int:
    """Load what ``save_checkpoint`` wrote; returns the saved step. Raises CheckpointError
    (one line naming the file) when it is missing, truncated or not a checkpoint."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if "format" in state:
            raise CheckpointError(f"checkpoint file {path} was written with virtual nodes "
                                  f"({state['format']}): run the job with its GAVEL_VN_LAYOUT")
        _unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if "rng" in state:   # (checkpoints written before the generators were kept lack it)
            set_rng_state(state["rng"])
        return int(state["step"])
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file {path} is missing") from None
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - unpickling errors come in many types
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"checkpoint file {path} is corrupt: {first}") from None


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# ---- the training loop ---------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """A rank's model (DDP-wrapped in a process group), optimizer and synthetic epoch."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    batches: list[tuple[torch.Tensor, ...]]
    distributed: bool
    device: torch.device = torch.device("cpu")
    amp: str = "fp32"


class StepOrder:
    """The synthetic batches in step order: step k trains on batch k mod n. ``step()``
    is the step the next batch is for, so an epoch that starts at a resumed step S starts
    at batch S mod n, where an uninterrupted run is at that step."""

    def __init__(self, batches: Sequence[tuple[torch.Tensor, ...]],
                 step: Callable[[], int]) -> None:
        self.batches, self.step = list(batches), step

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches[self.step() % len(self.batches):])


def _one_thread() -> None:
    if "OMP_NUM_THREADS" not in os.environ:
        # Tiny models gain nothing from intra-op threads, and several jobs (emulated GPUs)
        # share one CPU machine: spinning OpenMP threads would slow them all down.
        torch.set_num_threads(1)


def setup(workload: Workload, batch_size: int | None = None, seed: int = 0,
          dtype: torch.dtype = torch.float32, amp: str = "fp32",
          deterministic: bool = False) -> Setup:
    """Join the process group, build the model on this rank's device, make the batches."""
    _one_thread()
    if deterministic:
        make_deterministic()
    distributed = init_distributed()
    device = device_for_rank()
    torch.manual_seed(seed)
    model: nn.Module = workload.build().to(device=device, dtype=dtype)
    if distributed:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=workload.lr, momentum=0.9)
    rank = dist.get_rank() if distributed else 0
    gen = torch.Generator().manual_seed(seed + 1000 * rank)
    size = batch_size or workload.default_batch
    batches = [tuple((t.to(dtype) if t.is_floating_point() else t).to(device)
                     for t in workload.batch(gen, size)) for _ in range(SYNTHETIC_BATCHES)]
    return Setup(model, optimizer, batches, distributed, device, amp)


def train_step(workload: Workload, state: Setup, batch: tuple[torch.Tensor, ...]) -> float:
    """One optimizer step; returns the loss (raises on a non-finite one)."""
    state.optimizer.zero_grad(set_to_none=True)
    with autocast(state.amp, state.device):
        loss = workload.loss(state.model, batch)
    loss.backward()
    state.optimizer.step()
    return _finite(workload, float(loss.detach()))


def _finite(workload: Workload, value: float) -> float:
    if not math.isfinite(value):
        raise FloatingPointError(f"{workload.name}: loss is {value}")
    return value


def train(workload: Workload, *, steps: int | None = None, batch_size: int | None = None,
          seed: int = 0, checkpoint_dir: str | None = None,
          iterator_options: dict[str, Any] | None = None,
          dtype: torch.dtype | None = None, amp: str | None = None,
          deterministic: bool | None = None) -> TrainResult:
    """Train ``workload`` under GavelIterator until its lease ends (under a scheduler) or for
    ``steps`` steps (standalone). Returns the absolute steps and this run's losses.
    ``dtype``, ``amp`` and ``deterministic`` default to ``GAVEL_WORKLOAD_DTYPE``,
    ``GAVEL_WORKLOAD_AMP`` and ``GAVEL_WORKLOAD_DETERMINISTIC``; with ``GAVEL_VN_LAYOUT``
    set the rank runs its virtual nodes of the layout (``batch_size`` is then the
    layout's)."""
    from gavelsched.virtual.envspec import layout_from_env

    dtype = dtype or dtype_from_env()
    amp = amp or amp_from_env()
    deterministic = deterministic_from_env() if deterministic is None else deterministic
    part = layout_from_env(os.environ, int(os.environ.get("RANK", "0")),
                           int(os.environ.get("WORLD_SIZE", "1")))
    check_precision(dtype, amp, virtual=part is not None)
    if part is not None:
        if deterministic:
            make_deterministic()
        return _train_virtual(workload, part, steps, seed, checkpoint_dir, iterator_options,
                              dtype)
    state = setup(workload, batch_size, seed, dtype, amp, deterministic)
    model, optimizer = state.model, state.optimizer
    ckpt_dir = checkpoint_dir or os.environ.get(CHECKPOINT_DIR_VAR) or None
    iterator = GavelIterator(
        StepOrder(state.batches, lambda: iterator.steps), ckpt_dir,
        lambda d: load_checkpoint(Path(d) / CHECKPOINT_FILE, model, optimizer),
        lambda d: save_checkpoint(Path(d) / CHECKPOINT_FILE, model, optimizer,
                                  iterator.steps),
        **(iterator_options or {}))
    losses = _drive(iterator, lambda batch: train_step(workload, state, batch), steps)
    if state.distributed:
        leave_distributed()
    return _result(iterator, losses)


def _drive(iterator: GavelIterator, step: Callable[[Any], float],
           steps: int | None) -> list[float]:
    """Run ``step(batch)`` under the iterator until its lease ends, or for ``steps`` steps
    (default one synthetic epoch) without a scheduler; this run's losses."""
    standalone = not os.environ.get(SCHEDULER_VAR)
    if standalone and steps is None:
        steps = SYNTHETIC_BATCHES
    losses: list[float] = []
    while not iterator.done and not (standalone and len(losses) >= steps):
        for batch in iterator:
            losses.append(step(batch))
            if standalone and len(losses) >= steps:
                break
    iterator.close()
    return losses


def _result(iterator: GavelIterator, losses: list[float]) -> TrainResult:
    standalone = not os.environ.get(SCHEDULER_VAR)
    absolute = len(losses) if standalone else iterator.steps
    return TrainResult(absolute, tuple(losses), iterator.finished, iterator.done)


def _train_virtual(workload: Workload, part: Any, steps: int | None, seed: int,
                   checkpoint_dir: str | None, iterator_options: dict[str, Any] | None,
                   dtype: torch.dtype) -> TrainResult:
    from workers.virtual.workload import virtual_run

    _one_thread()
    distributed = init_distributed()
    trainer, iterator = virtual_run(
        workload, part, checkpoint_file=CHECKPOINT_FILE, seed=seed, dtype=dtype,
        device=device_for_rank(),
        checkpoint_dir=checkpoint_dir or os.environ.get(CHECKPOINT_DIR_VAR) or None,
        iterator_options=iterator_options)
    losses = _drive(iterator, lambda _: _finite(workload, trainer.step()), steps)
    if distributed:
        leave_distributed()
    return _result(iterator, losses)


def main(workload: Workload, argv: Sequence[str] | None = None) -> int:
    """``python -m workers.workloads.<name>``: train, log the outcome, exit 0."""
    parser = argparse.ArgumentParser(
        prog=f"python -m workers.workloads.{workload.name}",
        description=f"Reference workload '{workload.name}' (synthetic data). Under a "
                    "gavelsched worker it runs until its lease ends; alone, --steps steps.")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps to train without a scheduler (default: one epoch)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help=f"per-rank batch size (default: from --job-type or {JOB_TYPE_VAR})")
    parser.add_argument("--job-type", default=os.environ.get(JOB_TYPE_VAR),
                        help="catalog job type whose batch size to scale down")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help=f"floating-point type of model and data (default {DTYPE_VAR} "
                             "or float32)")
    parser.add_argument("--amp", choices=AMP_MODES, default=None,
                        help=f"mixed precision: bf16 runs forward and loss under bfloat16 "
                             f"autocast, parameters stay float32 (default {WORKLOAD_AMP_VAR} "
                             "or fp32)")
    parser.add_argument("--deterministic", action="store_true", default=None,
                        help="deterministic kernels (torch.use_deterministic_algorithms): a "
                             "preempted job then ends bit for bit where an uninterrupted run "
                             f"does (default {WORKLOAD_DETERMINISTIC_VAR})")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    if args.batch_size is not None and args.batch_size <= 0:
        parser.error(f"--batch-size must be positive, got {args.batch_size}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    size = args.batch_size or batch_size_for(workload, args.job_type)
    from gavelsched.virtual.envspec import LayoutEnvError, layout_from_env

    try:   # a bad environment is one line and exit code 2, before any work
        dtype = DTYPES[args.dtype] if args.dtype else dtype_from_env()
        amp = args.amp or amp_from_env()
        deterministic = args.deterministic or deterministic_from_env()
        part = layout_from_env(os.environ, int(os.environ.get("RANK", "0")),
                               int(os.environ.get("WORLD_SIZE", "1")))
        check_precision(dtype, amp, virtual=part is not None)
    except (LayoutEnvError, ValueError) as err:
        parser.error(str(err))
    result = train(workload, steps=args.steps, batch_size=size, seed=args.seed, dtype=dtype,
                   amp=amp, deterministic=deterministic)
    log.info("%s: at step %d, %d steps this run, last loss %s%s", workload.name, result.steps,
             len(result.losses), f"{result.losses[-1]:.4f}" if result.losses else "-",
             " (finished)" if result.finished else "")
    return 0
