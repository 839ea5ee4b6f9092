"""The single-process reference: the same model trained on the full mini-batch, for the
executor's checks (thesis §3.2.1 for the delayed-SGD semantics of 2BW)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .model import ModelSpec, build_layers, global_names, loss_sum, make_batch


def full_batch_grad(spec: ModelSpec, weights: dict[str, torch.Tensor], step: int,
                    batch: int) -> dict[str, torch.Tensor]:
    """∇f(W) on mini-batch ``step`` (mean token loss), by global parameter name."""
    layers = build_layers(spec)
    names = global_names(layers)
    leaves = {g: w.detach().clone().requires_grad_(True) for g, w in weights.items()}
    tokens, targets = make_batch(spec, step, batch)
    x = tokens
    for i, layer in enumerate(layers):
        params = {local: leaves[g] for local, g in names[i].items()}
        x = torch.func.functional_call(layer, params, (x,))
    loss = loss_sum(x, targets) / (batch * spec.seq)
    loss.backward()
    return {g: t.grad for g, t in leaves.items()}


def initial_weights(spec: ModelSpec) -> dict[str, torch.Tensor]:
    """W(0) by global name."""
    layers = build_layers(spec)
    names = global_names(layers)
    params = {}
    for i, layer in enumerate(layers):
        own = dict(layer.named_parameters(remove_duplicate=False))
        for local, g in names[i].items():
            params.setdefault(g, own[local].detach().clone())
    return params


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread for a while: the reference model is tiny, and OpenMP threads
    on a busy machine cost more than they give."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_reference(spec: ModelSpec, steps: int, batch: int, lr: float, delay: int = 0,
                    start: dict[str, torch.Tensor] | None = None,
                    start_step: int = 0) -> dict[str, torch.Tensor]:
    """SGD for ``steps`` mini-batches: W(t+1) = W(t) − ν∇f(W(t−delay)), with W(−1) = W(0).

    ``delay=0`` is plain SGD (flush schedules); ``delay=1`` is 2BW's semantics.
    """
    history = [start if start is not None else initial_weights(spec)]
    with one_thread():
        for t in range(steps):
            grad = full_batch_grad(spec, history[max(t - delay, 0)], start_step + t, batch)
            history.append({g: history[-1][g] - lr * grad[g] for g in history[-1]})
    return history[-1]


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest |a − b| over all parameters; the names must match."""
    if set(a) != set(b):
        raise ValueError(f"parameter names differ: {sorted(set(a) ^ set(b))}")
    return max(float((a[g] - b[g]).abs().max()) for g in a)
