"""Which live run holds each GPU, so that status and metrics count GPUs exactly (thesis §5.6).

A round's new run is sent when its round starts, while the run it replaces on the same GPUs
may still be saving its checkpoint: the worker queues the new process until none of its
GPUs on that server is busy (``workers/daemon/worker.py``). Both are live runs of the run
table, so counting every run's workers showed more GPUs held on a server than it has.

Here each server's GPUs go to runs oldest first (earlier round, then launch order): a run
holds its GPUs on a server whose processes have not exited (``Run.left``) when none of them
is held by an older run, and waits there (holding none) otherwise. No GPU is counted twice,
so no server shows more GPUs held than it has. Pure: runs and the worker -> server map in,
GPUs per job out; and the runs still on each server (``runs_per_server``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Protocol


class HeldRun(Protocol):
    """What this module reads of a run (``runs.Run`` has it)."""

    job_id: str
    round: int
    workers: tuple[int, ...]
    left: set[int]       # servers whose processes have not exited


def holders(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[int, str]:
    """GPU (worker id) -> the job whose run holds it now; a GPU no run holds is absent."""
    out: dict[int, str] = {}
    for run in sorted(runs, key=lambda r: r.round):          # stable: launch order
        by_server: dict[int, list[int]] = {}
        for w in dict.fromkeys(run.workers):
            s = server_of.get(w)
            if s is not None and s in run.left:
                by_server.setdefault(s, []).append(w)
        for workers in by_server.values():
            if not any(w in out for w in workers):
                out.update(dict.fromkeys(workers, run.job_id))
    return out


def held_gpus(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[str, int]:
    """GPUs each run's job holds now (every run listed, 0 while it waits for its GPUs)."""
    runs = list(runs)
    held = dict.fromkeys((r.job_id for r in runs), 0)
    for job_id in holders(runs, server_of).values():
        held[job_id] += 1
    return held


def runs_per_server(runs: Iterable[HeldRun]) -> Counter[int]:
    """Server id -> how many runs still have processes there (``Run.left``): what a drained
    server waits for (``servers.Servers.drain``)."""
    return Counter(s for run in runs for s in run.left)
