"""Batch-norm policy under virtual nodes (VirtualFlow §4.1, stateful kernels).

**Statistics:** each virtual node normalises with the mean and variance of its own samples,
as VirtualFlow does (a node is what a GPU used to be), so the forward pass of node j does not
depend on which other nodes share its process.

**Running statistics:** every node of a step starts from the same running buffers (those
left by the previous step) and the step ends with the average of what each node would have
produced, weighted by the node's share of the global batch. The running-average update is
linear in the batch statistics, so this equals one update with the share-weighted mean of
the node statistics. The average travels in the step's single all-reduce, so every process
ends the step with identical buffers whatever the mapping; ``num_batches_tracked`` counts
global steps.
"""

from __future__ import annotations

import torch
from torch import nn


class RunningStats:
    """The running buffers of a model's batch-norm layers, as one flat vector."""

    def __init__(self, model: nn.Module) -> None:
        layers = [m for m in model.modules()
                  if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats]
        self._values = [buf for m in layers for buf in (m.running_mean, m.running_var)
                        if buf is not None]
        self._counters = [m.num_batches_tracked for m in layers
                          if m.num_batches_tracked is not None]
        self.numel = sum(v.numel() for v in self._values)

    def snapshot(self) -> list[torch.Tensor]:
        """The buffers as they were before the step (one small copy, not per node)."""
        return [v.detach().clone() for v in self._values + self._counters]

    def restore(self, snapshot: list[torch.Tensor]) -> None:
        for buf, saved in zip(self._values + self._counters, snapshot):
            buf.copy_(saved)

    def accumulate(self, into: torch.Tensor, weight: float) -> None:
        """Add ``weight`` times the node's updated buffers to the flat ``into``."""
        offset = 0
        for buf in self._values:
            into[offset:offset + buf.numel()].add_(buf.reshape(-1).to(into.dtype), alpha=weight)
            offset += buf.numel()

    def finish(self, combined: torch.Tensor, snapshot: list[torch.Tensor]) -> None:
        """Install the share-weighted average; count one step per global batch."""
        offset = 0
        for buf in self._values:
            buf.copy_(combined[offset:offset + buf.numel()].view_as(buf))
            offset += buf.numel()
        for buf, saved in zip(self._counters, snapshot[len(self._values):]):
            buf.copy_(saved + 1)
