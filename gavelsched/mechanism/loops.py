"""The compiled round loops (``_loops.pyx``), or ``None``.

``pip install`` builds them when a C compiler is present; without one the install goes on
and the round takes its Python path, which gives the same result
(``tests/core/test_loops.py`` checks both on random inputs). ``GAVELSCHED_PURE_PYTHON=1``
takes the Python path even when they were built (a side-by-side benchmark, or a bug hunt).
"""

from __future__ import annotations

import os

compiled = None
if os.environ.get("GAVELSCHED_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _loops as compiled
    except ImportError:   # built without a C compiler
        compiled = None
