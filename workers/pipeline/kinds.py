"""Pipeline schedule kinds as data (issue #16): one :class:`ScheduleKind` per kind in
:data:`KINDS`, with the traits the rest of the code reads instead of comparing names.

A new kind is one generator in :mod:`workers.pipeline.schedules` and one declaration below.
The executor, the simulator, the planner, the calibrated simulator and the CLI follow its
traits: ``flush`` (thesis §3.2: a flush ends every mini-batch with all ranks idle and one
update), ``weight_versions`` (§3.2.1: 2BW double-buffers), ``recomputes`` (Varuna §3.2:
explicit R actions), ``multi_chunk`` (thesis §4.2.2: several model chunks per rank),
``options`` (the generator's keyword options) and ``planner`` (PipeDream-2BW's planner,
§3.3.3, models it). ``tests/workers/pipeline/test_kinds.py`` checks every declaration against
what its generator produces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import schedules
from .ops import Schedule, ScheduleError


@dataclass(frozen=True)
class ScheduleKind:
    """One pipeline schedule kind and its traits."""

    name: str
    generator: Callable[..., Schedule]   # (stages, microbatches, chunks, **options)
    description: str                     # one line
    source: str                          # the paper section it comes from
    # each call covers one mini-batch, after which every rank is idle and the weights are
    # updated once (W ← W − ν∇f(W)); False: one call spans many mini-batches (option
    # ``batches``) and a stage updates on its own once it has finished one (2BW)
    flush: bool = True
    # weight versions a stage holds at most: 1 with a flush; 2 for 2BW, whose input k uses
    # version max(⌊(k−1)/m⌋−1, 0), i.e. delayed SGD W(t+1) = W(t) − ν∇f(W(t−1))
    weight_versions: int = 1
    # the schedule itself holds R actions: every stage but the last recomputes every
    # micro-batch (with or without RunConfig.recompute)
    recomputes: bool = False
    multi_chunk: bool = False            # several model chunks per rank (chunk c on rank c mod P)
    options: tuple[str, ...] = ()        # the generator's keyword options
    planner: bool = False                # PipeDream-2BW's planner's cost model covers it

    def __post_init__(self) -> None:
        if self.weight_versions != (1 if self.flush else 2):
            raise ValueError(f"{self.name}: a flush kind holds 1 weight version and the no-flush "
                             f"kind 2BW's 2 (thesis §3.2.1), not {self.weight_versions}")
        if not self.flush and "batches" not in self.options:
            raise ValueError(f"{self.name}: a no-flush kind takes the option 'batches' (the "
                             "mini-batches one schedule spans)")

    @property
    def default_chunks(self) -> int:
        """Chunks per rank when none are given: 2 for a multi-chunk kind, else 1."""
        return 2 if self.multi_chunk else 1

    @property
    def delay(self) -> int:
        """Mini-batches a gradient is late by: W(t+1) = W(t) − ν∇f(W(t−delay))."""
        return self.weight_versions - 1

    def build(self, stages: int, microbatches: int, chunks: int | None = None,
              **options) -> Schedule:
        """The schedule of this kind; ``chunks`` defaults to :attr:`default_chunks`."""
        if chunks is None:
            chunks = self.default_chunks
        for name, value in (("stages", stages), ("microbatches", microbatches),
                            ("chunks", chunks)):
            if not isinstance(value, int) or value < 1:
                raise ScheduleError(f"{self.name}: {name}={value!r} must be a positive integer")
        if chunks != 1 and not self.multi_chunk:
            several = " or ".join(k.name for k in KINDS.values() if k.multi_chunk)
            raise ScheduleError(f"{self.name}: chunks={chunks} but this schedule has one chunk "
                                f"per device (use {several} for several)")
        return self.generator(stages, microbatches, chunks, **options)


KINDS: dict[str, ScheduleKind] = {kind.name: kind for kind in (
    ScheduleKind("gpipe", schedules.gpipe, "all forwards, then all backwards (flush)",
                 "thesis §3.2, Figure 3.3"),
    ScheduleKind("1f1b", schedules.one_f_one_b,
                 "PipeDream-Flush: p−d−1 warm-up forwards on device d, then one forward / one "
                 "backward", "thesis §2.4.2, §3.2.2", planner=True),
    ScheduleKind("interleaved", schedules.interleaved,
                 "Megatron's interleaved 1F1B, V chunks per device; m must be a multiple of p",
                 "thesis §4.2.2", multi_chunk=True),
    ScheduleKind("breadth_first", schedules.breadth_first,
                 "looped: every micro-batch through one local chunk before the next, backwards "
                 "in reverse", "Breadth-First Pipeline Parallelism §4.1", multi_chunk=True),
    ScheduleKind("2bw", schedules.two_bw,
                 "1F1B with no flush over `batches` mini-batches, two weight versions; needs "
                 "m ≥ p", "thesis §3.2.1", flush=False, weight_versions=2,
                 options=("batches",), planner=True),
    ScheduleKind("varuna", schedules.varuna,
                 "Varuna's rules (recompute just before the gradient arrives; after R wait for "
                 "B; B before F); the last stage does not recompute", "Varuna §3.2",
                 recomputes=True, options=("durations",)),
    ScheduleKind("advance_forward", schedules.advance_forward,
                 "AvgPipe: `advance_num` forwards on device 0 before its first backward "
                 "(p−1 = 1F1B, m+p−1 = GPipe)", "AvgPipe §4.2, Algorithm 1",
                 options=("advance_num",)),
)}


def kind_named(name: str) -> ScheduleKind:
    """The declared kind called ``name``; a :class:`ScheduleError` for any other name."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ScheduleError(f"unknown schedule kind {name!r} (one of: "
                            f"{', '.join(KINDS)})") from None


def build_schedule(kind: str, stages: int, microbatches: int, chunks: int | None = None,
                   **options) -> Schedule:
    """The schedule of the kind named ``kind`` (one of :data:`KINDS`); ``chunks`` defaults
    to 2 for the multi-chunk kinds and 1 otherwise."""
    return kind_named(kind).build(stages, microbatches, chunks, **options)
