"""The executor: real processes, gloo point-to-point, against one process on the full batch
(thesis §3.2: flush schedules are plain SGD, 2BW is delayed SGD; Varuna §4: morphing)."""

from __future__ import annotations

import pytest

from workers.pipeline.config import RunConfig
from workers.pipeline.launch import PipelineFailed, measure_link, run_pipeline
from workers.pipeline.model import ModelSpec
from workers.pipeline.morph import resume_config
from workers.pipeline.planner import plan
from workers.pipeline.profile import profile_from_dict
from workers.pipeline.reference import max_abs_diff, train_reference

# one run per kind: P ≤ 2 stages, D ≤ 2 replicas, a tiny float64 model, 2-3 steps; receives
# posted at their action (recv_ahead 0), two ahead, or a mini-batch's (the default, None)
RUNS = [
    ("gpipe", {"stages": 2, "microbatches": 2, "replicas": 2, "recv_ahead": 0}),
    ("1f1b", {"stages": 2, "microbatches": 4, "recv_ahead": 2}),
    ("interleaved", {"stages": 2, "microbatches": 2, "chunks": 2, "recv_ahead": 64}),
    ("breadth_first", {"stages": 2, "microbatches": 2, "chunks": 2, "recompute": True}),
    ("varuna", {"stages": 2, "microbatches": 3}),
    ("advance_forward", {"stages": 2, "microbatches": 3, "advance_num": 2}),
]


@pytest.mark.parametrize("kind,shape", RUNS, ids=[r[0] for r in RUNS])
def test_flush_schedules_match_full_batch_sgd(kind, shape):
    cfg = RunConfig(kind=kind, steps=2, **shape)
    run = run_pipeline(cfg)
    ref = train_reference(cfg.spec, cfg.steps, cfg.global_batch, cfg.lr)
    assert max_abs_diff(run.weights, ref) <= 1e-9
    # the weights moved: the comparison is not between two copies of the initial model
    start = train_reference(cfg.spec, 0, cfg.global_batch, cfg.lr)
    assert max_abs_diff(run.weights, start) > 1e-3
    assert {s.stage for s in run.stats} == set(range(cfg.stages))


def test_2bw_is_delayed_sgd_with_two_versions():
    cfg = RunConfig(kind="2bw", stages=2, microbatches=2, replicas=2, steps=4)
    run = run_pipeline(cfg)
    delayed = train_reference(cfg.spec, cfg.steps, cfg.global_batch, cfg.lr, delay=1)
    plain = train_reference(cfg.spec, cfg.steps, cfg.global_batch, cfg.lr, delay=0)
    assert max_abs_diff(run.weights, delayed) <= 1e-9
    assert max_abs_diff(run.weights, plain) > 1e-6   # the delay is real and visible
    assert max(s.max_versions for s in run.stats) == 2


def test_tied_weight_is_one_tensor_after_training():
    cfg = RunConfig(kind="1f1b", stages=2, microbatches=2, steps=2)
    run = run_pipeline(cfg)
    # the embedding (layer 0) and the head (last layer) share "0.weight": both stages
    # trained it and the copies agree with the single-process model
    assert "0.weight" in run.weights and not any(g.startswith(f"{cfg.spec.layers - 1}.")
                                                  for g in run.weights)
    ref = train_reference(cfg.spec, cfg.steps, cfg.global_batch, cfg.lr)
    assert float((run.weights["0.weight"] - ref["0.weight"]).abs().max()) <= 1e-9


def test_morphing_resumes_the_same_trajectory(tmp_path):
    """Varuna-style: 2 steps on 2 stages, a layer-wise checkpoint, then the job gets other
    GPUs: the planner re-plans for them with the global batch fixed and 2 more steps run under
    its layer-to-stage mapping; the result equals 4 steps that never morphed."""
    spec = ModelSpec()
    first = RunConfig(kind="1f1b", stages=2, microbatches=2, steps=2, batch=8, spec=spec,
                      cuts=(2,), save_dir=str(tmp_path / "ckpt"))
    run_pipeline(first)
    profile = profile_from_dict({"layers": [
        {"forward_s": 1.0, "backward_s": 2.0, "activation_bytes": 100.0, "output_bytes": 1.0,
         "weight_bytes": 10.0 * (i + 1)} for i in range(spec.layers)]})
    chosen = plan(profile, gpus=3, batch=8, memory_bytes=1e9)
    second = resume_config(chosen, spec, tmp_path / "ckpt", lr=first.lr, steps=2)
    assert second.start_step == 2 and second.global_batch == 8
    assert (second.stages, second.replicas, second.cuts) != (2, 1, (2,))  # a new mapping
    morphed = run_pipeline(second)
    never = train_reference(spec, 4, 8, first.lr)
    assert max_abs_diff(morphed.weights, never) <= 1e-9
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("layer_*.pt")) == \
        sorted(f"layer_{i}.pt" for i in range(spec.layers))


def test_a_failing_rank_is_reported():
    cfg = RunConfig(kind="1f1b", stages=2, microbatches=2, steps=1, load_dir="/nonexistent")
    with pytest.raises(PipelineFailed, match="rank .*layer_"):
        run_pipeline(cfg, timeout_s=60)


def test_link_is_measured_between_two_processes():
    """A boundary tensor's half round trip over gloo on loopback: a real, finite time."""
    seconds = measure_link(64 * 1024, repeats=5)
    assert 0 < seconds < 10
    with pytest.raises(ValueError, match="nbytes=0"):
        measure_link(0)


@pytest.mark.parametrize("bad,match", [
    ({"kind": "1f1b", "stages": 2, "microbatches": 3, "steps": 1, "batch": 4}, "batch=4 is not divisible"),
    ({"kind": "1f1b", "stages": 2, "microbatches": 2, "steps": 0}, "steps=0"),
    ({"kind": "1f1b", "stages": 2, "microbatches": 2, "steps": 1, "recv_ahead": -1},
     "recv_ahead=-1"),
    ({"kind": "gpipe", "stages": 2, "microbatches": 2, "steps": 1, "cuts": (0,)}, "do not split"),
])
def test_bad_configs_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        RunConfig(**bad).check()
