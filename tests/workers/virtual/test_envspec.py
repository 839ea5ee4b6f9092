"""The environment contract of a mixed-type job (VirtualFlow §5.1.2, launched): what the
scheduler puts in RunJob.env, what a rank reads back, and each rank's emulated pace."""

from __future__ import annotations

import json

import pytest

from traces.types import ThroughputTable
from workers.daemon.emulation import Emulation
from workers.daemon.launcher import LaunchSpec, job_env
from gavelsched.virtual.envspec import (
    BATCH_VAR,
    LAYOUT_VAR,
    NODES_VAR,
    JobLayout,
    LayoutEnvError,
    layout_env,
    layout_from_env,
    parse_layout_env,
)
from gavelsched.virtual.layout import NodeMapping, VirtualLayout
from gavelsched.virtual.split import SplitPlan, TypePlan

# the paper's kind of uneven split: one v100 runs 6 of 8 nodes, two k80s one each
PLAN = SplitPlan({"v100": TypePlan(gpus=1, batch_per_gpu=24, virtual_nodes_per_gpu=6),
                  "k80": TypePlan(gpus=2, batch_per_gpu=4, virtual_nodes_per_gpu=1)}, 0.1)


def test_plan_round_trips_through_the_environment():
    env = layout_env(PLAN)
    assert env == {
        LAYOUT_VAR: '{"sizes":[4,4,4,4,4,4,4,4],"ranks":[[0],[1],[2,3,4,5,6,7]],'
                    '"types":["k80","k80","v100"]}',
        NODES_VAR: "8", BATCH_VAR: "32"}
    ranks = [layout_from_env(env, r, 3) for r in range(3)]
    assert [r.nodes for r in ranks] == [(0,), (1,), (2, 3, 4, 5, 6, 7)]
    assert [r.worker_type for r in ranks] == ["k80", "k80", "v100"]
    assert [r.share for r in ranks] == [0.125, 0.125, 0.75]
    assert ranks[2].job.layout == VirtualLayout((4,) * 8)


def test_global_batch_rescales_the_node_sizes():
    """A plan solved in the catalog's units, launched with the workload's smaller batch."""
    job = parse_layout_env(layout_env(PLAN, global_batch=16), 3)
    assert job.layout.sizes == (2,) * 8 and job.samples_of(2) == 12
    with pytest.raises(ValueError, match="too small for 8 virtual nodes"):
        layout_env(PLAN, global_batch=5)


def test_no_layout_is_none():
    assert layout_from_env({"WORLD_SIZE": "2"}, 0, 2) is None


def _env(**changes: str | None) -> dict[str, str]:
    env = layout_env(PLAN)
    for key, value in changes.items():
        if value is None:
            env.pop(key)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize("env, world, rank, message", [
    (_env(GAVEL_VN_LAYOUT="{sizes"), 3, 0, "GAVEL_VN_LAYOUT is not JSON"),
    (_env(GAVEL_VN_LAYOUT="[1, 2]"), 3, 0, "GAVEL_VN_LAYOUT must be"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,4],"ranks":[[0,1]],"extra":1}'), 1, 0,
     "GAVEL_VN_LAYOUT must be"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,"4"],"ranks":[[0,1]]}'), 1, 0, "sizes must be"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,0],"ranks":[[0,1]]}'), 1, 0, "positive integers"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,4],"ranks":[0,1]}'), 1, 0, "ranks must be"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,4],"ranks":[[0],[0]]}'), 2, 0, "nodes 0..1 once"),
    (_env(GAVEL_VN_LAYOUT='{"sizes":[4,4],"ranks":[[0,1]],"types":["a","b"]}'), 1, 0,
     "2 GPU types for 1 ranks"),
    (_env(GAVEL_VN_NODES="7"), 3, 0, "GAVEL_VN_NODES='7' disagrees"),
    (_env(GAVEL_VN_BATCH="x"), 3, 0, "GAVEL_VN_BATCH='x' disagrees"),
    (_env(GAVEL_VN_BATCH=None), 3, 0, "GAVEL_VN_BATCH is missing"),
    (_env(GAVEL_VN_LAYOUT=None), 3, 0, "is set but GAVEL_VN_LAYOUT is missing"),
    (_env(), 2, 0, "3 ranks but WORLD_SIZE=2"),
    (_env(), 3, 3, "RANK=3 is not a rank"),
])
def test_bad_environment_is_one_line_naming_the_variable(env, world, rank, message):
    with pytest.raises(LayoutEnvError, match=message) as err:
        layout_from_env(env, rank, world)
    assert "\n" not in str(err.value) and "GAVEL_VN_" in str(err.value)


def test_each_rank_is_paced_by_its_share_on_its_own_type():
    """rate(type, job, W) x speed x (B / W) / b_r: an even share runs at the table's rate."""
    table = ThroughputTable({"v100": {("lm", 3): 30.0, ("lm", 1): 12.0},
                             "k80": {("lm", 1): 3.0}})
    job = parse_layout_env(layout_env(PLAN), 3)
    v100, k80 = Emulation("v100", table, 0.5), Emulation("k80", table, 0.5)
    # v100 (rank 2, 24 of 32 samples): its scale-factor-3 rate, slowed by 24 / (32 / 3)
    assert v100.split_steps_per_s("lm", job, 2) == pytest.approx(30 * 0.5 * 32 / (3 * 24))
    # k80 (4 of 32): no scale-factor-3 entry, so its one-GPU rate, sped up by (32 / 3) / 4
    assert k80.split_steps_per_s("lm", job, 0) == pytest.approx(3 * 0.5 * 32 / (3 * 4))
    assert k80.split_steps_per_s("other", job, 0) is None
    # (the scheduler's figure, as sent: not dilated again; its share's pace)
    assert k80.split_steps_per_s("other", job, 0, expected=2.0) == pytest.approx(16 / 3)
    even = JobLayout(VirtualLayout((4,) * 6), NodeMapping.even(3, 6), ("v100",) * 3)
    assert v100.split_steps_per_s("lm", even, 1) == pytest.approx(15.0)  # the table's


def test_launcher_sets_each_local_ranks_own_pace(tmp_path):
    spec = LaunchSpec(job_id="j", round=0, job_type="lm", argv=("true",), gpus=(0, 1), rank=0,
                      world_size=3, master_addr="", master_port=0, total_steps=5,
                      steps_done=0, max_seconds=10, checkpoint_dir=str(tmp_path),
                      scheduler_address="x", env=layout_env(PLAN), emulate_steps_per_s=9.0,
                      rank_steps_per_s=(4.0, 2.5))
    envs = [job_env(spec, local, {}) for local in (0, 1)]
    assert [e["GAVEL_EMULATE_STEPS_PER_S"] for e in envs] == ["4.0", "2.5"]
    assert json.loads(envs[1][LAYOUT_VAR])["ranks"][1] == [1]
