"""Which samples each virtual node reads, independent of the node-to-process mapping
(VirtualFlow §5.2, data sharding: exactly-once semantics under any split).

Epoch e visits the dataset in a permutation drawn from (seed, e) alone. Step s of the epoch
takes the next ``batch`` positions of that permutation (the epoch's last step takes what is
left), and virtual node j takes its consecutive share of them. So the samples of node j at
step s depend only on (seed, epoch, step, j) and the layout: never on which process runs
the node or on how many processes there are. Every sample is read exactly once per epoch,
also when the job is resized between steps, since a resumed job continues at its saved
(epoch, step).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from gavelsched.virtual.layout import VirtualLayout

_EPOCH_SALT = 0x5EED_DA7A


@dataclass(frozen=True)
class StepPosition:
    """Where a global step falls: its epoch and its step within that epoch."""

    epoch: int
    step_in_epoch: int


@dataclass(frozen=True)
class VirtualSampler:
    """Per-node sample indices for a dataset of ``dataset_size`` samples."""

    dataset_size: int
    layout: VirtualLayout
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dataset_size < self.layout.batch:
            raise ValueError(f"dataset of {self.dataset_size} samples is smaller than the "
                             f"global batch {self.layout.batch}")

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.dataset_size / self.layout.batch)

    def position(self, global_step: int) -> StepPosition:
        """The (epoch, step in epoch) of the ``global_step``-th step (counting from 0)."""
        epoch, step = divmod(global_step, self.steps_per_epoch)
        return StepPosition(epoch, step)

    def step_samples(self, global_step: int) -> int:
        """Samples in the global batch of this step (smaller only at an epoch's end)."""
        step = self.position(global_step).step_in_epoch
        return min(self.layout.batch, self.dataset_size - step * self.layout.batch)

    def node_indices(self, global_step: int, node: int) -> torch.Tensor:
        """Dataset indices read by virtual node ``node`` at ``global_step``."""
        return self.step_indices(global_step)[node]

    def step_indices(self, global_step: int) -> tuple[torch.Tensor, ...]:
        """Every node's dataset indices at ``global_step`` (views of the epoch's order)."""
        pos = self.position(global_step)
        counts = self.layout.node_samples(self.step_samples(global_step))
        order = _permutation(self.seed, pos.epoch, self.dataset_size)
        start = pos.step_in_epoch * self.layout.batch
        return tuple(order[begin:begin + count]
                     for begin, count in zip(itertools.accumulate(counts, initial=start), counts))


@lru_cache(maxsize=4)
def _permutation(seed: int, epoch: int, size: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed((seed * 1_000_003 + epoch) ^ _EPOCH_SALT)
    return torch.randperm(size, generator=generator)
