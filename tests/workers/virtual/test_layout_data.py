"""Mapping notation, node sizes and mapping-independent data (VirtualFlow §3, §5.2)."""

from __future__ import annotations

import pytest
import torch

from workers.virtual.data import VirtualSampler
from gavelsched.virtual.layout import (
    LayoutError,
    NodeMapping,
    VirtualLayout,
    parse_mapping,
    split_evenly,
    split_proportionally,
)
from workers.virtual.rng import node_stream, stream_seed


@pytest.mark.parametrize("text, ranks", [
    ("1x8", [[0, 1, 2, 3, 4, 5, 6, 7]]),
    ("2x4", [[0, 1, 2, 3], [4, 5, 6, 7]]),
    ("8x1", [[i] for i in range(8)]),
    ("6:2", [[0, 1, 2, 3, 4, 5], [6, 7]]),
    ("3:3:2", [[0, 1, 2], [3, 4, 5], [6, 7]]),
])
def test_parse_mapping(text, ranks):
    mapping = parse_mapping(text, 8)
    assert [list(r) for r in mapping.ranks] == ranks
    assert parse_mapping(mapping.label(), 8) == mapping


@pytest.mark.parametrize("text, fragment", [
    ("3x3", "'3x3'"), ("2x5", "'2x5'"), ("6:3", "'6:3'"), ("8:0", "'8:0'"),
    ("two", "'two'"), ("0x8", "'0x8'"), ("", "''"),
])
def test_parse_mapping_rejects(text, fragment):
    with pytest.raises(LayoutError, match=fragment):
        parse_mapping(text, 8)


def test_even_mapping_and_splits():
    assert NodeMapping.even(3, 8).ranks == ((0, 1, 2), (3, 4, 5), (6, 7))
    assert split_evenly(10, 4) == (3, 3, 2, 2)
    assert split_proportionally(24, (6, 6, 12)) == (6, 6, 12)
    assert sum(split_proportionally(7, (3, 1, 1))) == 7
    with pytest.raises(LayoutError):
        NodeMapping.even(9, 8)
    with pytest.raises(LayoutError):
        NodeMapping(((0, 1), (1, 2)))
    with pytest.raises(LayoutError):
        VirtualLayout.even(10, 4)


@pytest.mark.parametrize("sizes, dataset", [((6,) * 8, 120), ((6, 2), 50), ((5, 3, 1), 45)])
def test_every_sample_once_per_epoch_across_resizes(sizes, dataset):
    """Whatever processes run the nodes, and however often the job is resized between
    steps, each epoch reads every sample exactly once (VirtualFlow §5.2)."""
    sampler = VirtualSampler(dataset, VirtualLayout(sizes), seed=3)
    mappings = [NodeMapping.even(n, len(sizes)) for n in (1, len(sizes), 2 if len(sizes) > 1 else 1)]
    seen: dict[int, list[int]] = {}
    for step in range(3 * sampler.steps_per_epoch):
        mapping = mappings[step % len(mappings)]  # a resize before every step
        epoch = sampler.position(step).epoch
        for nodes in mapping.ranks:
            for node in nodes:
                seen.setdefault(epoch, []).extend(sampler.node_indices(step, node).tolist())
    for indices in seen.values():
        assert sorted(indices) == list(range(dataset))
    assert seen[0] != seen[1]  # a fresh permutation every epoch


def test_node_data_depends_only_on_seed_epoch_step_node():
    layout = VirtualLayout((4,) * 4)
    a = VirtualSampler(64, layout, seed=1)
    b = VirtualSampler(64, layout, seed=1)
    assert torch.equal(a.node_indices(5, 2), b.node_indices(5, 2))
    assert not torch.equal(a.node_indices(5, 2), VirtualSampler(64, layout, 2).node_indices(5, 2))


def test_node_streams_are_reproducible_and_restore_the_process_stream():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    with node_stream(0, 1, 2, 3):
        first = torch.rand(4)
    assert torch.equal(torch.get_rng_state(), before)
    with node_stream(0, 1, 2, 3):
        assert torch.equal(torch.rand(4), first)
    with node_stream(0, 1, 2, 4):
        assert not torch.equal(torch.rand(4), first)
    assert len({stream_seed(0, e, s, n) for e in range(3) for s in range(3) for n in range(3)}) == 27
