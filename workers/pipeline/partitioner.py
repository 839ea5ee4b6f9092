"""PipeDream's partitioning algorithm (thesis §2.4.1): a dynamic program over layers and
workers on a hierarchical topology, solved level by level.

T^k(i→j, m) = (1/m)·max(A^{k−1}(i→j, m_{k−1}), 2(m−1)·Σ w_l / B_k)
A^k(i→j, m) = min( T^k(i→j, m),                                  # one stage, replicated m×
                   min_{i≤s<j, 1≤m'<m} max(A^k(i→s, m−m'), 2a_s/B_k, T^k(s+1→j, m')) )
with A^0(i→j, 1) = Σ T_l. The first option is a single replicated stage spanning i…j, so pure
data parallelism competes with every pipeline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import networkx as nx

from .profile import Profile


class TopologyError(ValueError):
    """A topology the partitioner cannot read."""


@dataclass(frozen=True)
class Level:
    """Level k: ``count`` components of level k−1 joined by links of ``bandwidth`` bytes/s."""

    count: int
    bandwidth: float


@dataclass(frozen=True)
class Stage:
    """Layers ``first``…``last`` (inclusive) replicated on ``replicas`` workers."""

    first: int
    last: int
    replicas: int


@dataclass(frozen=True)
class Partition:
    """The optimal pipeline: its stages and its slowest stage's time per input."""

    stages: tuple[Stage, ...]
    time_per_input_s: float

    @property
    def workers(self) -> int:
        return sum(s.replicas for s in self.stages)

    @property
    def in_flight(self) -> int:
        """PipeDream's NOAM: ⌈workers / replicas of the input stage⌉ (thesis §2.4.2)."""
        return math.ceil(self.workers / self.stages[0].replicas)


def hierarchical_topology(levels: list[tuple[int, float]]) -> nx.DiGraph:
    """A tree: the root holds ``levels[-1][0]`` components, each of those ``levels[-2][0]``,
    …, down to GPUs; every edge carries the bandwidth of the level it joins."""
    graph = nx.DiGraph()
    graph.add_node("root")
    frontier = ["root"]
    for depth, (count, bandwidth) in enumerate(reversed(levels)):
        nxt = []
        for parent in frontier:
            for c in range(count):
                node = f"{parent}/{c}" if parent != "root" else f"{depth}:{c}"
                graph.add_edge(parent, node, bandwidth=float(bandwidth))
                nxt.append(node)
        frontier = nxt
    return graph


def levels_of(graph: nx.DiGraph) -> list[Level]:
    """Read levels 1…L (lowest first) from a tree whose every node at one depth has the same
    fan-out and edge bandwidth; raise :class:`TopologyError` otherwise."""
    roots = [n for n in graph if graph.in_degree(n) == 0]
    if len(roots) != 1 or not nx.is_arborescence(graph):
        raise TopologyError("topology must be a tree with one root")
    levels: list[Level] = []
    frontier = roots
    while True:
        fanouts = {graph.out_degree(n) for n in frontier}
        if fanouts == {0}:
            break
        if len(fanouts) != 1:
            raise TopologyError(f"uneven topology: fan-outs {sorted(fanouts)} at one depth")
        bandwidths = {graph.edges[e]["bandwidth"] for n in frontier for e in graph.out_edges(n)}
        if len(bandwidths) != 1:
            raise TopologyError(f"links at one depth differ in bandwidth: {sorted(bandwidths)}")
        levels.append(Level(fanouts.pop(), float(bandwidths.pop())))
        frontier = [c for n in frontier for c in graph.successors(n)]
    if not levels:
        raise TopologyError("topology has no workers")
    return list(reversed(levels))


def partition(profile: Profile, topology: nx.DiGraph | list[Level]) -> Partition:
    """Solve the dynamic program for every level and return the top level's optimum over all
    layers and all workers."""
    levels = levels_of(topology) if isinstance(topology, nx.DiGraph) else list(topology)
    n = len(profile.layers)
    compute = [0.0]
    weights = [0.0]
    for layer in profile.layers:
        compute.append(compute[-1] + layer.compute_s)
        weights.append(weights[-1] + layer.weight_bytes)
    outputs = [layer.output_bytes for layer in profile.layers]

    # level -> (i, j) -> (time, plan) for the whole component at that level (m = m_k)
    below: dict[tuple[int, int], tuple[float, tuple[Stage, ...]]] = {
        (i, j): (compute[j + 1] - compute[i], (Stage(i, j, 1),))
        for i in range(n) for j in range(i, n)}
    for level in levels:
        below = _solve_level(level, n, below, weights, outputs)
    time_, stages = below[(0, n - 1)]
    return Partition(stages, time_)


def _solve_level(level: Level, n: int, below: dict, weights: list[float],
                 outputs: list[float]) -> dict:
    bw = level.bandwidth

    def single(i: int, j: int, m: int) -> tuple[float, tuple[Stage, ...]]:
        inner_time, inner = below[(i, j)]
        sync = 2 * (m - 1) * (weights[j + 1] - weights[i]) / bw
        return max(inner_time, sync) / m, tuple(Stage(s.first, s.last, s.replicas * m)
                                                for s in inner)

    @cache
    def best(i: int, j: int, m: int) -> tuple[float, tuple[Stage, ...]]:
        result = single(i, j, m)
        for s in range(i, j):
            comm = 2 * outputs[s] / bw
            for m2 in range(1, m):
                head_time, head = best(i, s, m - m2)
                tail_time, tail = single(s + 1, j, m2)
                value = max(head_time, comm, tail_time)
                if value < result[0] - 1e-15:
                    result = (value, head + tail)
        return result

    return {(i, j): best(i, j, level.count) for i in range(n) for j in range(i, n)}


def brute_force(profile: Profile, workers: int | list[Level],
                bandwidth: float | None = None) -> float:
    """Slowest-stage time of the best pipeline found by enumeration: at every level, every
    split of the layers into contiguous stages and every way to hand out exactly that level's
    components as replicas; a stage's inner time is the best such pipeline one level down.
    ``brute_force(profile, m, B)`` is the flat case, one level of m workers."""
    levels = [Level(workers, bandwidth)] if isinstance(workers, int) else list(workers)
    layers = profile.layers

    @cache
    def best(level: int, first: int, last: int) -> float:
        if level < 0:
            return sum(layer.compute_s for layer in layers[first:last + 1])
        count, bw = levels[level].count, levels[level].bandwidth

        def stage_time(i: int, j: int, m: int) -> float:
            sync = 2 * (m - 1) * sum(layer.weight_bytes for layer in layers[i:j + 1]) / bw
            return max(best(level - 1, i, j), sync) / m

        found = math.inf

        def rec(i: int, left: int, worst: float) -> None:
            nonlocal found
            for j in range(i, last + 1):
                for m in range(1, left + 1):
                    t = max(worst, stage_time(i, j, m))
                    if j == last:
                        if m == left:
                            found = min(found, t)
                    elif m < left:
                        rec(j + 1, left - m, max(t, 2 * layers[j].output_bytes / bw))

        rec(first, count, 0.0)
        return found

    return best(len(levels) - 1, 0, len(layers) - 1)
