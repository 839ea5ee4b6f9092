"""One pipeline training run's configuration (:class:`RunConfig`), shared by the executor,
the launcher, morphing and the calibrated simulator (thesis §3.2, §4.2 for the P × D layout;
Varuna §4 for the checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .kinds import ScheduleKind, build_schedule, kind_named
from .model import ModelSpec, layer_bounds


@dataclass(frozen=True)
class RunConfig:
    """One pipeline training run."""

    kind: str
    stages: int
    microbatches: int
    steps: int
    replicas: int = 1
    chunks: int = 1
    batch: int = 0                    # global mini-batch; 0 means replicas × microbatches × 2
    lr: float = 0.1
    spec: ModelSpec = field(default_factory=ModelSpec)
    recompute: bool = False
    cuts: tuple[int, ...] | None = None   # first layer of chunks 1…; None = even split
    advance_num: int | None = None
    start_step: int = 0               # data offset when resuming from a checkpoint
    load_dir: str | None = None       # layer-wise checkpoint to start from
    save_dir: str | None = None       # write a layer-wise checkpoint at the end
    recv_ahead: int | None = None     # receives kept posted ahead of their action (0: none;
    #                                   None: a mini-batch's, one buffer per boundary tensor)

    @property
    def global_batch(self) -> int:
        return self.batch or self.replicas * self.microbatches * 2

    @property
    def micro_size(self) -> int:
        return self.global_batch // (self.replicas * self.microbatches)

    @property
    def schedule_kind(self) -> ScheduleKind:
        """The declared kind named by :attr:`kind` (a ScheduleError for an unknown one)."""
        return kind_named(self.kind)

    def schedule_options(self) -> dict:
        """Keyword options of this run's schedule generator, among those its kind takes:
        ``advance_num``, and ``batches`` (a no-flush schedule spans all the steps)."""
        values = {"advance_num": self.advance_num, "batches": self.steps}
        return {name: values[name] for name in self.schedule_kind.options if name in values}

    def check(self) -> None:
        """Raise ValueError naming the first bad field."""
        for name in ("stages", "microbatches", "steps", "replicas", "chunks"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        if self.recv_ahead is not None and (not isinstance(self.recv_ahead, int)
                                            or self.recv_ahead < 0):
            raise ValueError(f"recv_ahead={self.recv_ahead!r} must be a non-negative integer "
                             "or None (a mini-batch's receives)")
        if self.global_batch % (self.replicas * self.microbatches):
            raise ValueError(f"batch={self.global_batch} is not divisible by replicas × "
                             f"microbatches = {self.replicas * self.microbatches}")
        build_schedule(self.kind, self.stages, self.microbatches, self.chunks,
                       **self.schedule_options())   # a ScheduleError is a ValueError
        if not self.schedule_kind.flush and (self.load_dir or self.save_dir):
            raise ValueError("checkpoints (morphing) are for flush schedules, not "
                             f"{self.kind}")
        layer_bounds(self.spec.layers, self.stages * self.chunks,
                     list(self.cuts) if self.cuts is not None else None)
