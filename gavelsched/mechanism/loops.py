"""The compiled round loops, or ``None``: ``compiled``, the round's planning
(``_loops.pyx``), and ``compiled_steps``, its steps and seconds (``_steps.pyx``).

``pip install`` builds them when a C compiler is present; without one the install goes on
and the round takes its Python path, which gives the same result
(``tests/core/test_loops.py`` checks both on random inputs). ``GAVELSCHED_PURE_PYTHON=1``
takes the Python path even when they were built (a side-by-side benchmark, or a bug hunt).
"""

from __future__ import annotations

import os

compiled = None
compiled_steps = None
if os.environ.get("GAVELSCHED_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _loops as compiled
        from . import _steps as compiled_steps
    except ImportError:   # built without a C compiler: the round's Python path
        compiled = compiled_steps = None
