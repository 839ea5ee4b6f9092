"""Measure one worker type's throughput row: steps/s of every catalog job type at scale
factor 1 on one device (thesis §5.7.1, Table 5.2; Gavel profiled each job type offline the
same way, §5.3.3), as the ``gavelsched-profile/1`` dict that ``gavelsched profile`` writes.

Each family's model is built once and reused for its batch sizes. A job type takes at least
``WARMUP_STEPS`` untimed steps (cuDNN autotuning, allocator warm-up), then timed steps until
``seconds_per_type`` have passed and at least ``MIN_TIMED_STEPS`` ran; the device is
synchronized only before the clock is read, so queued kernels overlap as in training. A job
type that fails (out of memory, an unsupported kernel) is recorded under ``skipped`` with a
one-line reason and the others go on.
"""

from __future__ import annotations

import gc
import logging
import math
import platform
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

import torch

from traces.catalog import JobTypeInfo, default_catalog

from .architectures import FAMILIES, Trainer, batch_size, build, describe

log = logging.getLogger(__name__)

SCHEMA = "gavelsched-profile/1"
PRECISIONS = ("fp32", "bf16")
WARMUP_STEPS = 2
MIN_TIMED_STEPS = 3
REASON_CHARS = 200


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 autocast can run on ``device`` (CPU autocast always can, if slowly)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu"


def device_name(device: torch.device) -> str:
    """The name a profile records: the GPU's, or ``cpu (<processor>)``."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()})"


def measure_row(worker_type: str, *, device: torch.device | str, precision: str,
                reduced: bool, job_types: Iterable[str] | None = None,
                seconds_per_type: float,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Steps/s of ``job_types`` (default: the whole catalog, in its order) on ``device``.

    ``progress(job_type)`` is called once per job type, measured or skipped. Returns the
    ``gavelsched-profile/1`` dict (schema in docs; read by ``traces/profiles.py``)."""
    device = _resolved(torch.device(device))
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    catalog = default_catalog().job_types
    names = list(catalog) if job_types is None else list(job_types)
    unknown = [name for name in names if name not in catalog]
    if unknown:
        raise ValueError(f"unknown job types {unknown}; known: {', '.join(catalog)}")
    started, wall = datetime.now(timezone.utc), time.perf_counter()
    rates: dict[str, float] = {}
    skipped: dict[str, str] = {}
    architectures: dict[str, str] = {}
    benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = device.type == "cuda" or benchmark
    try:
        for family, infos in _by_family(catalog[name] for name in names).items():
            measured = _measure_family(family, infos, device, precision == "bf16", reduced,
                                       seconds_per_type, skipped, progress)
            rates.update(measured)
            if measured:
                architectures[family] = describe(family, reduced)
    finally:
        torch.backends.cudnn.benchmark = benchmark
    return {"schema": SCHEMA, "worker_type": worker_type, "device": device_name(device),
            "precision": precision, "reduced": reduced, "torch": torch.__version__,
            "cuda": torch.version.cuda or None,
            "measured_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "seconds": round(time.perf_counter() - wall, 3),
            "steps_per_s": {name: rates[name] for name in names if name in rates},
            "skipped": {name: skipped[name] for name in names if name in skipped},
            "architectures": architectures}


def _resolved(device: torch.device) -> torch.device:
    """``cuda`` pinned to the current GPU, so generators and tensors agree on it."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _by_family(infos: Iterable[JobTypeInfo]) -> dict[str, list[JobTypeInfo]]:
    families: dict[str, list[JobTypeInfo]] = {}
    for info in infos:
        families.setdefault(info.family, []).append(info)
    return families


def _measure_family(family: str, infos: list[JobTypeInfo], device: torch.device, bf16: bool,
                    reduced: bool, seconds: float, skipped: dict[str, str],
                    progress: Callable[[str], None] | None) -> dict[str, float]:
    """Build ``family`` once, time each of its job types, then free its memory."""
    rates: dict[str, float] = {}
    trainer: Trainer | None = None
    reason = None if family in FAMILIES else f"no architecture for family {family!r}"
    if reason is None:
        try:
            trainer = build(family, device, reduced=reduced, bf16=bf16)
        except (RuntimeError, ValueError) as err:   # torch.OutOfMemoryError is a RuntimeError
            reason = f"building {family}: {_one_line(err)}"
    for info in infos:
        if trainer is not None:
            reason = None
            try:
                rates[info.name] = _time_steps(trainer, batch_size(info.batch_size, reduced),
                                               device, seconds)
            except (RuntimeError, ValueError) as err:   # OOM, a kernel or shape refused
                reason = _one_line(err)
        if reason is not None:
            skipped[info.name] = reason
            log.warning("%s on %s: skipped: %s", info.name, device, reason)
            _free(device)
        else:
            log.info("%s: %.4g steps/s", info.name, rates[info.name])
        if progress is not None:
            progress(info.name)
    del trainer
    _free(device)
    return rates


def _time_steps(trainer: Trainer, batch: int, device: torch.device, seconds: float) -> float:
    """Steps/s of ``trainer`` on one synthetic batch of ``batch`` samples, made once."""
    generator = torch.Generator(device=device).manual_seed(0)
    data = trainer.make_batch(generator, batch)
    for _ in range(WARMUP_STEPS):
        trainer.step(data)
    _sync(device)
    start = time.perf_counter()
    steps = 0
    while steps < MIN_TIMED_STEPS or time.perf_counter() - start < seconds:
        trainer.step(data)
        steps += 1
    _sync(device)
    rate = steps / (time.perf_counter() - start)
    if not (math.isfinite(rate) and rate > 0):   # pragma: no cover - a clock that stood still
        raise RuntimeError(f"measured rate {rate!r} steps/s is not positive and finite")
    return rate


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    line = f"{type(err).__name__}: {text[0] if text else 'no message'}"
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 3] + "..."
