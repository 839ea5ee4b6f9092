"""What every reference workload shares (thesis §5.6, §5.7.1): process-group setup, device,
checkpoint I/O, synthetic batches and the training loop around GavelIterator.

A workload module only defines a ``Workload``: its model, one synthetic batch, its loss and
how the catalog's batch size shrinks to keep a CPU step in the milliseconds.

With ``GAVEL_VN_LAYOUT`` in the environment (a job split across GPU types, VirtualFlow
§5.1.2) a rank runs its virtual nodes instead of a DDP step (``workers.virtual.workload``).
``GAVEL_WORKLOAD_DTYPE`` (float32, the default, or float64) sets the model's and the data's
floating-point type.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import CHECKPOINT_DIR_VAR, JOB_TYPE_VAR, SCHEDULER_VAR, WORKLOAD_DTYPE_VAR
from traces.workloads import CPU_BATCH, cpu_batch

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoint.pt"
SYNTHETIC_BATCHES = 8   # distinct batches in one synthetic epoch
DTYPE_VAR = WORKLOAD_DTYPE_VAR   # gavelsched.jobenv owns the name
DTYPES = {"float32": torch.float32, "float64": torch.float64}


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
    WORLD_SIZE > 1. Returns whether a group was made."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return dist.is_initialized()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, init_method="env://")
    return True


def leave_distributed(wait_for_peers: bool = True) -> None:
    """Leave the job's process group, after every rank has reached this point unless
    ``wait_for_peers`` is false (a failing rank must not wait). A rank that tore its gloo
    connections down while a peer was still finishing could abort that peer ("terminate
    called without an active exception", exit -6)."""
    if wait_for_peers:
        dist.barrier()
    dist.destroy_process_group()


# ---- checkpoints ---------------------------------------------------------------------------

def save_checkpoint(path: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer,
                    step: int) -> Path:
    """torch.save model + optimizer + step to a temp file, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"model": _unwrap(model).state_dict(), "optimizer": optimizer.state_dict(),
                "step": int(step)}, tmp)
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


def _one_thread() -> None:
    if "OMP_NUM_THREADS" not in os.environ:
        # Tiny models gain nothing from intra-op threads, and several jobs (emulated GPUs)
        # share one CPU machine: spinning OpenMP threads would slow them all down.
        torch.set_num_threads(1)


def setup(workload: Workload, batch_size: int | None = None, seed: int = 0,
          dtype: torch.dtype = torch.float32) -> Setup:
    """Join the process group, build the model on this rank's device, make the batches."""
    _one_thread()
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
    return Setup(model, optimizer, batches, distributed)


def train_step(workload: Workload, state: Setup, batch: tuple[torch.Tensor, ...]) -> float:
    """One optimizer step; returns the loss (raises on a non-finite one)."""
    state.optimizer.zero_grad(set_to_none=True)
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
          dtype: torch.dtype | None = None) -> TrainResult:
    """Train ``workload`` under GavelIterator until its lease ends (under a scheduler) or for
    ``steps`` steps (standalone). Returns the absolute steps and this run's losses.
    ``dtype`` defaults to ``GAVEL_WORKLOAD_DTYPE``; with ``GAVEL_VN_LAYOUT`` set the rank
    runs its virtual nodes of the layout (``batch_size`` is then the layout's)."""
    from gavelsched.virtual.envspec import layout_from_env

    dtype = dtype or dtype_from_env()
    part = layout_from_env(os.environ, int(os.environ.get("RANK", "0")),
                           int(os.environ.get("WORLD_SIZE", "1")))
    if part is not None:
        return _train_virtual(workload, part, steps, seed, checkpoint_dir, iterator_options,
                              dtype)
    state = setup(workload, batch_size, seed, dtype)
    model, optimizer = state.model, state.optimizer
    ckpt_dir = checkpoint_dir or os.environ.get(CHECKPOINT_DIR_VAR) or None
    iterator = GavelIterator(
        state.batches, ckpt_dir,
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
        layout_from_env(os.environ, int(os.environ.get("RANK", "0")),
                        int(os.environ.get("WORLD_SIZE", "1")))
    except (LayoutEnvError, ValueError) as err:
        parser.error(str(err))
    result = train(workload, steps=args.steps, batch_size=size, seed=args.seed, dtype=dtype)
    log.info("%s: at step %d, %d steps this run, last loss %s%s", workload.name, result.steps,
             len(result.losses), f"{result.losses[-1]:.4f}" if result.losses else "-",
             " (finished)" if result.finished else "")
    return 0
