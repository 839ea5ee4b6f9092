"""A cache bounded by memory, not by entry count.

Policies keep compiled programs between solves (a scheduler re-solves the same shape many
times, thesis §5.5). An entry-count bound lets 64 full-size programs stay alive; this cache
holds entries while their estimated bytes fit in a budget and evicts the least recently
used ones first. An entry larger than the whole budget is built and returned, never kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")

DEFAULT_BUDGET = 256 * 2**20  # bytes


@dataclass(frozen=True)
class CacheInfo:
    """Counters, as ``functools.lru_cache``'s ``cache_info`` gives them, plus bytes."""

    hits: int
    misses: int
    entries: int
    bytes: int
    budget: int


class ByteBudgetCache(Generic[V]):
    """Least-recently-used cache of values whose estimated total size stays within
    ``budget`` bytes. ``get(key, make, size)`` returns the cached value or ``make()``,
    keeping it with ``size(value)`` bytes charged to the budget."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        if budget < 0:
            raise ValueError(f"ByteBudgetCache: budget must be >= 0 bytes, got {budget!r}")
        self._budget = budget
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = self._hits = self._misses = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V], size: Callable[[V], int]) -> V:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self._hits += 1
                return self._entries[key][0]
            self._misses += 1
        value = make()  # outside the lock: building may take long
        nbytes = int(size(value))
        with self._lock:
            if key not in self._entries and nbytes <= self._budget:
                self._entries[key] = (value, nbytes)
                self._bytes += nbytes
                self._evict()
        return value

    def resize(self, budget: int) -> None:
        """Set a new budget, evicting what no longer fits."""
        if budget < 0:
            raise ValueError(f"ByteBudgetCache: budget must be >= 0 bytes, got {budget!r}")
        with self._lock:
            self._budget = budget
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = self._hits = self._misses = 0

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._entries), self._bytes,
                             self._budget)

    def _evict(self) -> None:
        while self._bytes > self._budget:
            _, (_, nbytes) = self._entries.popitem(last=False)
            self._bytes -= nbytes
