"""A group of local gloo processes for the virtual-node self-test and profiler (VirtualFlow
§6: real multi-process data-parallel training, here on one machine).

Processes start from a fork server with torch preloaded, so each costs a fork, not an
interpreter and a torch import. They join one process group through a TCP store that the
parent opens on a free port of 127.0.0.1 (no port race). Each runs ``target(rank, world,
report, *args)`` after ``init_process_group``; ``report(key, payload)`` sends a result to
the parent, and an exception in any process ends the run with ``GroupFailed`` naming it.
The group is gloo's whatever the device: gloo also all-reduces CUDA tensors, so every
process may share one GPU (nccl refuses two ranks on one device).
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import traceback
from collections.abc import Callable, Hashable
from datetime import timedelta

import torch

log = logging.getLogger(__name__)

TIMEOUT_S = 300.0
# torch._dynamo: imported by the first optimizer built (~1.4 s): once in the server, not per process
PRELOAD = ("torch", "torch._dynamo")


class GroupFailed(RuntimeError):
    """A process of the group failed; the message carries its first error line."""


def run_group(target: Callable[..., None], world: int, args: tuple, expected: list[Hashable],
              meanwhile: Callable[[], object] = lambda: None) -> tuple[dict, object]:
    """Run ``target`` on ``world`` processes until every key in ``expected`` is reported.
    Returns (key -> payload, what ``meanwhile()`` returned: it runs here in the meantime).
    ``target`` must be importable by name (a module-level function)."""
    import torch.distributed as dist

    ctx = multiprocessing.get_context("forkserver")
    multiprocessing.set_forkserver_preload([*PRELOAD, __name__, target.__module__])
    store = dist.TCPStore("127.0.0.1", 0, world + 1, is_master=True,
                          timeout=timedelta(seconds=TIMEOUT_S), wait_for_workers=False)
    results = ctx.Queue()
    procs = [ctx.Process(target=_member, args=(target, rank, world, store.port, results, args),
                         daemon=True) for rank in range(world)]
    for proc in procs:
        proc.start()
    outputs: dict = {}
    try:
        extra = meanwhile()
        while len(outputs) < len(expected):
            try:
                kind, key, payload = results.get(timeout=1.0)
            except queue.Empty:
                _check_alive(procs, [k for k in expected if k not in outputs])
                continue
            if kind == "error":
                raise GroupFailed(f"process {key} failed: {payload}")
            outputs[key] = payload
        for proc in procs:
            proc.join(timeout=TIMEOUT_S)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join()
    return outputs, extra


def _check_alive(procs: list, missing: list) -> None:
    dead = [p for p in procs if p.exitcode not in (None, 0)]
    if dead:
        raise GroupFailed(f"a process exited with code {dead[0].exitcode}")
    if all(p.exitcode == 0 for p in procs):
        raise GroupFailed(f"the processes ended without reporting {missing}")


def _member(target: Callable[..., None], rank: int, world: int, port: int, results,
            args: tuple) -> None:
    import torch.distributed as dist

    from .engine import backend_for

    torch.set_num_threads(1)  # world processes share a small machine
    try:
        store = dist.TCPStore("127.0.0.1", port, world + 1, is_master=False,
                              timeout=timedelta(seconds=TIMEOUT_S))
        dist.init_process_group(backend_for(torch.device("cpu")), store=store, rank=rank,
                                world_size=world, timeout=timedelta(seconds=TIMEOUT_S))
        target(rank, world, lambda key, payload: results.put(("result", key, payload)), *args)
        dist.barrier()   # leave together: an early teardown can abort a peer still finishing
        dist.destroy_process_group()
    except Exception as err:  # reported to the parent, which raises GroupFailed
        log.debug("process %d failed", rank, exc_info=True)
        where = traceback.format_exc().splitlines()[-2].strip()
        results.put(("error", rank, f"{type(err).__name__}: {err} [{where}]"))
