"""``ClusterView``: the workers the round planner may place jobs on.

A view is a frozen value. A what-if ("what if this server failed?", "what if we add four
V100s?") is the same planner call on an edited copy (docs/style.md §3, decide from the view you
are given): ``view.without({3, 4})``, ``view.with_servers("v100", 1, 4)``.

Workers have integer ids, unique across the cluster; servers group workers of one type.
Any number of worker types with any names is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Server:
    """One machine: ``workers`` (ids) of a single ``worker_type``."""

    id: int
    worker_type: str
    workers: tuple[int, ...]


@dataclass(frozen=True)
class ClusterView:
    """Servers in a fixed order, and the ids of workers that are down."""

    servers: tuple[Server, ...]
    down: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "servers", tuple(self.servers))
        object.__setattr__(self, "down", frozenset(self.down))
        seen: set[int] = set()
        for server in self.servers:
            for w in server.workers:
                if w in seen:
                    raise ValueError(f"cluster view: worker id {w} appears twice")
                seen.add(w)

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def build(cls, counts: Mapping[str, int],
              gpus_per_server: Mapping[str, int] | int | None = None) -> ClusterView:
        """Servers of ``gpus_per_server[type]`` workers (default 1) for each type, in the
        order of ``counts``; a remainder smaller than a server gets a server of its own."""
        view = cls(servers=())
        for worker_type, count in counts.items():
            per = _per_server(gpus_per_server, worker_type)
            view = view.with_workers(worker_type, int(count), per)
        return view

    def with_workers(self, worker_type: str, count: int, gpus_per_server: int = 1) -> ClusterView:
        """A copy with ``count`` new workers of ``worker_type`` on new servers."""
        if count < 0:
            raise ValueError(f"cluster view: worker count must be >= 0, got {count}")
        if gpus_per_server < 1:
            raise ValueError(f"cluster view: gpus per server must be >= 1, got {gpus_per_server}")
        next_worker = 1 + max((w for s in self.servers for w in s.workers), default=-1)
        next_server = 1 + max((s.id for s in self.servers), default=-1)
        servers = list(self.servers)
        while count > 0:
            size = min(gpus_per_server, count)
            servers.append(Server(next_server, worker_type,
                                  tuple(range(next_worker, next_worker + size))))
            next_server += 1
            next_worker += size
            count -= size
        return ClusterView(tuple(servers), self.down)

    def without(self, worker_ids: Iterable[int]) -> ClusterView:
        """A copy in which ``worker_ids`` are down (failed or drained)."""
        ids = frozenset(worker_ids)
        unknown = ids - set(self.worker_type_of)
        if unknown:
            raise KeyError(f"cluster view: unknown worker id {min(unknown)}")
        return ClusterView(self.servers, self.down | ids)

    def restored(self, worker_ids: Iterable[int]) -> ClusterView:
        """A copy in which ``worker_ids`` are up again."""
        return ClusterView(self.servers, self.down - frozenset(worker_ids))

    # ---- queries ----------------------------------------------------------------------
    @cached_property
    def worker_types(self) -> tuple[str, ...]:
        """Types in order of first appearance (down workers included)."""
        return tuple(dict.fromkeys(s.worker_type for s in self.servers))

    @cached_property
    def worker_type_of(self) -> Mapping[int, str]:
        return {w: s.worker_type for s in self.servers for w in s.workers}

    @cached_property
    def server_of(self) -> Mapping[int, int]:
        return {w: s.id for s in self.servers for w in s.workers}

    @cached_property
    def counts(self) -> Mapping[str, int]:
        """Live workers per type (every type listed, possibly with 0)."""
        out = dict.fromkeys(self.worker_types, 0)
        for s in self.servers:
            out[s.worker_type] += sum(1 for w in s.workers if w not in self.down)
        return out

    def count(self, worker_type: str) -> int:
        return self.counts.get(worker_type, 0)

    @cached_property
    def live_servers(self) -> Mapping[str, tuple[tuple[int, tuple[int, ...]], ...]]:
        """Per type: (server id, live worker ids) for servers with a live worker."""
        out: dict[str, list] = {t: [] for t in self.worker_types}
        for s in self.servers:
            live = tuple(w for w in s.workers if w not in self.down)
            if live:
                out[s.worker_type].append((s.id, live))
        return {t: tuple(v) for t, v in out.items()}

    @cached_property
    def _live_workers(self) -> Mapping[str, tuple[int, ...]]:
        return {t: tuple(w for _, ws in servers for w in ws)
                for t, servers in self.live_servers.items()}

    @cached_property
    def _one_per_server(self) -> Mapping[str, bool]:
        return {t: all(len(ws) == 1 for _, ws in servers)
                for t, servers in self.live_servers.items()}

    @cached_property
    def live_type_of(self) -> Mapping[int, str]:
        """Each live worker's type (the down ones left out)."""
        return {w: t for t, ws in self._live_workers.items() for w in ws}

    def one_worker_per_server(self, worker_type: str) -> bool:
        """True when every live server of ``worker_type`` has a single live worker."""
        return self._one_per_server.get(worker_type, True)

    @cached_property
    def _live_sets(self) -> Mapping[str, frozenset[int]]:
        return {t: frozenset(ws) for t, ws in self._live_workers.items()}

    def live_set(self, worker_type: str) -> frozenset[int]:
        """``live_workers(worker_type)`` as a set."""
        return self._live_sets.get(worker_type, frozenset())

    def live_workers(self, worker_type: str) -> tuple[int, ...]:
        """Live worker ids of ``worker_type``, in server order."""
        return self._live_workers.get(worker_type, ())

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _per_server(gpus_per_server, worker_type: str) -> int:
    if gpus_per_server is None:
        return 1
    if isinstance(gpus_per_server, int):
        return gpus_per_server
    return int(gpus_per_server.get(worker_type, 1))
