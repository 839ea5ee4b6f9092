"""The scheduler daemon launches a mixed-type placement for real (issue #9; VirtualFlow
§5.1.2, §6.5.2): a job submitted with ``mixed: true`` under ``max_min_fairness_mixed`` on
v100 x 1 + k80 x 2 gets a configuration spanning both types, each worker daemon launches its
own ranks from RunJobs whose env carries the job's virtual-node layout, the lstm ranks train
split across the types (float64), and the job finishes with exactly its total steps and the
parameters of one process training the full global batch in plain PyTorch. Real scheduler,
real worker daemons, real gloo ranks; plus the pure parts (layout, deal, submission, YAML)."""

from __future__ import annotations

import pytest
import torch

from gavelsched import checkpoints
from gavelsched.cli import main
from gavelsched.daemon.mixed import job_layout, mixed_env, node_sizes
from gavelsched.core import JobSpec
from gavelsched.daemon.store import JobRow, Store
from gavelsched.daemon.submissions import SubmissionError, check_submission
from gavelsched.rpc import pb
from tests.workers.virtual.test_mixed_daemon import _full_batch_reference
from traces.catalog import default_table
from traces.throughputs import dump_table
from traces.workloads import CPU_BATCH, VIRTUAL_NODE_WORKLOADS
from gavelsched.virtual.envspec import parse_layout_env
from workers.workloads.common import CHECKPOINT_FILE

from .cluster import LOOPBACK_ANY, Cluster, running, wait_until

JOB_TYPE = "LM (batch size 80)"   # lstm: 16 samples a step (80 // 5), 16 nodes of 1
SPEED = 0.5                       # v100 4.2, k80 1.1, k80:1+v100:1 5.0 steps/s
STEPS = 10
SPLIT = {"types": {"k80": {"gpus": 1, "batch_per_gpu": 107, "virtual_nodes_per_gpu": 1},
                   "v100": {"gpus": 1, "batch_per_gpu": 405, "virtual_nodes_per_gpu": 1}},
         "step_s": 0.1}


def _row(**kw) -> JobRow:
    spec = {"id": "7", "job_type": JOB_TYPE, "scale_factor": 1, "total_steps": STEPS,
            "mixed": True, **kw}
    return JobRow(JobSpec(**spec), workload="lstm")


def _metrics(port: int) -> str:
    from urllib.request import urlopen

    return urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_every_virtual_node_workload_has_a_cpu_batch_rule():
    """The scheduler sizes a mixed job's layout from traces.workloads without torch."""
    assert set(VIRTUAL_NODE_WORKLOADS) <= set(CPU_BATCH)


def test_one_layout_dealt_by_the_split_plan():
    job = _row()
    assert node_sizes(job) == (1,) * 16                     # B = 16 = 1 x 80 // 5
    mixed = job_layout(job, ("k80", "v100"), SPLIT)
    assert mixed.mapping.ranks == ((0, 1, 2), tuple(range(3, 16)))   # 107:405 of 16 nodes
    alone = job_layout(job, ("v100",))
    assert alone.layout == mixed.layout and alone.mapping.ranks == (tuple(range(16)),)
    # a scale-factor-2 job: B = 2 x 16, V = 32; three ranks of a configuration
    wide = job_layout(_row(scale_factor=2), ("k80", "k80", "v100"), SPLIT)
    assert [len(r) for r in wide.mapping.ranks] == [6, 5, 21]   # 107:107:405, remainders
    env = mixed_env(job, ("k80", "v100"), SPLIT)
    assert parse_layout_env(env, 2).types == ("k80", "v100")
    # a rank the deal would leave empty still gets a node
    tiny = job_layout(_row(job_type="LM (batch size 20)"), ("k80", "v100"),
                      {"types": {"k80": {"batch_per_gpu": 1}, "v100": {"batch_per_gpu": 500}}})
    assert [len(r) for r in tiny.mapping.ranks] == [1, 3]


def test_mixed_submissions_are_checked_and_kept(tmp_path):
    table = default_table()
    ok = check_submission(pb.JobRequest(job_type=JOB_TYPE, total_steps=5, mixed=True),
                          table, table.worker_types, {})
    assert ok.spec.mixed and ok.workload == "lstm"
    for request, field in ((pb.JobRequest(job_type=JOB_TYPE, total_steps=5, mixed=True,
                                          workload="steps"), "workload 'steps'"),
                           (pb.JobRequest(job_type=JOB_TYPE, total_steps=5, mixed=True,
                                          command="true"), "a command job")):
        with pytest.raises(SubmissionError, match=f"mixed: {field} cannot run split"):
            check_submission(request, table, table.worker_types, {})
    store = Store(tmp_path)
    store.add_job(ok.with_id("0"))
    store.close()
    assert Store(tmp_path).jobs()[0].spec.mixed      # a restarted scheduler keeps it


def test_job_yaml_mixed_key(tmp_path, capsys):
    from gavelsched.client import JobRequest

    path = tmp_path / "job.yaml"
    path.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 5\nmixed: true\n")
    assert JobRequest.from_yaml(path).mixed
    path.write_text(f"job_type: {JOB_TYPE}\ntotal_steps: 5\nmixed: yes please\n")
    assert main(["submit", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mixed has a bad value 'yes please'" in err[0]


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "2", "--mixed-jobs", "3"], "--mixed-jobs must be between 0 and --jobs (2)"),
    (["--workload", "steps", "--mixed-jobs", "1"], "--mixed-jobs: workload 'steps' cannot"),
    (["--job-type", "nope"], "--job-type: unknown job type 'nope'"),
])
def test_local_cluster_mixed_flags_are_checked(argv, message, capsys):
    assert main(["local-cluster", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_mixed_job_trains_split_across_types(tmp_path, monkeypatch):
    monkeypatch.setenv("GAVEL_WORKLOAD_DTYPE", "float64")
    priors = tmp_path / "priors.json"
    dump_table(default_table().scaled(SPEED), priors)
    cluster = Cluster(tmp_path, policy="max_min_fairness_mixed", round_seconds=2.5,
                      extra={"expected_workers": 3, "throughputs": str(priors),
                             "metrics_listen": LOOPBACK_ANY})
    seen: set[str] = set()
    labelled: list[bool] = []
    with running(cluster):
        cluster.start_worker("v100", 1, emulation_speed=SPEED, grace_s=3.0)
        cluster.start_worker("k80", 2, emulation_speed=SPEED, grace_s=3.0)
        wait_until(lambda: cluster.alive_workers() == 2, 60, "the workers")
        job = cluster.submit(STEPS, job_type=JOB_TYPE, workload="lstm", mixed=True)

        def finished():
            state = cluster.jobs()[job]
            if state.worker_type:
                seen.add(state.worker_type)
            if "+" in state.worker_type and not any(labelled):
                labelled.append(f'gavelsched_job_gpus{{job="{job}",worker_type='
                                f'"{state.worker_type}"}} 2.0' in _metrics(cluster.metrics_port))
            return state if state.state in ("done", "failed", "cancelled") else None
        final = wait_until(finished, 150, "the mixed job")
    assert final.state == "done", final.reason
    assert final.steps_done == final.total_steps == STEPS
    assert final.mixed
    assert "k80:1+v100:1" in seen, seen              # the scheduler placed a configuration
    assert any(labelled)                             # ... and its metrics name it
    # ...and both worker daemons launched ranks of one round of it, with the layout env
    rounds = {}
    for n in (0, 1):
        for log in (tmp_path / f"worker{n}" / "logs" / job).glob("round*-rank*.err"):
            rounds.setdefault(log.name.split("-")[0], set()).add(n)
    assert any(hosts == {0, 1} for hosts in rounds.values()), rounds
    ckpt = checkpoints.latest(tmp_path / "state" / "checkpoints" / job).path / CHECKPOINT_FILE
    state = torch.load(ckpt, weights_only=False)
    assert state["global_step"] == STEPS
    layout = job_layout(_row(), ("v100",)).layout
    reference = _full_batch_reference(layout, STEPS)
    diff = max(float((state["model"][k] - v).abs().max()) for k, v in reference.items())
    assert diff <= 1e-9


def test_the_executor_launches_each_placement_with_the_same_layout(tmp_path):
    """The real executor (real core and policy solve) on a hand-moved clock: the mixed job's
    first placement spans both types (one RunJob per server, each with its own ranks, the
    configuration's steps/s, the layout dealt by the split plan); when the k80 server dies
    the job is placed again on the v100 alone with the *same* layout, all nodes on one rank
    (the checkpoint resumes under the new mapping)."""
    from gavelsched.core.configurations import Configurations
    from gavelsched.daemon.config import DaemonConfig
    from gavelsched.daemon.executor import DaemonExecutor
    from gavelsched.daemon.snapshot import build_snapshot
    from policies import get_policy

    from .test_round_aligned import Recorder

    t = [0.0]
    store = Store(tmp_path / "state")
    config = DaemonConfig(listen="127.0.0.1:0", policy="max_min_fairness_mixed",
                          round_seconds=10.0, state_dir=tmp_path / "state",
                          heartbeat_seconds=1.0, min_resolve_interval_s=0.0,
                          expected_workers=3)
    sent = Recorder()
    x = DaemonExecutor(config, store, get_policy("max_min_fairness_mixed"), default_table(),
                       sent, clock=lambda: t[0])
    x.solver.inline = True        # (``at`` plans and starts a round in one call)
    servers = {wtype: x.roster.register(pb.RegisterWorkerRequest(
        worker_type=wtype, gpus=gpus, address=f"127.0.0.1:{port}", hostname="h",
        previous_server_id=-1), 0.0).server_id
        for wtype, gpus, port in (("v100", 1, 1), ("k80", 2, 2))}
    job = x.submit(pb.JobRequest(job_type=JOB_TYPE, total_steps=10_000, workload="lstm",
                                 mixed=True))

    def at(when: float, *alive: str) -> None:
        t[0] = when
        for wtype in alive:
            x.roster.heartbeat(servers[wtype], when, {})
        x.tick()

    at(1.0, "v100", "k80")
    first = {r.env["GAVEL_VN_LAYOUT"]: r for r in sent.runs}
    assert len(sent.runs) == 2 and len(first) == 1       # one RunJob a server, one layout
    by_rank = sorted(sent.runs, key=lambda r: r.rank)
    assert [(r.rank, len(r.gpus), r.world_size) for r in by_rank] == [(0, 1, 2), (1, 1, 2)]
    mixed = parse_layout_env(dict(by_rank[0].env), 2)
    assert mixed.types == ("k80", "v100") and [len(n) for n in mixed.mapping.ranks] == [3, 13]
    option = next(o for o in Configurations(default_table()).options(
        JOB_TYPE, 1, {"v100": 1, "k80": 2}) if o.configuration.name == "k80:1+v100:1")
    assert by_rank[0].expected_steps_per_s == pytest.approx(option.configuration.throughput)
    assert build_snapshot(x.view(x.now())).response.jobs[0].mixed
    # the k80 server goes silent: failed after 3 heartbeats, its job re-placed on the v100
    for when in (2.0, 3.0, 4.5, 6.0, 8.5, 11.5):
        at(when, "v100")
    again = [r for r in sent.runs[2:] if r.job_id == job]
    assert len(again) == 1 and again[0].world_size == 1
    alone = parse_layout_env(dict(again[0].env), 1)
    assert alone.layout == mixed.layout and alone.mapping.ranks == (tuple(range(16)),)
    assert alone.types == ("v100",)
    store.close()
