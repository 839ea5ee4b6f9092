"""Checkpoints that let a job resume on a different number and mix of processes
(VirtualFlow §4.1, resource elasticity: the virtual nodes stay, only their mapping moves).

A checkpoint holds the layout (so a resume with another V is refused), the step counter,
the data seed, and the model, optimizer and LR-schedule states. Every process of a step
ends it with identical states, so the job's first process writes it for all. The virtual
nodes' random streams are counter-based (``rng.py``) and resume through the step counter;
the process's CPU generator state is saved as well, for any draw a user makes outside the
nodes. Files are written to a temporary name and renamed, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from .engine import VirtualNodeTrainer

FORMAT = "gavelsched-virtual-nodes/1"


class CheckpointMismatch(ValueError):
    """The checkpoint belongs to another job layout (its V, node sizes, data or seed)."""


def save_checkpoint(trainer: VirtualNodeTrainer, path: str | os.PathLike) -> Path:
    """Write ``trainer``'s full training state to ``path`` (atomically)."""
    path = Path(path)
    sampler = trainer.sampler
    state = {
        "format": FORMAT,
        "layout": list(sampler.layout.sizes),
        "dataset_size": sampler.dataset_size,
        "seed": sampler.seed,
        "global_step": trainer.global_step,
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict() if trainer.scheduler else None,
        "cpu_rng": torch.get_rng_state(),
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(trainer: VirtualNodeTrainer, path: str | os.PathLike) -> int:
    """Restore ``trainer`` from ``path``; returns the step it resumes at."""
    state = torch.load(Path(path), map_location=trainer.device, weights_only=False)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointMismatch(f"{path}: not a virtual-node checkpoint ({FORMAT})")
    sampler = trainer.sampler
    expected = {"layout": list(sampler.layout.sizes), "dataset_size": sampler.dataset_size,
                "seed": sampler.seed}
    for key, value in expected.items():
        if state[key] != value:
            raise CheckpointMismatch(f"{path}: checkpoint {key} {state[key]} differs from "
                                     f"this job's {value}; a job resumes with the same "
                                     f"virtual nodes")
    trainer.model.load_state_dict(state["model"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    if trainer.scheduler is not None:
        if state["scheduler"] is None:
            raise CheckpointMismatch(f"{path}: checkpoint has no LR schedule state")
        trainer.scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["cpu_rng"].cpu())
    trainer.global_step = int(state["global_step"])
    return trainer.global_step
