"""Per-entity GPU caps in the simulator (``Entity.max_gpus``; ``simulate --entities
NAME=WEIGHT[:POLICY][:MAX_GPUS]``): the simulator drives the same core, so a capped entity
never holds more GPUs at once than its cap, refills included, under any policy."""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import simulator.engine as engine
from gavelsched.cli import main
from gavelsched.core.driver import config_for
from policies import Entity, get_policy
from simulator import simulate
from traces import TraceJob, default_table

POLICIES = ["max_min_fairness_perf", "max_min_fairness_water_filling_perf", "fifo_perf",
            "max_sum_throughput_perf"]


def peak_use(ran, entity_of) -> dict[str, int]:
    """The most GPUs each entity's tasks hold at once in a round as run (``tasks.Ran``:
    each task holds its workers from ``start`` for ``seconds``)."""
    batch, seconds, start = ran.batch, ran.seconds.tolist(), ran.start.tolist()
    peak: dict[str, int] = {}
    for t in sorted(set(start)):
        use: dict[str, int] = {}
        for members, size, a, s in zip(batch.members, batch.size.tolist(), start, seconds):
            if a <= t < a + s:
                for m in members:
                    if entity_of[m] is not None:
                        use[entity_of[m]] = use.get(entity_of[m], 0) + int(size)
        for e, n in use.items():
            peak[e] = max(peak.get(e, 0), n)
    return peak


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 12), cap=st.integers(1, 3),
       gpus=st.integers(2, 4), refill=st.booleans(), name=st.sampled_from(POLICIES))
def test_a_capped_entity_never_holds_more_than_its_cap(seed, n, cap, gpus, refill, name):
    """Every round as run (tasks refilled mid-round included), entity a's tasks hold at
    most ``cap`` GPUs at once, and every job finishes (a is never starved)."""
    rng = np.random.default_rng(seed)
    table = default_table()
    types = sorted(table.job_types)[:6]
    jobs = [TraceJob(job_type=str(rng.choice(types)), scale_factor=int(rng.choice([1, 1, 2])),
                     total_steps=int(rng.integers(50, 5_000)),
                     arrival_s=float(rng.integers(0, 3) * 100),
                     entity=str(rng.choice(["a", "a", "b"]))) for _ in range(n)]
    entities = {"a": Entity("a", max_gpus=max(cap, 2)), "b": Entity("b")}
    entity_of = {str(i): job.entity for i, job in enumerate(jobs)}
    seen = []
    original = engine._Run.refill

    def recording(self, ran, now, span):
        out = original(self, ran, now, span)
        seen.append(out)
        return out

    policy = get_policy(name)
    cluster = {"v100": gpus, "k80": gpus}
    config = config_for(policy, table, tuple(cluster), round_seconds=360.0,
                        refill_freed=True, refill_until=1.0 if refill else 0.0)
    with mock.patch.object(engine._Run, "refill", recording):
        result = simulate(jobs, table, cluster, policy, core_config=config,
                          entities=entities)
    assert all(job.completion_s is not None for job in result.jobs)
    assert seen
    for ran in seen:
        assert peak_use(ran, entity_of).get("a", 0) <= entities["a"].max_gpus


def test_the_cap_lengthens_the_capped_entity_and_shortens_the_other():
    """Four GPUs, two jobs of each entity at once: a capped at one GPU runs its jobs one
    after the other; b's are untouched (each had a GPU anyway) and a's last ends later."""
    table = default_table()
    kind = sorted(table.job_types)[0]
    jobs = [TraceJob(job_type=kind, scale_factor=1, total_steps=2_000, arrival_s=0.0,
                     entity=e) for e in ("a", "a", "b", "b")]
    runs = {}
    for cap in (None, 1):
        entities = {"a": Entity("a", max_gpus=cap), "b": Entity("b")}
        result = simulate(jobs, table, {"v100": 4}, "max_min_fairness_perf",
                          entities=entities)
        runs[cap] = [job.completion_s for job in result.jobs]
    assert max(runs[1][:2]) > max(runs[None][:2])
    assert runs[1][2:] == runs[None][2:]


def test_cli_entities_take_a_cap(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    rows = [{"job_type": "ResNet-18 (batch size 64)", "scale_factor": 1,
             "total_steps": 3000, "arrival_s": 0.0, "entity": e} for e in ("x", "x", "y")]
    trace.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    base = ["simulate", "--trace", str(trace), "--cluster", "2:2:2", "--quiet",
            "--policy", "max_min_fairness_water_filling_perf"]
    assert main(base + ["--entities", "x=2:fifo:1,y=1:3"]) == 0
    spec = tmp_path / "entities.yaml"
    spec.write_text("x: {weight: 2, max_gpus: 1}\ny: {weight: 1, policy: fifo}\n")
    assert main(base + ["--entities", str(spec)]) == 0
    capsys.readouterr()
    for bad in ("x=1:0,y=1", "x=1:fifo:fifo,y=1", "x=1:1:2,y=1"):
        assert main(base + ["--entities", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--entities" in err[0]
    spec.write_text("x: {weight: 2, max_gpus: 1.5}\ny: 1\n")
    assert main(base + ["--entities", str(spec)]) == 2
    assert "entities.x.max_gpus" in capsys.readouterr().err
