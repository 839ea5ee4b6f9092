"""The core's per-job record (``gavelsched/core/jobs.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from gavelsched.core.jobs import by_type
from policies import Job


def test_by_type_is_a_read_only_row_a_problem_shares():
    row = by_type(("v100", "k80"), np.array([2.5, 0.0]))
    assert dict(row) == {"v100": 2.5, "k80": 0.0}
    assert all(type(v) is float for v in row.values())
    with pytest.raises(TypeError):
        row["v100"] = 1.0      # type: ignore[index]
    assert Job("0", row).throughputs is row      # no copy per Problem
