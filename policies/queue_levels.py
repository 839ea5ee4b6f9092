"""AlloX's matching [106] (thesis §5.7.3, its baseline), solved over queue levels.

AlloX matches each job to a (GPU, position) so as to minimise the total completion time:
the job k-th from the end of a GPU's queue delays itself and the k-1 jobs behind it, so
that slot costs k times the job's time on the GPU's type. GPUs of one type are alike, so
the slot (GPU, k) depends only on (type, k): a *queue level*, which holds as many jobs as
the type has GPUs. The matching is then a transportation problem from jobs to levels:
jobs x levels costs instead of jobs x GPUs x positions (20,000 jobs on 2,048 GPUs: 1.8
million instead of 860 million), solved exactly by successive shortest paths whose
paths run over the levels alone (a job moves from one level to another at the cost of
the cheapest such move, kept per pair of levels).

In an optimal matching a type's queues differ in length by one at most (a job at the head
of a longer queue would finish sooner at the head of the shorter one), so a type with n
GPUs needs ceil(jobs / n) levels, and the levels a type fills are nested: level k holds
no more jobs than level k-1.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np


class Levels(NamedTuple):
    """Each job's queue level (``level_of``: an index into ``type_of`` and ``depth``,
    -1 for a job that runs on no type), and each level's type and depth (1: last in its
    queues)."""

    level_of: np.ndarray
    type_of: np.ndarray
    depth: np.ndarray


def level_count(jobs: int, gpus: np.ndarray) -> int:
    """How many queue levels ``jobs`` jobs need on types of ``gpus`` GPUs each."""
    return int(_depths(jobs, gpus).sum())


def _depths(jobs: int, gpus: np.ndarray) -> np.ndarray:
    """Each type's levels for ``jobs`` jobs: ceil(jobs / its GPUs), 0 for a type with none."""
    gpus = np.asarray(gpus, dtype=int)
    return np.where(gpus > 0, -(-jobs // np.maximum(gpus, 1)), 0)


def match_levels(times: np.ndarray, gpus: np.ndarray) -> Levels:
    """The min-cost matching of jobs (rows of ``times``: each one's time on each type,
    inf where it cannot run) to queue levels of types with ``gpus`` GPUs each: every job
    that runs on some type gets a level; no level holds more jobs than its type has GPUs;
    the sum of depth x time is least. Jobs are added longest first (the order in which
    fewest of them move to make room: a single type is then filled with no move at all)."""
    times = np.asarray(times, dtype=float)
    gpus = np.asarray(gpus, dtype=int)
    runs = np.isfinite(times[:, gpus > 0]).any(axis=1)
    depths = _depths(int(runs.sum()), gpus)
    type_of = np.repeat(np.arange(gpus.size), depths)
    depth = np.concatenate([np.arange(1.0, k + 1) for k in depths]) if gpus.size else np.zeros(0)
    paths = _Paths(times, type_of, depth, gpus[type_of])
    for job in np.flatnonzero(runs)[np.argsort(-times[runs].min(axis=1), kind="stable")]:
        paths.add(int(job))
    return Levels(paths.level_of, type_of, depth.astype(int))


class _Paths:
    """Successive shortest paths (Ahuja, Magnanti & Orlin §9.7) from each new job to a level
    with room. A path enters a level and moves one of its jobs on to the next: the cheapest
    move from level a to level b is ``move[a, b]`` (by job ``mover[a, b]``). Potentials on
    the levels (``price``) and on the sink keep every reduced cost non-negative, so each
    path is found by Dijkstra over the levels."""

    def __init__(self, times: np.ndarray, type_of: np.ndarray, depth: np.ndarray,
                 room: np.ndarray):
        g = type_of.size
        self.times, self.type_of, self.depth, self.room = times, type_of, depth, room
        self.price, self.sink_price = np.zeros(g), 0.0
        self.move = np.full((g, g), np.inf)
        self.mover = np.full((g, g), -1)
        self.members = np.full((g, int(room.max(initial=0))), -1)
        self.count = np.zeros(g, dtype=int)
        self.level_of = np.full(times.shape[0], -1)
        self.slot = np.full(times.shape[0], -1)

    def costs(self, job: int) -> np.ndarray:
        """What ``job`` costs at each level: depth x its time on the level's type."""
        return self.depth * self.times[job, self.type_of]

    def add(self, job: int) -> None:
        """Match ``job`` along the cheapest path to a level with room, then move the prices
        by the path's distances."""
        dist = self.costs(job) - self.price
        came_from = np.full(dist.size, -1)
        done = np.zeros(dist.size, dtype=bool)
        to_sink, last = np.inf, -1
        while True:
            open_dist = np.where(done, np.inf, dist)
            a = int(open_dist.argmin())
            if not open_dist[a] < to_sink:
                break
            done[a] = True
            if self.count[a] < self.room[a]:
                # a level with room ends the path; no path goes on through it (moving one
                # of its jobs on would lower the cost of an optimal matching)
                if dist[a] + self.price[a] - self.sink_price < to_sink:
                    to_sink, last = dist[a] + self.price[a] - self.sink_price, a
                continue
            via = dist[a] + self.move[a] + self.price[a] - self.price
            better = (via < dist) & ~done
            dist[better] = via[better]
            came_from[better] = a
        path = [last]
        while came_from[path[-1]] >= 0:
            path.append(int(came_from[path[-1]]))
        path.reverse()
        moved = [(int(self.mover[a, b]), b) for a, b in pairwise(path)]
        for other, _ in moved:
            self._leave(other)
        for member, level in [(job, path[0]), *moved]:
            self._join(member, level)
        self.price += np.minimum(dist, to_sink)
        self.sink_price += to_sink

    def _join(self, job: int, level: int) -> None:
        """Put ``job`` in ``level``; its moves from there lower the level's where cheaper."""
        self.members[level, self.count[level]] = job
        self.slot[job] = self.count[level]
        self.count[level] += 1
        self.level_of[job] = level
        cost = self.costs(job)
        gain = cost - cost[level]
        cheaper = gain < self.move[level]
        self.move[level, cheaper] = gain[cheaper]
        self.mover[level, cheaper] = job

    def _leave(self, job: int) -> None:
        """Take ``job`` out of its level; the level's moves it made are found again among
        the jobs left."""
        level, slot = int(self.level_of[job]), int(self.slot[job])
        last = self.count[level] - 1
        kept = self.members[level, last]
        self.members[level, slot], self.slot[kept] = kept, slot
        self.members[level, last] = -1
        self.count[level] = last
        stale = np.flatnonzero(self.mover[level] == job)   # moves it was the cheapest for
        if last == 0:
            self.move[level, stale], self.mover[level, stale] = np.inf, -1
            return
        members = self.members[level, :last]
        times = self.times[members]
        gains = (times[:, self.type_of[stale]] * self.depth[stale]
                 - (self.depth[level] * times[:, self.type_of[level]])[:, None])
        best = gains.argmin(axis=0)
        self.move[level, stale] = gains[best, np.arange(stale.size)]
        self.mover[level, stale] = members[best]
