"""Start the P × D ranks of a pipeline run as processes and collect their results
(thesis §3.2.3: parallel pipelines). gloo on CPU, nccl when CUDA is present.

Ranks start from a fork server (see :func:`_context`). Rank 0 opens the rendezvous store on
port 0 of 127.0.0.1 and hands the port to the others, so runs never race for a port. Each
rank uses one thread (``torch.set_num_threads(1)``) so that P·D processes share a small
machine without fighting.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import statistics
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .calibrate import calibrate_rank
from .config import RunConfig
from .executor import StageRuntime
from .morph import save_layers, write_meta
from .records import RankStats, StageCalibration

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipelineRun:
    """Final weights by global name (from replica 0 of each stage), per-rank stats and,
    when asked for, per-rank calibration."""

    weights: dict[str, torch.Tensor]
    stats: tuple[RankStats, ...]
    calibration: tuple[StageCalibration, ...] = ()


class PipelineFailed(RuntimeError):
    """A rank raised; the message carries its traceback's last line."""


def _join(rank: int, world: int, ports: mp.Queue) -> None:
    """Join the process group on one thread: rank 0 opens the store and hands out its port."""
    torch.set_num_threads(1)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True,
                              timeout=timedelta(seconds=120), wait_for_workers=False)
        for _ in range(world - 1):
            ports.put(store.port)
    else:
        port = ports.get(timeout=120)
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                              timeout=timedelta(seconds=120))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))


def _rank_process(work, rank: int, world: int, args: tuple, ports: mp.Queue,
                  results: mp.Queue) -> None:
    """A rank process: join the group, run ``work(rank, *args)`` and report ("ok", rank,
    *its reply) or the error to the parent; the ranks leave the group together."""
    try:
        _join(rank, world, ports)
        results.put(("ok", rank, *work(rank, *args)))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as err:  # noqa: BLE001 - every failure goes to the parent
        results.put(("error", rank, f"{type(err).__name__}: {err}",
                     traceback.format_exc()))
    finally:
        results.close()
        results.join_thread()  # flush the queue before leaving without clean-up
        os._exit(0)


def _train_rank(rank: int, cfg: RunConfig, calibrate: bool) -> tuple:
    """(weights of replica 0, stats, calibration or None) of one rank of ``cfg``."""
    runtime = StageRuntime(cfg, rank)
    calibration = calibrate_rank(runtime) if calibrate else None
    stats = runtime.train()
    weights = runtime.final_weights() if runtime.replica == 0 else {}
    if cfg.save_dir and runtime.replica == 0:
        save_layers(Path(cfg.save_dir), runtime.layer_state())
    return {g: t.numpy().copy() for g, t in weights.items()}, stats, calibration


def _context() -> mp.context.BaseContext:
    """A fork server that has imported this module but run no torch op: children start fast
    and do not inherit a parent's OpenMP pool (forking one leaves every op ~100× slower).
    The server also imports what torch loads on the first backward with an explicit gradient
    (``symbolic_shapes``, pulling in sympy: ~1.4 s per process otherwise)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "torch.fx.experimental.symbolic_shapes"])
    return ctx


def run_pipeline(cfg: RunConfig, timeout_s: float = 300.0,
                 calibrate: bool = False) -> PipelineRun:
    """Train ``cfg`` across P × D processes; raise :class:`PipelineFailed` if a rank fails.
    With ``calibrate``, every rank first measures its primitive costs (Varuna §4.3:
    :func:`workers.pipeline.calibrate.calibrate_rank`, all ranks at once, just before training)."""
    cfg.check()
    weights: dict[str, torch.Tensor] = {}
    stats: list[RankStats] = []
    calibration: list[StageCalibration] = []
    for _, _, rank_weights, rank_stats, rank_calibration in _run_ranks(
            _train_rank, cfg.stages * cfg.replicas, (cfg, calibrate), timeout_s,
            "pipeline run"):
        weights.update({g: torch.from_numpy(a) for g, a in rank_weights.items()})
        stats.append(rank_stats)
        if rank_calibration is not None:
            calibration.append(rank_calibration)
    if cfg.save_dir:
        write_meta(Path(cfg.save_dir), cfg.start_step + cfg.steps, cfg.spec.layers)
    return PipelineRun(weights, tuple(sorted(stats, key=lambda s: s.rank)),
                       tuple(sorted(calibration, key=lambda c: c.rank)))


def _run_ranks(work, world: int, args: tuple, timeout_s: float, what: str) -> list[tuple]:
    """Run ``work(rank, *args)`` in ranks 0…world−1 (:func:`_rank_process`, from the fork
    server) and return each rank's reply; raise :class:`PipelineFailed` when a rank reports
    an error or no reply comes within ``timeout_s``. The processes are reaped either way."""
    ctx = _context()
    ports, results = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_rank_process, args=(work, r, world, args, ports, results),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    replies = []
    try:
        for _ in range(world):
            try:
                item = results.get(timeout=timeout_s)
            except queue.Empty:
                raise PipelineFailed(f"{what} timed out after {timeout_s:.0f}s") from None
            if item[0] == "error":
                log.debug("rank %d failed:\n%s", item[1], item[3])
                raise PipelineFailed(f"rank {item[1]}: {item[2]}")
            replies.append(item)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join()
    return replies


def _link_rank(rank: int, nbytes: int, repeats: int) -> tuple[float]:
    """(median half round trip,) of an ``nbytes`` tensor between ranks 0 and 1."""
    device = (torch.device("cuda", rank % torch.cuda.device_count())
              if torch.cuda.is_available() else torch.device("cpu"))
    buf = torch.zeros(max(nbytes // 4, 1), dtype=torch.float32, device=device)
    times = []
    for rep in range(repeats + 3):     # the first trips set the connection up
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(buf, 1)
            dist.recv(buf, 1)
        else:
            dist.recv(buf, 0)
            dist.send(buf, 0)
        if rep >= 3:
            times.append((time.perf_counter() - t0) / 2)
    return (statistics.median(times),)


def measure_link(nbytes: int, repeats: int = 20, timeout_s: float = 120.0) -> float:
    """Seconds for one ``nbytes`` tensor to go from one rank to another: the median half
    round trip over ``repeats`` between two fresh processes (Varuna §4.3 calibrates
    "activation send-receive time" per micro-batch size; a profile's
    ``bandwidth_bytes_per_s`` is ``nbytes`` over it)."""
    if not isinstance(nbytes, int) or nbytes < 4:
        raise ValueError(f"nbytes={nbytes!r} must be an integer of at least 4")
    replies = _run_ranks(_link_rank, 2, (nbytes, repeats), timeout_s, "link measurement")
    return next(seconds for _, rank, seconds in replies if rank == 0)
