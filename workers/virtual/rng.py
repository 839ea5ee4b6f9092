"""One random stream per virtual node (VirtualFlow §3: a node, not a device, is the unit of
computation), so dropout masks do not depend on the node-to-process mapping.

The stream of node j at a step is seeded from (seed, epoch, step, j) alone: a counter-based
scheme, like Philox keys. Nothing about it is stored, so it carries over any checkpoint and
resize through the step counter; two processes that run the same node at the same step draw
the same numbers. The process's own generators are restored after each node.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

_MASK = (1 << 64) - 1


def _mix(value: int) -> int:
    """SplitMix64's finaliser: a well-spread 64-bit function of ``value``."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


def stream_seed(seed: int, epoch: int, step: int, node: int) -> int:
    """The seed of virtual node ``node``'s stream at (``epoch``, ``step``), below 2**63."""
    value = _mix(seed & _MASK)
    for part in (epoch, step, node):
        value = _mix(value ^ (part & _MASK))
    return value >> 1


@contextmanager
def node_stream(seed: int, epoch: int, step: int, node: int,
                device: torch.device | None = None) -> Iterator[None]:
    """Run the body with the default generators (CPU, and ``device``'s if CUDA) on the
    node's stream; their previous states come back afterwards. The generators are seeded
    directly: ``torch.manual_seed`` would also queue lazy seeds for every accelerator
    backend, recording a stack trace each time (about 0.5 ms per node)."""
    generators = [torch.default_generator]
    if device is not None and device.type == "cuda":
        generators.append(torch.cuda.default_generators[device.index or 0])
    saved = [g.get_state() for g in generators]
    value = stream_seed(seed, epoch, step, node)
    try:
        for generator in generators:
            generator.manual_seed(value)
        yield
    finally:
        for generator, state in zip(generators, saved):
            generator.set_state(state)
