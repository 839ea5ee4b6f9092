"""``gavelsched pipeline schedule|check|profile|plan``: pipeline-parallel schedules, the
executor's correctness check, the reference model's profile and the 2BW planner (thesis
chapters 2–4; docs/pipelines.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import InputError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "pipeline", help="pipeline-parallel schedules, executor check and planner",
        description="Pipeline-parallel training (thesis chapters 2-4): print a schedule, train "
                    "a reference model across processes and compare with one process, or plan "
                    "a configuration from a per-layer profile.")
    sub = parser.add_subparsers(dest="pipeline_command", metavar="ACTION")
    sub.required = True

    sched = sub.add_parser(
        "schedule", help="print a schedule's per-device action lists",
        description="Print the per-device ordered actions of a schedule. Chunk c (0 … P·V−1 "
                    "in layer order) runs on device c mod P. Prints the simulated time × rank grid "
                    "(forward 1 unit, backward 2) with its bubble fraction, or "
                    "{\"stages\": [[{\"op\", \"mb\", \"chunk\"}, ...], ...]} with --json.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _common(sched)
    sched.add_argument("--batches", type=int, default=2,
                       help=f"{_kinds_with(lambda k: not k.flush)} only: mini-batches the "
                            "no-flush schedule spans")
    sched.add_argument("--json", action="store_true", help="print JSON")
    sched.set_defaults(func=run_schedule)

    check = sub.add_parser(
        "check", help="train a reference model pipelined and in one process; compare",
        description="Train the reference GPT-style model with the schedule across P × D "
                    "processes (gloo point-to-point) and in one process on the full batch, and "
                    "print the largest parameter difference. 2bw is compared with delayed SGD "
                    "W(t+1) = W(t) − ν∇f(W(t−1)).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _common(check)
    check.add_argument("--steps", type=int, default=3, help="mini-batches to train")
    check.add_argument("--replicas", type=int, default=1, help="data-parallel width D")
    check.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    check.add_argument("--recompute", action="store_true", help="recompute activations")
    check.add_argument("--json", action="store_true", help='print {"max_abs_diff": x}')
    check.set_defaults(func=run_check)

    prof = sub.add_parser(
        "profile", help="profile the reference model layer by layer (the planner's input)",
        description="Measure the reference GPT-style model on this machine, one thread: each "
                    "layer's forward, backward and optimizer step, the bytes it saves for "
                    "backward, its output and weights (thesis §2.4.1, §3.3.3), and the link: "
                    "a boundary tensor's trip between two processes (Varuna §4.3). "
                    "Writes the profile JSON of docs/pipelines.md for `pipeline plan`.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    prof.add_argument("-o", "--output", type=Path, required=True, metavar="PATH",
                      help="profile JSON to write")
    prof.add_argument("--microbatch-size", type=int, default=4,
                      help="samples per measured call")
    prof.add_argument("--repeats", type=int, default=20, help="timed passes (medians)")
    prof.add_argument("--vocab", type=int, default=256, help="vocabulary size")
    prof.add_argument("--hidden", type=int, default=256, help="hidden width")
    prof.add_argument("--blocks", type=int, default=6, help="transformer blocks")
    prof.add_argument("--seq", type=int, default=64, help="sequence length")
    prof.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                      help="parameter and activation type")
    prof.add_argument("--no-link", action="store_true",
                      help="do not measure the link (the profile's bandwidth is then infinite)")
    prof.add_argument("--calibrate", action="store_true",
                      help="then measure every layer's forward and backward again inside the "
                           "executor, each layer a chunk of its own on 2 ranks at once "
                           "(Varuna's per-cut-point calibration, Varuna §4.3), and the link "
                           "from their boundary trip; the layers must split evenly in 2")
    prof.set_defaults(func=run_profile)

    plan = sub.add_parser(
        "plan", help="choose P, D, micro-batch size and recomputation from a profile",
        description="PipeDream-2BW's planner (thesis §3.3): the fastest configuration whose "
                    "predicted memory fits, with the global batch fixed. The profile JSON "
                    "format is in docs/pipelines.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    plan.add_argument("--profile", type=Path, required=True, help="per-layer profile JSON")
    plan.add_argument("--gpus", type=int, required=True, help="GPUs available")
    plan.add_argument("--batch", type=int, required=True, help="global mini-batch size")
    plan.add_argument("--memory-gb", type=float, required=True, help="memory per GPU (GiB)")
    from workers.pipeline.planner import SCHEDULES
    plan.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    plan.add_argument("--timing", choices=("closed_form", "simulated"), default="closed_form",
                      help="time per mini-batch from the thesis's closed form (§3.3.3), or "
                           "from running the schedule through the event simulator with the "
                           "profile's per-stage costs (Varuna §4.4)")
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(func=run_plan)


def _kinds_with(trait) -> str:
    """The declared kinds that have ``trait`` (a predicate on a ScheduleKind), for help."""
    from workers.pipeline.kinds import KINDS
    return ", ".join(name for name, kind in KINDS.items() if trait(kind))


def _common(parser: argparse.ArgumentParser) -> None:
    from workers.pipeline.kinds import KINDS
    parser.add_argument("--kind", required=True, choices=list(KINDS), help="schedule kind")
    parser.add_argument("--stages", type=int, required=True, help="pipeline stages P")
    parser.add_argument("--microbatches", type=int, required=True, help="micro-batches M")
    parser.add_argument("--chunks", type=int, default=None,
                        help=f"model chunks per device V ({_kinds_with(lambda k: k.multi_chunk)}"
                             "; default 2)")
    parser.add_argument("--advance-num", type=int, default=None,
                        help=f"{_kinds_with(lambda k: 'advance_num' in k.options)}: forwards "
                             "on device 0 before its first backward")


EXIT_RANKS_FAILED = 1


def _ranks_failed(err: Exception) -> int:
    """A rank process failed (not bad input): one line, exit 1."""
    print(f"gavelsched pipeline: error: {str(err).splitlines()[0]}", file=sys.stderr)
    return EXIT_RANKS_FAILED


def _schedule_options(args) -> dict:
    """The options given on the command line that the kind's generator takes."""
    from workers.pipeline.kinds import KINDS
    given = {"advance_num": args.advance_num, "batches": getattr(args, "batches", None)}
    return {name: given[name] for name in KINDS[args.kind].options
            if given.get(name) is not None}


def run_schedule(args) -> int:
    from workers.pipeline.kinds import KINDS, build_schedule
    from workers.pipeline.ops import ScheduleError, schedule_to_json
    try:
        schedule = build_schedule(args.kind, args.stages, args.microbatches, args.chunks,
                                  **_schedule_options(args))
    except ScheduleError as err:
        raise InputError(str(err)) from None
    if args.json:
        print(json.dumps(schedule_to_json(schedule)))
        return 0
    from workers.pipeline.schedules import chunks_of
    from workers.pipeline.simulate import format_timeline, validate
    # a no-flush schedule spans --batches mini-batches
    microbatches = args.microbatches * (1 if KINDS[args.kind].flush else args.batches)
    result = validate(schedule, microbatches, chunks_of(schedule))
    print(format_timeline(result))
    print(f"makespan {result.makespan:g} units (F=1, B=2, R=1), bubble fraction "
          f"{result.bubble_fraction:.4f}, peak stashed micro-batches per device "
          f"{list(result.peak_stash)}")
    return 0


def run_check(args) -> int:
    from workers.pipeline.config import RunConfig
    from workers.pipeline.kinds import KINDS
    from workers.pipeline.launch import run_pipeline
    from workers.pipeline.model import ModelSpec
    from workers.pipeline.reference import max_abs_diff, train_reference

    kind = KINDS[args.kind]
    chunks = args.chunks or kind.default_chunks
    spec = ModelSpec(dtype=args.dtype, blocks=max(4, args.stages * chunks - 2))
    cfg = RunConfig(kind=args.kind, stages=args.stages, microbatches=args.microbatches,
                    chunks=chunks, steps=args.steps, replicas=args.replicas, spec=spec,
                    recompute=args.recompute, advance_num=args.advance_num)
    try:  # refuse a bad configuration before starting any process
        cfg.check()
    except ValueError as err:
        raise InputError(str(err)) from None
    from workers.pipeline.launch import PipelineFailed
    try:
        run = run_pipeline(cfg)
    except PipelineFailed as err:
        return _ranks_failed(err)
    ref = train_reference(spec, cfg.steps, cfg.global_batch, cfg.lr, delay=kind.delay)
    diff = max_abs_diff(run.weights, ref)
    if args.json:
        print(json.dumps({"max_abs_diff": diff}))
    else:
        print(f"{args.kind}: P={args.stages} D={args.replicas} M={args.microbatches} V={chunks} "
              f"steps={args.steps}: max |pipelined − reference| = {diff:.3g}")
    return 0


def run_profile(args) -> int:
    from workers.pipeline.model import ModelSpec
    from workers.pipeline.profile import profile_from_dict, profile_model

    for name in ("microbatch_size", "repeats", "vocab", "hidden", "blocks", "seq"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')}: must be >= 1, got "
                             f"{getattr(args, name)}")
    spec = ModelSpec(vocab=args.vocab, hidden=args.hidden, blocks=args.blocks, seq=args.seq,
                     dtype=args.dtype)
    if args.calibrate and spec.layers % 2:
        raise InputError(f"--calibrate: the {spec.layers} layers (blocks + 2) do not split "
                         "evenly on 2 ranks; use an even --blocks")
    from workers.pipeline.launch import PipelineFailed, measure_link
    from workers.pipeline.profile import calibrate_profile

    data = profile_model(spec, args.microbatch_size, args.repeats)
    try:
        if args.calibrate:
            data = calibrate_profile(data, spec)
        elif not args.no_link:
            boundary = max(row["output_bytes"] for row in data["layers"][:-1])
            data["bandwidth_bytes_per_s"] = boundary / measure_link(int(boundary))
    except PipelineFailed as err:
        return _ranks_failed(err)
    try:
        args.output.write_text(json.dumps(data, indent=1) + "\n")
    except OSError as err:
        raise InputError(f"{args.output}: {err.strerror or err}") from None
    profile = profile_from_dict(data)
    b = args.microbatch_size
    link = (f"{profile.bandwidth_bytes_per_s / 1e9:.3g} GB/s"
            if args.calibrate or not args.no_link else "not measured")
    print(f"{data['model']}: {len(profile.layers)} layers, F+B "
          f"{b * sum(layer.compute_s for layer in profile.layers) * 1e3:.2f} ms and step "
          f"{sum(layer.update_s for layer in profile.layers) * 1e3:.2f} ms per micro-batch of "
          f"{b}{' (calibrated)' if args.calibrate else ''}, weights "
          f"{profile.weight_bytes / 2**20:.2f} MiB, link {link}; wrote {args.output}")
    return 0


def run_plan(args) -> int:
    from workers.pipeline.planner import PlanInfeasible, plan
    from workers.pipeline.profile import ProfileError, load_profile
    try:
        profile = load_profile(args.profile)
        chosen = plan(profile, args.gpus, args.batch, args.memory_gb * 2**30, args.schedule,
                      timing=args.timing)
    except (ProfileError, PlanInfeasible) as err:
        raise InputError(str(err)) from None
    out = chosen.to_json()
    if args.json:
        print(json.dumps(out))
    else:
        print(f"P={out['stages']} stages × D={out['replicas']} replicas ({out['gpus']} GPUs), "
              f"micro-batch {out['microbatch_size']} × {out['microbatches']} accumulated, "
              f"recompute={'yes' if out['recompute'] else 'no'}, schedule {out['schedule']}, "
              f"stage cuts at layers {out['cuts']}\n"
              f"predicted time per mini-batch: {out['predicted_time_per_minibatch_s']:.6g} s, "
              f"peak memory {out['predicted_memory_bytes'] / 2**20:.3f} MiB")
    return 0
