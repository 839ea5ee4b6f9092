"""The heterogeneous split solver (VirtualFlow §5.1.2) and ``gavelsched vn plan``."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gavelsched.cli import main
from workers.virtual.profiler import profile_batches
from gavelsched.virtual.split import SplitError, parse_profiles, plan_split

SIZES = profile_batches(512)


def affine(overhead: float, per_sample: float, *, comm: float = 0.01, sizes=SIZES,
           memory: float = 16.0) -> dict:
    return {"memory_gb": memory, "comm_s": comm,
            "step_s": {str(b): overhead + per_sample * b for b in sizes}}


def recomputed_step(profiles, plan) -> float:
    """The plan's step time from the profiles, independently of the solver's tables."""
    total = sum(p.gpus for p in plan.types.values())
    comm = max(profiles[t].comm_s for t in plan.types) if total > 1 else 0.0
    return max(profiles[t].gpu_time(p.batch_per_gpu, p.virtual_nodes_per_gpu)
               for t, p in plan.types.items()) + comm


def brute_force(profiles, batch: int, gpus: dict[str, int]) -> float:
    """Every GPU count, every per-GPU batch and every node count (small cases only)."""
    best = math.inf
    names = [t for t, n in gpus.items() if n > 0]
    for counts in itertools.product(*[range(gpus[t] + 1) for t in names]):
        used = [(t, n) for t, n in zip(names, counts) if n > 0]
        if not used:
            continue
        comm = max(profiles[t].comm_s for t, _ in used) if sum(n for _, n in used) > 1 else 0.0
        for loads in itertools.product(*[range(1, batch // n + 1) for _, n in used]):
            if sum(n * b for (_, n), b in zip(used, loads)) != batch:
                continue
            worst = 0.0
            for (t, _), b in zip(used, loads):
                lo = -(-b // profiles[t].max_pass)
                worst = max(worst, min(profiles[t].gpu_time(b, v) for v in range(lo, b + 1)))
            best = min(best, worst + comm)
    return best


def test_v100_four_times_faster_gets_the_uneven_mixed_split():
    """Figure 7 (right): 2 V100 + 2 P100, B = 8192, V100 4x as fast. Optimum: b_v + b_p =
    4096 and max(b_v / 4, b_p) smallest, i.e. b_v = 3277, b_p = 819."""
    per = 1e-4
    profiles = parse_profiles({"v100": affine(0.0, per / 4), "p100": affine(0.0, per)})
    plan = plan_split(profiles, 8192, {"v100": 2, "p100": 2})
    assert plan.to_dict()["types"] == {
        "p100": {"gpus": 2, "batch_per_gpu": 819, "virtual_nodes_per_gpu": 2},
        "v100": {"gpus": 2, "batch_per_gpu": 3277, "virtual_nodes_per_gpu": 7}}
    assert plan.step_s == pytest.approx(3277 * per / 4 + 0.01, rel=1e-12)
    even = plan_split(profiles, 8192, {"v100": 2})
    assert plan.step_s < even.step_s  # mixing helps here
    assert plan.step_s == pytest.approx(recomputed_step(profiles, plan), rel=1e-12)


def test_too_few_slow_gpus_fall_back_to_the_fast_type_alone():
    """H1 (§6.5.1): a K80 whose smallest pass is slower than the V100s' whole step cannot
    help; the plan is the V100-only plan, no slower."""
    profiles = parse_profiles({"v100": affine(0.01, 0.001, sizes=profile_batches(64)),
                               "k80": affine(0.2, 0.02, comm=0.05, sizes=profile_batches(64))})
    mixed = plan_split(profiles, 128, {"v100": 2, "k80": 1})
    alone = plan_split(profiles, 128, {"v100": 2})
    assert list(mixed.types) == ["v100"]
    assert mixed == alone
    assert mixed.step_s == pytest.approx(0.01 + 0.064 + 0.01)


def test_memory_limit_needs_more_virtual_nodes():
    """A pass never exceeds the largest batch that fits; more nodes fit a bigger batch."""
    profiles = parse_profiles({"v100": {
        "memory_gb": 16, "comm_s": 0.0, "step_s": {"32": 0.1, "64": 0.2, "128": 0.4},
        "peak_gb": {"32": 4, "64": 8, "128": 20}}})
    plan = plan_split(profiles, 256, {"v100": 1})
    assert plan.types["v100"].virtual_nodes_per_gpu == 4  # 4 passes of 64 (128 needs 20 GB)
    assert plan.step_s == pytest.approx(0.8)


def test_fixed_node_batch_moves_whole_nodes():
    profiles = parse_profiles({"v100": affine(0.0, 0.25), "p100": affine(0.0, 1.0)})
    plan = plan_split(profiles, 64, {"v100": 1, "p100": 1}, node_batch=8)
    # a node takes 2 s on the V100, 8 s on the P100: 7 + 1 nodes -> max(14, 8) beats 6 + 2
    assert plan.to_dict()["types"] == {
        "p100": {"gpus": 1, "batch_per_gpu": 8, "virtual_nodes_per_gpu": 1},
        "v100": {"gpus": 1, "batch_per_gpu": 56, "virtual_nodes_per_gpu": 7}}
    assert plan.step_s == pytest.approx(14.01)
    assert all(p.batch_per_gpu == 8 * p.virtual_nodes_per_gpu for p in plan.types.values())
    layout, mapping, types = plan.assignment()
    assert layout.sizes == (8,) * 8  # the job's layout, whatever the mix
    assert mapping.label() == "1:7" and types == ("p100", "v100")
    other, _, _ = plan_split(profiles, 64, {"v100": 2}, node_batch=8).assignment()
    assert other == layout


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 24),
       v100=st.tuples(st.floats(0.0, 0.05), st.floats(0.001, 0.01), st.integers(0, 3)),
       p100=st.tuples(st.floats(0.0, 0.05), st.floats(0.001, 0.04), st.integers(0, 3)),
       k80=st.tuples(st.floats(0.0, 0.1), st.floats(0.002, 0.08), st.integers(0, 2)),
       max_pass=st.sampled_from([2, 4, 6, 8]), comm=st.floats(0.0, 0.05))
def test_matches_brute_force_on_small_affine_cases(batch, v100, p100, k80, max_pass, comm):
    sizes = profile_batches(max_pass)
    profiles = parse_profiles({name: affine(a, b, comm=comm, sizes=sizes)
                               for name, (a, b, _) in
                               (("v100", v100), ("p100", p100), ("k80", k80))})
    gpus = {"v100": v100[2], "p100": p100[2], "k80": k80[2]}
    if not any(gpus.values()):
        gpus["v100"] = 1
    plan = plan_split(profiles, batch, gpus)
    assert plan.step_s == pytest.approx(brute_force(profiles, batch, gpus), rel=1e-9, abs=1e-12)


profile_tables = st.lists(st.floats(0.001, 1.0), min_size=1, max_size=12).map(
    lambda steps: list(itertools.accumulate(sorted(steps))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.integers(1, 300), data=st.data(),
       types=st.lists(st.sampled_from(["v100", "p100", "k80"]), min_size=1, max_size=3,
                      unique=True))
def test_plan_properties(batch, data, types):
    """Batches cover B exactly, passes fit in memory, the predicted time is the plan's, and
    mixing is never slower than any one type alone."""
    raw, gpus = {}, {}
    for name in types:
        times = data.draw(profile_tables, label=f"{name} times")
        sizes = profile_batches(64)[:len(times)]
        memory = data.draw(st.sampled_from([8.0, 16.0]), label=f"{name} memory")
        peaks = {str(b): data.draw(st.floats(0.5, 20.0), label=f"{name} peak {b}")
                 for b in sizes}
        peaks[str(sizes[0])] = 0.5  # at least one pass fits
        raw[name] = {"memory_gb": memory, "comm_s": data.draw(st.floats(0.0, 0.1)),
                     "step_s": dict(zip(map(str, sizes), times)), "peak_gb": peaks}
        gpus[name] = data.draw(st.integers(1, 12), label=f"{name} gpus")
    profiles = parse_profiles(raw)
    plan = plan_split(profiles, batch, gpus)
    assert sum(p.gpus * p.batch_per_gpu for p in plan.types.values()) == batch
    for name, part in plan.types.items():
        assert 1 <= part.gpus <= gpus[name]
        assert 1 <= part.virtual_nodes_per_gpu <= part.batch_per_gpu
        assert max(part.node_sizes()) <= profiles[name].max_pass
        peak = dict(profiles[name].peak_gb)
        fitting = [b for b in peak if peak[b] <= profiles[name].memory_gb]
        assert max(part.node_sizes()) <= max(fitting)
    assert plan.step_s == pytest.approx(recomputed_step(profiles, plan), rel=1e-9)
    layout, mapping, ranks = plan.assignment()
    assert layout.batch == batch and mapping.nodes == layout.nodes
    assert len(ranks) == mapping.processes == sum(p.gpus for p in plan.types.values())
    for name in types:
        alone = plan_split(profiles, batch, {name: gpus[name]})
        assert plan.step_s <= alone.step_s * (1 + 1e-12)


@pytest.mark.parametrize("data, fragment", [
    ({}, "non-empty"),
    ({"v100": {"step_s": {"1": 0.1}}}, "memory_gb"),
    ({"v100": {"memory_gb": 16, "step_s": {"x": 0.1}}}, "'x'"),
    ({"v100": {"memory_gb": 16, "step_s": {"4": -1}}}, "-1"),
    ({"v100": {"memory_gb": 16, "step_s": {"4": 0.1}, "comm": 1}}, "'comm'"),
    ({"v100": {"memory_gb": 1, "step_s": {"4": 0.1}, "peak_gb": {"4": 2}}}, "fits"),
])
def test_bad_profiles(data, fragment):
    with pytest.raises(SplitError, match=fragment):
        parse_profiles(data)


def test_bad_requests():
    profiles = parse_profiles({"v100": affine(0.0, 0.01, sizes=[1, 2, 4])})
    with pytest.raises(SplitError, match="'a100'"):
        plan_split(profiles, 8, {"a100": 1})
    with pytest.raises(SplitError, match="batch"):
        plan_split(profiles, 0, {"v100": 1})
    with pytest.raises(SplitError, match="node batch 3"):
        plan_split(profiles, 8, {"v100": 1}, node_batch=3)
    with pytest.raises(SplitError, match="no plan"):
        plan_split(profiles, 8, {"v100": 2}, node_batch=8)


def test_plan_cli(tmp_path, capsys):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"v100": affine(0.0, 0.25e-4), "p100": affine(0.0, 1e-4)}))
    argv = ["vn", "plan", "--batch", "1024", "--gpus", "v100=2,p100=8", "--profile", str(path)]
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert sum(t["gpus"] * t["batch_per_gpu"] for t in plan["types"].values()) == 1024
    assert set(plan["types"]) == {"v100", "p100"} and plan["step_s"] > 0
    assert main(argv) == 0
    assert "predicted step" in capsys.readouterr().out


@pytest.mark.parametrize("extra, fragment", [
    (["--gpus", "v100"], "TYPE=N"),
    (["--gpus", "v100=two"], "'two'"),
    (["--gpus", "a100=1"], "'a100'"),
    (["--batch", "-4"], "-4"),
])
def test_plan_cli_bad_input(tmp_path, capsys, extra, fragment):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"v100": affine(0.0, 0.01, sizes=[1, 2, 4])}))
    argv = ["vn", "plan", "--batch", "8", "--gpus", "v100=1", "--profile", str(path)]
    for i in range(0, len(extra), 2):
        argv[argv.index(extra[i]) + 1] = extra[i + 1]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err


def test_plan_cli_bad_json(tmp_path, capsys):
    path = tmp_path / "profile.json"
    path.write_text("{not json")
    assert main(["vn", "plan", "--batch", "8", "--gpus", "v100=1", "--profile", str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["vn", "plan", "--batch", "8", "--gpus", "v100=1", "--profile",
                 str(tmp_path / "missing.json")]) == 2
