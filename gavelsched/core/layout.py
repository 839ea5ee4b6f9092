"""The column axis of the core's rows: the worker types (thesis §5.3.1: one column of X
and T per accelerator type), then one column per configuration that uses several types
at once (VirtualFlow §6.5.2; none unless the policy mixes).

``ColumnLayout`` names the columns, widens the rows when a type or configuration joins,
and keeps the configurations in the form the planner takes them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..mechanism.planner import configuration_matrix
from .configurations import MixedOption
from .rows import Rows


class ColumnLayout:
    """``types`` then the configurations' names, in the order they were first seen."""

    def __init__(self, types: tuple[str, ...]) -> None:
        self.types = types
        self.type_index = {t: j for j, t in enumerate(types)}
        self.config_gpus: dict[str, dict[str, int]] = {}
        self.columns: tuple[str, ...] = types
        self._config_matrices()

    def set_types(self, types: tuple[str, ...], rows: Rows, seed: float) -> None:
        """The cluster's worker types changed: re-index ``rows`` (new cells get ``seed``)."""
        self.types = types
        self.type_index = {t: j for j, t in enumerate(types)}
        old, self.columns = self.columns, types + tuple(self.config_gpus)
        rows.widen(old, self.columns, seed)
        self._config_matrices()

    def add_configurations(self, options: Sequence[MixedOption], rows: Rows,
                           seed: float) -> None:
        """New configuration columns for any of ``options`` not seen yet."""
        new = {o.configuration.name: dict(o.configuration.gpus) for o in options
               if o.configuration.name not in self.config_gpus}
        if not new:
            return
        self.config_gpus.update(new)
        old, self.columns = self.columns, self.types + tuple(self.config_gpus)
        rows.widen(old, self.columns, seed)
        self._config_matrices()

    def _config_matrices(self) -> None:
        """The configurations as the planner takes them, rebuilt when columns change."""
        self.config_list = tuple(self.config_gpus.values())
        self.config_matrix = (configuration_matrix(self.config_list, self.types)
                              if self.config_list else None)

    def rate_row(self, T: np.ndarray, options: Sequence[MixedOption]) -> np.ndarray:
        """A job's steps/s on every column: its types (``T``), then its configurations."""
        if not self.config_gpus:
            return T
        rate = np.zeros(len(self.columns))
        rate[:len(self.types)] = T
        at = {name: j for j, name in enumerate(self.columns)}
        for o in options:
            rate[at[o.configuration.name]] = o.configuration.throughput
        return rate
