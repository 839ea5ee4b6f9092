"""Reference workload: a small ResNet on synthetic 32x32 images (ResNet-18/50, CycleGAN and
A3C job types; thesis Table 5.2). Run: ``python -m workers.workloads.resnet``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import Workload, exit_process, main

CLASSES = 10
IMAGE = 32


class _Block(nn.Module):
    """A residual basic block: two 3x3 convolutions with batch norm and a skip path."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.skip(x))


class _GlobalAvgPool(nn.Module):
    """The mean over each feature map, as ``AdaptiveAvgPool2d(1)`` computes it; its CUDA
    backward is a plain reduction's, which has a deterministic kernel (AdaptiveAvgPool2d's
    has none)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3), keepdim=True)


def build() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        _Block(8, 8, 1), _Block(8, 16, 2), _Block(16, 32, 2),
        _GlobalAvgPool(), nn.Flatten(), nn.Linear(32, CLASSES))


def batch(gen: torch.Generator, size: int) -> tuple[torch.Tensor, ...]:
    images = torch.randn(size, 3, IMAGE, IMAGE, generator=gen)
    labels = torch.randint(0, CLASSES, (size,), generator=gen)
    return images, labels


def loss(model: nn.Module, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
    images, labels = data
    return F.cross_entropy(model(images), labels)


WORKLOAD = Workload("resnet", build=build, batch=batch,
                    loss=loss, lr=0.05)

if __name__ == "__main__":
    exit_process(main(WORKLOAD))
