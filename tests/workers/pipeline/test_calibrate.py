"""Varuna's calibrated simulator (Varuna §4.3–4.4): calibration in the real ranks, and the
prediction from calibrated costs on cases worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workers.pipeline.calibrate import predict_calibrated
from workers.pipeline.config import RunConfig
from workers.pipeline.launch import run_pipeline
from workers.pipeline.profile import calibrate_profile
from workers.pipeline.records import StageCalibration
from workers.pipeline.reference import max_abs_diff, train_reference


def cal(stages: int, f: float, b: float, p2p: float, update: float,
        chunks: int = 1) -> list[StageCalibration]:
    return [StageCalibration(s, s, 0, {c: f for c in range(s, stages * chunks, stages)},
                             {c: b for c in range(s, stages * chunks, stages)},
                             p2p if s < stages - 1 else 0.0, update) for s in range(stages)]


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
def test_flush_prediction_is_the_pipeline_formula_plus_communication_and_update(kind):
    # one micro-batch crosses 2 stages forward and back: 2 boundary trips, then the update
    cfg = RunConfig(kind=kind, stages=2, microbatches=1, steps=1)
    assert predict_calibrated(cfg, cal(2, 1.0, 2.0, 0.5, 0.25)) == pytest.approx(
        2 * 3.0 + 2 * 0.5 + 0.25)
    # no communication: (m + p − 1)(F + B) for GPipe and 1F1B
    cfg = RunConfig(kind=kind, stages=3, microbatches=4, steps=1)
    assert predict_calibrated(cfg, cal(3, 1.0, 2.0, 0.0, 0.0)) == pytest.approx(6 * 3.0)


def test_a_boundary_tensor_costs_its_endpoints():
    """P = 2, m = 1, F 1 s, B 2 s, a 0.5 s trip, 0.1 s to send and 0.2 s to receive: stage 0's
    F sends (1.1), stage 1's F receives (1.2) and its B sends (2.1), stage 0's B receives
    (2.2); with two trips and the 0.25 s update: 1.1 + 0.5 + 1.2 + 2.1 + 0.5 + 2.2 + 0.25."""
    cfg = RunConfig(kind="1f1b", stages=2, microbatches=1, steps=1)
    costs = [replace(c, send_s=0.1 if c.stage == 0 else 0.0,
                     recv_s=0.2 if c.stage == 1 else 0.0) for c in cal(2, 1.0, 2.0, 0.5, 0.25)]
    assert predict_calibrated(cfg, costs) == pytest.approx(7.85)
    one = RunConfig(kind="1f1b", stages=1, microbatches=2, steps=1)   # nothing to send
    assert predict_calibrated(one, [replace(cal(1, 1.0, 2.0, 0.0, 0.0)[0], send_s=0.1,
                                            recv_s=0.2)]) == pytest.approx(6.0)


def test_2bw_steady_state_is_m_times_the_slowest_stage():
    # no flush: once the pipeline is full, a mini-batch takes m·(F + B) on every stage
    cfg = RunConfig(kind="2bw", stages=2, microbatches=4, steps=4)
    assert predict_calibrated(cfg, cal(2, 1.0, 2.0, 0.0, 0.1)) == pytest.approx(4 * 3.0 + 0.1)


def test_missing_chunks_are_refused():
    with pytest.raises(ValueError, match=r"lacks chunks \[1\]"):
        predict_calibrated(RunConfig(kind="1f1b", stages=2, microbatches=2, steps=1),
                           cal(1, 1.0, 2.0, 0.0, 0.0))


def test_calibration_in_the_ranks_then_training_is_unchanged():
    cfg = RunConfig(kind="1f1b", stages=2, microbatches=2, steps=2)
    run = run_pipeline(cfg, calibrate=True)
    assert [c.rank for c in run.calibration] == [0, 1]
    for c in run.calibration:
        assert set(c.forward_s) == set(c.backward_s) == {c.stage}
        assert min(c.forward_s.values()) > 0 and c.update_s > 0
        assert set(c.forward_cpu_s) == set(c.backward_cpu_s) == {c.stage}
        assert min(c.backward_cpu_s.values()) > 0
        assert (c.p2p_s > 0) == (c.stage == 0)      # stage 0 → 1 is the only boundary
        # the sender's isend call on stage 0; posting and taking the receive on stage 1
        assert (c.send_s > 0, c.recv_s > 0) == (c.stage == 0, c.stage == 1)
    # calibrating (zero gradients) left the weights where they were
    ref = train_reference(cfg.spec, cfg.steps, cfg.global_batch, cfg.lr)
    assert max_abs_diff(run.weights, ref) <= 1e-9
    assert all(s.observed is not None and s.observed.update_s > 0 for s in run.stats)
    assert predict_calibrated(cfg, [s.observed for s in run.stats]) > 0


def test_a_middle_stage_calibrates_both_its_sending_and_receiving_side():
    cfg = RunConfig(kind="1f1b", stages=3, microbatches=3, steps=1)
    sides = [(c.send_s > 0, c.recv_s > 0) for c in run_pipeline(cfg, calibrate=True).calibration]
    assert sides == [(True, False), (True, True), (False, True)]


def test_calibrate_profile_measures_every_layer_in_the_ranks():
    """Varuna's per-cut-point calibration (Varuna §4.3): each layer's F and B are
    replaced by the ranks' own measurement, everything else is kept, and the link is the
    calibrated trip. Bad inputs are refused before any process starts."""
    from workers.pipeline.model import ModelSpec

    spec = ModelSpec(vocab=32, hidden=16, blocks=2, seq=8, dtype="float32")
    row = {"forward_s": 123.0, "backward_s": 456.0, "activation_bytes": 7, "output_bytes": 512,
           "weight_bytes": 9, "update_s": 1e-5}
    data = {"model": "m", "microbatch_size": 2, "tied_weight_bytes": 3, "layers": [row] * 4}
    out = calibrate_profile(data, spec)
    assert all(0 < r["forward_s"] < 1 and 0 < r["backward_s"] < 1 for r in out["layers"])
    assert all(r["activation_bytes"] == 7 and r["update_s"] == 1e-5 for r in out["layers"])
    assert out["tied_weight_bytes"] == 3 and 0 < out["bandwidth_bytes_per_s"] < float("inf")
    with pytest.raises(ValueError, match="stages=3 must be at least 2 and divide the 4"):
        calibrate_profile(data, spec, stages=3)
    with pytest.raises(ValueError, match="the profile has 3 layers, the model 4"):
        calibrate_profile({**data, "layers": [row] * 3}, spec)
