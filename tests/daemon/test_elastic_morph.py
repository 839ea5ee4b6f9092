"""An elastic pipeline job morphs on the daemon (issue #10; Varuna §4): a GPT job
submitted with scale factor 4 and ``min_scale_factor`` 2 under ``max_min_fairness_mixed`` on
one v100 x 4 worker runs on 2 GPUs next to a 2-GPU job and on 4 when it is alone (or the
reverse), re-plans its pipeline for each count, resumes from its layer-wise checkpoint, and
finishes with exactly its total steps and the weights of a run that never morphed
(float64). Real scheduler, real worker daemon, real gloo ranks; plus the pure parts
(submission, store, JOB.yaml, local-cluster's job)."""

from __future__ import annotations

import json
import sys

import pytest

from gavelsched import checkpoints
from gavelsched.cli import InputError, main
from gavelsched.client.local import elastic_gpt_job
from gavelsched.client.schedule import gpus_held
from gavelsched.daemon.store import Store
from gavelsched.daemon.submissions import SubmissionError, check_submission
from gavelsched.rpc import pb
from traces.catalog import default_table
from traces.throughputs import dump_table
from workers.pipeline.model import ModelSpec
from workers.pipeline.morph import read_weights
from workers.pipeline.reference import max_abs_diff, train_reference
from workers.workloads import gpt

from .cluster import Cluster, running, wait_until

GPT_TYPE = "Transformer (batch size 16)"   # v100: 52 steps/s on 2 GPUs, 92 on 4
SPEED = 0.05                               # paced at 2.6 and 4.6 steps/s
STEPS = 14
SPEC = ModelSpec(vocab=16, hidden=8, blocks=4, seq=3, dtype="float64")
BATCH, LR = 8, 0.1


def test_elastic_submissions_are_checked_and_kept(tmp_path):
    table = default_table()
    ok = check_submission(pb.JobRequest(job_type=GPT_TYPE, scale_factor=4, total_steps=5,
                                        min_scale_factor=2), table, table.worker_types, {})
    assert ok.spec.min_scale_factor == 2
    assert check_submission(pb.JobRequest(job_type=GPT_TYPE, scale_factor=4, total_steps=5),
                            table, table.worker_types, {}).spec.min_scale_factor is None
    for low in (5, -1):
        with pytest.raises(SubmissionError, match=rf"min_scale_factor: must be between 1 and "
                                                  rf"scale_factor \(4\), got {low}"):
            check_submission(pb.JobRequest(job_type=GPT_TYPE, scale_factor=4, total_steps=5,
                                           min_scale_factor=low), table, table.worker_types, {})
    store = Store(tmp_path)
    store.add_job(ok.with_id("0"))
    store.close()
    assert Store(tmp_path).jobs()[0].spec.min_scale_factor == 2    # a restarted scheduler keeps it


def test_job_yaml_and_local_cluster_job(tmp_path, capsys):
    from gavelsched.client import JobRequest

    path = tmp_path / "job.yaml"
    path.write_text(f"job_type: {GPT_TYPE}\ntotal_steps: 5\nscale_factor: 4\n"
                    f"min_scale_factor: 2\nworkload: gpt\n")
    assert JobRequest.from_yaml(path).min_scale_factor == 2
    path.write_text(f"job_type: {GPT_TYPE}\ntotal_steps: 5\nmin_scale_factor: two\n")
    assert main(["submit", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "min_scale_factor has a bad value 'two'" in err[0]
    job = elastic_gpt_job({"k80": 2, "v100": 4}, lambda t, j, n: 10.0 * n, 5.0, 0.1)
    assert (job.scale_factor, job.min_scale_factor, job.total_steps) == (4, 2, 60)
    assert "workers.workloads.gpt" in job.command
    with pytest.raises(InputError, match="--elastic-gpt needs a worker type with >= 2 GPUs"):
        elastic_gpt_job({"v100": 1}, lambda *a: 1.0, 5.0, 0.1)
    assert gpus_held("v100:2", 4) == [("v100", 2)] and gpus_held("v100", 4) == [("v100", 4)]
    assert main(["local-cluster", "--workers", "v100=1", "--elastic-gpt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--elastic-gpt needs a worker type with >= 2 GPUs" in err[0]


def test_an_elastic_gpt_job_morphs_and_finishes_exactly(tmp_path):
    priors = tmp_path / "priors.json"
    dump_table(default_table().scaled(SPEED), priors)
    # Gavel's restart rule: under the default one (``core/restarts.py``) a run whose torch
    # start-up is a few seconds keeps its 2 GPUs for five times that, longer than this
    # 14-step job lives, so it would never morph (moving would not pay).
    cluster = Cluster(tmp_path, policy="max_min_fairness_mixed", round_seconds=3.0,
                      extra={"expected_workers": 4, "throughputs": str(priors),
                             "restart_rule": "gavel"})
    command = (f"{sys.executable} -m workers.workloads.gpt --dtype float64 --replicas 1 "
               f"--vocab {SPEC.vocab} --hidden {SPEC.hidden} --blocks {SPEC.blocks} "
               f"--seq {SPEC.seq} --batch {BATCH} --lr {LR}")
    seen: set[str] = set()
    held: set[int] = set()
    with running(cluster):
        cluster.start_worker("v100", 4, emulation_speed=SPEED, grace_s=5.0)
        wait_until(lambda: cluster.alive_workers() == 1, 60, "the worker")
        job = cluster.submit(STEPS, job_type=GPT_TYPE, scale_factor=4, min_scale_factor=2,
                             workload="", command=command)
        other = cluster.submit(8, scale_factor=2)          # A3C, the light steps workload

        def finished():
            state = cluster.jobs()[job]
            if state.worker_type:
                seen.add(state.worker_type)
                held.add(state.gpus)
                assert state.min_scale_factor == 2
            return state if state.state in ("done", "failed", "cancelled") else None
        final = wait_until(finished, 90, "the elastic job")
        assert cluster.jobs()[other].state in ("done", "running", "queued")
    assert final.state == "done", final.reason
    assert final.steps_done == final.total_steps == STEPS
    # the world size of each run: the ranks the worker launched for it, per round
    ranks: dict[str, int] = {}
    for log in (tmp_path / "worker0" / "logs" / job).glob("round*-rank*.err"):
        round_ = log.name.split("-")[0]
        ranks[round_] = ranks.get(round_, 0) + 1
    assert {2, 4} <= set(ranks.values()), ranks
    assert {"v100", "v100:2"} <= seen, seen               # the status named both
    assert {2, 4} <= held, held                           # and the GPUs it held
    # online throughputs: only under the type's name, i.e. measured on the scale factor's
    # 4 GPUs; a v100:2 run is not recorded as the job's v100 throughput
    store = Store(tmp_path / "state")
    assert set(store.throughputs().get(job, {})) <= {"v100"}
    # a v100:2 run measured the job type's rate on 2 GPUs instead: it refines the scaling
    # model that prices elastic counts (``traces/scaling.py``) and outlives a restart
    assert store.scaling()[GPT_TYPE, "v100", 2] > 0
    store.close()
    ckpt = checkpoints.latest(tmp_path / "state" / "checkpoints" / job).path / gpt.LAYERS_DIR
    meta = json.loads((ckpt / "meta.json").read_text())
    assert meta["steps_done"] == STEPS and meta["replicas"] == 1
    morphed = read_weights(ckpt, SPEC)
    assert max_abs_diff(morphed, train_reference(SPEC, STEPS, BATCH, LR)) <= 1e-9
