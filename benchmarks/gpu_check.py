"""The GPU check (issue #19): gavelsched's CUDA paths on a real GPU, end to end.

Run on a machine with one NVIDIA GPU: ``python benchmarks/gpu_check.py [--type h100]``
(6 minutes on a 2-core CPU with ``--cpu``; on an H200, whose start-ups are ~7 s, expect
about as long). It checks, and exits 1 unless all of it holds:

1. **Exact preemption on CUDA.** A real ``gavelsched scheduler`` and real ``gavelsched
   worker --type TYPE --gpus 1 --emulate off`` daemons on loopback (``--workers``, two by
   default, both on the one GPU: two jobs train at once) run one job of every reference
   workload (resnet, lstm, transformer, recoder, gpt) on ``cuda`` with deterministic kernels
   (``GAVEL_WORKLOAD_DETERMINISTIC=1``, ``CUBLAS_WORKSPACE_CONFIG``). The five share the
   GPU round by round (max-min fairness under Gavel's rule, ``restart_rule: gavel``: the
   default rule would keep each run to its job's end, a few rounds away), so each is
   preempted and resumed from its checkpoint (model, optimizer, step, CPU and CUDA
   generators). Each job's size is set from a calibration so that it needs about six
   rounds (``RUNS_WANTED``). Every job must end ``done`` with
   exactly its total steps, after at least two preemptions, and its final parameters must
   equal, bit for bit, those of an uninterrupted run of the same job on the same GPU.
2. **Virtual nodes on CUDA.** ``gavelsched vn check --device cuda --mappings 1x8,2x4,8x1``
   in float64: every mapping within 1e-9 of one process running all nodes.
3. **Every CUDA path.** Those one GPU can run are run (``benchmarks/gpu_runner.py paths``);
   those that need several GPUs are listed with the reason.
4. **A data-parallel job's two ranks on the one GPU**, tried (``gpu_runner.py
   two-ranks``: nccl, as ``common.init_distributed`` picks it with CUDA): what happened
   is recorded, ran or refused (on ``--cpu``, the same two ranks under gloo).

It also records the thesis Table 5.4 analogue (§5.7.2) per workload on this GPU: each
run's start-up, training and save-and-exit seconds, read from the daemons' logs
(``benchmarks/gpu_runs.py``). Writes ``gpu_check.json`` and ``gpu_check.md`` to ``--out``,
and keeps the daemons' and jobs' logs under ``--out/work``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gavelsched.core.rules import startup_charge  # noqa: E402
from gavelsched.daemon.local import FINAL_STATES, LocalCluster, subprocess_env  # noqa: E402
from gavelsched.jobenv import WORKLOAD_DETERMINISTIC_VAR  # noqa: E402
from gavelsched.rpc import pb  # noqa: E402

import gpu_runs  # noqa: E402  (this folder is on sys.path when run as a script)

RUNNER = Path(__file__).with_name("gpu_runner.py")
# Workload -> the catalog job type its job runs as (distinct, so each has its own prior).
JOBS = {"resnet": "ResNet-18 (batch size 128)", "lstm": "LM (batch size 20)",
        "transformer": "Transformer (batch size 64)",
        "recoder": "Recommendation (batch size 2048)", "gpt": "LM (batch size 80)"}
# Each job is sized to need about this many rounds. A run whose lease is extended into the
# next round is one run, and with two jobs training at once some are: rehearsed on the CPU
# at 4.5, two jobs of ten ran 3 times, the least the check accepts.
RUNS_WANTED = 6.0
VN_MAPPINGS = "1x8,2x4,8x1"
VN_TOLERANCE = 1e-9
# CUDA paths one GPU cannot run, and why.
MULTI_GPU_PATHS = [
    ("DDP gradient all-reduce across GPUs (common.setup under nccl, WORLD_SIZE > 1)",
     "nccl with several ranks needs one GPU per rank"),
    ("GavelIterator's stop-step agreement (_Ranks.max) over nccl",
     "a one-rank job never all-reduces; the primitive it calls runs above"),
    ("gpt pipeline stages' activation send/recv (P > 1) and replica all-reduce (D > 1)",
     "one stage per GPU"),
    ("a mixed-type job's virtual nodes over nccl (workers.virtual.engine.backend_for)",
     "one rank per GPU; the engine on CUDA tensors runs above under gloo"),
]


class _Skipped(Exception):
    """A part left out by --parts."""


def child(*args: str, timeout: float = 600.0) -> Any:
    """Run ``gpu_runner.py ARGS`` in a fresh process; its JSON output."""
    done = subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True,
                          text=True, timeout=timeout, env=subprocess_env(), cwd=ROOT)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"gpu_runner {' '.join(args[:2])} failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def environment() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                            "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device=torch.cuda.get_device_name(0), memory_gb=props.total_memory / 2**30,
                    capability=f"{props.major}.{props.minor}")
    return info


def job_steps(cal: dict[str, Any], round_s: float) -> int:
    """Steps that need about RUNS_WANTED rounds: a run trains for what its round leaves
    after start-up (at least the daemon's lease floor: ``startup_charge``)."""
    train_s = round_s - startup_charge(cal["startup_s"], round_s)
    return max(20, math.ceil(RUNS_WANTED * train_s / cal["step_s"]))


def prior_table(worker_type: str, cal: dict[str, dict[str, Any]], path: Path) -> Path:
    """The catalog's table plus this GPU's calibrated steps/s for the check's job types
    (the scheduler's priors for a type the catalog lacks)."""
    from traces.catalog import default_table
    from traces.throughputs import dump_table
    from traces.types import ThroughputTable

    table = default_table()
    solo = {w: dict(rows) for w, rows in table.solo.items()}
    solo[worker_type] = {(JOBS[w], 1): 1.0 / c["step_s"] for w, c in cal.items()}
    dump_table(ThroughputTable(solo, {w: dict(p) for w, p in table.pairs.items()}), path)
    return path


def run_cluster(root: Path, worker_type: str, round_s: float, steps: dict[str, int],
                table: Path, timeout: float, workers: int) -> dict[str, Any]:
    """The jobs on a real scheduler and ``workers`` real workers of one GPU each, all on
    this machine's one GPU (each launches its jobs on local GPU 0): that many jobs train at
    once. Their outcome and checkpoints."""
    os.environ.update({WORKLOAD_DETERMINISTIC_VAR: "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    cluster = LocalCluster(root, round_seconds=round_s,
                           config={"throughputs": str(table), "restart_rule": "gavel"})
    try:
        cluster.start_scheduler()
        for _ in range(workers):
            cluster.start_worker(worker_type, 1, grace_s=30.0, extra_args=["--emulate", "off"])
        ids = {w: cluster.submit(pb.JobRequest(job_type=JOBS[w], scale_factor=1,
                                               total_steps=steps[w], workload=w))
               for w in steps}
        start, last = time.monotonic(), ""
        while True:
            jobs = cluster.jobs()
            line = "  ".join(f"{w} {jobs[i].state} {jobs[i].steps_done}/{steps[w]}"
                             for w, i in ids.items())
            if line != last:
                print(f"[{time.monotonic() - start:5.0f}s] {line}", flush=True)
                last = line
            if all(jobs[i].state in FINAL_STATES for i in ids.values()):
                break
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"jobs not done after {timeout:.0f} s: {line}")
            time.sleep(2.0)
        return {w: {"id": i, "job_type": JOBS[w], "state": jobs[i].state,
                    "steps": jobs[i].steps_done,
                    "reason": jobs[i].reason} for w, i in ids.items()}
    finally:
        cluster.stop()


def compare(job_dir: Path, reference_dir: Path) -> dict[str, Any]:
    """Bitwise comparison of the job's last commit with the uninterrupted run's."""
    import torch

    from gavelsched import checkpoints
    from gpu_runner import saved_parameters

    commit = checkpoints.latest(job_dir)
    if commit is None:
        return {"equal": False, "why": f"no checkpoint commit under {job_dir}"}
    got, want = saved_parameters(commit.path), saved_parameters(reference_dir)
    if got.keys() != want.keys():
        return {"equal": False, "why": "different parameter names"}
    differ = [k for k in want if not torch.equal(got[k].cpu(), want[k].cpu())]
    worst = max((float((got[k].double() - want[k].double()).abs().max()) for k in differ),
                default=0.0)
    return {"equal": not differ, "tensors": len(want), "differing": len(differ),
            "max_abs_diff": worst, "commit": commit.path.name}


def vn_check(device: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "gavelsched", "vn", "check", "--device",
                           device, "--mappings", VN_MAPPINGS, "--dtype", "float64",
                           "--json"], capture_output=True, text=True, timeout=300,
                          env=subprocess_env(), cwd=ROOT)
    if done.returncode not in (0, 1):
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"ok": False, "error": last}
    mappings = json.loads(done.stdout)["mappings"]
    worst = max(mappings.values())
    return {"ok": worst <= VN_TOLERANCE, "max_abs_diff": worst, "mappings": mappings}


def markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    lines = [f"GPU check on {env.get('device', 'no GPU')} (torch {env['torch']}, CUDA "
             f"{env['cuda']}): {'PASSED' if result['passed'] else 'FAILED'} in "
             f"{result['seconds']:.0f} s", "",
             "| workload | steps | state | runs (preemptions) | bit-equal to uninterrupted |",
             "|---|---|---|---|---|"]
    for w, job in result.get("jobs", {}).items():
        runs = result["runs"].get(w, 0)
        same = result["comparison"].get(w, {})
        state = job["state"] if job["state"] == "done" else f"{job['state']}: {job['reason']}"
        lines.append(f"| {w} | {job['steps']}/{result['steps'][w]} | {state} | "
                     f"{runs} ({max(0, runs - 1)}) | "
                     f"{'yes' if same.get('equal') else 'NO ' + str(same)} |")
    if result.get("costs"):
        lines += ["", result["costs"]]
    vn = result.get("vn", {})
    lines += ["", f"Virtual nodes on CUDA ({VN_MAPPINGS}, float64): max |diff| "
              f"{vn.get('max_abs_diff', vn.get('error'))}", "", "CUDA paths run:"]
    lines += [f"- {p['path']}: {p['result']}" for p in result.get("paths", [])]
    two = result.get("two_ranks")
    if two:
        lines += ["", f"{two['path']}: {two['result']}"]
    lines += ["", "CUDA paths that need several GPUs:"]
    lines += [f"- {path}: {why}" for path, why in MULTI_GPU_PATHS]
    if result["errors"]:
        lines += ["", "Errors:"] + [f"- {e}" for e in result["errors"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--type", default=None, dest="worker_type",
                        help="the worker's GPU type (default: from the device name, e.g. h100)")
    parser.add_argument("--round-seconds", type=float, default=12.0,
                        help="the scheduler's round: longer than a job's start-up (about 7 s "
                             "on an H200 machine), so that every run trains")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker daemons sharing the one GPU (each --gpus 1): that many "
                             "jobs train at once, which halves the cluster part's time (at "
                             "most one fewer than the workloads, so that they preempt each "
                             "other)")
    parser.add_argument("--timeout", type=float, default=420.0,
                        help="seconds the cluster part may take")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "gpu_check")
    parser.add_argument("--workloads", default=",".join(JOBS),
                        help="the reference workloads to run (comma-separated; at least two, "
                             "so that they preempt each other)")
    parser.add_argument("--parts", default="preemption,vn,paths,two-ranks",
                        help="which parts to run (a rerun may take only what failed)")
    parser.add_argument("--cpu", action="store_true",
                        help="try the check itself on a machine without CUDA: every part "
                             "runs on the CPU (no CUDA path is checked then)")
    args = parser.parse_args(argv)
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if len(chosen) < 2 or set(chosen) - set(JOBS):
        parser.error(f"--workloads: at least two of {', '.join(JOBS)}")
    if args.workers < 1:
        parser.error(f"--workers: at least 1, got {args.workers}")
    # more jobs than workers, or no job is ever preempted (a rerun of two workloads: one)
    workers = min(args.workers, len(chosen) - 1)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"preemption", "vn", "paths", "two-ranks"}:
        parser.error("--parts: some of preemption, vn, paths, two-ranks")
    began = time.monotonic()
    env = environment()
    if not env["cuda_available"] and not args.cpu:
        print("gpu_check: no CUDA device on this machine (--cpu tries the check on the CPU)",
              file=sys.stderr)
        return 2
    name = env.get("device", "cpu").lower()
    worker_type = args.worker_type or next(
        (t for t in ("h200", "h100", "a100", "l4", "v100") if t in name), "gpu")
    result: dict[str, Any] = {"environment": env, "worker_type": worker_type, "errors": [],
                              "workers": workers,
                              "round_s": args.round_seconds}
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.out / "work"         # kept: the daemons' logs, job logs, checkpoints
    shutil.rmtree(root, ignore_errors=True)
    try:
        if "preemption" not in parts:
            raise _Skipped
        print("calibrating each workload on", env.get("device", "the CPU"), flush=True)
        cal = {w: child("calibrate", w, JOBS[w]) for w in chosen}
        steps = {w: job_steps(c, args.round_seconds) for w, c in cal.items()}
        result.update(calibration=cal, steps=steps)
        print("uninterrupted reference runs:", steps, flush=True)
        with ThreadPoolExecutor(len(chosen)) as pool:
            refs = dict(zip(chosen, pool.map(lambda w: child(
                "reference", w, JOBS[w], str(steps[w]), str(root / "ref" / w)), chosen)))
        result["references"] = refs
        table = prior_table(worker_type, cal, root / "priors.yaml")
        jobs = run_cluster(root / "cluster", worker_type, args.round_seconds, steps,
                           table, args.timeout, workers)
        result["jobs"] = jobs
        costs = gpu_runs.runs(root / "cluster")
        result["runs"] = {w: sum(c.job_id == j["id"] for c in costs) for w, j in jobs.items()}
        result["costs"] = gpu_runs.table(costs)
        ckpts = root / "cluster" / "state" / "checkpoints"   # the scheduler's default
        result["comparison"] = {w: compare(ckpts / j["id"], root / "ref" / w)
                                for w, j in jobs.items()}
    except _Skipped:
        pass
    except Exception as err:  # noqa: BLE001 - recorded; the other parts still run
        result["errors"].append(f"preemption: {type(err).__name__}: {err}")
    try:
        if "vn" in parts:
            result["vn"] = vn_check("cpu" if args.cpu else "cuda")
    except Exception as err:  # noqa: BLE001
        result["errors"].append(f"virtual nodes: {type(err).__name__}: {err}")
    if not args.cpu and "paths" in parts:
        try:
            result["paths"] = child("paths")
        except Exception as err:  # noqa: BLE001
            result["errors"].append(f"paths: {type(err).__name__}: {err}")
    if "two-ranks" in parts:
        try:
            result["two_ranks"] = child("two-ranks", str(root / "two_ranks"))
        except Exception as err:  # noqa: BLE001
            result["errors"].append(f"two ranks: {type(err).__name__}: {err}")
    jobs_ok = "preemption" not in parts or bool(result.get("jobs")) and all(
        j["state"] == "done" and j["steps"] == result["steps"][w]
        and result["runs"][w] >= 3 and result["comparison"][w]["equal"]
        for w, j in result["jobs"].items())
    result["passed"] = (jobs_ok and ("vn" not in parts or result.get("vn", {}).get("ok", False))
                        and (args.cpu or "paths" not in parts or bool(result.get("paths")))
                        and not result["errors"])
    result["seconds"] = time.monotonic() - began
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=1, default=str))
    text = markdown(result)
    (args.out / "gpu_check.md").write_text(text)
    print(text)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
