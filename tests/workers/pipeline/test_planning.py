"""PipeDream's partitioner against brute force (thesis §2.4.1) and the 2BW planner's cost
model and search (thesis §3.3)."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace

import pytest

from workers.pipeline.partitioner import (
    Level,
    TopologyError,
    brute_force,
    hierarchical_topology,
    levels_of,
    partition,
)
from workers.pipeline.planner import PlanInfeasible, balanced_cuts, plan, predict
from workers.pipeline.profile import ProfileError, load_profile, profile_from_dict


def _profile(rng: random.Random, n: int) -> dict:
    return {"layers": [{"forward_s": rng.random(), "backward_s": 2 * rng.random(),
                        "activation_bytes": rng.randint(1, 100),
                        "output_bytes": rng.random() * 5, "weight_bytes": rng.random() * 5}
                       for _ in range(n)]}


@pytest.mark.parametrize("seed", range(40))
def test_dp_equals_brute_force_on_small_cases(seed):
    rng = random.Random(seed)
    n, m = rng.randint(1, 5), rng.randint(1, 5)
    bandwidth = rng.choice([0.5, 2.0, 50.0, 1e6])
    prof = profile_from_dict(_profile(rng, n))
    best = partition(prof, [Level(m, bandwidth)])
    assert best.time_per_input_s == pytest.approx(brute_force(prof, m, bandwidth), rel=1e-12)
    assert best.workers == m
    assert [s.first for s in best.stages] == [0] + [s.last + 1 for s in best.stages[:-1]]
    assert best.stages[-1].last == n - 1


@pytest.mark.parametrize("seed", range(25))
def test_hierarchical_dp_equals_nested_brute_force(seed):
    rng = random.Random(100 + seed)
    n = rng.randint(1, 4)
    levels = [Level(rng.randint(1, 3), rng.choice([5.0, 50.0, 1e6])),
              Level(rng.randint(1, 3), rng.choice([0.5, 5.0, 1e6]))]
    prof = profile_from_dict(_profile(rng, n))
    best = partition(prof, levels)
    assert best.time_per_input_s == pytest.approx(brute_force(prof, levels), rel=1e-12)
    assert best.workers == levels[0].count * levels[1].count


def test_pure_data_parallelism_wins_when_weights_are_tiny_and_activations_huge():
    prof = profile_from_dict({"layers": [{"forward_s": 1, "backward_s": 2, "activation_bytes": 1,
                                          "output_bytes": 1e9, "weight_bytes": 1e-3}] * 4})
    best = partition(prof, [Level(4, 1e3)])
    assert len(best.stages) == 1 and best.stages[0].replicas == 4
    assert best.time_per_input_s == pytest.approx(12 / 4)


def test_pipeline_wins_when_weights_are_huge():
    prof = profile_from_dict({"layers": [{"forward_s": 1, "backward_s": 2, "activation_bytes": 1,
                                          "output_bytes": 1e-3, "weight_bytes": 1e9}] * 4})
    best = partition(prof, [Level(4, 1e3)])
    assert [s.replicas for s in best.stages] == [1, 1, 1, 1]
    assert best.time_per_input_s == pytest.approx(3.0)
    assert best.in_flight == 4


def test_hierarchy_with_equal_bandwidths_and_one_server_is_the_flat_problem():
    prof = profile_from_dict(_profile(random.Random(7), 5))
    flat = partition(prof, [Level(4, 10.0)])
    nested = partition(prof, hierarchical_topology([(4, 10.0), (1, 10.0)]))
    assert nested.time_per_input_s == pytest.approx(flat.time_per_input_s)


def test_two_level_topology_replicates_inside_servers():
    prof = profile_from_dict({"layers": [{"forward_s": 1, "backward_s": 2, "activation_bytes": 1,
                                          "output_bytes": 1.0, "weight_bytes": 10.0}] * 4})
    topo = hierarchical_topology([(2, 1e6), (2, 1.0)])   # fast inside a server, slow across
    assert levels_of(topo) == [Level(2, 1e6), Level(2, 1.0)]
    best = partition(prof, topo)
    assert best.workers == 4
    # across servers the weights (10 B per layer over 1 B/s) are too slow to all-reduce:
    # the servers form a pipeline, and each server replicates its stage inside itself
    assert all(s.replicas <= 2 for s in best.stages) and len(best.stages) >= 2


def test_uneven_topology_is_refused():
    topo = hierarchical_topology([(2, 1.0), (2, 1.0)])
    topo.add_edge("0:0", "extra", bandwidth=1.0)
    with pytest.raises(TopologyError, match="uneven topology"):
        levels_of(topo)


@pytest.mark.parametrize("costs,parts", [([1, 1, 1, 1], 2), ([5, 1, 1, 1, 1, 1], 2),
                                         ([3, 1, 4, 1, 5, 9, 2, 6], 3), ([1], 1)])
def test_balanced_cuts_is_optimal(costs, parts):
    cuts = balanced_cuts(costs, parts)
    def worst(cs):
        edges = [0, *cs, len(costs)]
        return max(sum(costs[a:b]) for a, b in itertools.pairwise(edges))
    best = min(worst(cs) for cs in itertools.combinations(range(1, len(costs)), parts - 1))
    assert worst(cuts) == best


def _uniform(n=8, weight=1000.0, act=100.0):
    return profile_from_dict({"layers": [{"forward_s": 1.0, "backward_s": 2.0,
                                          "activation_bytes": act, "output_bytes": 10.0,
                                          "weight_bytes": weight}] * n})


def test_predict_flush_time_and_memory_closed_form():
    prof = _uniform()
    pred = predict(prof, stages=4, replicas=1, microbatch_size=2, microbatches=8,
                   recompute=False)
    # T_i = b·(2 layers × 3 s) = 12 s; Σ T_i + (m−1)·max T_i = 48 + 84
    assert pred.time_s == pytest.approx(4 * 12 + 7 * 12)
    # stage i: |W_i| + min(p−i, m)·|A_i(b)| with |A_i(b)| = 2 samples × 2 layers × 100 B
    assert pred.stage_memory_bytes == tuple(2000 + min(4 - i, 8) * 400 for i in range(4))


def test_predict_2bw_keeps_two_versions_and_recompute_costs_a_third_more():
    prof = _uniform()
    plain = predict(prof, 4, 1, 2, 8, recompute=False, schedule="2bw")
    again = predict(prof, 4, 1, 2, 8, recompute=True, schedule="2bw")
    assert plain.time_s == pytest.approx(8 * 12)
    assert again.time_s == pytest.approx(8 * 12 * 4 / 3)
    assert plain.stage_memory_bytes[0] == pytest.approx(2 * 2000 + 4 * 400)
    # recompute: one full activation set plus p in-flight stage inputs (2 samples × 10 B)
    assert again.stage_memory_bytes[1] == pytest.approx(2 * 2000 + 400 + 3 * 20)


def _tied_profile():
    """Four layers (F 1 s, B 2 s per sample, one boundary tensor: 2 B at 2 B/s = 1 s), each
    stepping its weights in 0.5 s; the first and last share a 4-byte weight, which the
    embedding's 10 bytes include and the head's 0 do not."""
    layer = {"forward_s": 1.0, "backward_s": 2.0, "activation_bytes": 1.0, "output_bytes": 2.0,
             "weight_bytes": 10.0, "update_s": 0.5}
    return profile_from_dict({"bandwidth_bytes_per_s": 2.0, "tied_weight_bytes": 4.0,
                              "layers": [layer] * 3 + [{**layer, "weight_bytes": 0.0}]})


def test_update_and_tied_weight_in_the_closed_form():
    """Two stages, m = 2 micro-batches of 1. T_i = 2 layers × 3 s + 2 × 1 s = 8 s. Each
    stage steps in 1 s (the head's 0.5 s is its step on its copy of the tied weight) and
    all-reduces the tied 4 bytes over its 2 copies: 2·(2−1)/2·4/2 = 2 s. 1f1b:
    Σ T_i + (m−1)·max T_i + max(s_i + u_i) = 16 + 8 + 3; 2bw: m·T_i + u_i = 17. The last
    stage holds its copy of the tied weight, 10 + 4 bytes, beside its one micro-batch of
    2-byte activations in flight (stage 0: two)."""
    prof = _tied_profile()
    flush = predict(prof, 2, 1, 1, 2, False, "1f1b")
    assert flush.time_s == pytest.approx(27.0)
    assert predict(prof, 2, 1, 1, 2, False, "2bw").time_s == pytest.approx(17.0)
    assert flush.stage_memory_bytes == (20.0 + 2 * 2.0, 14.0 + 2.0)


def test_one_stage_holds_a_tied_weight_once():
    """p = 1: no transfer, no tied all-reduce, and the head's step is not taken (one copy):
    T = 12 s, 2 × 12 + 1.5 s of steps."""
    pred = predict(_tied_profile(), 1, 1, 1, 2, False, "1f1b")
    assert pred.time_s == pytest.approx(25.5)
    assert pred.stage_memory_bytes == (30.0 + 4.0,)   # 4 layers × 1 B, one in flight


def test_without_a_tied_weight_every_step_is_taken():
    """The same profile with no tied weight: on one stage all four steps count (2 s)."""
    untied = replace(_tied_profile(), tied_weight_bytes=0.0)
    assert predict(untied, 1, 1, 1, 2, False, "1f1b").time_s == pytest.approx(24.0 + 2.0)


def test_simulated_timing_adds_the_same_update():
    """The simulated 1F1B of the tied profile: the flush, all-reduce then step, is the
    closed form's 3 s, after the schedule's own makespan (with a 1 s delay per transfer)."""
    prof = _tied_profile()
    bare = replace(prof, tied_weight_bytes=0.0,
                   layers=tuple(replace(layer, update_s=0.0) for layer in prof.layers))
    with_update = predict(prof, 2, 1, 1, 2, False, "1f1b", timing="simulated").time_s
    without = predict(bare, 2, 1, 1, 2, False, "1f1b", timing="simulated").time_s
    assert with_update - without == pytest.approx(3.0)


@pytest.mark.parametrize("schedule", ["1f1b", "2bw"])
@pytest.mark.parametrize("recompute", [False, True])
def test_simulated_timing_equals_the_closed_form_where_that_is_exact(schedule, recompute):
    """Balanced stages, free communication, one replica: the closed form of thesis §3.3.3 is
    the schedule's exact time, and the event simulator (Varuna §4.4) must agree."""
    prof = _uniform()
    closed = predict(prof, 4, 1, 2, 8, recompute, schedule)
    simulated = predict(prof, 4, 1, 2, 8, recompute, schedule, timing="simulated")
    assert simulated.time_s == pytest.approx(closed.time_s)
    assert simulated.stage_memory_bytes == closed.stage_memory_bytes


def test_simulated_timing_runs_the_schedule_with_unbalanced_stages():
    """Stages of 1, 3 and 1 layers (F 1 s, B 2 s per layer and sample), m = 2 micro-batches
    of 1, and 0.5 s per boundary tensor. The simulated 1F1B, by hand:
    stage 0: F0 [0,1] F1 [1,2]; stage 1: F0 [1.5,4.5] F1 [4.5,7.5];
    stage 2: F0 [5,6] B0 [6,8] F1 [8,9] B1 [9,11]; stage 1: B0 [8.5,14.5] B1 [14.5,20.5];
    stage 0: B0 [15,17] B1 [21,23]. The closed form charges both transfers of a micro-batch
    to every stage's T_i, T = (4, 10, 4): Σ T_i + (m−1)·max T_i = 28."""
    prof = profile_from_dict({"bandwidth_bytes_per_s": 20.0, "layers": [
        {"forward_s": 1.0, "backward_s": 2.0, "activation_bytes": 1.0, "output_bytes": 10.0,
         "weight_bytes": 1.0}] * 5})
    simulated = predict(prof, 3, 1, 1, 2, False, "1f1b", cuts=(1, 4), timing="simulated")
    closed = predict(prof, 3, 1, 1, 2, False, "1f1b", cuts=(1, 4))
    assert simulated.time_s == pytest.approx(23.0)
    assert closed.time_s == pytest.approx(28.0)


def test_unknown_timing_is_refused():
    with pytest.raises(PlanInfeasible, match="timing 'guess' is not one of"):
        predict(_uniform(), 2, 1, 1, 2, False, timing="guess")


def test_planner_respects_memory_and_batch():
    prof = _uniform()
    roomy = plan(prof, gpus=4, batch=16, memory_bytes=1e12)
    tight = plan(prof, gpus=4, batch=16, memory_bytes=3000)
    for chosen in (roomy, tight):
        assert chosen.replicas * chosen.microbatch_size * chosen.microbatches == 16
        assert chosen.stages * chosen.replicas <= 4
    assert tight.prediction.memory_bytes <= 3000
    assert roomy.prediction.memory_bytes > 3000  # the roomy plan would not have fitted
    assert tight.prediction.time_s >= roomy.prediction.time_s
    with pytest.raises(PlanInfeasible, match="no configuration of up to 4 GPUs"):
        plan(prof, gpus=4, batch=16, memory_bytes=10)


def test_planner_picks_data_parallelism_for_a_small_model_with_room():
    prof = _uniform(weight=1.0)
    chosen = plan(prof, gpus=4, batch=16, memory_bytes=1e12)
    assert (chosen.stages, chosen.replicas) == (1, 4)


@pytest.mark.parametrize("data,match", [
    ([], "expected a JSON object"),
    ({"layers": []}, "'layers' must be a non-empty list"),
    ({"layers": [{"forward_s": -1, "backward_s": 1, "activation_bytes": 1,
                  "weight_bytes": 1}]}, r"layers\[0\].forward_s=-1"),
    ({"layers": [{"forward_s": 1, "backward_s": 1, "activation_bytes": 1}]},
     r"layers\[0\].weight_bytes=None"),
    ({"microbatch_size": 0, "layers": [{}]}, "microbatch_size=0"),
    ({"tied_weight_bytes": -4, "layers": [{}]}, "tied_weight_bytes=-4"),
    ({"layers": [{"forward_s": 1, "backward_s": 1, "activation_bytes": 1, "weight_bytes": 1,
                  "update_s": "fast"}]}, r"layers\[0\].update_s='fast'"),
])
def test_bad_profiles_name_the_value(data, match):
    with pytest.raises(ProfileError, match=match):
        profile_from_dict(data)


def test_profile_file_round_trip(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"microbatch_size": 2, **_profile(random.Random(1), 3)}))
    prof = load_profile(path)
    assert len(prof.layers) == 3
    path.write_text("{nope")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(path)


def test_profile_model_measures_steps_and_the_tied_weight():
    """The reference model's profile: every layer's step is timed, the head's weight is the
    embedding's (counted once, and named as tied), and the per-sample numbers parse."""
    from workers.pipeline.model import ModelSpec
    from workers.pipeline.profile import profile_model

    spec = ModelSpec(vocab=32, hidden=16, blocks=2, seq=8, dtype="float32")
    data = profile_model(spec, microbatch_size=2, repeats=3)
    assert data["tied_weight_bytes"] == 32 * 16 * 4
    assert data["layers"][-1]["weight_bytes"] == 0
    assert data["layers"][0]["weight_bytes"] == 32 * 16 * 4
    assert all(row["update_s"] > 0 for row in data["layers"])
    prof = profile_from_dict(data)
    assert prof.layers[1].update_s == data["layers"][1]["update_s"]    # not per sample
    assert prof.layers[1].forward_s == pytest.approx(data["layers"][1]["forward_s"] / 2)
