"""``vn check``: the same training trajectory under every mapping and across resizes
(VirtualFlow §3, §4.1, §6.2: only the virtual nodes, never the mapping, affect training).

Real multi-process training: a pool of processes started once (``procs.run_group``:
forkserver, torch preloaded) joins one gloo group on 127.0.0.1 through a TCP store on a
free port. Each mapping, and each phase of a resize sequence, uses a sub-group of the
first N processes; between resize phases the job checkpoints to disk and the next phase,
on another number of processes, resumes from that file. The parent process trains the reference meanwhile: one process
running all virtual nodes without any process group. Results are the largest absolute
difference, over the model's parameters and batch-norm running statistics, from it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from gavelsched.virtual.layout import NodeMapping
from .procs import GroupFailed, run_group
from .reference import ReferenceJob, reference_trainer, state_vector


@dataclass(frozen=True)
class Task:
    """One run: a mapping for ``steps`` steps, from scratch or from a checkpoint."""

    label: str
    mapping: NodeMapping
    steps: int
    resume_from: str | None = None
    save_to: str | None = None
    end_step: int = 0


@dataclass(frozen=True)
class CheckResult:
    label: str
    processes: int
    nodes_per_process: tuple[int, ...]
    end_step: int
    max_abs_diff: float


class CheckFailed(RuntimeError):
    """A check process failed; the message carries its first error line."""


def mapping_tasks(mappings: list[NodeMapping], steps: int) -> list[Task]:
    return [Task(m.label(), m, steps, end_step=steps) for m in mappings]


def resize_tasks(processes: list[int], nodes: int, steps: int, workdir: Path) -> list[Task]:
    """Phases of ``steps`` steps on each process count, checkpointing in between."""
    tasks, previous = [], None
    for i, count in enumerate(processes):
        mapping = NodeMapping.even(count, nodes)
        path = str(workdir / f"phase{i}.pt")
        tasks.append(Task(f"resize[{i}]:{count}", mapping, steps, resume_from=previous,
                          save_to=path, end_step=steps * (i + 1)))
        previous = path
    return tasks


def run_check(job: ReferenceJob, mappings: list[NodeMapping], steps: int,
              resize: list[int] | None = None) -> list[CheckResult]:
    """Run every mapping (and the resize sequence) and compare with the reference."""
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    with tempfile.TemporaryDirectory(prefix="vn-check-") as tmp:
        tasks = mapping_tasks(mappings, steps)
        tasks += resize_tasks(resize or [], job.nodes, steps, Path(tmp))
        if not tasks:
            return []
        world = max(t.mapping.processes for t in tasks)
        wanted = sorted({t.end_step for t in tasks})
        try:
            outputs, reference = run_group(_worker, world, (job, tasks), list(range(len(tasks))),
                                           lambda: _reference_states(job, wanted))
        except GroupFailed as err:
            raise CheckFailed(f"check {err}") from None
    return [CheckResult(t.label, t.mapping.processes, tuple(len(n) for n in t.mapping.ranks),
                        t.end_step, float((torch.tensor(outputs[i], dtype=torch.float64)
                                           - reference[t.end_step]).abs().max()))
            for i, t in enumerate(tasks)]


def _reference_states(job: ReferenceJob, steps: list[int]) -> dict[int, torch.Tensor]:
    trainer = reference_trainer(job, range(job.nodes))
    states = {}
    for _ in range(max(steps)):
        trainer.step()
        if trainer.global_step in steps:
            states[trainer.global_step] = state_vector(trainer)
    return states


def _worker(rank: int, world: int, report: Callable[[int, list], None], job: ReferenceJob,
            tasks: list[Task]) -> None:
    """One process of the pool: every task in order, on the sub-group of its first N."""
    import torch.distributed as dist

    from .checkpoint import load_checkpoint, save_checkpoint

    for index, task in enumerate(tasks):
        members = task.mapping.processes
        group = dist.new_group(ranks=list(range(members)))
        if rank < members:
            trainer = reference_trainer(job, task.mapping.ranks[rank], group=group)
            if task.resume_from:
                load_checkpoint(trainer, task.resume_from)
            for _ in range(task.steps):
                trainer.step()
            if rank == 0:
                if task.save_to:
                    save_checkpoint(trainer, task.save_to)
                report(index, state_vector(trainer).tolist())
        dist.barrier()  # a phase's checkpoint is on disk before the next phase starts
