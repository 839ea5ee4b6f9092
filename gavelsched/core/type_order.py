"""The order in which the round planner serves worker types (``CoreConfig.type_order``):
fastest first, as Gavel serves v100, p100, k80 (thesis §5.5). Shared by both executors,
the simulator and the daemon."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from traces.types import ThroughputTable


def fastest_first(table: ThroughputTable, types: Sequence[str]) -> tuple[str, ...]:
    """Worker types from fastest to slowest: by the geometric mean, over the job kinds the
    table has on every type, of their throughput (v100, p100, k80 for Gavel's table)."""
    keys = [k for k in table.job_keys if all(table.get(t, *k) > 0 for t in types)]
    if not keys:
        return tuple(types)
    score = {t: float(np.mean([math.log(table.get(t, *k)) for k in keys])) for t in types}
    return tuple(sorted(types, key=lambda t: (-score[t], list(types).index(t))))
