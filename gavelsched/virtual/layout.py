"""Virtual nodes and their mapping onto processes (VirtualFlow §3, §4.1, §5.1).

A job's global batch B is split into V *virtual nodes*; ``VirtualLayout`` fixes their sizes,
and with them the training semantics. A ``NodeMapping`` says which process runs which nodes;
changing the mapping (more or fewer processes, an uneven split across GPU types) leaves the
trajectory unchanged.

Mapping notation (``gavelsched vn check --mappings``), for a layout of V nodes:

- ``NxV``: N processes holding V nodes each (N * V must equal the layout's V), e.g. ``2x4``;
- ``a:b[:c...]``: one process per part, holding a, b, ... nodes (summing to V), e.g. ``6:2``.

Nodes are dealt out in order: the first process holds nodes 0..a-1, the next a..a+b-1, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NXV = re.compile(r"^(\d+)x(\d+)$")
_PARTS = re.compile(r"^\d+(?::\d+)+$")


class LayoutError(ValueError):
    """A malformed layout, mapping or mapping string (the message names the bad value)."""


def split_evenly(total: int, parts: int) -> tuple[int, ...]:
    """``total`` split into ``parts`` integers differing by at most one, larger ones first."""
    if parts <= 0:
        raise LayoutError(f"cannot split {total} into {parts} parts")
    base, extra = divmod(total, parts)
    return tuple(base + 1 if i < extra else base for i in range(parts))


def split_proportionally(total: int, weights: tuple[int, ...]) -> tuple[int, ...]:
    """``total`` split in proportion to ``weights`` (largest remainder, ties to lower index)."""
    whole = sum(weights)
    if whole <= 0:
        raise LayoutError(f"cannot split {total} by weights {weights}")
    shares = [total * w // whole for w in weights]
    left = total - sum(shares)
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[:left]:
        shares[i] += 1
    return tuple(shares)


@dataclass(frozen=True)
class VirtualLayout:
    """The sizes (samples per step) of a job's virtual nodes; their sum is the global batch."""

    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.sizes or any(int(s) != s or s <= 0 for s in self.sizes):
            raise LayoutError(f"virtual node sizes must be positive integers, got {self.sizes}")

    @classmethod
    def even(cls, batch: int, nodes: int) -> VirtualLayout:
        """``nodes`` virtual nodes of equal size (``batch`` must divide evenly)."""
        if nodes <= 0 or batch <= 0 or batch % nodes:
            raise LayoutError(f"global batch {batch} does not split into {nodes} equal "
                              f"virtual nodes")
        return cls((batch // nodes,) * nodes)

    @property
    def nodes(self) -> int:
        return len(self.sizes)

    @property
    def batch(self) -> int:
        return sum(self.sizes)

    def node_samples(self, samples: int) -> tuple[int, ...]:
        """Samples per node in a step of ``samples`` (a full batch, or an epoch's last one)."""
        if samples == self.batch:
            return self.sizes
        return split_proportionally(samples, self.sizes)


@dataclass(frozen=True)
class NodeMapping:
    """Which virtual nodes each process (rank) runs, in order; every node exactly once."""

    ranks: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        flat = [n for nodes in self.ranks for n in nodes]
        if not self.ranks or any(not nodes for nodes in self.ranks):
            raise LayoutError(f"every process needs at least one virtual node: {self.ranks}")
        if sorted(flat) != list(range(len(flat))):
            raise LayoutError(f"mapping must hold nodes 0..{len(flat) - 1} once each: "
                              f"{self.ranks}")

    @property
    def processes(self) -> int:
        return len(self.ranks)

    @property
    def nodes(self) -> int:
        return sum(len(nodes) for nodes in self.ranks)

    @classmethod
    def from_counts(cls, counts: tuple[int, ...]) -> NodeMapping:
        """Consecutive nodes: the first process holds ``counts[0]`` nodes, and so on."""
        ranks, start = [], 0
        for count in counts:
            ranks.append(tuple(range(start, start + count)))
            start += count
        return cls(tuple(ranks))

    @classmethod
    def even(cls, processes: int, nodes: int) -> NodeMapping:
        """``nodes`` spread over ``processes`` as evenly as possible (elastic resizes)."""
        if processes <= 0 or processes > nodes:
            raise LayoutError(f"cannot map {nodes} virtual nodes onto {processes} processes")
        return cls.from_counts(split_evenly(nodes, processes))

    def label(self) -> str:
        counts = [len(nodes) for nodes in self.ranks]
        if len(set(counts)) == 1:
            return f"{len(counts)}x{counts[0]}"
        return ":".join(str(c) for c in counts)


def parse_mapping(text: str, nodes: int) -> NodeMapping:
    """``"2x4"`` or ``"6:2"`` -> a ``NodeMapping`` of ``nodes`` virtual nodes."""
    text = text.strip()
    match = _NXV.match(text)
    if match:
        processes, per = int(match.group(1)), int(match.group(2))
        if processes <= 0 or per <= 0 or processes * per != nodes:
            raise LayoutError(f"mapping {text!r}: {processes} x {per} is not the {nodes} "
                              f"virtual nodes")
        return NodeMapping.from_counts((per,) * processes)
    if _PARTS.match(text):
        counts = tuple(int(part) for part in text.split(":"))
        if any(c <= 0 for c in counts) or sum(counts) != nodes:
            raise LayoutError(f"mapping {text!r}: parts must be positive and sum to the "
                              f"{nodes} virtual nodes")
        return NodeMapping.from_counts(counts)
    raise LayoutError(f"mapping {text!r}: expected NxV (e.g. 2x4) or a:b (e.g. 6:2)")
