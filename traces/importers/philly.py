"""Import Microsoft's Philly trace (``cluster_job_log``, Jeon et al., ATC '19).

The thesis cites these published Microsoft traces for its multi-GPU job mix (§5.7.1). The
file is one JSON array; each job looks like::

    {"status": "Pass", "vc": "6214e9", "jobid": "application_1506638472019_10238",
     "user": "...", "submitted_time": "2017-10-03 02:52:01",
     "attempts": [{"start_time": "2017-10-03 02:52:04", "end_time": "2017-10-03 04:13:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}

Mapping to a gavelsched trace (deterministic for a file and a seed):

- **Which jobs.** Jobs whose ``status`` is in ``statuses`` (default ``("Pass",)``: jobs that
  finished; ``Killed`` can be added; ``Failed`` runs are crashes whose length says nothing
  about the work). Skipped, and counted in ``ImportResult.skipped``: other statuses, jobs
  without attempts, with an unreadable or missing time, with zero GPUs, or a run time <= 0.
- **GPUs -> scale factor.** The GPU count of the last attempt (summed over its machines) is
  rounded *up* to the next scale factor the table has for the job type (1, 2, 4, 8 in the
  catalog: 3 -> 4, 5..7 -> 8); counts above the largest are capped at it (logged).
- **Duration.** Run time of the last attempt (end - start), taken as time on the reference
  worker type (V100), as §5.7.1 does for its synthetic durations.
- **Job type.** Philly does not record models, so each job gets a job type drawn uniformly
  from the table with ``numpy.random.default_rng(seed)``, one draw per kept job in arrival
  order; total steps = duration x V100 steps/s of that type at the scale factor.
- **Arrival.** ``submitted_time`` minus the earliest kept submission; jobs are sorted by it
  (stably). ``entity`` is the job's virtual cluster (``vc``), for hierarchical policies.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .. import checks
from ..checks import BadValue
from ..errors import TraceError
from ..types import ThroughputTable, TraceJob

log = logging.getLogger(__name__)

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DEFAULT_STATUSES = ("Pass",)


@dataclass(frozen=True)
class ImportResult:
    """The imported jobs (sorted by arrival) and how many source jobs were skipped, why."""

    jobs: list[TraceJob]
    skipped: Mapping[str, int] = field(default_factory=dict)
    capped: int = 0  # jobs whose GPU count exceeded the largest scale factor


@dataclass(frozen=True)
class _Run:
    submitted: datetime
    gpus: int
    duration_s: float
    entity: str | None


def import_philly(path: str | os.PathLike, *, table: ThroughputTable | None = None,
                  seed: int = 0, statuses: Sequence[str] = DEFAULT_STATUSES,
                  job_types: Sequence[str] | None = None, max_jobs: int | None = None,
                  reference_worker: str = "v100") -> ImportResult:
    """Read a Philly ``cluster_job_log`` and map it onto the table's job types (see the
    module docstring). ``max_jobs`` keeps the earliest submissions."""
    if table is None:
        from ..catalog import default_table
        table = default_table()
    if reference_worker not in table.solo:
        raise ValueError(f"the throughput table has no {reference_worker!r} worker type")
    runs, skipped = _read_runs(Path(path), set(statuses))
    runs.sort(key=lambda run: run.submitted)
    if max_jobs is not None:
        runs = runs[:max_jobs]
    types = list(job_types) if job_types is not None else list(table.job_types)
    choices = {t: sorted(sf for (name, sf) in table.solo[reference_worker]
                         if name == t and table.get(reference_worker, t, sf) > 0)
               for t in types}
    types = [t for t in types if choices[t]]
    if not types:
        raise ValueError(f"no job type of the table runs on {reference_worker}")
    rng = np.random.default_rng(seed)
    draws = rng.integers(len(types), size=len(runs))
    start = runs[0].submitted if runs else None
    jobs, capped = [], 0
    for run, index in zip(runs, draws):
        job_type = types[int(index)]
        sf, was_capped = _scale_factor(run.gpus, choices[job_type])
        capped += was_capped
        jobs.append(TraceJob(
            job_type=job_type, scale_factor=sf,
            total_steps=max(1, round(run.duration_s * table.get(reference_worker, job_type, sf))),
            arrival_s=(run.submitted - start).total_seconds(), entity=run.entity))
    if capped:
        log.info("%s: %d jobs used more GPUs than the largest scale factor; capped", path,
                 capped)
    log.info("%s: imported %d jobs; skipped %s", path, len(jobs),
             dict(skipped) or "none")
    return ImportResult(jobs=jobs, skipped=dict(skipped), capped=capped)


def _scale_factor(gpus: int, available: list[int]) -> tuple[int, bool]:
    """The smallest available scale factor >= ``gpus``, or the largest one (capped)."""
    i = bisect.bisect_left(available, gpus)
    return (available[i], False) if i < len(available) else (available[-1], True)


def _read_runs(path: Path, statuses: set[str]) -> tuple[list[_Run], Counter]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise TraceError(path, err.lineno, None, f"not valid JSON: {err.msg}") from None
    if not isinstance(data, list):
        raise TraceError(path, None, None, "expected a JSON array of jobs (Philly "
                         "cluster_job_log)")
    runs: list[_Run] = []
    skipped: Counter = Counter()
    for job in data:
        reason, run = _run(job, statuses)
        if run is None:
            skipped[reason] += 1
        else:
            runs.append(run)
    return runs, skipped


def _run(job: Any, statuses: set[str]) -> tuple[str, _Run | None]:
    """(skip reason, None) or ("", run) for one entry of the log."""
    if not isinstance(job, Mapping):
        return "not an object", None
    status = job.get("status")
    if not isinstance(status, str):
        return "status not text", None
    if status not in statuses:
        return f"status {status}", None
    attempts = job.get("attempts")
    if not isinstance(attempts, list) or not attempts or not isinstance(attempts[-1], Mapping):
        return "no attempts", None
    last = attempts[-1]
    submitted = _time(job.get("submitted_time"))
    start, end = _time(last.get("start_time")), _time(last.get("end_time"))
    if submitted is None or start is None or end is None:
        return "missing time", None
    detail = last.get("detail")
    if not isinstance(detail, list):
        return "no GPU detail", None
    gpus = sum(len(m["gpus"]) for m in detail
               if isinstance(m, Mapping) and isinstance(m.get("gpus"), list))
    if gpus == 0:
        return "zero GPUs", None
    duration = (end - start).total_seconds()
    if duration <= 0:
        return "non-positive run time", None
    vc = job.get("vc")
    if vc in (None, ""):
        vc = None
    elif not _is_name(vc):
        return "vc not a name", None
    return "", _Run(submitted, gpus, duration, vc)


def _is_name(value: Any) -> bool:
    """Whether ``value`` can name an entity: one line of UTF-8 text (``checks.text``)."""
    try:
        checks.text(value, "vc")
    except BadValue:
        return False
    return True


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or value in ("", "None"):
        return None
    try:
        return datetime.strptime(value, TIME_FORMAT)
    except ValueError:
        return None
