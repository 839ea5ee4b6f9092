"""Offline profiles of step time against per-GPU batch size (VirtualFlow §5.1.1).

A job runs a few steps at each batch size of interest on one device: powers of two and
the midpoints between them (1, 2, 3, 4, 6, 8, 12, ...), up to the largest that fits (on
CUDA an out-of-memory error ends the sweep). On a CPU-only machine the CPU is profiled and
stands in for one GPU type; the other, emulated, types scale that profile by the throughput
table's ratios, the rule the worker's GPU emulation uses for pacing. ``measure_comm_s``
times the step's one all-reduce among local processes. The result is the profile format the
split solver reads.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Mapping

import torch

log = logging.getLogger(__name__)

StepFactory = Callable[[int], Callable[[], None]]


def profile_batches(max_batch: int) -> list[int]:
    """Powers of two and their midpoints (3 * 2**k) up to ``max_batch``."""
    if max_batch < 1:
        raise ValueError(f"max batch must be at least 1, got {max_batch}")
    sizes = {1}
    power = 1
    while power <= max_batch:
        sizes.update(s for s in (power, 3 * power // 2) if s <= max_batch and s >= 1)
        power *= 2
    return sorted(sizes)


def profile_step_times(make_step: StepFactory, batches: list[int], *, steps: int = 3,
                       warmup: int = 1, device: torch.device | None = None,
                       clock: Callable[[], float] = time.perf_counter) -> dict[int, float]:
    """Median seconds of ``steps`` steps at each batch size (after ``warmup`` steps).

    ``make_step(b)`` returns a function running one training step on a batch of ``b``
    samples. The sweep stops at the first batch that runs out of device memory."""
    cuda = device is not None and device.type == "cuda"
    result: dict[int, float] = {}
    for batch in batches:
        try:
            step = make_step(batch)
            for _ in range(warmup):
                step()
            times = []
            for _ in range(steps):
                if cuda:
                    torch.cuda.synchronize(device)
                start = clock()
                step()
                if cuda:
                    torch.cuda.synchronize(device)
                times.append(clock() - start)
        except torch.OutOfMemoryError:
            log.info("batch %d does not fit in memory; profile ends at %s", batch,
                     max(result, default=None))
            break
        result[batch] = statistics.median(times)
        log.debug("batch %d: %.6f s/step", batch, result[batch])
    return result


def _time_all_reduce(rank: int, world: int, report, numel: int, repeats: int) -> None:
    import torch.distributed as dist

    buffer = torch.zeros(numel)
    dist.all_reduce(buffer)  # the first one also sets up the connections
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(buffer)
        times.append(time.perf_counter() - start)
    if rank == 0:
        report("comm_s", statistics.median(times))


def measure_comm_s(numel: int, processes: int = 2, repeats: int = 5) -> float:
    """Median seconds of one all-reduce of ``numel`` float32 values (a model's gradient)
    among ``processes`` local gloo processes: the ``comm`` of §5.1.2. The paper takes the
    difference of distributed and single-node step times at batch 1; with virtual nodes
    that difference is this one all-reduce per step, so it is timed directly."""
    from .procs import run_group

    if numel <= 0 or processes < 2 or repeats <= 0:
        raise ValueError(f"need numel > 0, processes >= 2, repeats > 0; got {numel}, "
                         f"{processes}, {repeats}")
    outputs, _ = run_group(_time_all_reduce, processes, (numel, repeats), ["comm_s"])
    return float(outputs["comm_s"])


def emulate_profiles(measured: Mapping[int, float], base_type: str,
                     speeds: Mapping[str, float], memory_gb: Mapping[str, float],
                     comm_s: float = 0.0) -> dict[str, dict]:
    """Profiles of emulated types from one measured profile standing in for ``base_type``.

    ``speeds[t]`` is type t's throughput (e.g. the throughput table's steps/s of the job);
    type t's step time is the measured time x speeds[base] / speeds[t]."""
    if speeds.get(base_type, 0) <= 0:
        raise ValueError(f"base type {base_type!r} needs a positive speed, got "
                         f"{speeds.get(base_type)!r}")
    profiles = {}
    for name, speed in speeds.items():
        if speed <= 0:
            continue  # the job cannot run on this type
        if name not in memory_gb:
            raise ValueError(f"no memory size for GPU type {name!r}")
        scale = speeds[base_type] / speed
        profiles[name] = {"memory_gb": memory_gb[name], "comm_s": comm_s,
                          "step_s": {str(b): t * scale for b, t in sorted(measured.items())}}
    return profiles


def model_step_factory(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                       loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                       make_batch: Callable[[int], tuple[torch.Tensor, torch.Tensor]]
                       ) -> StepFactory:
    """``make_step`` for a model: forward, backward and optimizer step on synthetic data."""
    def make_step(batch: int) -> Callable[[], None]:
        inputs, targets = make_batch(batch)

        def step() -> None:
            optimizer.zero_grad(set_to_none=False)
            loss_fn(model(inputs), targets).backward()
            optimizer.step()
        return step
    return make_step


def catalog_profiles(measured: Mapping[int, float], job_type: str, *, base_type: str = "k80",
                     scale_factor: int = 1, comm_s: float = 0.0) -> dict[str, dict]:
    """Emulated profiles of every GPU type of the default catalog for ``job_type``: the
    catalog's steps/s give the speed ratios and its GPU list the memory sizes."""
    from traces.catalog import DEFAULT_CATALOG_JSON_PATH, default_catalog
    from traces.throughputs import read_document

    catalog = default_catalog()
    gpus = read_document(DEFAULT_CATALOG_JSON_PATH)["meta"]["gpus"]
    speeds = {w: catalog.table.get(w, job_type, scale_factor) for w in catalog.table.worker_types}
    if not any(speeds.values()):
        raise ValueError(f"job type {job_type!r} (scale factor {scale_factor}) is not in the "
                         f"catalog")
    memory = {w: float(gpus[w]["memory_gb"]) for w in speeds if w in gpus}
    return emulate_profiles(measured, base_type, speeds, memory, comm_s)
