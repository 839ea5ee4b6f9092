"""Schedule generators: per-device ordered action lists (thesis §2.4.2, §3.2, §4.2.2;
Breadth-First Pipeline Parallelism §4.1; Varuna §3.2; AvgPipe §4.2).

Every generator takes ``(stages, microbatches, chunks)`` plus keyword options and returns a
:data:`~workers.pipeline.ops.Schedule` of compute actions only; communication is added later by
:func:`workers.pipeline.lowering.add_communication`. Micro-batch and chunk numbers start at 0.
A generator is declared, with its kind's traits, in :data:`workers.pipeline.kinds.KINDS`, and
called through :func:`workers.pipeline.kinds.build_schedule`, which checks the sizes first.
"""

from __future__ import annotations

from .ops import Op, PipeOp, Schedule, ScheduleError


def _one_f_one_b(stages: int, device: int, microbatches: int, warmup: int,
                 first_mb: int = 0) -> list[PipeOp | None]:
    """``warmup`` forwards, then alternate one forward / one backward, then the remaining
    backwards (thesis §2.4.2); ``warmup = m`` is GPipe's all-forward-all-backward."""
    warmup = max(0, min(warmup, microbatches))
    actions: list[PipeOp | None] = []
    fwd = bwd = 0
    for _ in range(warmup):
        actions.append(PipeOp(Op.F, first_mb + fwd, device))
        fwd += 1
    while fwd < microbatches:
        actions.append(PipeOp(Op.F, first_mb + fwd, device))
        fwd += 1
        actions.append(PipeOp(Op.B, first_mb + bwd, device))
        bwd += 1
    while bwd < microbatches:
        actions.append(PipeOp(Op.B, first_mb + bwd, device))
        bwd += 1
    return actions


def gpipe(stages: int, microbatches: int, chunks: int = 1) -> Schedule:
    """GPipe: all forwards, then all backwards, flush (thesis §3.2, Figure 3.3)."""
    return {d: _one_f_one_b(stages, d, microbatches, microbatches) for d in range(stages)}


def one_f_one_b(stages: int, microbatches: int, chunks: int = 1) -> Schedule:
    """PipeDream-Flush: p−d−1 warm-up forwards on device d, then 1F1B, flush (thesis §3.2.2)."""
    return {d: _one_f_one_b(stages, d, microbatches, stages - d - 1) for d in range(stages)}


def advance_forward(stages: int, microbatches: int, chunks: int = 1,
                    advance_num: int | None = None) -> Schedule:
    """AvgPipe's advance forward propagation (AvgPipe §4.2, Algorithm 1).

    ``advance_num`` is the number of forwards the first device runs before its first backward;
    p−1 (the default) is 1F1B and m+p−1 or more is GPipe. Device d runs advance_num−d.
    """
    advance = stages - 1 if advance_num is None else advance_num
    if not isinstance(advance, int) or advance < stages - 1:
        raise ScheduleError(f"advance_forward: advance_num={advance!r} must be an integer "
                            f">= stages-1={stages - 1} (stages-1 is 1F1B)")
    return {d: _one_f_one_b(stages, d, microbatches, advance - d) for d in range(stages)}


def interleaved(stages: int, microbatches: int, chunks: int = 2) -> Schedule:
    """Megatron's interleaved 1F1B with v chunks per device (thesis §4.2.2).

    Micro-batches go through in groups of p: device d runs forwards of a group on its local
    chunk 0, then chunk 1, …; backwards visit the chunks in reverse. The warm-up is
    2(p−d−1) + (v−1)p forwards. Needs m to be a multiple of p.
    """
    if microbatches % stages:
        raise ScheduleError(f"interleaved: microbatches={microbatches} is not a multiple of "
                            f"stages={stages}")
    total = microbatches * chunks

    def action(op: Op, k: int, device: int) -> PipeOp:
        local = (k // stages) % chunks
        if op is Op.B:
            local = chunks - 1 - local
        mb = (k // (stages * chunks)) * stages + k % stages
        return PipeOp(op, mb, local * stages + device)

    out: Schedule = {}
    for d in range(stages):
        if microbatches == stages:
            warmup = total
        else:
            warmup = min(2 * (stages - d - 1) + (chunks - 1) * stages, total)
        actions: list[PipeOp | None] = [action(Op.F, k, d) for k in range(warmup)]
        fwd, bwd = warmup, 0
        while fwd < total:
            actions += [action(Op.F, fwd, d), action(Op.B, bwd, d)]
            fwd += 1
            bwd += 1
        actions += [action(Op.B, k, d) for k in range(bwd, total)]
        out[d] = actions
    return out


def breadth_first(stages: int, microbatches: int, chunks: int = 2) -> Schedule:
    """Breadth-first looped pipeline (Breadth-First Pipeline Parallelism §4.1): device d holds chunks
    d, d+p, …; it runs the forward of every micro-batch on one chunk before moving to the
    next chunk, then the backwards chunk by chunk in reverse."""
    out: Schedule = {}
    for d in range(stages):
        local = [j * stages + d for j in range(chunks)]
        out[d] = ([PipeOp(Op.F, i, c) for c in local for i in range(microbatches)]
                  + [PipeOp(Op.B, i, c) for c in reversed(local) for i in range(microbatches)])
    return out


def two_bw(stages: int, microbatches: int, chunks: int = 1, batches: int = 2) -> Schedule:
    """PipeDream-2BW (thesis §3.2.1): 1F1B with no flush across ``batches`` mini-batches of m
    micro-batches (global micro-batch k = batch·m + i). Weight versions follow
    :func:`workers.pipeline.versions.weight_version`; needs m ≥ p."""
    if not isinstance(batches, int) or batches < 1:
        raise ScheduleError(f"2bw: batches={batches!r} must be a positive integer")
    if microbatches < stages:
        raise ScheduleError(f"2bw: microbatches={microbatches} < stages={stages}; 2BW needs "
                            "m >= p so that at most 2 weight versions are live")
    total = microbatches * batches
    return {d: _one_f_one_b(stages, d, total, stages - d - 1) for d in range(stages)}


def varuna(stages: int, microbatches: int, chunks: int = 1,
           durations: dict[str, int] | None = None) -> Schedule:
    """Varuna's rule-based schedule with recomputation (Varuna §3.2), enumerated offline
    by a unit-time simulation of its rules (forward 1, backward 2, recompute 1 unless
    ``durations`` says otherwise):

    1. stage d recomputes micro-batch i once stage d+1 has started B(i), so the recompute is
       done by the time the gradient arrives (the last stage keeps its activations: no R);
    2. after a recompute, the stage waits for that backward and runs nothing else;
    3. a ready backward (or its recompute) goes before a forward. Forwards keep at most p−d
       micro-batches in flight on device d.
    """
    dur = {"F": 1, "B": 2, "R": 1, **(durations or {})}
    last = stages - 1
    done: dict[tuple[Op, int, int], int] = {}     # (op, mb, device) -> finish time
    started: dict[tuple[Op, int, int], int] = {}  # (op, mb, device) -> start time
    out: Schedule = {d: [] for d in range(stages)}
    free = [0] * stages
    nxt_f = [0] * stages
    nxt_b = [0] * stages
    recomputed = [False] * stages
    remaining = 2 * microbatches * stages + microbatches * last
    now = 0
    while remaining:
        for d in range(stages):
            if free[d] > now:
                continue
            i, f = nxt_b[d], nxt_f[d]
            choice: Op | None = None
            if i < microbatches and i < f:
                grad_ready = d == last or done.get((Op.B, i, d + 1), now + 1) <= now
                if d == last or recomputed[d]:
                    if grad_ready:
                        choice = Op.B
                elif started.get((Op.B, i, d + 1), now + 1) <= now:
                    choice = Op.R
            if (choice is None and not recomputed[d] and f < microbatches
                    and f - i < stages - d
                    and (d == 0 or done.get((Op.F, f, d - 1), now + 1) <= now)):
                choice = Op.F
            if choice is None:
                continue
            mb = f if choice is Op.F else i
            out[d].append(PipeOp(choice, mb, d))
            started[(choice, mb, d)] = now
            free[d] = now + dur[choice.value]
            done[(choice, mb, d)] = free[d]
            if choice is Op.F:
                nxt_f[d] += 1
            elif choice is Op.R:
                recomputed[d] = True
            else:
                nxt_b[d] += 1
                recomputed[d] = False
            remaining -= 1
        now += 1
        if now > 10 * (remaining + microbatches * stages * 4 + 10):  # pragma: no cover
            raise ScheduleError(f"varuna: rules stalled at t={now} for p={stages} m={microbatches}")
    return out


def chunks_of(schedule: Schedule) -> int:
    """Chunks per device, read off the schedule (max chunk + 1 over P)."""
    stages = len(schedule)
    top = max((a.chunk for acts in schedule.values() for a in acts if a is not None), default=0)
    return top // stages + 1
