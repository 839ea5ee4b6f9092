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

:func:`calibrate_profile` is Varuna's per-cut-point calibration for the planner: every layer
is its own chunk, so the calibrated F and B are per layer and serve any layout.
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


def calibrate_profile(data: dict, spec, stages: int = 2, timeout_s: float = 300.0) -> dict:
    """Varuna's per-cut-point calibration (varuna.txt §4.3) of a layer profile (the JSON of
    :mod:`workers.pipeline.profile` for the reference model ``spec``): ``stages`` ranks hold
    every layer as a chunk of its own (the interleaved layout) and calibrate at once, so each
    layer's F and B are measured in the executor's own code on one micro-batch of the
    profile's size, while the other ranks compute as in training. Returns ``data`` with those
    F and B, and the bandwidth of the calibrated boundary trip."""
    from .launch import run_pipeline

    layers = spec.layers
    size = data.get("microbatch_size")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"microbatch_size={size!r} must be a positive integer to calibrate")
    if len(data.get("layers", ())) != layers:
        raise ValueError(f"the profile has {len(data.get('layers', ()))} layers, the model "
                         f"{layers}")
    if not isinstance(stages, int) or stages < 2 or layers % stages:
        raise ValueError(f"stages={stages!r} must be at least 2 and divide the {layers} "
                         "layers")
    cfg = RunConfig(kind="interleaved", stages=stages, microbatches=stages,
                    chunks=layers // stages, steps=1, batch=stages * size, spec=spec,
                    cuts=tuple(range(1, layers)))
    run = run_pipeline(cfg, timeout_s=timeout_s, calibrate=True)
    forward, backward, trip, _ = _costs(run.calibration)
    rows = [{**row, "forward_s": forward[i], "backward_s": backward[i]}
            for i, row in enumerate(data["layers"])]
    boundary = max(row["output_bytes"] for row in rows[:-1])
    return {**data, "layers": rows, "bandwidth_bytes_per_s": boundary / trip}
