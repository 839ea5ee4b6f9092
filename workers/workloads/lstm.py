"""Reference workload: an LSTM language model on synthetic token sequences (the LM job
types; thesis Table 5.2). Run: ``python -m workers.workloads.lstm``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import Workload, exit_process, main

VOCAB = 500
SEQ = 20


class LanguageModel(nn.Module):
    """Embedding -> 2-layer LSTM -> projection onto the vocabulary."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(tokens))
        return self.out(hidden)


def batch(gen: torch.Generator, size: int) -> tuple[torch.Tensor, ...]:
    tokens = torch.randint(0, VOCAB, (size, SEQ + 1), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def loss(model: nn.Module, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
    inputs, targets = data
    return F.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))


WORKLOAD = Workload("lstm", build=LanguageModel,
                    batch=batch, loss=loss, lr=0.5)

if __name__ == "__main__":
    exit_process(main(WORKLOAD))
