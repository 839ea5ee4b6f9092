"""Pipeline-parallel execution on CPU (issue #10): measured bubble against the formula, 1F1B,
interleaved, breadth-first and 2BW against GPipe, peak activation memory per stage against
the planner's MEMORY(.), and the planner's predicted time per mini-batch against the measured.

Everything is measured in one run, so the ratios share the machine's state. To keep P
processes from fighting over 2 cores, the pipelines have P = 2 stages (D = 1), every rank and
the profiler run torch on one thread (``torch.set_num_threads(1)``), and the kinds are run
round-robin ``--repeats`` times so that background load hits them alike. The layer profile
(``workers.pipeline.profile.profile_model``) is measured first, in P processes at once so that
each sees the machine as a rank of a P-stage run does (``_concurrent_profile``); the planner
predicts from it with the stage cuts it chose, and the executor runs with those cuts.

Rows:
- *one-time*: the first ``run_pipeline`` call (fork server start, torch import, rendezvous,
  process groups, first step) minus its steady steps, with the ranks' peak RSS;
- per kind: median time per mini-batch over the measured steps (the first ``--warmup``
  steps of every run are dropped), measured bubble = (step wall − compute) / compute averaged
  over ranks, and the formula's bubble (p−1)/m or (p−1)/(v·m);
- memory: each stage's peak activation bytes (tensors saved for backward) against the
  planner's prediction, for gpipe (m in flight) and 1f1b (p−d in flight);
- planner: predicted against measured time per mini-batch, per kind and per run (median
  error over the repeats, with its range):
  * *planner* (1f1b, 2bw), on the per-layer profile: thesis §3.3.3's closed form on the
    layers' compute only (as before the profile had a link and an update), the closed form
    with the measured link (``measure_link``: a boundary tensor's half round trip between
    two fresh processes) and each layer's optimizer step, and the simulated timing
    (``predict(timing="simulated")``) on the same profile; then both again on the
    *calibrated* profile (``calibrate_profile``, Varuna §4.3: every layer's F and B
    measured in the executor, each layer its own chunk on P ranks at once, and the link
    from their boundary trip), made once before the runs;
  * *calibrated*: Varuna's calibrated simulator (Varuna §4.3–4.4,
    ``workers.pipeline.calibrate``): every rank measures F and B of its chunks on mocked
    input, a boundary tensor's trip and its endpoints' costs, and one update, all ranks at
    once and just before training (``run_pipeline(calibrate=True)``), and the real schedule
    is simulated with them;
  * *online*: the same simulator fed with the F and B costs the ranks saw while training,
    and the rest as calibrated (what is left is the schedule and communication model's own
    error);
  the compute rows compare the profile's per-stage compute with the run's;
- the calibrated error split in two: the F+B *work* (thread CPU seconds, which the machine's
  load hardly moves) in the calibration against the run, and the *share* of a core the ranks
  got (wall / CPU seconds) in the calibration against the run.

A shared 2-core machine's speed moves by tens of percent within seconds (other processes'
load); the load average is printed beside each figure. Calibrated predictions are only as
good as the machine is steady between calibration and run.

    python benchmarks/pipeline.py                     # the BENCHMARKS.md table
    python benchmarks/pipeline.py --quick             # a smoke test
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import platform
import statistics
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import torch

from workers.pipeline.calibrate import predict_calibrated
from workers.pipeline.config import RunConfig
from workers.pipeline.kinds import KINDS, build_schedule
from workers.pipeline.launch import measure_link, run_pipeline
from workers.pipeline.model import ModelSpec
from workers.pipeline.planner import SCHEDULES, balanced_cuts, predict
from workers.pipeline.profile import calibrate_profile, profile_from_dict, profile_model
from workers.pipeline.simulate import simulate

RUNS = [("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("breadth_first", 2), ("2bw", 1)]
BEFORE = " (recv 0)"   # a row's label suffix: every receive posted at its own action


def _machine() -> str:
    try:
        cpu = subprocess.run(["lscpu"], check=False, capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines()
                      if ln.startswith("Model name")), platform.processor())
    except OSError:
        model = platform.processor()
    return f"{os.cpu_count()} cores, {model}, torch {torch.__version__}"


def _concurrent_profile(spec: ModelSpec, microbatch_size: int, copies: int) -> dict:
    """Profile the layers in ``copies`` processes at once and average them: each rank of a
    P-stage run shares the machine with P−1 others, and so does each profiler (a calibrated
    profile, as Varuna calibrates its simulator on the machine it predicts)."""
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=copies, mp_context=ctx) as pool:
        runs = list(pool.map(profile_model, [spec] * copies, [microbatch_size] * copies))
    merged = dict(runs[0])
    merged["layers"] = [
        {**rows[0], **{k: statistics.mean(r[k] for r in rows) for k in ("forward_s", "backward_s")}}
        for rows in zip(*[r["layers"] for r in runs])]
    return merged


def _steady(values: tuple[float, ...], warmup: int) -> list[float]:
    return list(values[warmup:]) or list(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32, help="global mini-batch")
    parser.add_argument("--steps", type=int, default=8, help="steps per run")
    parser.add_argument("--warmup", type=int, default=2, help="steps dropped per run")
    parser.add_argument("--repeats", type=int, default=2, help="round-robin repeats")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--recv-ahead", type=int, default=None,
                        help="receives each rank keeps posted ahead (default: a mini-batch's, "
                             "RunConfig.recv_ahead)")
    parser.add_argument("--before", action="store_true",
                        help="also run every kind with receives posted at their own action "
                             f"(recv_ahead 0, rows marked '{BEFORE.strip()}'), as before the "
                             "gloo stall fix, alternating with the others")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.hidden, args.seq, args.steps, args.repeats, args.warmup = 32, 8, 3, 1, 1
    p, m = 2, args.microbatches
    b = args.batch // m
    spec = ModelSpec(vocab=256, hidden=args.hidden, blocks=args.blocks, seq=args.seq,
                     dtype="float32")
    print(f"machine: {_machine()}; load average at start {os.getloadavg()[0]:.2f}")
    print(f"model: {spec.layers} layers (hidden {spec.hidden}, seq {spec.seq}, float32), "
          f"P={p} stages, M={m} micro-batches of {b}, global batch {args.batch}, "
          f"{args.steps} steps per run ({args.warmup} warm-up), {args.repeats} repeats, "
          "receives posted ahead: "
          f"{'a mini-batch' if args.recv_ahead is None else args.recv_ahead}")
    rows = [(label, kind, v, ahead) for kind, v in RUNS
            for label, ahead in [(kind, args.recv_ahead)] + ([(kind + BEFORE, 0)]
                                                               if args.before else [])]
    labels = [label for label, *_ in rows]

    t0 = time.perf_counter()
    measured_profile = _concurrent_profile(spec, b, p)
    profile_s = time.perf_counter() - t0
    boundary = max(row["output_bytes"] for row in measured_profile["layers"][:-1])
    t0 = time.perf_counter()
    link_s = measure_link(int(boundary))
    link_wall_s = time.perf_counter() - t0
    profile = profile_from_dict({**measured_profile, "bandwidth_bytes_per_s": boundary / link_s})
    t0 = time.perf_counter()
    calibrated_profile = profile_from_dict(calibrate_profile(measured_profile, spec, p))
    calibrate_profile_s = time.perf_counter() - t0
    compute_only = replace(profile, bandwidth_bytes_per_s=math.inf, tied_weight_bytes=0.0,
                           layers=tuple(replace(layer, update_s=0.0)
                                        for layer in profile.layers))
    cuts_by_chunks = {v: balanced_cuts([layer.compute_s for layer in profile.layers], p * v)
                      for v in {v for _, v in RUNS}}

    walls: dict[str, list[float]] = {k: [] for k in labels}
    bubbles: dict[str, list[float]] = {k: [] for k in labels}
    act_peak: dict[str, list[int]] = {}
    stage_compute: dict[str, list[list[float]]] = {}
    errors: dict[str, dict[str, list[float]]] = {
        k: {"calibrated": [], "online": [], "work": [], "share": []} for k in labels}
    loads: list[float] = []
    calibrate_s: list[float] = []
    one_time = None
    rss = 0
    for rep in range(args.repeats):
        for label, kind, v, ahead in rows:
            cfg = RunConfig(kind=kind, stages=p, microbatches=m, chunks=v, steps=args.steps,
                            batch=args.batch, spec=spec, cuts=cuts_by_chunks[v], lr=1e-3,
                            recv_ahead=ahead)
            started = time.perf_counter()
            run = run_pipeline(cfg, timeout_s=900, calibrate=True)
            total = time.perf_counter() - started
            loads.append(os.getloadavg()[0])
            calibrate_s.append(max(c.seconds for c in run.calibration))
            rss = max([rss] + [s.peak_rss_kb for s in run.stats])
            # per mini-batch: flush kinds per step, 2bw between a stage's weight updates
            per_batch = _steady(tuple(max(x) for x in zip(*[s.step_wall_s
                                                          for s in run.stats])), args.warmup)
            bubble = [statistics.mean((w - c) / c for s in run.stats
                                      for w, c in zip(_steady(s.step_wall_s, args.warmup),
                                                      _steady(s.step_compute_s, args.warmup)))]
            for s in run.stats:
                stage_compute.setdefault(label, [[] for _ in range(p)])[s.stage] += \
                    _steady(s.step_compute_s, args.warmup)
            if one_time is None:
                one_time = total - calibrate_s[-1] - sum(max(s.step_wall_s)
                                                          for s in run.stats[:1]) \
                    - (args.steps - 1) * statistics.median(per_batch)
            measured = statistics.median(per_batch)
            # the F and B the ranks saw while training; the boundary tensors and the update
            # as calibrated (an update seen in the run includes waiting for the other stages)
            online = [replace(s.observed, p2p_s=c.p2p_s, update_s=c.update_s, send_s=c.send_s,
                              recv_s=c.recv_s) for s, c in zip(run.stats, run.calibration)]
            errors[label]["calibrated"].append(
                predict_calibrated(cfg, run.calibration) / measured - 1)
            errors[label]["online"].append(predict_calibrated(cfg, online) / measured - 1)
            # the calibrated error, split: F+B work in CPU seconds (calibration vs the run)
            # and the share of a core the ranks got (wall / CPU, calibration vs the run)
            cal_wall, cal_cpu, run_wall, run_cpu = (
                sum(sum(getattr(c, f).values()) for c in records for f in fields)
                for records, fields in (
                    (run.calibration, ("forward_s", "backward_s")),
                    (run.calibration, ("forward_cpu_s", "backward_cpu_s")),
                    (online, ("forward_s", "backward_s")),
                    (online, ("forward_cpu_s", "backward_cpu_s"))))
            errors[label]["work"].append(cal_cpu / run_cpu - 1)
            errors[label]["share"].append((cal_wall / cal_cpu) / (run_wall / run_cpu) - 1)
            walls[label] += per_batch
            bubbles[label] += bubble
            act_peak.setdefault(label, [0] * p)
            for s in run.stats:
                act_peak[label][s.stage] = max(act_peak[label][s.stage], s.peak_activation_bytes)

    print(f"\none-time: profile {profile_s:.2f} s; link {link_wall_s:.2f} s (a "
          f"{boundary / 1024:.0f} KiB boundary tensor: {link_s * 1e3:.3f} ms); per-layer "
          f"calibration {calibrate_profile_s:.2f} s; first run_pipeline overhead "
          f"{one_time:.2f} s (fork server, imports, rendezvous, first step); calibration "
          f"{statistics.median(calibrate_s):.2f} s per run (median); "
          f"peak RSS per rank {rss / 1024:.0f} MiB")
    gpipe = statistics.median(walls["gpipe"])
    print(f"\n{'kind':<24}{'V':>3}{'s/mini-batch':>14}{'vs gpipe':>10}"
          f"{'bubble meas.':>14}{'formula':>9}")
    for label, kind, v, _ in rows:
        med = statistics.median(walls[label])
        formula = (p - 1) / (v * m) if KINDS[kind].flush else 0.0
        print(f"{label:<24}{v:>3}{med:>14.4f}{med / gpipe:>10.3f}"
              f"{statistics.median(bubbles[label]):>14.3f}{formula:>9.3f}")

    print(f"\n{'memory':<8}{'stage':>6}{'measured B':>13}{'predicted B':>13}{'ratio':>8}")
    for kind in ("gpipe", "1f1b"):
        pred = predict(profile, p, 1, b, m, False, "1f1b", cuts_by_chunks[1])
        # micro-batches in flight per stage, from the simulated schedule: GPipe holds all m
        in_flight = simulate(build_schedule(kind, p, m), m).peak_stash
        for d in range(p):
            # the planner's 1f1b has min(p−d, m) in flight
            predicted = pred.stage_activation_bytes[d] / min(p - d, m) * in_flight[d]
            measured = act_peak[kind][d]
            print(f"{kind:<8}{d:>6}{measured:>13,}{predicted:>13,.0f}{measured / predicted:>8.3f}")

    print(f"\n{'compute':<8}{'stage':>6}{'measured s':>12}{'profile s':>11}{'ratio':>8}"
          "   (F+B per mini-batch inside the pipelined run vs the profile)")
    pred = predict(profile, p, 1, b, m, False, "1f1b", cuts_by_chunks[1])
    edges = [0, *cuts_by_chunks[1], len(profile.layers)]
    for d in range(p):
        want = m * b * sum(layer.compute_s for layer in profile.layers[edges[d]:edges[d + 1]])
        got = statistics.median(stage_compute["1f1b"][d])
        print(f"{'1f1b':<8}{d:>6}{got:>12.4f}{want:>11.4f}{got / want:>8.3f}")

    def spread(values: list[float]) -> str:
        return (f"{statistics.median(values):+.1%} [{min(values):+.1%}, {max(values):+.1%}]"
                if values else "-")

    planners = ((compute_only, "closed_form"), (profile, "closed_form"),
                (profile, "simulated"), (calibrated_profile, "closed_form"),
                (calibrated_profile, "simulated"))
    print(f"\n{'planner':<24}{'measured s':>11}{'compute only':>14}{'closed form':>13}"
          f"{'simulated':>11}{'cal. closed':>13}{'cal. sim.':>11}"
          f"{'calibrated (range)':>30}{'online F/B (range)':>30}")
    for label, kind, _, _ in rows:
        meas = statistics.median(walls[label])
        planned = ["-"] * len(planners)
        if kind in SCHEDULES:   # the kinds the planner models
            planned = [
                format(predict(prof, p, 1, b, m, False, kind, cuts_by_chunks[1],
                               timing=t).time_s / meas - 1, "+.1%")
                for prof, t in planners]
        print(f"{label:<24}{meas:>11.4f}{planned[0]:>14}{planned[1]:>13}{planned[2]:>11}"
              f"{planned[3]:>13}{planned[4]:>11}"
              f"{spread(errors[label]['calibrated']):>30}{spread(errors[label]['online']):>30}")
    print(f"\n{'calibrated, split':<24}{'F+B CPU work: calibration/run':>36}"
          f"{'wall/CPU: calibration/run':>32}")
    for label in labels:
        print(f"{label:<24}{spread(errors[label]['work']):>36}"
              f"{spread(errors[label]['share']):>32}")
    for group in ("", BEFORE) if args.before else ("",):
        chosen = [label for label in labels if label.endswith(BEFORE) == bool(group)]
        for name in ("calibrated", "online", "work"):
            values = [e for label in chosen for e in errors[label][name]]
            within = sum(abs(e) <= 0.05 for e in values)
            print(f"{name}{group}: median |error| "
                  f"{statistics.median(abs(e) for e in values):.1%}, "
                  f"{within} of {len(values)} runs within 5%")
    print(f"load average per run: median {statistics.median(loads):.2f}, "
          f"range {min(loads):.2f}-{max(loads):.2f}")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
