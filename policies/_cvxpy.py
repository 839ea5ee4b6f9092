"""cvxpy, imported on first use.

Importing cvxpy costs ~0.6 s (it pulls in scipy.stats), which a ``gavelsched solve`` on a
policy's direct LP path (policies/lp.py) would pay for nothing. The policies write their
programs as ``cp.Variable``, ``cp.Problem``, ... against ``cp`` below, which imports cvxpy
the first time one of its names is read, i.e. only when a policy builds a cvxpy program
(``backend="cvxpy"``, or a policy without a direct path). ``sys.modules`` holds no
``cvxpy`` until then (tests/policies/test_lazy_import.py).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Cvxpy:
    """Stands for the ``cvxpy`` module; an attribute read imports it (once)."""

    __slots__ = ()

    @staticmethod
    def module() -> ModuleType:
        return importlib.import_module("cvxpy")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module(), name)


cp: Any = _Cvxpy()
