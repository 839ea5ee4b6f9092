"""The communication pass: compute-only schedule in, schedule with sends and receives out
(docs/style.md §2: compute-only plans, communication added in a pass).

After F(i,c) whose next chunk lives on another device: SA(i,c). Before F(i,c) whose previous
chunk lives elsewhere: RA(i,c). After B(i,c) whose previous chunk lives elsewhere: SG(i,c).
Before B(i,c) whose next chunk lives elsewhere: RG(i,c). Between chunks on the same device
the tensor stays in memory and no action is added. Sends are non-blocking, so with a
deadlock-free compute schedule every receive is eventually matched.
"""

from __future__ import annotations

from .ops import Op, PipeOp, Schedule


def add_communication(schedule: Schedule, chunks: int) -> Schedule:
    """Return a new schedule with SA/RA/SG/RG actions placed around the compute actions."""
    stages = len(schedule)
    last = stages * chunks - 1
    out: Schedule = {}
    for d, actions in schedule.items():
        lowered: list[PipeOp | None] = []
        for a in actions:
            if a is None:
                continue
            i, c = a.mb, a.chunk
            if a.op is Op.F:
                if c > 0 and (c - 1) % stages != d:
                    lowered.append(PipeOp(Op.RA, i, c))
                lowered.append(a)
                if c < last and (c + 1) % stages != d:
                    lowered.append(PipeOp(Op.SA, i, c))
            elif a.op is Op.B:
                if c < last and (c + 1) % stages != d:
                    lowered.append(PipeOp(Op.RG, i, c))
                lowered.append(a)
                if c > 0 and (c - 1) % stages != d:
                    lowered.append(PipeOp(Op.SG, i, c))
            else:
                lowered.append(a)
        out[d] = lowered
    return out


def peer(action: PipeOp, stages: int) -> int:
    """The pipeline position a communication action talks to."""
    if action.op in (Op.SA, Op.RG):
        return (action.chunk + 1) % stages
    if action.op in (Op.RA, Op.SG):
        return (action.chunk - 1) % stages
    raise ValueError(f"{action} is not a communication action")


def tag(action: PipeOp, chunks_total: int) -> int:
    """A message tag that is the same on both ends: activations by (mb, producing chunk),
    gradients by (mb, consuming chunk)."""
    if action.op in (Op.SA, Op.RG):
        boundary = action.chunk          # between chunk and chunk+1
    else:
        boundary = action.chunk - 1      # between chunk−1 and chunk
    kind = 0 if action.op in (Op.SA, Op.RA) else 1
    return (action.mb * chunks_total + boundary) * 2 + kind
