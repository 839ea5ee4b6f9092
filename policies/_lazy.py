"""Heavy modules, imported on first use.

Importing cvxpy costs ~0.6 s (it pulls in scipy.stats), and scipy.sparse and
scipy.optimize ~0.15 s and ~0.2 s (scipy's array-API layer, scipy.fft, scipy.special).
A ``gavelsched simulate`` or ``solve`` on a policy's direct LP path (policies/lp.py,
policies/sparse.py: plain arrays handed to Clarabel) would pay for them for nothing, about
half of a small simulation's wall time. The policies write ``cp.Variable``,
``sp.csr_matrix``, ... against the stand-ins below, each of which imports its module the
first time one of its names is read. ``sys.modules`` holds none of the three until then
(tests/policies/test_lazy_import.py).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; an attribute read imports it (once: later reads
    find it in ``sys.modules``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def module(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module(), name)


cp: Any = LazyModule("cvxpy")
sp: Any = LazyModule("scipy.sparse")
optimize: Any = LazyModule("scipy.optimize")
