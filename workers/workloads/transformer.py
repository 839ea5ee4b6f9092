"""Reference workload: a small Transformer encoder-decoder translating synthetic token
pairs (the Transformer job types; thesis Table 5.2).
Run: ``python -m workers.workloads.transformer``."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .common import Workload, exit_process, main

VOCAB = 300
SEQ = 12
WIDTH = 32


class Translator(nn.Module):
    """Source and target embeddings with learned positions, nn.Transformer, projection."""

    def __init__(self) -> None:
        super().__init__()
        self.src = nn.Embedding(VOCAB, WIDTH)
        self.tgt = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, WIDTH))
        self.core = nn.Transformer(d_model=WIDTH, nhead=4, num_encoder_layers=1,
                                   num_decoder_layers=1, dim_feedforward=64, dropout=0.0,
                                   batch_first=True)
        self.out = nn.Linear(WIDTH, VOCAB)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(SEQ),
                             persistent=False)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        hidden = self.core(self.src(src) + self.pos, self.tgt(tgt) + self.pos,
                           tgt_mask=self.causal)
        return self.out(hidden)


def batch(gen: torch.Generator, size: int) -> tuple[torch.Tensor, ...]:
    src = torch.randint(1, VOCAB, (size, SEQ), generator=gen)
    target = torch.flip(src, dims=[1])           # a learnable synthetic "translation"
    tgt_in = torch.cat([torch.zeros(size, 1, dtype=torch.long), target[:, :-1]], dim=1)
    return src, tgt_in, target


def loss(model: nn.Module, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
    src, tgt_in, target = data
    return F.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), target.reshape(-1))


WORKLOAD = Workload("transformer", build=Translator,
                    batch=batch, loss=loss, lr=0.05)

if __name__ == "__main__":
    exit_process(main(WORKLOAD))
