"""One validator and one unit-time event simulator for any schedule (docs/style.md §2; the
bubble and memory figures of thesis §2.4, §3.2 and §4.2.2).

Dependencies: F(i,c) needs F(i,c−1); R(i,c) needs F(i,c); B(i,c) needs F(i,c), B(i,c+1) and,
when the schedule recomputes (i,c), R(i,c). Each device runs its list in order; an action
starts when its device is free and its dependencies have finished (communication is free).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .ops import COMPUTE, Op, PipeOp, Schedule, ScheduleError, format_grid
from .kinds import build_schedule, kind_named

DEFAULT_DURATIONS = {"F": 1.0, "B": 2.0, "R": 1.0}


@dataclass(frozen=True)
class Timed:
    """An action with its device and simulated start and finish times."""

    action: PipeOp
    device: int
    start: float
    finish: float


@dataclass(frozen=True)
class SimResult:
    """What a schedule costs in the unit-time model."""

    stages: int
    chunks: int
    microbatches: int
    makespan: float
    busy: tuple[float, ...]            # compute time per device
    peak_stash: tuple[int, ...]        # most (micro-batch, chunk) activations held per device
    timeline: tuple[Timed, ...]        # every action, in start order

    @property
    def bubble_fraction(self) -> float:
        """Idle time over compute time, summed over devices: (p−1)/m for GPipe."""
        total = sum(self.busy)
        return (self.makespan * self.stages - total) / total


def _fail(schedule: Schedule, message: str, device: int | None = None,
          step: int | None = None) -> ScheduleError:
    where = "" if device is None else f" (rank {device}, step {step})"
    grid = format_grid(schedule, step, f"rank {device}" if device is not None else "")
    return ScheduleError(f"{message}{where}\n{grid}")


def validate(schedule: Schedule, microbatches: int, chunks: int = 1,
             durations: dict[str, float] | Callable[[PipeOp], float] | None = None
             ) -> SimResult:
    """Check ``schedule`` and simulate it; raise :class:`ScheduleError` with the printed grid.

    Checks: devices are 0…P−1; only compute actions; chunk c sits on device c mod P; every
    F and B of every (micro-batch, chunk) appears exactly once, R at most once and between
    its F and B; no deadlock.
    """
    stages = len(schedule)
    if sorted(schedule) != list(range(stages)):
        raise ScheduleError(f"devices must be 0..{stages - 1}, got {sorted(schedule)}")
    n_chunks = stages * chunks
    seen: dict[tuple[Op, int, int], tuple[int, int]] = {}
    for d in range(stages):
        for step, action in enumerate(schedule[d]):
            if action is None:
                continue
            if not isinstance(action, PipeOp) or action.op not in COMPUTE:
                raise _fail(schedule, f"{action!s} is not a compute action (F, B or R)", d, step)
            if action.mb >= microbatches or action.chunk >= n_chunks:
                raise _fail(schedule, f"{action} is out of range (microbatches={microbatches}, "
                                      f"chunks={n_chunks})", d, step)
            if action.chunk % stages != d:
                raise _fail(schedule, f"{action} is on rank {d} but chunk {action.chunk} runs on "
                                      f"rank {action.chunk % stages}", d, step)
            key = (action.op, action.mb, action.chunk)
            if key in seen:
                raise _fail(schedule, f"{action} appears twice (first at rank {seen[key][0]}, "
                                      f"step {seen[key][1]})", d, step)
            seen[key] = (d, step)
    for c in range(n_chunks):
        for i in range(microbatches):
            for op in (Op.F, Op.B):
                if (op, i, c) not in seen:
                    raise _fail(schedule, f"{PipeOp(op, i, c)} is missing")
    for (op, i, c), (d, step) in seen.items():
        if op is Op.R and not (seen[(Op.F, i, c)][1] < step < seen[(Op.B, i, c)][1]):
            raise _fail(schedule, f"{PipeOp(op, i, c)} must come after F and before B of the "
                                  "same micro-batch and chunk", d, step)
    return simulate(schedule, microbatches, chunks, durations)


def _deps(action: PipeOp, n_chunks: int, recomputed: bool) -> list[tuple[Op, int, int]]:
    i, c = action.mb, action.chunk
    if action.op is Op.F:
        return [(Op.F, i, c - 1)] if c > 0 else []
    if action.op is Op.R:
        return [(Op.F, i, c)]
    deps = [(Op.F, i, c)]
    if c + 1 < n_chunks:
        deps.append((Op.B, i, c + 1))
    if recomputed:
        deps.append((Op.R, i, c))
    return deps


def simulate(schedule: Schedule, microbatches: int, chunks: int = 1,
             durations: dict[str, float] | Callable[[PipeOp], float] | None = None,
             comm_s: float = 0.0) -> SimResult:
    """Run ``schedule`` as-soon-as-possible in list order; raise on deadlock with the grid.

    ``durations`` is per op kind, or a function of the action (e.g. calibrated per chunk,
    Varuna §4.4); a dependency on another device arrives ``comm_s`` after it finished.
    """
    if callable(durations):
        duration = durations
    else:
        table = {**DEFAULT_DURATIONS, **(durations or {})}

        def duration(action: PipeOp) -> float:
            return table[action.op.value]
    stages = len(schedule)
    n_chunks = stages * chunks
    lists = {d: [a for a in schedule[d] if a is not None] for d in range(stages)}
    recomputes = {(a.mb, a.chunk) for acts in lists.values() for a in acts if a.op is Op.R}
    finish: dict[tuple[Op, int, int], float] = {}
    free = [0.0] * stages
    pos = [0] * stages
    timeline: list[Timed] = []
    progress = True
    while progress:
        progress = False
        for d in range(stages):
            while pos[d] < len(lists[d]):
                action = lists[d][pos[d]]
                deps = _deps(action, n_chunks, (action.mb, action.chunk) in recomputes)
                if any(dep not in finish for dep in deps):
                    break
                start = max([free[d]] + [finish[dep] + (comm_s if dep[2] % stages != d else 0.0)
                                          for dep in deps])
                end = start + duration(action)
                finish[(action.op, action.mb, action.chunk)] = end
                free[d] = end
                timeline.append(Timed(action, d, start, end))
                pos[d] += 1
                progress = True
    stuck = [d for d in range(stages) if pos[d] < len(lists[d])]
    if stuck:
        blocked = ", ".join(f"rank {d} waits at {lists[d][pos[d]]}" for d in stuck)
        step = min(_raw_step(schedule[d], pos[d]) for d in stuck)
        raise ScheduleError(f"deadlock: {blocked}\n"
                            + format_grid(schedule, step, "nothing can run"))
    timeline.sort(key=lambda t: (t.start, t.device))
    busy = tuple(sum(t.finish - t.start for t in timeline if t.device == d) for d in range(stages))
    return SimResult(stages, chunks, microbatches, max(free, default=0.0), busy,
                     _peak_stash(timeline, stages), tuple(timeline))


def minibatch_time(kind: str, stages: int, microbatches: int, chunks: int,
                   forward: Mapping[int, float], backward: Mapping[int, float], comm_s: float,
                   update_s: float, send_s: float = 0.0, recv_s: float = 0.0,
                   **options) -> float:
    """Seconds per mini-batch of a schedule with per-chunk F and B durations (Varuna
    §4.4: its simulator, fed with calibrated or profiled costs); a recompute is one more F.
    A boundary tensor is ``comm_s`` late at its consumer, and costs its producer's device
    ``send_s`` and its consumer's ``recv_s`` on top of the action (P > 1).

    * flush kinds: the makespan of one mini-batch plus the update (the next mini-batch
      starts after it);
    * a no-flush kind (2bw): the steady-state interval between one mini-batch's last
      backward and the next's, on the slowest device, over a schedule of 6 mini-batches
      (its option ``batches``, whatever ``options`` says), plus the update, which each stage
      runs on its own critical path once per mini-batch.
    """
    last = stages * chunks - 1

    def duration(action: PipeOp) -> float:
        c = action.chunk
        if action.op is Op.R:
            return forward[c]
        if action.op is Op.F:
            sends, receives = c < last, c > 0
        else:
            sends, receives = c > 0, c < last
        cost = backward[c] if action.op is Op.B else forward[c]
        if stages > 1:
            cost += send_s * sends + recv_s * receives
        return cost

    if kind_named(kind).flush:
        schedule = build_schedule(kind, stages, microbatches, chunks, **options)
        return simulate(schedule, microbatches, chunks, duration, comm_s).makespan + update_s
    batches = 6
    schedule = build_schedule(kind, stages, microbatches, chunks,
                              **{**options, "batches": batches})
    sim = simulate(schedule, microbatches * batches, chunks, duration, comm_s)
    ends = [[0.0] * batches for _ in range(stages)]
    for t in sim.timeline:
        if t.action.op is Op.B:
            b = t.action.mb // microbatches
            ends[t.device][b] = max(ends[t.device][b], t.finish)
    steady = [max(e[b] - e[b - 1] for e in ends) for b in range(2, batches)]
    return statistics.median(steady) + update_s


def _raw_step(actions: list[PipeOp | None], compact_pos: int) -> int:
    """Index in the list with bubbles of the ``compact_pos``-th real action."""
    count = -1
    for step, action in enumerate(actions):
        if action is not None:
            count += 1
            if count == compact_pos:
                return step
    return len(actions)


def _peak_stash(timeline: list[Timed], stages: int) -> tuple[int, ...]:
    """Most (micro-batch, chunk) pairs per device whose forward has started and whose
    backward has not finished: the activations (or, with recomputation, inputs) it stashes."""
    events: list[tuple[float, int, int]] = []  # (time, order, delta) per device
    per_device: list[list[tuple[float, int, int]]] = [[] for _ in range(stages)]
    for t in timeline:
        if t.action.op is Op.F:
            per_device[t.device].append((t.start, 1, +1))
        elif t.action.op is Op.B:
            per_device[t.device].append((t.finish, 0, -1))
    del events
    peaks = []
    for evs in per_device:
        held = peak = 0
        for _, _, delta in sorted(evs):
            held += delta
            peak = max(peak, held)
        peaks.append(peak)
    return tuple(peaks)


def format_timeline(result: SimResult) -> str:
    """The simulated time × rank grid (one row per time unit; '.' is a bubble)."""
    rows = math.ceil(result.makespan)
    cells = [["."] * result.stages for _ in range(rows)]
    for t in result.timeline:
        for unit in range(int(t.start), math.ceil(t.finish)):
            cells[unit][t.device] = str(t.action)
    width = max([6] + [len(str(t.action)) + 1 for t in result.timeline])
    lines = ["time  " + "".join(f"rank{r}".ljust(width) for r in range(result.stages))]
    lines += [f"{i:<6}" + "".join(c.ljust(width) for c in row) for i, row in enumerate(cells)]
    return "\n".join(line.rstrip() for line in lines)
