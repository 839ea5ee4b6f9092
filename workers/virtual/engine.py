"""Virtual-node execution of one data-parallel training step (VirtualFlow §3.2, §5.2).

A process runs its virtual nodes one after another. Node j's loss (a mean over its samples)
is scaled by the node's share of the global batch, so the gradients that accumulate in the
process's gradient buffer are the share-weighted sum; one all-reduce (a sum) over all
processes then gives the gradient of the global batch mean under any split, also an uneven
one (the paper's 6:2 example). The optimizer and the LR schedule step once per global batch.

Across processes the gradient buffer is one flat tensor: every parameter's ``.grad`` is a
view into it, so accumulation writes there directly and the all-reduce needs no copy (the
only overhead over a plain step is the batch-norm running statistics and the loss, a few
numbers, which ride along in the same tensor). A process alone has nothing to all-reduce:
its gradients accumulate in ordinary ``.grad`` tensors, the first node's backward writing
fresh ones, exactly as plain gradient accumulation does (no buffer to zero), and only the
statistics and the loss use the small flat tensor. Data comes
from ``VirtualSampler``, randomness from ``node_stream``, and batch norm follows
``RunningStats``: none depends on the mapping.

With one virtual node on one process (V = 1) that bookkeeping is arithmetic with weight 1
and nothing to all-reduce, so the step skips it and lets backward write fresh gradient
tensors, as a plain step does; the result is bit-identical to the general path (the flat
buffer is then never allocated). BENCHMARKS.md, "Virtual nodes", has the measured cost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .batchnorm import RunningStats
from .data import StepPosition, VirtualSampler
from .rng import node_stream

log = logging.getLogger(__name__)

def backend_for(device: torch.device) -> str:
    """The collective backend of a job's process group: nccl on CUDA, gloo on CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


Fetch = Callable[[torch.Tensor], Any]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
BatchLoss = Callable[[nn.Module, Any], torch.Tensor]


class VirtualNodeTrainer:
    """Trains ``model`` on this process's virtual ``nodes`` of a job's global batch.

    ``fetch(indices)`` returns the (inputs, targets) of those dataset indices on the
    device; ``loss_fn(outputs, targets)`` returns the mean loss of a batch. Alternatively
    ``batch_loss(model, batch)`` computes the mean loss of whatever ``fetch`` returns (a
    workload's own batch tuple); ``loss_fn`` is then unused. ``group`` is the process group of
    the job's processes (``None``: the default group if one exists, else this process
    alone). All processes must hold identical model, optimizer and schedule states.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: LossFn | None, fetch: Fetch, sampler: VirtualSampler,
                 nodes: Sequence[int], *, batch_loss: BatchLoss | None = None,
                 scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
                 group: dist.ProcessGroup | None = None,
                 device: torch.device | None = None, global_step: int = 0) -> None:
        bad = [n for n in nodes if not 0 <= n < sampler.layout.nodes]
        if bad or len(set(nodes)) != len(nodes):
            raise ValueError(f"nodes {list(nodes)} are not distinct nodes of a layout of "
                             f"{sampler.layout.nodes}")
        if batch_loss is None and loss_fn is None:
            raise ValueError("a trainer needs loss_fn or batch_loss")
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self._loss = batch_loss or (lambda module, batch: loss_fn(module(batch[0]), batch[1]))
        self.loss_fn, self.fetch, self.sampler = loss_fn, fetch, sampler
        self.nodes = tuple(nodes)
        self.group = group
        self.device = device or torch.device("cpu")
        self.global_step = global_step
        self._stats = RunningStats(model)
        self._params = [p for p in model.parameters() if p.requires_grad]
        dtypes = {p.dtype for p in self._params}
        if len(dtypes) != 1:
            raise ValueError(f"virtual nodes need one parameter dtype, got {sorted(map(str, dtypes))}")
        self._flat: torch.Tensor | None = None   # made by the first multi-node step

    def _make_buffer(self, grads: bool) -> torch.Tensor:
        """Gradients (when ``grads``: they are all-reduced), batch-norm buffers and loss."""
        dtypes = {p.dtype for p in self._params}
        total = sum(p.numel() for p in self._params) if grads else 0
        flat = torch.zeros(total + self._stats.numel + 1, dtype=dtypes.pop(), device=self.device)
        self._views, offset = [], 0
        for p in self._params if grads else ():
            self._views.append(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        self._stats.bind(flat[total:-1])
        self._loss_slot = flat[-1:]
        return flat

    def _attach_grads(self) -> None:
        """Point every ``.grad`` at its slice of the flat buffer (again, if a caller's
        ``zero_grad()`` set it to None); alone, clear them for the first backward."""
        if not self._views:
            for p in self._params:
                p.grad = None
            return
        for p, view in zip(self._params, self._views):
            if p.grad is not view:
                p.grad = view

    @property
    def _world(self) -> int:
        if not dist.is_available() or not dist.is_initialized():
            return 1
        return dist.get_world_size(self.group)

    def step(self) -> float:
        """One global step: this process's nodes, one all-reduce, one optimizer step.
        Returns the global batch's mean loss (the same on every process)."""
        sampler, step = self.sampler, self.global_step
        position = sampler.position(step)
        if not self.model.training:
            self.model.train()
        if sampler.layout.nodes == 1 and self._world == 1:
            return self._single_node_step(position)
        samples = sampler.step_samples(step)
        indices = sampler.step_indices(step)
        if self._flat is None:
            self._flat = self._make_buffer(grads=self._world > 1)
        loss_slot = self._loss_slot
        self._attach_grads()
        self._flat.zero_()
        self._stats.snapshot()
        first = True
        for node in self.nodes:
            count = len(indices[node])
            if count == 0:
                continue
            weight = count / samples
            batch = self.fetch(indices[node])
            if not first:  # the first node starts from the snapshot's buffers already
                self._stats.restore()
            first = False
            with node_stream(sampler.seed, position.epoch, position.step_in_epoch, node,
                             self.device):
                loss = self._loss(self.model, batch)
                (loss * weight).backward()
            loss_slot.add_(loss.detach(), alpha=weight)
            self._stats.accumulate(weight)
        if self._world > 1:
            dist.all_reduce(self._flat, group=self.group)
        self._stats.finish()
        self._optimizer_step()
        return float(loss_slot)

    def _single_node_step(self, position: StepPosition) -> float:
        """V = 1 on one process: the general step with weight 1, no other node whose batch
        norm to isolate and nothing to all-reduce, i.e. a plain step (same bits)."""
        for p in self._params:
            p.grad = None
        batch = self.fetch(self.sampler.node_indices(self.global_step, 0))
        with node_stream(self.sampler.seed, position.epoch, position.step_in_epoch, 0,
                         self.device):
            loss = self._loss(self.model, batch)
            loss.backward()
        self._optimizer_step()
        return float(loss.detach())

    def _optimizer_step(self) -> None:
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.global_step += 1
