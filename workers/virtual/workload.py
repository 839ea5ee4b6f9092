"""A reference workload run with virtual nodes: one rank of a job split across GPU types
(VirtualFlow §3.2, §4.1, §5.1.2; docs/runtime.md, "Mixed-type jobs (virtual nodes)").

``workers.workloads.common.train`` comes here when ``GAVEL_VN_LAYOUT`` is set. The rank runs
its virtual nodes one after another through ``engine.VirtualNodeTrainer`` (one all-reduce
per step over the job's process group, no DDP wrapper), reading a synthetic data set that
every rank builds alike from the seed, through ``data.VirtualSampler``; GavelIterator counts
the steps and its checkpoints are ``checkpoint.py``'s, so a later run of the job may have
another number and mix of ranks and continues the same trajectory.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch

from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import EMULATE_STEPS_PER_S_VAR

from .checkpoint import load_checkpoint, save_checkpoint
from .data import VirtualSampler
from .engine import VirtualNodeTrainer
from gavelsched.virtual.envspec import RankLayout

log = logging.getLogger(__name__)

DATASET_STEPS = 8   # the synthetic data set holds this many global batches


def synthetic_dataset(workload: Any, samples: int, seed: int, dtype: torch.dtype,
                      device: torch.device) -> tuple[torch.Tensor, ...]:
    """``samples`` samples of the workload's synthetic data, the same on every rank (drawn
    from the seed alone), floating tensors in ``dtype``."""
    generator = torch.Generator().manual_seed(seed + 1)
    return tuple((t.to(dtype) if t.is_floating_point() else t).to(device)
                 for t in workload.batch(generator, samples))


def virtual_trainer(workload: Any, part: RankLayout, *, seed: int = 0,
                    dtype: torch.dtype = torch.float32,
                    device: torch.device | None = None) -> VirtualNodeTrainer:
    """This rank's trainer: the model from the seed (identical on every rank), SGD with the
    workload's rate and momentum 0.9 (as the plain path), the rank's virtual nodes."""
    device = device or torch.device("cpu")
    layout = part.job.layout
    torch.manual_seed(seed)
    model = workload.build().to(device=device, dtype=dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=workload.lr, momentum=0.9)
    data = synthetic_dataset(workload, layout.batch * DATASET_STEPS, seed, dtype, device)
    sampler = VirtualSampler(layout.batch * DATASET_STEPS, layout, seed)
    return VirtualNodeTrainer(model, optimizer, None, lambda idx: tuple(t[idx] for t in data),
                              sampler, part.nodes, batch_loss=workload.loss, device=device)


def virtual_run(workload: Any, part: RankLayout, *, checkpoint_file: str, seed: int,
                dtype: torch.dtype, device: torch.device, checkpoint_dir: str | None = None,
                iterator_options: dict[str, Any] | None = None
                ) -> tuple[VirtualNodeTrainer, GavelIterator]:
    """This rank's trainer and the GavelIterator that drives it: one item per global step,
    checkpoints through ``checkpoint.py`` (loaded at once when the job has one)."""
    trainer = virtual_trainer(workload, part, seed=seed, dtype=dtype, device=device)
    log.info("%s rank %d of %d: virtual nodes %s (%d of %d samples, V=%d), type %s, %s, "
             "paced at %s steps/s", workload.name, part.rank, part.job.mapping.processes,
             list(part.nodes), part.job.samples_of(part.rank), part.job.layout.batch,
             part.job.layout.nodes, part.worker_type or "-", str(dtype).replace("torch.", ""),
             os.environ.get(EMULATE_STEPS_PER_S_VAR, "-"))

    def save(directory: str) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        save_checkpoint(trainer, Path(directory) / checkpoint_file)

    iterator = GavelIterator(range(trainer.sampler.steps_per_epoch), checkpoint_dir,
                             lambda d: load_checkpoint(trainer, Path(d) / checkpoint_file),
                             save, **(iterator_options or {}))
    if iterator.steps != trainer.global_step:
        raise RuntimeError(f"checkpoint in {iterator.checkpoint_dir} is at step "
                           f"{trainer.global_step}, its progress file at {iterator.steps}")
    return trainer, iterator
