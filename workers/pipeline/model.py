"""A small GPT-style reference model cut into layers, for the executor and its checks
(thesis §3.3: a model of repeated blocks; §4.2: embedding and output layers with tied weights).

Layer 0 embeds tokens, layers 1…L are pre-norm transformer blocks (causal attention + MLP), layer L+1 projects back to the
vocabulary with the embedding's weight (a tied weight). Parameters carry *global* names
``"<layer>.<name>"``; a tied parameter keeps the name of its first occurrence.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    """Shape of the reference model and of its data."""

    vocab: int = 16
    hidden: int = 8
    blocks: int = 4
    seq: int = 3
    seed: int = 0
    dtype: str = "float64"

    @property
    def layers(self) -> int:
        return self.blocks + 2

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


class Embed(nn.Module):
    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, hidden) * 0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(tokens, self.weight)


class Block(nn.Module):
    """Pre-norm transformer block: causal single-head self-attention, then an MLP."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 2 * hidden)
        self.fc2 = nn.Linear(2 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        seq = x.shape[-2]
        future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        attn = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        x = x + self.proj(attn)
        return x + self.fc2(torch.tanh(self.fc1(self.norm2(x))))


class Head(nn.Module):
    def __init__(self, embed: Embed) -> None:
        super().__init__()
        self.weight = embed.weight  # tied with the embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.t()


def build_layers(spec: ModelSpec) -> nn.ModuleList:
    """The full model as a list of layers, initialised from ``spec.seed`` (same on every rank)."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(spec.seed)
    try:
        embed = Embed(spec.vocab, spec.hidden)
        layers = [embed] + [Block(spec.hidden) for _ in range(spec.blocks)] + [Head(embed)]
        model = nn.ModuleList(layers).to(spec.torch_dtype)
    finally:
        torch.random.set_rng_state(gen_state)
    return model


def global_names(layers: nn.ModuleList) -> dict[int, dict[str, str]]:
    """layer index -> {local parameter name -> global name}; tied parameters share a name."""
    first: dict[int, str] = {}
    out: dict[int, dict[str, str]] = {}
    for index, layer in enumerate(layers):
        out[index] = {}
        for name, param in layer.named_parameters(remove_duplicate=False):
            first.setdefault(id(param), f"{index}.{name}")
            out[index][name] = first[id(param)]
    return out


def tied_names(layers: nn.ModuleList) -> dict[str, tuple[int, ...]]:
    """Global name -> the layers that use it, for parameters used by more than one layer."""
    users: dict[str, list[int]] = {}
    for index, names in global_names(layers).items():
        for gname in set(names.values()):
            users.setdefault(gname, []).append(index)
    return {g: tuple(ls) for g, ls in users.items() if len(ls) > 1}


def make_batch(spec: ModelSpec, step: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and next-token targets for mini-batch ``step`` (deterministic)."""
    gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + step)
    tokens = torch.randint(0, spec.vocab, (batch, spec.seq), generator=gen)
    targets = torch.randint(0, spec.vocab, (batch, spec.seq), generator=gen)
    return tokens, targets


def loss_sum(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy; callers divide by the global token count."""
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       targets.reshape(-1), reduction="sum")


def layer_bounds(layers: int, n_chunks: int, cuts: list[int] | None = None) -> list[tuple[int, int]]:
    """[start, end) layer range of each chunk: ``cuts`` (the first layer of chunks 1…) if
    given, else as even as possible."""
    if cuts is None:
        if n_chunks > layers:
            raise ValueError(f"{n_chunks} chunks but the model has only {layers} layers")
        base, extra = divmod(layers, n_chunks)
        cuts, at = [], 0
        for c in range(n_chunks - 1):
            at += base + (1 if c < extra else 0)
            cuts.append(at)
    edges = [0, *cuts, layers]
    if len(edges) != n_chunks + 1 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise ValueError(f"layer cuts {cuts} do not split {layers} layers into {n_chunks} "
                         "non-empty chunks")
    return list(itertools.pairwise(edges))
