"""Allocation rows held as one matrix (thesis §5.3.1: X, one row per job and one column per
worker type), read as the read-only mapping ``Allocation.allocation`` is.

A policy that solves over single-job columns ends with X as an (m, n) matrix, one row per
class of identical jobs (``policies.columns``, ``merge``). Writing it out as a read-only
dict per row and a dict over every job was a re-solve's largest cost after the solver and
the column model, and the scheduler core reads X back as a matrix (``periods.install``):
the rows are made only for a caller that reads them, each once (issue #30).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

import numpy as np


class MatrixRows(Mapping):
    """``keys[i]`` -> its row ``X[row_of[i]]`` over ``types``, as a read-only mapping of
    read-only rows (the keys sharing a row of ``X`` share one mapping). ``X`` is kept
    read-only; ``row_of`` None means one row each, in order."""

    __slots__ = ("_X", "_index", "_row_of", "_rows", "types")

    def __init__(self, keys: tuple[str, ...], types: tuple[str, ...], X: np.ndarray,
                 row_of: np.ndarray | None = None) -> None:
        if X.ndim != 2 or X.shape[1] != len(types) or len(keys) != (
                X.shape[0] if row_of is None else len(row_of)):
            raise ValueError(f"MatrixRows: {len(keys)} keys, {len(types)} types, "
                             f"X of shape {X.shape}")
        self._index = dict(zip(keys, range(len(keys))))
        if len(self._index) != len(keys):
            raise ValueError("MatrixRows: a key named twice")
        X = np.array(X, dtype=float)
        X.flags.writeable = False
        self.types, self._X = tuple(types), X
        self._row_of = None if row_of is None else np.asarray(row_of).tolist()
        self._rows: list[Mapping[str, float] | None] = [None] * X.shape[0]

    def matrix(self) -> tuple[tuple[str, ...], np.ndarray]:
        """(keys, X with one row per key): read-only, in the keys' order."""
        if self._row_of is None:
            return tuple(self._index), self._X
        X = self._X.take(self._row_of, axis=0)
        X.flags.writeable = False
        return tuple(self._index), X

    def __getitem__(self, key: str) -> Mapping[str, float]:
        at = self._index[key]
        row = at if self._row_of is None else self._row_of[at]
        made = self._rows[row]
        if made is None:
            made = self._rows[row] = MappingProxyType(dict(zip(self.types,
                                                               self._X[row].tolist())))
        return made

    def keys(self):
        return self._index.keys()    # (a dict's view: set operations in C)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return repr({key: dict(row) for key, row in self.items()})

    def __reduce__(self):
        return MatrixRows, (tuple(self._index), self.types, self._X, self._row_of)
