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
    """The running buffers of a model's batch-norm layers, as one flat vector.

    ``bind(flat)`` ties them to their slice of the step's flat buffer once; a step is then
    ``snapshot`` (one copy), per node ``restore`` and ``accumulate`` (one fused call each,
    ``torch._foreach_*``) and ``finish``. Buffers of another dtype than the flat one go
    through a per-buffer loop with a conversion."""

    def __init__(self, model: nn.Module) -> None:
        layers = [m for m in model.modules()
                  if isinstance(m, nn.modules.batchnorm._NormBase) and m.track_running_stats]
        self._values = [buf for m in layers for buf in (m.running_mean, m.running_var)
                        if buf is not None]
        self._counters = [m.num_batches_tracked for m in layers
                          if m.num_batches_tracked is not None]
        self.numel = sum(v.numel() for v in self._values)
        self._views: list[torch.Tensor] = []
        self._saved: list[torch.Tensor] = []
        self._fused = False

    def bind(self, flat: torch.Tensor) -> None:
        """Use ``flat`` (``numel`` entries) as the buffers' accumulator from now on."""
        self._views, offset = [], 0
        for buf in self._values:
            self._views.append(flat[offset:offset + buf.numel()].view(buf.shape))
            offset += buf.numel()
        self._saved = [t.detach().clone() for t in self._values + self._counters]
        self._fused = all(v.dtype == flat.dtype and v.device == flat.device
                          for v in self._values)

    def snapshot(self) -> None:
        """Keep the buffers as they were before the step (one copy, not per node)."""
        if self._saved:
            torch._foreach_copy_(self._saved, self._values + self._counters)

    def restore(self) -> None:
        if self._saved:
            torch._foreach_copy_(self._values + self._counters, self._saved)

    def accumulate(self, weight: float) -> None:
        """Add ``weight`` times the node's updated buffers to the bound slice."""
        if not self._values:
            return
        if self._fused:
            torch._foreach_add_(self._views, self._values, alpha=weight)
            return
        for view, buf in zip(self._views, self._values):
            view.add_(buf.to(view.dtype), alpha=weight)

    def finish(self) -> None:
        """Install the share-weighted average; count one step per global batch."""
        for buf, view in zip(self._values, self._views):
            buf.copy_(view)
        for buf, saved in zip(self._counters, self._saved[len(self._values):]):
            buf.copy_(saved + 1)
