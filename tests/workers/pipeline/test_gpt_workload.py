"""The GPT pipeline workload under a real worker daemon: it plans for the GPUs it holds, and
when the scheduler restarts it on a different GPU count it morphs (Varuna §4) and keeps
the SGD trajectory of a run that never morphed (issue #10)."""

from __future__ import annotations

import json
import sys

import pytest

from gavelsched import checkpoints
from gavelsched.daemon.leases import free_port
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeJob, FakeScheduler
from workers.daemon.worker import Worker, WorkerConfig
from workers.pipeline.model import ModelSpec
from workers.pipeline.morph import read_weights
from workers.pipeline.planner import PlanInfeasible, plan
from workers.pipeline.profile import profile_from_dict
from workers.pipeline.reference import max_abs_diff, train_reference
from workers.workloads import gpt

SPEC = ModelSpec(vocab=16, hidden=8, blocks=4, seq=3, dtype="float64")
BATCH, LR = 8, 0.1



def run_job(sched: FakeScheduler, round_: int, gpus: tuple[int, ...], total: int, done: int,
            ckpt: str, command: str) -> pb.RunJobRequest:
    return pb.RunJobRequest(
        job_id="gpt", round=round_, job_type="Transformer (batch size 64)", command=command,
        total_steps=total, steps_done=done, gpus=list(gpus), rank=0, world_size=len(gpus),
        master_addr="127.0.0.1", master_port=free_port(), checkpoint_dir=ckpt,
        scheduler_address=sched.address,
        lease=pb.Lease(max_steps=total, max_seconds=120, round=round_))


def test_morphs_from_four_gpus_to_two_and_keeps_the_trajectory(tmp_path):
    """Round 0: 4 GPUs, a pure pipeline (P=4) for 2 steps; round 1: 2 GPUs (P=2, another
    layer-to-stage mapping) for the other 3. The final weights equal 5 steps of one process
    on the full batch, in float64."""
    sched = FakeScheduler()
    sched.start()
    worker = Worker(WorkerConfig(scheduler=sched.address, worker_type="k80", gpus=4,
                                 work_dir=tmp_path / "work", grace_s=5.0))
    worker.start()
    ckpt = tmp_path / "ckpt"
    command = (f"{sys.executable} -m workers.workloads.gpt --dtype float64 --replicas 1 "
               f"--vocab {SPEC.vocab} --hidden {SPEC.hidden} --blocks {SPEC.blocks} "
               f"--seq {SPEC.seq} --batch {BATCH} --lr {LR}")
    total, first = 5, 2
    layouts = []
    try:
        stub = sched.worker_stub(worker.address)
        sched.jobs["gpt"] = FakeJob(total_steps=total, lease=lambda job, rank: pb.Lease(
            max_steps=first, max_seconds=120))
        for round_, gpus, want in ((0, (0, 1, 2, 3), first), (1, (2, 3), total)):
            if round_ == 1:
                sched.jobs["gpt"].lease = lambda job, rank: pb.Lease(max_steps=total,
                                                                     max_seconds=120)
            ack = stub.RunJob(run_job(sched, round_, gpus, total, sched.jobs["gpt"].steps_done,
                                      str(ckpt), command))
            assert ack.ok, ack.message
            report = sched.wait_for(lambda r=round_: next(
                (x for x in sched.log.rounds if x.job_id == "gpt" and x.round == r), None),
                timeout=120)
            assert (report.exit_code, report.failed) == (0, False), report.reason
            assert report.steps == want == checkpoints.latest(ckpt).steps == sched.jobs["gpt"].steps_done
            meta = json.loads((checkpoints.latest(ckpt).path / gpt.LAYERS_DIR / "meta.json").read_text())
            assert meta["steps_done"] == want
            layouts.append((meta["stages"], meta["replicas"], tuple(meta["cuts"])))
    finally:
        worker.stop()
        sched.stop()
    assert [layout[:2] for layout in layouts] == [(4, 1), (2, 1)]
    assert len({r.rank for r in sched.log.inits if r.round == 0}) == 4
    morphed = read_weights(checkpoints.latest(ckpt).path / gpt.LAYERS_DIR, SPEC)
    never = train_reference(SPEC, total, BATCH, LR)
    assert max_abs_diff(morphed, never) <= 1e-9
    assert max_abs_diff(morphed, train_reference(SPEC, 0, BATCH, LR)) > 1e-3   # it trained


def test_standalone_run_trains_the_planned_layout(monkeypatch):
    for var in ("GAVEL_SCHEDULER", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    result = gpt.train(gpt.GptOptions(spec=SPEC, batch=BATCH), steps=2)
    assert result.steps == 2 and (result.plan.stages, result.plan.replicas) == (1, 1)


def test_planner_uses_every_gpu_and_keeps_the_global_batch():
    profile = profile_from_dict({"layers": [
        {"forward_s": 1.0, "backward_s": 2.0, "activation_bytes": 10.0, "output_bytes": 1.0,
         "weight_bytes": 1.0} for _ in range(6)]})
    for gpus in (1, 2, 3, 4, 6):
        chosen = plan(profile, gpus, 12, 1e9, exact=True)
        assert chosen.stages * chosen.replicas == gpus
        assert chosen.replicas * chosen.microbatch_size * chosen.microbatches == 12
    pinned = plan(profile, 4, 12, 1e9, exact=True, replicas=1)
    assert (pinned.stages, pinned.replicas) == (4, 1)
    with pytest.raises(PlanInfeasible, match="exactly 8 GPUs with 1 replicas"):
        plan(profile, 8, 12, 1e9, exact=True, replicas=1)   # 6 layers: at most 6 stages


@pytest.mark.parametrize("argv,match", [(["--batch", "0"], "--batch must be positive"),
                                        (["--memory-mb", "nan"], "--memory-mb must be")])
def test_bad_flags_exit_2_with_one_line(argv, match, capsys):
    with pytest.raises(SystemExit) as exit_:
        gpt.parse_options(argv)
    assert exit_.value.code == 2 and match in capsys.readouterr().err.splitlines()[-1]


def test_no_plan_fits_is_one_line_exit_3(monkeypatch, capsys):
    for var in ("GAVEL_SCHEDULER", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(var, raising=False)
    assert gpt.main(["--memory-mb", "0.001", "--steps", "1"]) == gpt.EXIT_PLAN_FAILED
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("gpt: no configuration of exactly 1 GPUs fits")
