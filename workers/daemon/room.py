"""Room on the disk of a worker's ``work_dir``: its jobs' logs are written there (and their
checkpoints, without shared storage), so a run started on a full disk fails at once, and
every run the scheduler launches there is lost, round after round. Below ``--min-free-mb``
free the worker says so in its heartbeats (``short_of_room``), and the scheduler drains it
until it no longer does (``gavelsched/daemon/servers.py``), as Kubernetes taints a node
under disk pressure; its runs go on."""

from __future__ import annotations

import shutil
from pathlib import Path

MIB = 1 << 20
MIN_FREE_MB = 256       # the default reserve (``--min-free-mb``)


def short_of_room(work_dir: Path, min_free_mb: int) -> str:
    """Why the worker takes no new run, in one line: its ``work_dir``'s disk has less than
    ``min_free_mb`` MiB free; "" when it has room, no reserve is set, or the disk cannot be
    read."""
    if min_free_mb <= 0:
        return ""
    try:
        free = shutil.disk_usage(work_dir).free
    except OSError:
        return ""
    reserve = int(min_free_mb) * MIB
    return "" if free >= reserve else (
        f"its work_dir {work_dir} has {free / MIB:.0f} MiB free, under its reserve of "
        f"{reserve / MIB:.0f} MiB (--min-free-mb)")
