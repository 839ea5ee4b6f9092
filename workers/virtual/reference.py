"""The tiny reference job of ``gavelsched vn check`` (VirtualFlow §6.2, reproducibility):
an MLP with batch norm and dropout, trained with Adam and a cosine LR schedule with warm
restarts on a synthetic classification set. Every process builds the same initial state
from the seed, so any mapping can be compared with one process running all nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from .data import VirtualSampler
from .engine import VirtualNodeTrainer
from gavelsched.virtual.layout import VirtualLayout

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class ReferenceJob:
    """The check's job: ``nodes`` virtual nodes of ``node_batch`` samples each, or of
    ``node_sizes`` (e.g. a heterogeneous plan's layout, ``SplitPlan.assignment``)."""

    nodes: int = 8
    node_batch: int = 6
    dataset_size: int = 120  # not a multiple of the batch: each epoch ends with a short step
    features: int = 12
    hidden: int = 24
    classes: int = 4
    dropout: float = 0.25
    batchnorm: bool = True
    lr: float = 0.02
    seed: int = 0
    dtype: str = "float64"
    node_sizes: tuple[int, ...] = ()
    device: str = "cpu"      # "cuda": every process trains on this machine's GPU 0

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device {self.device!r}: expected cpu or cuda")
        if self.node_sizes and len(self.node_sizes) != self.nodes:
            raise ValueError(f"node sizes {self.node_sizes} are not {self.nodes} nodes")

    @property
    def layout(self) -> VirtualLayout:
        return VirtualLayout(self.node_sizes or (self.node_batch,) * self.nodes)

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda", 0) if self.device == "cuda" else torch.device("cpu")


def reference_model(job: ReferenceJob) -> nn.Module:
    """The MLP, initialised from the job's seed (the process's generators are untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(job.seed)
        norm: list[nn.Module] = [nn.BatchNorm1d(job.hidden)] if job.batchnorm else []
        model = nn.Sequential(
            nn.Linear(job.features, job.hidden, bias=not job.batchnorm), *norm, nn.ReLU(),
            nn.Dropout(job.dropout), nn.Linear(job.hidden, job.classes))
    return model.to(device=job.torch_device, dtype=DTYPES[job.dtype])


def reference_data(job: ReferenceJob) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels of a synthetic, learnable classification set."""
    generator = torch.Generator().manual_seed(job.seed + 1)
    inputs = torch.randn(job.dataset_size, job.features, generator=generator,
                         dtype=DTYPES[job.dtype])
    mix = torch.randn(job.features, job.classes, generator=generator, dtype=DTYPES[job.dtype])
    return inputs.to(job.torch_device), (inputs @ mix).argmax(dim=1).to(job.torch_device)


def reference_trainer(job: ReferenceJob, nodes: Sequence[int],
                      group: dist.ProcessGroup | None = None) -> VirtualNodeTrainer:
    """A trainer of the reference job running ``nodes`` (all of them: one process alone)."""
    model = reference_model(job)
    inputs, labels = reference_data(job)
    optimizer = torch.optim.Adam(model.parameters(), lr=job.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=4)
    sampler = VirtualSampler(job.dataset_size, job.layout, job.seed)
    return VirtualNodeTrainer(
        model, optimizer, nn.functional.cross_entropy,
        lambda idx: (inputs[idx], labels[idx]), sampler, nodes,
        scheduler=scheduler, group=group, device=job.torch_device)


def state_vector(trainer: VirtualNodeTrainer) -> torch.Tensor:
    """Every floating-point entry of the model's state (parameters and running stats)."""
    return torch.cat([v.detach().reshape(-1).to("cpu", torch.float64)
                      for v in trainer.model.state_dict().values() if v.is_floating_point()])
