"""The compiled policy loops: the max-min LP's lists (``_lists.pyx``, ``compiled``) and the
column model's (``_columns.pyx``, ``compiled_columns``), or ``None`` each.

``pip install`` builds them when a C compiler is present; without one the install goes on
and the policies take their numpy path, which gives the same result
(``tests/policies/test_fairness_lp.py`` checks both). ``GAVELSCHED_PURE_PYTHON=1`` takes the
numpy path even when they were built (as ``gavelsched/mechanism/loops.py``).
"""

from __future__ import annotations

import os

compiled = compiled_columns = None
if os.environ.get("GAVELSCHED_PURE_PYTHON", "") in ("", "0"):
    try:
        from . import _columns as compiled_columns
        from . import _lists as compiled
    except ImportError:   # built without a C compiler
        compiled = compiled_columns = None
