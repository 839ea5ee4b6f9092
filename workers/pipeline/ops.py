"""Pipeline actions as data (thesis §2.4.2, §3.2; docs/style.md §2).

A schedule is ``dict[int, list[PipeOp | None]]``: device -> its actions in execution order,
``None`` marking a deliberate bubble. Model chunks are numbered 0 … P·V−1 in layer order and
chunk c runs on device c mod P. Compute ops are F (forward), B (backward) and R (recompute the
forward of a micro-batch whose activations were dropped); the communication pass
(:mod:`workers.pipeline.lowering`) adds SA/RA (send/recv activation) and SG/RG (send/recv
gradient) ops that name the chunk whose *output* (SA) or *input gradient* (SG) travels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Op(str, Enum):
    """What an action does."""

    F = "F"    # forward of (micro-batch, chunk)
    B = "B"    # backward of (micro-batch, chunk)
    R = "R"    # recompute the forward of (micro-batch, chunk) right before its backward
    SA = "SA"  # send chunk's output activation to the next chunk's device
    RA = "RA"  # receive chunk's input activation from the previous chunk's device
    SG = "SG"  # send the gradient of chunk's input to the previous chunk's device
    RG = "RG"  # receive the gradient of chunk's output from the next chunk's device


COMPUTE = (Op.F, Op.B, Op.R)


class ScheduleError(ValueError):
    """A schedule that is malformed, violates a dependency or deadlocks."""


@dataclass(frozen=True, order=True)
class PipeOp:
    """One action: ``op`` on micro-batch ``mb`` for model chunk ``chunk``.

    The string form is ``F3c1`` (op, micro-batch, 'c', chunk) and round-trips with
    :meth:`parse`.
    """

    op: Op
    mb: int
    chunk: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.op, Op):
            object.__setattr__(self, "op", Op(self.op))
        if self.mb < 0 or self.chunk < 0:
            raise ScheduleError(f"PipeOp {self.op.value}{self.mb}c{self.chunk}: "
                                "negative micro-batch or chunk")

    def __str__(self) -> str:
        return f"{self.op.value}{self.mb}c{self.chunk}"

    @classmethod
    def parse(cls, text: str) -> PipeOp:
        """``"B4c2"`` -> ``PipeOp(Op.B, 4, 2)``; the chunk part may be left out (chunk 0)."""
        match = _PATTERN.fullmatch(text.strip())
        if not match:
            raise ScheduleError(f"{text!r} is not a pipeline action (expected e.g. F3c1, B0, RA2c1)")
        return cls(Op(match[1]), int(match[2]), int(match[3] or 0))

    def to_json(self) -> dict:
        return {"op": self.op.value, "mb": self.mb, "chunk": self.chunk}


_PATTERN = re.compile(r"(SA|RA|SG|RG|F|B|R)(\d+)(?:c(\d+))?")

Schedule = dict[int, list["PipeOp | None"]]


def schedule_to_json(schedule: Schedule) -> dict:
    """The CLI form: ``{"stages": [[{"op", "mb", "chunk"}, ...], ...]}``, bubbles left out."""
    return {"stages": [[a.to_json() for a in schedule[d] if a is not None]
                       for d in sorted(schedule)]}


def format_grid(schedule: Schedule, error_step: int | None = None,
                error_note: str = "") -> str:
    """The step × rank grid of a schedule, with ``<-- ERROR HERE`` on ``error_step``."""
    ranks = sorted(schedule)
    steps = max((len(schedule[r]) for r in ranks), default=0)
    width = max([6] + [len(str(a)) + 1 for r in ranks for a in schedule[r] if a is not None])
    lines = ["step  " + "".join(f"rank{r}".ljust(width) for r in ranks)]
    for step in range(steps):
        cells = []
        for r in ranks:
            action = schedule[r][step] if step < len(schedule[r]) else None
            cells.append(("." if action is None else str(action)).ljust(width))
        line = f"{step:<6}" + "".join(cells)
        if step == error_step:
            line = line.rstrip() + "  <-- ERROR HERE" + (f" ({error_note})" if error_note else "")
        lines.append(line.rstrip())
    return "\n".join(lines)
