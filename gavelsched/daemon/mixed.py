"""What the daemon launches for a mixed-capable job (VirtualFlow §5.1.2, §6.5.2; issue #9):
one virtual-node layout for the job's whole life, and each run's mapping of its nodes onto
the ranks of the micro-task it got (docs/runtime.md, "Mixed-type jobs (virtual nodes)").

- **The layout is fixed.** A virtual-node checkpoint only resumes under the same layout (V
  and node sizes), so a job keeps one: its global batch B is the batch it trains on one
  type, ``scale_factor`` ranks of the reference workload's CPU batch for its job type
  (``traces.workloads.cpu_batch``, the rule the workload itself trains with), and its V = min(B, ``NODES_PER_GPU`` x
  scale factor) nodes are as even as possible. B is raised to the most ranks a
  configuration of the job can hold (2 x scale factor, ``core.configurations``) when it is
  smaller, so every rank holds a node.
- **Every run carries it**, a single-type run too (all nodes dealt evenly over its ranks):
  plain and virtual-node checkpoints refuse each other, and one trajectory needs one layout.
- **A configuration's run** deals the nodes in proportion to the split plan's batch per GPU
  of each rank's type (largest remainder, at least one node per rank), ranks in the plan's
  order (by type name, then GPU: the order of ``MicroTask.workers``).

Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from traces.workloads import VIRTUAL_NODE_WORKLOADS
from traces.workloads import cpu_batch as workload_cpu_batch

from ..virtual.envspec import JobLayout
from ..virtual.layout import NodeMapping, VirtualLayout, split_evenly, split_proportionally
from .store import JobRow

NODES_PER_GPU = 16


class MixedJobError(ValueError):
    """A job that cannot run split across types (the message names why)."""


def cpu_batch(workload: str, job_type: str) -> int:
    """The per-rank batch ``workload`` trains for ``job_type`` on CPU."""
    if workload not in VIRTUAL_NODE_WORKLOADS:
        raise MixedJobError(f"workload {workload!r} does not run virtual nodes; mixed jobs "
                            f"need one of {', '.join(VIRTUAL_NODE_WORKLOADS)}")
    return workload_cpu_batch(workload, job_type)


def node_sizes(job: JobRow) -> tuple[int, ...]:
    """The job's virtual-node sizes (module docstring): sum B, V of them."""
    sf = job.spec.scale_factor
    batch = max(sf * cpu_batch(job.workload, job.spec.job_type), 2 * sf)
    return split_evenly(batch, min(batch, NODES_PER_GPU * sf))


def rank_weights(split: Mapping | None, worker_types: Sequence[str]) -> tuple[int, ...]:
    """Each rank's weight in the deal: its type's batch per GPU in the split plan
    (``SplitPlan.to_dict()``), or 1 each for a single-type run."""
    if split is None:
        return (1,) * len(worker_types)
    per_type = {t: int(p["batch_per_gpu"]) for t, p in split["types"].items()}
    return tuple(per_type[t] for t in worker_types)


def job_layout(job: JobRow, worker_types: Sequence[str],
               split: Mapping | None = None) -> JobLayout:
    """The layout of ``job`` mapped onto ranks of ``worker_types`` (module docstring)."""
    sizes = node_sizes(job)
    ranks = len(worker_types)
    if ranks > len(sizes):
        raise MixedJobError(f"job {job.id}: {ranks} ranks for {len(sizes)} virtual nodes")
    counts = list(split_proportionally(len(sizes), rank_weights(split, worker_types)))
    for rank in range(ranks):     # a rank the deal left empty takes one from the largest
        if counts[rank] == 0:
            counts[counts.index(max(counts))] -= 1
            counts[rank] = 1
    return JobLayout(VirtualLayout(sizes), NodeMapping.from_counts(tuple(counts)),
                     tuple(worker_types))


def mixed_env(job: JobRow, worker_types: Sequence[str],
              split: Mapping | None = None) -> dict[str, str]:
    """The ``RunJobRequest.env`` of every server of one run of ``job``
    (``gavelsched.virtual.envspec``)."""
    return job_layout(job, worker_types, split).to_env()
