"""Reference pipeline workload: the GPT-style model of ``workers/pipeline/model.py`` trained
pipeline-parallel (P stages × D replicas) by the pipeline executor, on synthetic tokens.
Run: ``python -m workers.workloads.gpt [--steps N]``; under a worker it runs until its lease
ends (docs/runtime.md, "Pipeline jobs").

At every start the job plans for the GPUs it holds now (WORLD_SIZE = P·D) with the global
batch fixed (thesis §3.3, Algorithm 1, with every GPU used), from a per-layer profile rank 0
measures and broadcasts, so all ranks run the same plan. It then loads the layer-wise
checkpoint, each stage just the layers it now holds, and trains under GavelIterator; at the
lease's end every replica-0 rank saves its layers (Varuna §4: morphing). So a job that
the scheduler restarts on a different GPU count continues the same SGD trajectory.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from gavelsched.iterator import EXIT_JOB_FAILED, GavelIterator
from workers.pipeline.executor import StageRuntime
from workers.pipeline.model import ModelSpec, build_layers, loss_sum
from workers.pipeline.morph import config_for_plan, read_meta_for, save_layers, write_meta
from workers.pipeline.planner import Plan, PlanInfeasible, plan
from workers.pipeline.profile import profile_from_dict, profile_model

from .common import (AMP_MODES, Workload, amp_from_env, autocast, deterministic_from_env,
                     device_for_rank, exit_process, init_distributed, leave_distributed,
                     make_deterministic)

log = logging.getLogger(__name__)

LAYERS_DIR = "layers"     # the layer-wise checkpoint, inside the job's checkpoint directory
EPOCH = 1000              # synthetic mini-batches per pass of the iterator's loader
STANDALONE_STEPS = 8
EXIT_PLAN_FAILED = EXIT_JOB_FAILED   # like a job that cannot start: one line on stderr


@dataclass(frozen=True)
class GptOptions:
    """What the job trains and how it may be laid out; the same for every start."""

    spec: ModelSpec = field(default_factory=lambda: ModelSpec(vocab=64, hidden=32, blocks=4,
                                                              seq=16, dtype="float32"))
    batch: int = 8                      # global mini-batch: fixed across morphs
    lr: float = 0.05
    memory_bytes: float = math.inf      # per GPU, for the planner's MEMORY(.)
    replicas: int | None = None         # pin D (then P = world / D); None: the planner picks
    kind: str = "1f1b"                  # a flush schedule (2bw cannot be checkpointed)
    amp: str = "fp32"                   # bf16: bfloat16 autocast (with float32 parameters)
    deterministic: bool = False         # deterministic kernels (common.make_deterministic)


@dataclass(frozen=True)
class GptResult:
    """Absolute steps at exit, this run's plan, and whether the lease/job ended."""

    steps: int
    plan: Plan
    done: bool
    finished: bool


def choose_plan(world: int, options: GptOptions) -> Plan:
    """The plan for ``world`` GPUs from this machine's profile of the model (every GPU
    used, global batch fixed), timed by simulating the schedule (Varuna §4.4)."""
    profile = profile_from_dict(profile_model(options.spec, microbatch_size=1, repeats=5))
    return plan(profile, world, options.batch, options.memory_bytes, exact=True,
                replicas=options.replicas, timing="simulated")


def agreed_plan(world: int, rank: int, options: GptOptions) -> Plan:
    """Rank 0 plans and broadcasts, so every rank runs the same layout (profiles differ
    from process to process); a failure reaches every rank as PlanInfeasible."""
    chosen: Plan | str
    if rank == 0:
        try:
            chosen = choose_plan(world, options)
        except PlanInfeasible as err:
            chosen = str(err)
    else:
        chosen = ""
    if world > 1:
        box = [chosen]
        dist.broadcast_object_list(box, src=0)
        chosen = box[0]
    if isinstance(chosen, str):
        raise PlanInfeasible(chosen)
    return chosen


def describe(chosen: Plan) -> str:
    return (f"P={chosen.stages} D={chosen.replicas} micro-batches={chosen.microbatches}x"
            f"{chosen.microbatch_size} recompute={chosen.recompute} cuts={list(chosen.cuts)}")


def train(options: GptOptions, steps: int | None = None) -> GptResult:
    """Plan for this world size, resume from the layer checkpoint, train under GavelIterator
    until the lease ends (under a scheduler) or for ``steps`` mini-batches (standalone)."""
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)   # P·D ranks share the machine (see benchmarks/pipeline.py)
    if options.deterministic:
        make_deterministic()
    distributed = init_distributed()
    device = device_for_rank()   # with CUDA: this rank's GPU is the current device (nccl)
    world = dist.get_world_size() if distributed else 1
    rank = dist.get_rank() if distributed else 0
    try:
        chosen = agreed_plan(world, rank, options)
        cfg = config_for_plan(chosen, options.spec, options.kind, options.lr)
        cfg.check()
        runtime = StageRuntime(cfg, rank)
        if rank == 0:
            log.info("gpt: %d GPUs, batch %d: %s (predicted %.4f s per mini-batch)", world,
                     options.batch, describe(chosen), chosen.prediction.time_s)

        def load(directory: str) -> None:
            folder = Path(directory) / LAYERS_DIR
            read_meta_for(folder, options.spec)
            runtime.load_layers(folder)

        def save(directory: str) -> None:
            folder = Path(directory) / LAYERS_DIR
            if runtime.replica == 0:
                save_layers(folder, runtime.layer_state())
            if rank == 0:
                write_meta(folder, iterator.steps, options.spec.layers, stages=chosen.stages,
                           replicas=chosen.replicas, cuts=list(chosen.cuts))
            if distributed:
                dist.barrier()   # every stage's layers are on disk before the step count

        iterator = GavelIterator(range(EPOCH), None, load, save, save_on_all_ranks=True)
        if iterator.standalone:
            steps = STANDALONE_STEPS if steps is None else steps
            for step in range(steps):
                with autocast(options.amp, device):
                    runtime.minibatch(step)
            return GptResult(steps, chosen, True, False)
        while not iterator.done:
            for _ in iterator:
                with autocast(options.amp, device):
                    runtime.minibatch(iterator.steps)   # the absolute step picks the data
        iterator.close()
        return GptResult(iterator.steps, chosen, iterator.done, iterator.finished)
    finally:
        if distributed:   # a rank that is raising leaves without waiting for the others
            leave_distributed(wait_for_peers=sys.exc_info()[0] is None)


# ---- the same model as one data-parallel stage, for tools that treat workloads alike ------

_ONE_STAGE = ModelSpec(vocab=64, hidden=32, blocks=2, seq=16, dtype="float32")


def _one_stage_batch(gen: torch.Generator, size: int) -> tuple[torch.Tensor, ...]:
    tokens = torch.randint(0, _ONE_STAGE.vocab, (size, _ONE_STAGE.seq), generator=gen)
    return tokens, torch.roll(tokens, -1, dims=1)   # learnable: predict the next token


def _one_stage_loss(model: nn.Module, data: tuple[torch.Tensor, ...]) -> torch.Tensor:
    tokens, targets = data
    return loss_sum(model(tokens), targets) / targets.numel()


WORKLOAD = Workload("gpt", 
                    build=lambda: nn.Sequential(*build_layers(_ONE_STAGE)),
                    batch=_one_stage_batch, loss=_one_stage_loss, lr=0.05)


def parse_options(argv: Sequence[str] | None = None) -> tuple[GptOptions, int | None]:
    default = GptOptions()
    parser = argparse.ArgumentParser(
        prog="python -m workers.workloads.gpt",
        description="Reference pipeline workload: a GPT-style model trained by the pipeline "
                    "executor (P stages x D replicas = WORLD_SIZE, planned at every start "
                    "with the global batch fixed; resumes from a layer-wise checkpoint under "
                    "any layout). Under a gavelsched worker it runs until its lease ends; "
                    "alone, --steps mini-batches.")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"mini-batches to train without a scheduler "
                             f"(default {STANDALONE_STEPS})")
    parser.add_argument("--batch", type=int, default=default.batch,
                        help="global mini-batch (fixed)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="pin the data-parallel width D (default: the planner picks)")
    parser.add_argument("--memory-mb", type=float, default=None,
                        help="memory per GPU for the planner (default: unlimited)")
    parser.add_argument("--vocab", type=int, default=default.spec.vocab)
    parser.add_argument("--hidden", type=int, default=default.spec.hidden)
    parser.add_argument("--blocks", type=int, default=default.spec.blocks,
                        help="transformer blocks")
    parser.add_argument("--seq", type=int, default=default.spec.seq)
    parser.add_argument("--dtype", choices=("float32", "float64"), default=default.spec.dtype)
    parser.add_argument("--lr", type=float, default=default.lr)
    parser.add_argument("--seed", type=int, default=0, help="initial weights and data")
    parser.add_argument("--amp", choices=AMP_MODES, default=None,
                        help="mixed precision: bf16 runs the stages under bfloat16 autocast "
                             "(float32 parameters; default GAVEL_WORKLOAD_AMP or fp32)")
    parser.add_argument("--deterministic", action="store_true", default=None,
                        help="deterministic kernels (torch.use_deterministic_algorithms; "
                             "default GAVEL_WORKLOAD_DETERMINISTIC)")
    args = parser.parse_args(argv)
    try:
        args.amp = args.amp or amp_from_env()
        args.deterministic = args.deterministic or deterministic_from_env()
    except ValueError as err:
        parser.error(str(err))
    if args.amp != "fp32" and args.dtype == "float64":
        parser.error("--amp bf16 needs float32 parameters, not --dtype float64")
    for name in ("steps", "batch", "replicas", "vocab", "hidden", "blocks", "seq"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} must be positive, got {value}")
    for name in ("memory_mb", "lr"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"--{name.replace('_', '-')} must be a positive number, got {value}")
    spec = ModelSpec(vocab=args.vocab, hidden=args.hidden, blocks=args.blocks, seq=args.seq,
                     seed=args.seed, dtype=args.dtype)
    memory = args.memory_mb * 2**20 if args.memory_mb is not None else math.inf
    return GptOptions(spec, args.batch, args.lr, memory, args.replicas, default.kind,
                      args.amp, args.deterministic), args.steps


def main(argv: Sequence[str] | None = None) -> int:
    """Train; log the outcome; exit 0 (3 with a one-line reason when no plan fits)."""
    options, steps = parse_options(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = train(options, steps)
    except PlanInfeasible as err:
        sys.stderr.write(f"gpt: {err}\n")
        return EXIT_PLAN_FAILED
    log.info("gpt: at step %d under %s%s", result.steps, describe(result.plan),
             " (finished)" if result.finished else "")
    return 0


if __name__ == "__main__":
    exit_process(main())
