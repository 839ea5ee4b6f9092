"""Which reference workload runs each job type (thesis Table 5.2's families), as data.

The scheduler validates submissions against this table without importing torch; the
workers resolve a workload name to its module (``workers.workloads``). ``steps`` is the
light workload that only steps the iterator (load tests, and jobs with no model).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Workload name -> what it trains (synthetic data only).
WORKLOADS: Mapping[str, str] = MappingProxyType({
    "resnet": "a small ResNet on synthetic images",
    "lstm": "an LSTM language model on synthetic tokens",
    "transformer": "a Transformer encoder-decoder on synthetic token pairs",
    "recoder": "a recommendation autoencoder on synthetic user-item vectors",
    "gpt": "a GPT-style model trained pipeline-parallel (P stages x D replicas), re-planned "
           "for its GPU count at every start",
    "steps": "no model: steps the iterator at the pace of its worker type",
})

# Catalog family -> reference workload. A3C's policy network and CycleGAN's generators are
# convolutional, so the ResNet stands in for them.
FAMILY_WORKLOAD: Mapping[str, str] = MappingProxyType({
    "ResNet-50": "resnet",
    "ResNet-18": "resnet",
    "CycleGAN": "resnet",
    "A3C": "resnet",
    "LSTM": "lstm",
    "Transformer": "transformer",
    "Recoder": "recoder",
})


# Workload name -> its CPU batch rule, (batch when the job type is not in the catalog,
# divisor of the catalog's per-GPU batch): a CPU step stays in the milliseconds while
# bigger job types still do more work per step. Here, not in the workload modules, so the
# scheduler reads it without importing torch.
CPU_BATCH: Mapping[str, tuple[int, int]] = MappingProxyType({
    "resnet": (8, 16), "lstm": (4, 5), "transformer": (4, 16), "recoder": (8, 256),
    "gpt": (4, 16)})

# Workloads whose training loop runs virtual nodes (workers/workloads/common.py: ``train``),
# so a job on several GPU types at once may use them (VirtualFlow §4).
VIRTUAL_NODE_WORKLOADS: tuple[str, ...] = ("resnet", "lstm", "transformer", "recoder")


class UnknownWorkload(ValueError):
    """A workload name or job type with no reference workload."""


def check_workload(name: str) -> str:
    if name not in WORKLOADS:
        raise UnknownWorkload(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return name


def workload_for(job_type: str) -> str:
    """The reference workload of a catalog job type (by its family)."""
    from .catalog import default_catalog

    info = default_catalog().job_types.get(job_type)
    if info is None or info.family not in FAMILY_WORKLOAD:
        raise UnknownWorkload(f"job type {job_type!r} has no reference workload; give "
                              f"`workload` ({', '.join(WORKLOADS)}) or `command`")
    return FAMILY_WORKLOAD[info.family]


def cpu_batch(workload: str, job_type: str | None) -> int:
    """The per-rank batch ``workload`` trains for ``job_type`` on CPU (``CPU_BATCH``)."""
    from .catalog import default_catalog

    default, divisor = CPU_BATCH[workload]
    info = default_catalog().job_types.get(job_type) if job_type else None
    return default if info is None else max(1, info.batch_size // divisor)
