"""Which live run holds each GPU, so that status and metrics count GPUs exactly (thesis §5.6).

A round's new run is sent when its round starts, while the run it replaces on the same GPUs
may still be saving its checkpoint: the worker queues the new process until none of its
GPUs on that server is busy (``workers/daemon/worker.py``). Both are live runs of the run
table, so counting every run's workers showed more GPUs held on a server than it has.

Here each server's GPUs go to runs oldest first (earlier round, then launch order): a run
holds its GPUs on a server whose processes have not exited (``Run.left``) when none of them
is held by an older run, and waits there (holding none) otherwise. No GPU is counted twice,
so no server shows more GPUs held than it has. The two runs of a co-located pair (thesis
§5.3.1: one task of the round, its key a pair's) hold their GPUs together: each job runs
on them, and a sum over jobs counts them once (``counted_once``); an entity's sum counts
them once for each entity of the pair (``counted_for_entity``), as its GPU cap does
(``gavelsched/mechanism/quota.py``). Pure: runs and the
worker -> server map in, GPUs per job out; and the runs still on each server
(``runs_per_server``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Protocol

from policies import is_pair_key


class HeldRun(Protocol):
    """What this module reads of a run (``run.Run`` has it)."""

    job_id: str
    round: int
    workers: tuple[int, ...]
    left: set[int]       # servers whose processes have not exited
    task_key: str        # the round's task it runs (a pair's key: shared with its partner)


def holding(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[int, list[str]]:
    """GPU (worker id) -> the jobs whose runs hold it now: one, or the two of a co-located
    pair's task, the first launched first; a GPU no run holds is absent."""
    out: dict[int, list[str]] = {}
    task: dict[int, tuple[str, int]] = {}      # GPU -> the pair task holding it
    for run in sorted(runs, key=lambda r: r.round):          # stable: launch order
        by_server: dict[int, list[int]] = {}
        for w in dict.fromkeys(run.workers):
            s = server_of.get(w)
            if s is not None and s in run.left:
                by_server.setdefault(s, []).append(w)
        pair = (run.task_key, run.round) if is_pair_key(run.task_key) else None
        for workers in by_server.values():
            if not any(w in out for w in workers):
                for w in workers:
                    out[w] = [run.job_id]
                    if pair is not None:
                        task[w] = pair
            elif pair is not None and all(task.get(w) == pair for w in workers):
                for w in workers:
                    out[w].append(run.job_id)
    return out


def holders(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[int, str]:
    """GPU (worker id) -> the job whose run holds it now (of a pair, the first launched);
    a GPU no run holds is absent."""
    return {w: jobs[0] for w, jobs in holding(runs, server_of).items()}


def held_gpus(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[str, int]:
    """GPUs each run's job holds now (every run listed, 0 while it waits for its GPUs); both
    jobs of a pair count the GPUs they share."""
    runs = list(runs)
    held = dict.fromkeys((r.job_id for r in runs), 0)
    for jobs in holding(runs, server_of).values():
        for job_id in jobs:
            held[job_id] += 1
    return held


def sharing(runs: Iterable[HeldRun], server_of: Mapping[int, int]) -> dict[str, str]:
    """Job -> the job it shares its GPUs with now (both jobs of a pair whose runs hold
    them together)."""
    out: dict[str, str] = {}
    for jobs in holding(runs, server_of).values():
        if len(jobs) == 2:
            out[jobs[0]], out[jobs[1]] = jobs[1], jobs[0]
    return out


def counted_once(job_id: str, gpus: int, shared_with: str) -> int:
    """The GPUs a sum over jobs counts for this one: all it holds, except that of a pair
    sharing them (``shared_with``) only the job with the smaller id counts them."""
    return gpus if not shared_with or job_id < shared_with else 0


def counted_for_entity(job_id: str, gpus: int, shared_with: str, entity: str,
                       partner_entity: str) -> int:
    """The GPUs an entity's sum counts for this job of ``entity``: as ``counted_once``
    when its partner is of the same entity, else all it holds (each entity of a pair holds
    the GPU, as the quota charges it)."""
    if shared_with and partner_entity == entity:
        return counted_once(job_id, gpus, shared_with)
    return gpus


def runs_per_server(runs: Iterable[HeldRun]) -> Counter[int]:
    """Server id -> how many runs still have processes there (``Run.left``): what a drained
    server waits for (``servers.Servers.drain``)."""
    return Counter(s for run in runs for s in run.left)
