"""The networks of thesis Table 5.2's families (§5.7.1), written from their papers in
plain torch: ResNet-50 and the CIFAR ResNet-18 (He2016), the A3C Pong policy (Mnih et al.
2016, as in ikostrikov/pytorch-a3c), the medium LSTM LM (Zaremba2014), Transformer base
(Vaswani2017), and CycleGAN's generator and PatchGAN discriminator (Zhu2017). Recoder's
autoencoder is an ``nn.Sequential`` in ``architectures.py``. Sizes are arguments: the
catalog's full sizes and the reduced ones live in ``architectures.FAMILIES``."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


# ----------------------------------------------------------------------------- ResNets (He2016)

def _conv_bn(cin: int, cout: int, kernel: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False),
                         nn.BatchNorm2d(cout))


class _Residual(nn.Module):
    """A basic block (two 3x3) or a bottleneck (1x1, 3x3 with the stride, 1x1 to 4x width),
    plus a projection shortcut where the shape changes."""

    def __init__(self, cin: int, width: int, stride: int, bottleneck: bool) -> None:
        super().__init__()
        cout = width * 4 if bottleneck else width
        convs = ([(cin, width, 1, 1), (width, width, 3, stride), (width, cout, 1, 1)]
                 if bottleneck else [(cin, width, 3, stride), (width, cout, 3, 1)])
        layers: list[nn.Module] = []
        for args in convs:
            layers += [_conv_bn(*args), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*layers[:-1])
        self.skip = nn.Identity() if stride == 1 and cin == cout else _conv_bn(cin, cout, 1, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.skip(x))


def resnet(blocks: list[int], *, width: int, classes: int, bottleneck: bool,
           imagenet_stem: bool) -> nn.Sequential:
    """ImageNet stem (7x7/2 + 3x3/2 max-pool) or CIFAR stem (3x3/1), four stages doubling
    the width and halving the size, global average pool, linear classifier."""
    stem = ([_conv_bn(3, width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
            if imagenet_stem else [_conv_bn(3, width, 3, 1), nn.ReLU(inplace=True)])
    layers, cin = [], width
    for stage, count in enumerate(blocks):
        for index in range(count):
            stride = 2 if stage > 0 and index == 0 else 1
            layers.append(_Residual(cin, width << stage, stride, bottleneck))
            cin = (width << stage) * (4 if bottleneck else 1)
    return nn.Sequential(*stem, *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(cin, classes))


# ----------------------------------------------------------------------------- A3C (Mnih 2016)

class A3CPolicy(nn.Module):
    """Four 3x3/2 convolutions with ELU, an LSTM cell, an actor and a critic head."""

    def __init__(self, filters: int, hidden: int, actions: int, frame: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin in (1, filters, filters, filters):
            layers += [nn.Conv2d(cin, filters, 3, 2, 1), nn.ELU()]
            frame = (frame + 1) // 2
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.cell = nn.LSTMCell(filters * frame * frame, hidden)
        self.actor, self.critic = nn.Linear(hidden, actions), nn.Linear(hidden, 1)

    def forward(self, frames: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(actor logits, critic value, next LSTM state) of one frame per environment."""
        h, c = self.cell(self.features(frames), state)
        return self.actor(h), self.critic(h).squeeze(1), (h, c)


# ----------------------------------------------------------------------------- LM (Zaremba2014)

class WordLM(nn.Module):
    """Embedding, stacked LSTM with dropout, untied decoder onto the vocabulary."""

    def __init__(self, vocab: int, hidden: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.embed, self.drop = nn.Embedding(vocab, hidden), nn.Dropout(dropout)
        self.lstm = nn.LSTM(hidden, hidden, layers, dropout=dropout)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.drop(self.embed(tokens)))
        return self.decoder(self.drop(out))


# ----------------------------------------------------------------------------- Transformer

class Translator(nn.Module):
    """Vaswani2017: scaled embeddings plus sinusoidal positions, post-norm encoder-decoder,
    pre-softmax projection shared with the target embedding (§3.4)."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int, heads: int, layers: int,
                 d_ff: int, dropout: float, tokens: int) -> None:
        super().__init__()
        self.src, self.tgt = nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model)
        for table in (self.src, self.tgt):   # N(0, 1/d_model): unit-scale tied logits
            nn.init.normal_(table.weight, std=d_model ** -0.5)
        self.core = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout,
                                   batch_first=True)
        self.drop, self.scale = nn.Dropout(dropout), math.sqrt(d_model)
        where = torch.arange(tokens)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
        self.register_buffer("position", torch.cat([where.sin(), where.cos()], 1)[None],
                             persistent=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(tokens),
                             persistent=False)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        source = self.drop(self.src(src) * self.scale + self.position)
        target = self.drop(self.tgt(tgt) * self.scale + self.position)
        hidden = self.core(source, target, tgt_mask=self.causal, tgt_is_causal=True)
        return F.linear(hidden, self.tgt.weight)


# ----------------------------------------------------------------------------- CycleGAN (Zhu2017)

class _ResnetBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3),
                                  nn.InstanceNorm2d(ch), nn.ReLU(True), nn.ReflectionPad2d(1),
                                  nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def generator(ngf: int, blocks: int) -> nn.Sequential:
    """c7s1-ngf, two stride-2 downsamplings, residual blocks, two upsamplings, c7s1-3, tanh."""
    layers: list[nn.Module] = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7),
                               nn.InstanceNorm2d(ngf), nn.ReLU(True)]
    for ch in (ngf, ngf * 2):
        layers += [nn.Conv2d(ch, ch * 2, 3, 2, 1), nn.InstanceNorm2d(ch * 2), nn.ReLU(True)]
    layers += [_ResnetBlock(ngf * 4) for _ in range(blocks)]
    for ch in (ngf * 4, ngf * 2):
        layers += [nn.ConvTranspose2d(ch, ch // 2, 3, 2, 1, output_padding=1),
                   nn.InstanceNorm2d(ch // 2), nn.ReLU(True)]
    return nn.Sequential(*layers, nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh())


def patch_discriminator(ndf: int) -> nn.Sequential:
    """The 70x70 PatchGAN: C64-C128-C256-C512 (4x4 convolutions), then one output map."""
    layers: list[nn.Module] = [nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)]
    for cin, cout, stride in ((ndf, ndf * 2, 2), (ndf * 2, ndf * 4, 2), (ndf * 4, ndf * 8, 1)):
        layers += [nn.Conv2d(cin, cout, 4, stride, 1), nn.InstanceNorm2d(cout),
                   nn.LeakyReLU(0.2, True)]
    return nn.Sequential(*layers, nn.Conv2d(ndf * 8, 1, 4, 1, 1))
