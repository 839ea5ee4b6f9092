"""``gavelsched vn``: virtual nodes (VirtualFlow). ``check`` proves that the training
trajectory does not depend on the node-to-process mapping or on resizes; ``plan`` splits a
job's global batch across GPU types from offline profiles (docs/virtual_nodes.md)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from . import InputError
from .args import needs_torch, parse_counts

DEFAULT_MAPPINGS = "1x8,2x4,4x2,8x1,6:2"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "vn", help="virtual nodes: mapping self-test and heterogeneous batch split",
        description="Virtual nodes (VirtualFlow): a job's global batch is split into V virtual "
                    "nodes that any number and mix of processes or GPU types run, with the "
                    "same training trajectory. See docs/virtual_nodes.md.")
    commands = parser.add_subparsers(dest="vn_command", metavar="SUBCOMMAND")
    commands.required = True

    check = commands.add_parser(
        "check", help="train a reference model under several mappings and compare",
        description="Train a tiny reference model (batch norm, dropout, Adam, cosine LR "
                    "schedule) with real gloo processes on 127.0.0.1 under each mapping of its "
                    "virtual nodes, and print the largest absolute difference of the "
                    "parameters (and batch-norm running statistics) from one process running "
                    "all nodes. Mapping notation: NxV = N processes with V nodes each; "
                    "a:b = two processes holding a and b nodes. Exit code 1 if a difference "
                    "exceeds --tolerance.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    check.add_argument("--mappings", default=DEFAULT_MAPPINGS,
                       help="comma-separated mappings of the virtual nodes ('' for none)")
    check.add_argument("--nodes", type=int, default=8, help="virtual nodes V of the job")
    check.add_argument("--node-batch", type=int, default=6,
                       help="samples per virtual node (at least 2: the model has batch norm)")
    check.add_argument("--steps", type=int, default=5, help="training steps per run (K)")
    check.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    check.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                       help="where every process trains: cuda puts them all on this "
                            "machine's GPU 0 (gloo carries CUDA tensors, so one GPU runs "
                            "every mapping)")
    check.add_argument("--resize", default=None, metavar="N1,N2,...",
                       help="also run phases of --steps steps on these process counts, "
                            "checkpointing between phases (one entry per phase)")
    check.add_argument("--tolerance", type=float, default=None,
                       help="largest accepted difference (default 1e-9 for float64, "
                            "1e-4 for float32)")
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    check.set_defaults(func=run_check)

    plan = commands.add_parser(
        "plan", help="split a global batch across GPU types from offline profiles",
        description="Choose how many GPUs of each type to use, the batch per GPU and the "
                    "virtual nodes per GPU that minimise the predicted step time "
                    "(VirtualFlow §5.1.2). The profile JSON is {type: {\"memory_gb\": M, "
                    "\"step_s\": {per_gpu_batch: seconds}, \"comm_s\": C}}; step_s lists the "
                    "passes that fit in memory (optional \"peak_gb\": {batch: GB} bounds "
                    "them by memory_gb too).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    plan.add_argument("--batch", type=int, required=True, help="global batch size B")
    plan.add_argument("--gpus", required=True, metavar="TYPE=N,...",
                      help="GPUs available per type, e.g. v100=2,p100=8")
    plan.add_argument("--profile", type=Path, required=True, help="profile JSON file")
    plan.add_argument("--node-batch", type=int, default=None,
                      help="fix every virtual node at this many samples (keeps the job's "
                           "layout, and so its trajectory, across plans)")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(func=run_plan)


# ----------------------------------------------------------------------------- check

def _positive(value: int, flag: str) -> int:
    if value <= 0:
        raise InputError(f"{flag} {value}: must be positive")
    return value


def run_check(args: argparse.Namespace) -> int:
    needs_torch("vn check")
    from workers.virtual.check import CheckFailed
    from workers.virtual.check import run_check as check
    from gavelsched.virtual.layout import LayoutError, parse_mapping
    from workers.virtual.reference import ReferenceJob

    nodes = _positive(args.nodes, "--nodes")
    if args.node_batch < 2:
        raise InputError(f"--node-batch {args.node_batch}: batch norm needs at least 2 "
                         f"samples per virtual node")
    # two full steps and a short one (each node at least 2 samples) per epoch
    dataset = 2 * nodes * args.node_batch + nodes * max(2, args.node_batch // 2)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: this machine has no CUDA device")
    job = ReferenceJob(nodes=nodes, node_batch=args.node_batch, dtype=args.dtype,
                       dataset_size=dataset, device=args.device)
    steps = _positive(args.steps, "--steps")
    try:
        mappings = [parse_mapping(text, nodes) for text in args.mappings.split(",")
                    if text.strip()]
    except LayoutError as err:
        raise InputError(f"--mappings: {err}") from None
    resize = _process_counts(args.resize, nodes) if args.resize else []
    if not mappings and not resize:
        raise InputError("nothing to check: give --mappings or --resize")
    tolerance = args.tolerance if args.tolerance is not None else (
        1e-9 if args.dtype == "float64" else 1e-4)
    try:
        results = check(job, mappings, steps, resize)
    except CheckFailed as err:
        raise InputError(str(err)) from None
    if args.json:
        out = {"mappings": {r.label: r.max_abs_diff for r in results
                            if not r.label.startswith("resize")}}
        if resize:
            out["resize"] = [{"processes": r.processes, "nodes_per_process":
                              list(r.nodes_per_process), "after_step": r.end_step,
                              "max_abs_diff": r.max_abs_diff}
                             for r in results if r.label.startswith("resize")]
        print(json.dumps(out, indent=2))
    else:
        print(f"{'run':<14} {'processes':>9} {'nodes per process':<24} {'steps':>5} "
              f"{'max |diff|':>10}")
        for r in results:
            nodes_text = ",".join(map(str, r.nodes_per_process))
            print(f"{r.label:<14} {r.processes:>9} {nodes_text:<24} {r.end_step:>5} "
                  f"{r.max_abs_diff:>10.3g}")
    worst = max((r.max_abs_diff for r in results), default=0.0)
    if not worst <= tolerance:
        print(f"gavelsched vn check: largest difference {worst:.3g} exceeds tolerance "
              f"{tolerance:g}", file=sys.stderr)
        return 1
    return 0


def _process_counts(text: str, nodes: int) -> list[int]:
    counts = []
    for part in text.split(","):
        try:
            count = int(part)
        except ValueError:
            raise InputError(f"--resize {text!r}: {part!r} is not a process count") from None
        if not 1 <= count <= nodes:
            raise InputError(f"--resize {text!r}: {count} processes cannot hold {nodes} "
                             f"virtual nodes (1..{nodes})")
        counts.append(count)
    return counts


# ----------------------------------------------------------------------------- plan

def run_plan(args: argparse.Namespace) -> int:
    from gavelsched.virtual.split import SplitError, parse_profiles, plan_split

    try:
        data = json.loads(args.profile.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{args.profile}: not valid JSON (line {err.lineno}: {err.msg})") \
            from None
    try:
        profiles = parse_profiles(data, str(args.profile))
        plan = plan_split(profiles, args.batch, parse_counts(args.gpus, what="--gpus"),
                          node_batch=args.node_batch)
    except SplitError as err:
        raise InputError(str(err)) from None
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return 0
    print(f"{'type':<10} {'gpus':>4} {'batch/gpu':>9} {'nodes/gpu':>9}")
    for name, part in plan.types.items():
        print(f"{name:<10} {part.gpus:>4} {part.batch_per_gpu:>9} "
              f"{part.virtual_nodes_per_gpu:>9}")
    rate = plan.steps_per_s if math.isfinite(plan.steps_per_s) else float("nan")
    print(f"batch {plan.batch}, predicted step {plan.step_s:.6g} s ({rate:.4g} steps/s)")
    return 0
