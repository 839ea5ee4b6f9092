"""Varuna's calibrated simulator (varuna.txt §4.3–4.4): the time per mini-batch of a layout,
predicted by running its real schedule through the event simulator with calibrated
primitive costs instead of the closed form of thesis §3.3.3.

The costs (:class:`workers.pipeline.executor.StageCalibration`, measured by
:func:`workers.pipeline.launch.calibrate_pipeline` in all P × D processes at once): F and B
of each chunk on one micro-batch, one boundary tensor's trip to the next stage, and one
flush update (gradient all-reduces, including the tied embedding's, then W − ν·g).

* flush schedules: the simulated makespan of one mini-batch, plus the slowest stage's
  update (the next mini-batch starts after it);
* 2bw (no flush): the steady-state interval between one mini-batch's last backward and
  the next's, slowest stage, plus the update, which each stage runs on its own critical
  path once per mini-batch.

Replicas of a stage run in parallel; a stage's cost is its slowest replica's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .executor import RunConfig, StageCalibration
from .ops import Op, PipeOp
from .schedules import build_schedule
from .simulate import simulate


def _costs(cal: Sequence[StageCalibration]) -> tuple[dict[int, float], dict[int, float],
                                                     float, float]:
    forward: dict[int, float] = {}
    backward: dict[int, float] = {}
    for c in cal:
        for chunk, t in c.forward_s.items():
            forward[chunk] = max(forward.get(chunk, 0.0), t)
        for chunk, t in c.backward_s.items():
            backward[chunk] = max(backward.get(chunk, 0.0), t)
    trips = [c.p2p_s for c in cal if c.p2p_s > 0]
    comm = statistics.mean(trips) if trips else 0.0
    return forward, backward, comm, max(c.update_s for c in cal)


def predict_calibrated(cfg: RunConfig, cal: Sequence[StageCalibration]) -> float:
    """Seconds per mini-batch of ``cfg`` from its calibration (varuna.txt §4.4)."""
    if not cal:
        raise ValueError("no calibration records")
    forward, backward, comm, update = _costs(cal)
    missing = set(range(cfg.stages * cfg.chunks)) - set(forward)
    if missing:
        raise ValueError(f"calibration lacks chunks {sorted(missing)}")

    def duration(action: PipeOp) -> float:
        if action.op is Op.F:
            return forward[action.chunk]
        if action.op is Op.B:
            return backward[action.chunk]
        return forward[action.chunk]          # a recompute is one more forward

    if cfg.kind != "2bw":
        schedule = build_schedule(cfg.kind, cfg.stages, cfg.microbatches, cfg.chunks,
                                  **cfg.schedule_options())
        sim = simulate(schedule, cfg.microbatches, cfg.chunks, duration, comm)
        return sim.makespan + update
    # per device, the end of each mini-batch's last backward; the steady-state interval
    batches = 6
    schedule = build_schedule("2bw", cfg.stages, cfg.microbatches, cfg.chunks, batches=batches)
    sim = simulate(schedule, cfg.microbatches * batches, cfg.chunks, duration, comm)
    ends = [[0.0] * batches for _ in range(cfg.stages)]
    for t in sim.timeline:
        if t.action.op is Op.B:
            b = t.action.mb // cfg.microbatches
            ends[t.device][b] = max(ends[t.device][b], t.finish)
    steady = [max(e[b] - e[b - 1] for e in ends) for b in range(2, batches)]
    return statistics.median(steady) + update
