"""``gavelsched local-cluster``: the physical demo (thesis §5.6-5.7). A scheduler and
emulated typed workers on loopback run a small mix of the reference torch workloads; live
progress goes to stderr, and the end is the simulator's summary (``SimulationResult``;
``--json`` writes its JSON with every job's ``completion_s``). The daemons share a fresh
random token (``<state dir>/token``, mode 0600): no other local user can reach them.

Emulation (docs/runtime.md): each worker paces its jobs to the throughput table's steps/s
for its type times ``--emulation-speed``, so a K80 is really slower than a V100 by the
table's ratio. A job's ``total_steps`` is ``rounds x round_seconds`` of work on the fastest
type at that pace, with ``rounds`` cycling through 1.5, 2.5 and 3.5. The scheduler gets
the table scaled by ``--emulation-speed`` as its priors, so what it expects is what the
workers run. ``--mixed-jobs N`` marks the first N jobs mixed-capable (``mixed: true``): under
a ``*_mixed`` policy they may run on several types at once, split with virtual nodes.
``--dashboard`` serves the web dashboard on a free loopback port (its address, with the
demo's token, goes to stderr). ``--elastic-gpt`` adds an elastic pipeline job first (issue #10; Varuna §4): the gpt
workload with the scale factor of the largest type's GPUs and half of it as its minimum
(``elastic_gpt_job``), so under a ``*_mixed`` policy it morphs as the other jobs come and go.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from . import InputError
from .args import parse_counts
from .replay import scale_flags

log = logging.getLogger(__name__)

# Job types of the mix, one per reference workload family (traces/workloads.py).
MIX = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "Transformer (batch size 16)",
       "Recommendation (batch size 512)")
ROUNDS_OF_WORK = (1.5, 2.5, 3.5)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "local-cluster", help="run a scheduler and emulated workers on loopback (demo)",
        description="Start a scheduler and emulated typed workers on loopback (a temporary "
                    "state dir), submit a small mix of the reference torch workloads "
                    "(ResNet, LSTM, Transformer, recommendation autoencoder), show live "
                    "progress on stderr and end with the simulator's summary.")
    p.add_argument("--workers", default="k80=1,p100=1,v100=1", metavar="TYPE=N,...",
                   help="GPUs per worker type (one worker daemon per type)")
    p.add_argument("--jobs", type=int, default=6, metavar="N", help="jobs to submit")
    p.add_argument("--round-seconds", type=float, default=10.0, metavar="S",
                   help="round length")
    p.add_argument("--policy", default="max_min_fairness_perf", help="scheduling policy")
    p.add_argument("--emulation-speed", type=float, default=0.1, metavar="X",
                   help="time dilation: jobs run at X times the table's steps/s (CPU-sized)")
    p.add_argument("--workload", default=None,
                   help="run this reference workload for every job (e.g. 'steps', no torch)")
    p.add_argument("--job-type", default=None, metavar="TYPE",
                   help="submit every job as this catalog job type (default: a mix)")
    p.add_argument("--mixed-jobs", type=int, default=0, metavar="N",
                   help="the first N jobs may run on several GPU types at once (virtual "
                        "nodes; with --policy max_min_fairness_mixed or "
                        "finish_time_fairness_mixed)")
    p.add_argument("--elastic-gpt", action="store_true",
                   help="also submit, first, an elastic GPT pipeline job on all GPUs of the "
                        "largest type, down to half of them (with a *_mixed policy it "
                        "morphs: re-plans, checkpoints layer-wise, resumes)")
    p.add_argument("--dashboard", action="store_true",
                   help="serve the web dashboard on a free loopback port and print its "
                        "address (with the demo's token) on stderr")
    p.add_argument("--trace", metavar="TRACE",
                   help="replay this trace (.jsonl or Gavel .trace) instead of the mix: each "
                        "job submitted at its arrival time (see gavelsched replay)")
    scale_flags(p, "with --trace: ")
    p.add_argument("--json", metavar="OUT", help="write the Simulation result JSON here")
    p.add_argument("--keep", metavar="DIR", help="keep the state and logs in DIR")
    p.set_defaults(func=run)


def job_mix(n: int, fastest_rate, round_seconds: float, speed: float,
            workload: str | None, job_type: str | None = None, mixed: int = 0):
    """The demo's job requests: the MIX job types in turn (or ``job_type``), sized in rounds
    of work; the first ``mixed`` of them mixed-capable."""
    from ..rpc import pb
    out = []
    for i in range(n):
        kind = job_type or MIX[i % len(MIX)]
        rounds = ROUNDS_OF_WORK[i % len(ROUNDS_OF_WORK)]
        steps = max(1, int(rounds * round_seconds * fastest_rate(kind) * speed))
        out.append(pb.JobRequest(job_type=kind, scale_factor=1, total_steps=steps,
                                 workload=workload or "", mixed=i < mixed))
    return out


ELASTIC_JOB_TYPE = "Transformer (batch size 16)"   # paced by the table's rates at 2, 4, 8


def elastic_gpt_job(workers: dict[str, int], rate, round_seconds: float, speed: float):
    """The ``--elastic-gpt`` job: ``workers.workloads.gpt`` with one replica (a pipeline of
    P = GPUs stages, so a morph changes the layer-to-stage mapping) on the largest type's
    n GPUs, elastic down to n // 2, with 3 rounds of work at n GPUs (``rate(type, job_type,
    n)`` steps/s). Raises ``InputError`` when no type has 2 GPUs."""
    from ..rpc import pb

    worker_type, n = max(workers.items(), key=lambda kv: (kv[1], kv[0]))
    if n < 2:
        raise InputError(f"--elastic-gpt needs a worker type with >= 2 GPUs, got "
                         f"{','.join(f'{t}={k}' for t, k in workers.items())}")
    steps = max(1, int(3 * round_seconds * rate(worker_type, ELASTIC_JOB_TYPE, n) * speed))
    return pb.JobRequest(job_type=ELASTIC_JOB_TYPE, scale_factor=n, min_scale_factor=n // 2,
                         total_steps=steps,
                         command=f"{sys.executable} -m workers.workloads.gpt --replicas 1")


def run(args: argparse.Namespace) -> int:
    from traces import default_table

    workers = parse_counts(args.workers, what="--workers", allow_zero=False)
    if args.jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {args.jobs}")
    if not args.round_seconds > 0 or not args.emulation_speed > 0:
        raise InputError("--round-seconds and --emulation-speed must be > 0")
    if args.trace:
        from .replay import check_scales

        check_scales(args.time_scale, args.steps_scale)
        args.trace = str(Path(args.trace).resolve())
    if not 0 <= args.mixed_jobs <= args.jobs:
        raise InputError(f"--mixed-jobs must be between 0 and --jobs ({args.jobs}), "
                         f"got {args.mixed_jobs}")
    if args.mixed_jobs and args.workload is not None:
        from traces.workloads import VIRTUAL_NODE_WORKLOADS
        if args.workload not in VIRTUAL_NODE_WORKLOADS:
            raise InputError(f"--mixed-jobs: workload {args.workload!r} cannot run split "
                             f"across types (virtual nodes need one of {', '.join(VIRTUAL_NODE_WORKLOADS)})")
    table = default_table()
    if args.job_type is not None and not table.has(args.job_type):
        raise InputError(f"--job-type: unknown job type {args.job_type!r} (not in the "
                         f"throughput table)")
    unknown = [t for t in workers if t not in table.worker_types]
    if unknown:
        raise InputError(f"--workers: unknown worker type {unknown[0]!r}; known: "
                         f"{', '.join(table.worker_types)}")
    first = [elastic_gpt_job(workers, table.get, args.round_seconds,
                             args.emulation_speed)] if args.elastic_gpt else []
    if args.keep:
        root = Path(args.keep).resolve()
        return _run(args, root, workers, table, first)
    with tempfile.TemporaryDirectory(prefix="gavel-local-") as tmp:
        return _run(args, Path(tmp), workers, table, first)


def _run(args, root: Path, workers: dict[str, int], table, first=()) -> int:
    """The demo on ``workers``: ``first`` (job requests submitted before the rest), then the
    mix, or the trace's jobs at their (scaled) arrival times."""
    from traces import default_prices

    from .drive import refusal_line, report, run_schedule, show_progress

    cluster, metrics_port = make_cluster(args, root, workers, table)
    try:
        start_daemons(cluster, args, workers)
        if cluster.dashboard_url:
            sys.stderr.write(f"dashboard: {cluster.dashboard_url}\n")
        schedule = [(0.0, r) for r in first] + _schedule(args, workers, table)
        outcome = run_schedule(cluster, schedule, prices=default_prices(),
                               refused=refusal_line, solves=lambda: _solves(metrics_port),
                               show=show_progress)
    finally:
        cluster.stop()
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return report(outcome, args.json)


def _schedule(args, workers: dict[str, int], table) -> list:
    """``(submit at s, JobRequest)``: the trace's jobs (``--trace``), else the demo mix."""
    if args.trace:
        from .replay import trace_schedule

        return trace_schedule(args.trace, args.time_scale, args.steps_scale, args.workload)

    def fastest(job_type: str) -> float:
        return max(table.get(t, job_type, 1) for t in workers)

    return [(0.0, r) for r in job_mix(args.jobs, fastest, args.round_seconds,
                                      args.emulation_speed, args.workload, args.job_type,
                                      args.mixed_jobs)]


def make_cluster(args, root: Path, workers: dict[str, int], table):
    """The demo's ``LocalCluster`` in ``root`` (not started) and its metrics port: the
    priors scaled to the emulation, and a fresh random token (``root/token``, mode 0600)
    that its scheduler, workers and client use, so that no other local user can reach
    them even on loopback."""
    from traces.throughputs import dump_table

    from ..daemon.local import LocalCluster, free_port
    from ..rpc.security import new_token

    metrics_port = free_port()
    dashboard = ({"dashboard_listen": f"127.0.0.1:{free_port()}"}
                 if getattr(args, "dashboard", False) else {})
    root.mkdir(parents=True, exist_ok=True)
    priors = root / "throughputs.json"
    dump_table(scaled(table, args.emulation_speed), priors)
    # Re-solve at any round boundary after a change (the daemon's default waits Gavel's
    # 1920 s scaled to the round, too long for a demo of a few minutes).
    cluster = LocalCluster(root, policy=args.policy, round_seconds=args.round_seconds,
                           token=new_token(),
                           config={"expected_workers": sum(workers.values()),
                                   "min_resolve_interval_s": args.round_seconds,
                                   "metrics_listen": f"127.0.0.1:{metrics_port}",
                                   "throughputs": str(priors), **dashboard})
    return cluster, metrics_port


def start_daemons(cluster, args, workers: dict[str, int]) -> None:
    """Start ``cluster``'s scheduler and one emulated worker per type; return once every
    worker is alive."""
    from ..daemon.local import wait_until

    cluster.start_scheduler()
    for worker_type, gpus in workers.items():
        cluster.start_worker(worker_type, gpus, emulation_speed=args.emulation_speed,
                             grace_s=max(10.0, args.round_seconds))
    wait_until(lambda: cluster.alive_workers() == len(workers), 120, "the workers")


def scaled(table, speed: float):
    """``table`` with every steps/s times ``speed`` (the emulation's time dilation)."""
    from traces.types import ThroughputTable

    return ThroughputTable(
        {w: {k: v * speed for k, v in rows.items()} for w, rows in table.solo.items()},
        {w: {k: (a * speed, b * speed) for k, (a, b) in rows.items()}
         for w, rows in table.pairs.items()})


def _solves(port: int) -> tuple[int, float]:
    """Policy re-solves and their total time, from the daemon's Prometheus endpoint."""
    from urllib.request import urlopen

    from prometheus_client.parser import text_string_to_metric_families
    text = urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    count, total = 0, 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "gavelsched_policy_solve_seconds":
            for sample in family.samples:
                if sample.name.endswith("_count"):
                    count = int(sample.value)
                elif sample.name.endswith("_sum"):
                    total = float(sample.value)
    return count, total
