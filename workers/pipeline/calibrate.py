"""Varuna's calibrated simulator (varuna.txt §4.3–4.4): the time per mini-batch of a layout,
predicted by running its real schedule through the event simulator with calibrated
primitive costs instead of the closed form of thesis §3.3.3 (the timing itself is
:func:`workers.pipeline.simulate.minibatch_time`, which the planner also runs on a profile).

The costs (:class:`workers.pipeline.executor.StageCalibration`, measured by
``run_pipeline(cfg, calibrate=True)`` in all P × D processes at once): F and B
of each chunk on one micro-batch, one boundary tensor's trip to the next stage and what it
costs its two endpoints' own threads (starting the send, taking the arrived tensor), and one
flush update (gradient all-reduces, including the tied embedding's, then W − ν·g).

The update is the slowest stage's. Replicas of a stage run in parallel; a stage's cost is
its slowest replica's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from .executor import RunConfig, StageCalibration
from .simulate import minibatch_time


def _mean_of_recorded(values: list[float]) -> float:
    """Mean over the ranks that measured it (0: none did, e.g. one stage)."""
    recorded = [v for v in values if v > 0]
    return statistics.mean(recorded) if recorded else 0.0


def _costs(cal: Sequence[StageCalibration]) -> tuple[dict[int, float], dict[int, float],
                                                     float, float]:
    forward: dict[int, float] = {}
    backward: dict[int, float] = {}
    for c in cal:
        for chunk, t in c.forward_s.items():
            forward[chunk] = max(forward.get(chunk, 0.0), t)
        for chunk, t in c.backward_s.items():
            backward[chunk] = max(backward.get(chunk, 0.0), t)
    return (forward, backward, _mean_of_recorded([c.p2p_s for c in cal]),
            max(c.update_s for c in cal))


def predict_calibrated(cfg: RunConfig, cal: Sequence[StageCalibration]) -> float:
    """Seconds per mini-batch of ``cfg`` from its calibration (varuna.txt §4.4)."""
    if not cal:
        raise ValueError("no calibration records")
    forward, backward, comm, update = _costs(cal)
    missing = set(range(cfg.stages * cfg.chunks)) - set(forward)
    if missing:
        raise ValueError(f"calibration lacks chunks {sorted(missing)}")
    options = {} if cfg.kind == "2bw" else cfg.schedule_options()
    return minibatch_time(cfg.kind, cfg.stages, cfg.microbatches, cfg.chunks, forward,
                          backward, comm, update,
                          send_s=_mean_of_recorded([c.send_s for c in cal]),
                          recv_s=_mean_of_recorded([c.recv_s for c in cal]), **options)
