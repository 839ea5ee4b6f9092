"""The order in which the round planner serves worker types (``CoreConfig.type_order``):
fastest first, as Gavel serves v100, p100, k80 (thesis §5.5). Shared by both executors,
the simulator and the daemon."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from traces.types import ThroughputTable


def fastest_first(table: ThroughputTable, types: Sequence[str],
                  rows: Sequence[Mapping[str, float]] = ()) -> tuple[str, ...]:
    """Worker types from fastest to slowest: by the geometric mean, over the job kinds the
    table has on every type, of their throughput (v100, p100, k80 for Gavel's table).
    ``rows``: jobs' own steps/s per type (``traces.TraceJob.throughputs``), each a kind of
    its own after the table's."""
    kinds = [{t: table.get(t, *k) for t in types} for k in table.job_keys]
    kinds += [{t: float(row.get(t, 0.0)) for t in types} for row in rows]
    kinds = [kind for kind in kinds if all(v > 0 for v in kind.values())]
    if not kinds:
        return tuple(types)
    score = {t: float(np.mean([math.log(kind[t]) for kind in kinds])) for t in types}
    return tuple(sorted(types, key=lambda t: (-score[t], list(types).index(t))))
