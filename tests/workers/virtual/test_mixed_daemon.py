"""One job split across two emulated GPU types by two real worker daemons (VirtualFlow §5.1.2,
§4.1; docs/runtime.md, "Mixed-type jobs (virtual nodes)"): the ranks are real processes of
the lstm reference workload in one gloo group, launched by the workers from RunJobs whose
env carries the virtual-node layout, and their final parameters equal one process training
the full global batch in plain PyTorch (float64). A checkpoint taken on three ranks resumes
on one rank of another type with the same trajectory."""

from __future__ import annotations


import pytest
import torch

from gavelsched import checkpoints
from gavelsched.daemon.leases import free_port as _free_port
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import FakeJob, FakeScheduler
from traces.catalog import default_table
from workers.daemon.emulation import Emulation
from workers.daemon.worker import Worker, WorkerConfig
from workers.virtual.data import VirtualSampler
from gavelsched.virtual.envspec import layout_env, parse_layout_env
from gavelsched.virtual.split import SplitPlan, TypePlan
from workers.virtual.workload import DATASET_STEPS, synthetic_dataset
from workers.workloads.common import CHECKPOINT_FILE
from workers.workloads.lstm import WORKLOAD

JOB_TYPE = "LM (batch size 20)"
STEPS = 4
NODE = 2   # samples per virtual node; V = 8, B = 16


def _plan(**types: tuple[int, int]) -> SplitPlan:
    """type=(gpus, nodes per GPU)."""
    return SplitPlan({name: TypePlan(gpus, NODE * nodes, nodes)
                      for name, (gpus, nodes) in types.items()}, 1.0)


@pytest.fixture
def cluster(tmp_path):
    """A fake scheduler, an emulated v100 worker with 1 GPU and a k80 worker with 2."""
    table = default_table()
    speed = 20.0   # every rank paced, none slower than ~200 steps/s
    sched = FakeScheduler()
    sched.start()
    workers = {}
    for wtype, gpus in (("v100", 1), ("k80", 2)):
        workers[wtype] = Worker(WorkerConfig(
            scheduler=sched.address, worker_type=wtype, gpus=gpus,
            work_dir=tmp_path / wtype, emulation=Emulation(wtype, table, speed)))
        workers[wtype].start()
    yield sched, workers
    for worker in workers.values():
        worker.stop()
    sched.stop()



def _launch(sched, workers, job_id: str, plan: SplitPlan, ckpt, round_: int, steps_done: int,
            stop_at: int) -> list[pb.RoundReportRequest]:
    """RunJob on every worker the plan uses (ranks in the plan's order) and the reports."""
    env = {**layout_env(plan), "GAVEL_WORKLOAD_DTYPE": "float64"}
    world = sum(p.gpus for p in plan.types.values())
    sched.jobs[job_id].lease = lambda job, rank: pb.Lease(max_steps=stop_at, max_seconds=120,
                                                         round=round_)
    port, rank = _free_port(), 0
    for wtype in sorted(plan.types):
        gpus = plan.types[wtype].gpus
        ack = sched.worker_stub(workers[wtype].address).RunJob(pb.RunJobRequest(
            job_id=job_id, round=round_, job_type=JOB_TYPE, workload="lstm",
            total_steps=STEPS, steps_done=steps_done, gpus=list(range(gpus)), rank=rank,
            world_size=world, master_addr="127.0.0.1", master_port=port,
            checkpoint_dir=str(ckpt), scheduler_address=sched.address, env=env,
            lease=pb.Lease(max_steps=stop_at, max_seconds=120, round=round_)))
        assert ack.ok, ack.message
        rank += gpus
    servers = len(plan.types)
    reports = sched.wait_for(lambda: len(mine := [r for r in sched.log.rounds
                                                  if r.job_id == job_id
                                                  and r.round == round_]) == servers and mine,
                             timeout=120)
    for report in reports:
        assert (report.exit_code, report.failed) == (0, False), report.reason
        assert report.steps == stop_at
    return reports


def _full_batch_reference(layout, steps: int) -> dict[str, torch.Tensor]:
    """Plain PyTorch in one process: each step's whole global batch (the samples the virtual
    nodes read, in node order) in one forward pass, SGD with momentum, float64."""
    torch.manual_seed(0)
    model = WORKLOAD.build().to(torch.float64)
    optimizer = torch.optim.SGD(model.parameters(), lr=WORKLOAD.lr, momentum=0.9)
    size = layout.batch * DATASET_STEPS
    data = synthetic_dataset(WORKLOAD, size, 0, torch.float64, torch.device("cpu"))
    sampler = VirtualSampler(size, layout, 0)
    for step in range(steps):
        index = torch.cat([sampler.node_indices(step, n) for n in range(layout.nodes)])
        optimizer.zero_grad()
        WORKLOAD.loss(model, tuple(t[index] for t in data)).backward()
        optimizer.step()
    return model.state_dict()


def _max_diff(ckpt, reference: dict[str, torch.Tensor]) -> float:
    state = torch.load(checkpoints.latest(ckpt).path / CHECKPOINT_FILE, weights_only=False)
    assert state["global_step"] == STEPS
    return max(float((state["model"][k] - v).abs().max()) for k, v in reference.items())


def _paces(workers, job_id: str, round_: int) -> dict[int, str]:
    """The pace each rank's process logged (its GAVEL_EMULATE_STEPS_PER_S)."""
    paces = {}
    for worker in workers.values():
        for log in (worker.config.work_dir / "logs" / job_id).glob(f"round{round_}-rank*.err"):
            line = next(ln for ln in log.read_text().splitlines() if "paced at" in ln)
            paces[int(log.stem.rsplit("rank", 1)[1])] = line.split("paced at ")[1].split()[0]
    return paces


def test_uneven_split_across_types_equals_one_full_batch_process(cluster, tmp_path):
    """6:1:1 of V = 8: the v100 runs six nodes, each k80 one; float64, <= 1e-9."""
    sched, workers = cluster
    plan = _plan(v100=(1, 6), k80=(2, 1))
    sched.jobs["mixed"] = FakeJob(total_steps=STEPS)
    ckpt = tmp_path / "ckpt"
    _launch(sched, workers, "mixed", plan, ckpt, round_=0, steps_done=0, stop_at=STEPS)
    assert checkpoints.latest(ckpt).steps == STEPS == sched.jobs["mixed"].steps_done
    job = parse_layout_env(layout_env(plan), 3)
    assert [job.nodes_of(r) for r in range(3)] == [(0,), (1,), (2, 3, 4, 5, 6, 7)]
    assert _max_diff(ckpt, _full_batch_reference(job.layout, STEPS)) <= 1e-9
    # each rank was paced for its own share on its own emulated type
    emulation = {t: w.config.emulation for t, w in workers.items()}
    expected = {r: repr(emulation[job.types[r]].split_steps_per_s(JOB_TYPE, job, r))
                for r in range(3)}
    assert _paces(workers, "mixed", 0) == expected
    assert float(expected[2]) < float(expected[0])   # six nodes on the v100: the slowest


def test_resume_on_another_mapping_stays_on_the_trajectory(cluster, tmp_path):
    """4:2:2 on v100 + 2 x k80 for two steps, checkpoint, then all 8 nodes on one v100."""
    sched, workers = cluster
    sched.jobs["elastic"] = FakeJob(total_steps=STEPS)
    ckpt = tmp_path / "ckpt"
    _launch(sched, workers, "elastic", _plan(v100=(1, 4), k80=(2, 2)), ckpt, round_=0,
            steps_done=0, stop_at=2)
    assert checkpoints.latest(ckpt).steps == 2 == sched.jobs["elastic"].steps_done
    alone = _plan(v100=(1, 8))
    _launch(sched, workers, "elastic", alone, ckpt, round_=1, steps_done=2, stop_at=STEPS)
    inits = [(i.round, i.rank) for i in sched.log.inits if i.job_id == "elastic"]
    assert sorted(inits) == [(0, 0), (0, 1), (0, 2), (1, 0)]
    layout = parse_layout_env(layout_env(alone), 1).layout
    assert _max_diff(ckpt, _full_batch_reference(layout, STEPS)) <= 1e-9


@pytest.mark.parametrize("env, message", [
    ({"GAVEL_VN_LAYOUT": '{"sizes":[2,2],"ranks":[[0],[1]]}', "GAVEL_VN_NODES": "2",
      "GAVEL_VN_BATCH": "4"}, "GAVEL_VN_LAYOUT has 2 ranks but WORLD_SIZE=3"),
    ({"GAVEL_VN_LAYOUT": "not json"}, "GAVEL_VN_LAYOUT is not JSON"),
    ({**layout_env(_plan(v100=(1, 6), k80=(2, 1))), "GAVEL_VN_NODES": "6"},
     "GAVEL_VN_NODES='6' disagrees"),
])
def test_worker_refuses_a_bad_layout_before_launching(cluster, env, message):
    sched, workers = cluster
    ack = sched.worker_stub(workers["k80"].address).RunJob(pb.RunJobRequest(
        job_id="bad", job_type=JOB_TYPE, workload="lstm", total_steps=1, gpus=[0, 1],
        rank=0, world_size=3, env=env, lease=pb.Lease(max_steps=1, max_seconds=10)))
    assert not ack.ok and message in ack.message
    assert workers["k80"].launcher.running_jobs() == []


def test_ranks_past_the_layout_are_refused(cluster):
    sched, workers = cluster
    ack = sched.worker_stub(workers["k80"].address).RunJob(pb.RunJobRequest(
        job_id="bad", job_type=JOB_TYPE, workload="lstm", total_steps=1, gpus=[0, 1],
        rank=2, world_size=3, env=layout_env(_plan(v100=(1, 6), k80=(2, 1))),
        lease=pb.Lease(max_steps=1, max_seconds=10)))
    assert not ack.ok and "RunJob ranks 2..3 are not ranks of GAVEL_VN_LAYOUT" in ack.message


@pytest.mark.parametrize("name", ["resnet", "lstm", "transformer", "recoder"])
def test_every_reference_workload_runs_its_virtual_nodes(name, monkeypatch, caplog):
    """In one process (all four uneven nodes on rank 0), float64, standalone."""
    import importlib

    from workers.workloads import common

    for var in ("GAVEL_SCHEDULER", "GAVEL_CHECKPOINT_DIR", "MASTER_ADDR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GAVEL_VN_LAYOUT", '{"sizes":[3,1,2,2],"ranks":[[0,1,2,3]]}')
    monkeypatch.setenv("GAVEL_VN_NODES", "4")
    monkeypatch.setenv("GAVEL_VN_BATCH", "8")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("GAVEL_WORKLOAD_DTYPE", "float64")
    workload = importlib.import_module(f"workers.workloads.{name}").WORKLOAD
    with caplog.at_level("INFO", logger="workers.virtual.workload"):
        result = common.train(workload, steps=2)
    assert "rank 0 of 1: virtual nodes [0, 1, 2, 3] (8 of 8 samples, V=4)" in caplog.text
    assert "float64" in caplog.text
    assert result.steps == 2 and len(result.losses) == 2
    assert all(torch.isfinite(torch.tensor(v)) for v in result.losses)


def test_plain_and_virtual_checkpoints_refuse_each_other(tmp_path):
    from workers.virtual.checkpoint import CheckpointMismatch, load_checkpoint, save_checkpoint
    from gavelsched.virtual.envspec import layout_from_env
    from workers.virtual.workload import virtual_trainer
    from workers.workloads import common

    env = layout_env(_plan(v100=(1, 2)))
    trainer = virtual_trainer(WORKLOAD, layout_from_env(env, 0, 1))
    path = save_checkpoint(trainer, tmp_path / "vn.pt")
    model = WORKLOAD.build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(common.CheckpointError, match="written with virtual nodes"):
        common.load_checkpoint(path, model, optimizer)
    plain = common.save_checkpoint(tmp_path / "plain.pt", model, optimizer, 3)
    with pytest.raises(CheckpointMismatch, match="not a virtual-node checkpoint"):
        load_checkpoint(trainer, plain)
