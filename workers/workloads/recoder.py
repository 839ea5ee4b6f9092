"""Reference workload: a recommendation autoencoder (Recoder) reconstructing synthetic
sparse user-item vectors (the Recommendation job types; thesis Table 5.2).
Run: ``python -m workers.workloads.recoder``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import Workload, exit_process, main

ITEMS = 1000
DENSITY = 0.02


def build() -> nn.Module:
    return nn.Sequential(nn.Linear(ITEMS, 128), nn.SELU(), nn.Linear(128, 64), nn.SELU(),
                         nn.Linear(64, 128), nn.SELU(), nn.Linear(128, ITEMS))


def batch(gen: torch.Generator, size: int) -> tuple[torch.Tensor, ...]:
    seen = (torch.rand(size, ITEMS, generator=gen) < DENSITY).float()
    ratings = torch.randint(1, 6, (size, ITEMS), generator=gen).float() * seen
    return (ratings,)


def loss(model: nn.Module, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
    (ratings,) = data
    mask = ratings > 0   # only observed ratings count (masked MSE, as in Recoder)
    return F.mse_loss(model(ratings)[mask], ratings[mask])


WORKLOAD = Workload("recoder", build=build, batch=batch,
                    loss=loss, lr=0.01)

if __name__ == "__main__":
    exit_process(main(WORKLOAD))
