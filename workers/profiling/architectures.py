"""The seven job families of thesis Table 5.2 (§5.7.1), each as its real network
(``models.py``) with its optimizer, a synthetic batch and one full training step, to time on
a device.

Sources (``traces/data/catalog.yaml``, ``meta.families`` and ``meta.sources``): He2016,
Zaremba2014, Vaswani2017, Zhu2017, the A3C recipe of ikostrikov/pytorch-a3c, and Recoder's
autoencoder on ML-20M. ``build(family, device, reduced=..., bf16=...)`` returns a
``Trainer``; ``describe`` says in one line what is built and where it differs from what
Gavel profiled. ``reduced=True`` shrinks widths, images, vocabularies and batches (÷16) so a
whole row runs in seconds on a CPU: the code path is the same, the rates are not comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .models import A3CPolicy, Translator, WordLM, generator, patch_discriminator, resnet

Batch = tuple[torch.Tensor, ...]
Amp = Callable[[], AbstractContextManager]
BATCH_DIVISOR = 16   # reduced mode: catalog batch // 16, at least 1


@dataclass(frozen=True)
class Trainer:
    """A family's model(s) and optimizer(s) on a device; ``step`` trains on one batch
    (forward, loss, backward, optimizer step) and returns the detached loss."""

    models: tuple[nn.Module, ...]
    optimizers: tuple[torch.optim.Optimizer, ...]
    make_batch: Callable[[torch.Generator, int], Batch]
    step: Callable[[Batch], torch.Tensor]


def batch_size(catalog_batch: int, reduced: bool) -> int:
    """The batch a job type runs with: the catalog's, or ÷16 (at least 1) when reduced."""
    return max(1, catalog_batch // BATCH_DIVISOR) if reduced else catalog_batch


def _supervised(model: nn.Module, optimizer: torch.optim.Optimizer, make_batch, loss_fn,
                amp: Amp, clip: float | None = None) -> Trainer:
    """One model, one loss: the step every family but CycleGAN takes."""
    def step(batch: Batch) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with amp():
            loss = loss_fn(*batch)
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return loss.detach()
    return Trainer((model,), (optimizer,), make_batch, step)


def _classifier(device: torch.device, amp: Amp, *, image: int, classes: int, lr: float,
                weight_decay: float, **shape: Any) -> Trainer:
    model = resnet(classes=classes, **shape)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9,
                                weight_decay=weight_decay)

    def make_batch(gen: torch.Generator, size: int) -> Batch:
        return (torch.randn(size, 3, image, image, generator=gen, device=device),
                torch.randint(0, classes, (size,), generator=gen, device=device))
    return _supervised(model, optimizer, make_batch,
                       lambda x, y: F.cross_entropy(model(x), y), amp)


def _a3c(device: torch.device, amp: Amp, *, rollout: int, frame: int, actions: int,
         gamma: float = 0.99, **shape: Any) -> Trainer:
    model = A3CPolicy(actions=actions, frame=frame, **shape)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def make_batch(gen: torch.Generator, envs: int) -> Batch:
        frames = torch.rand(rollout + 1, envs, 1, frame, frame, generator=gen, device=device)
        rewards = torch.randint(-1, 2, (rollout, envs), generator=gen, device=device).float()
        return frames, rewards, torch.rand(rollout, envs, generator=gen, device=device)

    def loss(frames: torch.Tensor, rewards: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        state, values, chosen, entropies = None, [], [], []
        for t in range(rollout):
            logits, value, state = model(frames[t], state)
            probs, logp = F.softmax(logits.float(), 1), F.log_softmax(logits.float(), 1)
            action = (probs.detach().cumsum(1) < noise[t, :, None]).sum(1).clamp_max(actions - 1)
            chosen.append(logp.gather(1, action[:, None]).squeeze(1))
            entropies.append(-(probs * logp).sum(1))
            values.append(value.float())
        ret = model(frames[rollout], state)[1].float().detach()   # bootstrap from V(s_T)
        returns = []
        for t in reversed(range(rollout)):
            ret = rewards[t] + gamma * ret
            returns.append(ret)
        advantage = torch.stack(returns[::-1]) - torch.stack(values)
        policy = -(torch.stack(chosen) * advantage.detach()).sum(0) - 0.01 * torch.stack(
            entropies).sum(0)
        value = 0.5 * advantage.pow(2).sum(0)
        return (policy + 0.5 * value).mean()   # value-loss coefficient 0.5
    return _supervised(model, optimizer, make_batch, loss, amp, clip=50.0)


def _language_model(device: torch.device, amp: Amp, *, bptt: int, **shape: Any) -> Trainer:
    model = WordLM(**shape)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)

    def make_batch(gen: torch.Generator, size: int) -> Batch:
        tokens = torch.randint(0, shape["vocab"], (bptt + 1, size), generator=gen, device=device)
        return tokens[:-1], tokens[1:]
    return _supervised(model, optimizer, make_batch,
                       lambda x, y: F.cross_entropy(model(x).flatten(0, 1), y.flatten()),
                       amp, clip=0.25)


def _transformer(device: torch.device, amp: Amp, **shape: Any) -> Trainer:
    model = Translator(**shape)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    tokens, src_vocab, tgt_vocab = shape["tokens"], shape["src_vocab"], shape["tgt_vocab"]

    def make_batch(gen: torch.Generator, size: int) -> Batch:
        src = torch.randint(1, src_vocab, (size, tokens), generator=gen, device=device)
        tgt = torch.randint(1, tgt_vocab, (size, tokens + 1), generator=gen, device=device)
        return src, tgt[:, :-1], tgt[:, 1:]

    def loss(src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten(),
                               label_smoothing=0.1)
    return _supervised(model, optimizer, make_batch, loss, amp)


def _cyclegan(device: torch.device, amp: Amp, *, image: int, ngf: int, ndf: int,
              blocks: int, cycle: float = 10.0, identity: float = 0.5) -> Trainer:
    g_ab, g_ba = generator(ngf, blocks), generator(ngf, blocks)
    d_b, d_a = patch_discriminator(ndf), patch_discriminator(ndf)
    adam = partial(torch.optim.Adam, lr=2e-4, betas=(0.5, 0.999))
    opt_g = adam([*g_ab.parameters(), *g_ba.parameters()])
    opt_d = adam([*d_a.parameters(), *d_b.parameters()])

    def gan(d: nn.Module, x: torch.Tensor, real: bool) -> torch.Tensor:   # LSGAN
        out = d(x).float()
        return F.mse_loss(out, torch.full_like(out, float(real)))

    def make_batch(gen: torch.Generator, size: int) -> Batch:
        return tuple(torch.rand(size, 3, image, image, generator=gen, device=device) * 2 - 1
                     for _ in range(2))

    def l1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.l1_loss(x.float(), y)

    def step(batch: Batch) -> torch.Tensor:
        a, b = batch   # generator update: adversarial (6 G passes, 2 D) + cycle + identity
        for d in (d_a, d_b):
            d.requires_grad_(False)
        opt_g.zero_grad(set_to_none=True)
        with amp():
            fake_b, fake_a = g_ab(a), g_ba(b)
            loss_g = (gan(d_b, fake_b, True) + gan(d_a, fake_a, True)
                      + cycle * (l1(g_ba(fake_b), a) + l1(g_ab(fake_a), b))
                      + identity * cycle * (l1(g_ab(b), b) + l1(g_ba(a), a)))
        loss_g.backward()
        opt_g.step()
        for d in (d_a, d_b):   # then the discriminators on real and (detached) fake images
            d.requires_grad_(True)
        opt_d.zero_grad(set_to_none=True)
        with amp():
            loss_d = 0.5 * (gan(d_b, b, True) + gan(d_b, fake_b.detach(), False)
                            + gan(d_a, a, True) + gan(d_a, fake_a.detach(), False))
        loss_d.backward()
        opt_d.step()
        return (loss_g + loss_d).detach()
    return Trainer((g_ab, g_ba, d_a, d_b), (opt_g, opt_d), make_batch, step)


def _recoder(device: torch.device, amp: Amp, *, items: int, hidden: int,
             density: float) -> Trainer:
    model = nn.Sequential(nn.Linear(items, hidden), nn.Tanh(), nn.Linear(hidden, items))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def make_batch(gen: torch.Generator, size: int) -> Batch:
        seen = torch.rand(size, items, generator=gen, device=device) < density
        stars = torch.randint(1, 6, (size, items), generator=gen, device=device)
        return ((stars * seen).float(),)

    def loss(ratings: torch.Tensor) -> torch.Tensor:   # MSE over the observed ratings only
        seen = (ratings > 0).float()
        return ((model(ratings).float() - ratings) ** 2 * seen).sum() / seen.sum().clamp_min(1)
    return _supervised(model, optimizer, make_batch, loss, amp)


# ----------------------------------------------------------------------------- the families

@dataclass(frozen=True)
class Family:
    """How to build one family, at full size and reduced, and what to say about it."""

    build: Callable[..., Trainer]
    full: Mapping[str, Any]
    reduced: Mapping[str, Any]
    describe: str   # formatted with the sizes built


_R50 = dict(blocks=[3, 4, 6, 3], bottleneck=True, imagenet_stem=True, lr=0.1, weight_decay=1e-4)
_R18 = dict(blocks=[2, 2, 2, 2], bottleneck=False, imagenet_stem=False, lr=0.1,
            weight_decay=5e-4)
_TF = dict(heads=8, dropout=0.1, tokens=13)
FAMILIES: Mapping[str, Family] = MappingProxyType({
    "ResNet-50": Family(
        _classifier, dict(_R50, width=64, image=224, classes=1000),
        dict(_R50, width=8, image=64, classes=100),
        "ResNet-50 (He2016; bottlenecks [3,4,6,3], width {width}, {image}x{image} input, "
        "{classes} classes), SGD momentum 0.9; synthetic images, no data loading or "
        "augmentation"),
    "ResNet-18": Family(
        _classifier, dict(_R18, width=64, image=32, classes=10),
        dict(_R18, width=8, image=16, classes=10),
        "CIFAR ResNet-18 (3x3 stem, no max-pool, basic blocks [2,2,2,2], width {width}, "
        "{image}x{image} input, {classes} classes), SGD momentum 0.9; synthetic images, no "
        "data loading"),
    "A3C": Family(
        _a3c, dict(filters=32, hidden=256, actions=6, frame=42, rollout=20),
        dict(filters=8, hidden=32, actions=6, frame=42, rollout=5),
        "A3C Pong policy (4 convs x {filters} ELU, LSTMCell({hidden}), actor {actions} + "
        "critic), shared Adam; one step = a {rollout}-step rollout of the batch's environments (4) and "
        "one backward; synthetic frames and rewards: no Atari emulator, no asynchronous workers"),
    "LSTM": Family(
        _language_model, dict(vocab=33278, hidden=650, layers=2, dropout=0.5, bptt=35),
        dict(vocab=1000, hidden=64, layers=2, dropout=0.5, bptt=10),
        "Zaremba2014 medium LM (embedding {vocab} x {hidden}, {layers}-layer LSTM {hidden}, "
        "BPTT {bptt}, dropout {dropout}, untied decoder), SGD with gradient clipping 0.25; "
        "synthetic tokens, hidden state not carried between batches"),
    "Transformer": Family(
        _transformer, dict(_TF, src_vocab=8000, tgt_vocab=6000, d_model=512, layers=6,
                           d_ff=2048),
        dict(_TF, src_vocab=500, tgt_vocab=400, d_model=32, layers=2, d_ff=64),
        "Vaswani2017 base (d_model {d_model}, {heads} heads, {layers}+{layers} layers, d_ff "
        "{d_ff}, dropout {dropout}), Adam; vocabularies {src_vocab}/{tgt_vocab} and "
        "{tokens}-token sentences are estimates of Multi30k's; synthetic tokens, no padding"),
    "CycleGAN": Family(
        _cyclegan, dict(image=256, ngf=64, ndf=64, blocks=9),
        dict(image=32, ngf=8, ndf=8, blocks=9),
        "CycleGAN (Zhu2017; two ResNet-{blocks}-block generators ngf {ngf}, two 70x70 "
        "PatchGANs ndf {ndf}, instance norm, {image}x{image}), Adam, LSGAN + cycle + identity "
        "losses; synthetic images, no image pool"),
    "Recoder": Family(
        _recoder, dict(items=26744, hidden=200, density=0.005),
        dict(items=1000, hidden=16, density=0.02),
        "Recoder autoencoder {items} -> {hidden} -> {items} (hidden size an estimate), Adam, "
        "masked MSE; synthetic dense ratings at density {density}, not ML-20M's sparse rows"),
})


def _sizes(family: str, reduced: bool) -> Mapping[str, Any]:
    try:
        spec = FAMILIES[family]
    except KeyError:
        raise KeyError(f"no architecture for family {family!r}; known: "
                       f"{', '.join(FAMILIES)}") from None
    return spec.reduced if reduced else spec.full


def build(family: str, device: torch.device, *, reduced: bool = False,
          bf16: bool = False) -> Trainer:
    """``family``'s model(s) and optimizer(s), created directly on ``device`` (``meta``
    builds without memory); bf16 autocasts forward and loss, parameters stay fp32."""
    sizes = _sizes(family, reduced)
    amp = partial(torch.autocast, device.type, dtype=torch.bfloat16, enabled=bf16)
    with torch.device(device):
        trainer = FAMILIES[family].build(device, amp, **sizes)
    for model in trainer.models:
        model.train()
    return trainer


def describe(family: str, reduced: bool = False) -> str:
    """One line: what ``build`` makes for ``family`` and where it differs from Gavel's run."""
    text = FAMILIES[family].describe.format(**_sizes(family, reduced))
    return f"{text}; REDUCED sizes, batch /{BATCH_DIVISOR}" if reduced else text
