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
