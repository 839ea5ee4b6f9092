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
import math
import signal
import sys
import tempfile
from pathlib import Path

from ..client.local import elastic_gpt_job, job_mix, make_cluster, start_daemons
from . import InputError
from .args import needs_torch, parse_counts
from .replay import scale_flags

log = logging.getLogger(__name__)


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


def run(args: argparse.Namespace) -> int:
    # SIGTERM stops the daemons and removes the temp dir, as Ctrl-C does (the default
    # action left both behind: issue #29); the handler before it is put back after (a
    # caller in this process keeps its own: a test's sweep then forked workers that a
    # SIGTERM no longer ended)
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _checked_run(args)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _checked_run(args: argparse.Namespace) -> int:
    from traces import default_table

    if args.workload != "steps":
        needs_torch("local-cluster's reference workloads (--workload steps runs without it)")
    from policies.registry import policy_class
    from traces.checks import MAX_GPUS_PER_SERVER, MAX_SECONDS, MIN_ROUND_SECONDS

    workers = parse_counts(args.workers, what="--workers", allow_zero=False)
    big = [(t, n) for t, n in workers.items() if n > MAX_GPUS_PER_SERVER]
    if big:
        raise InputError(f"--workers: {big[0][0]}={big[0][1]}: a worker has at most "
                         f"{MAX_GPUS_PER_SERVER} GPUs")
    if args.jobs < 1:
        raise InputError(f"--jobs must be >= 1, got {args.jobs}")
    if not MIN_ROUND_SECONDS <= args.round_seconds <= MAX_SECONDS:
        raise InputError(f"--round-seconds must be in [{MIN_ROUND_SECONDS:g}, "
                         f"{MAX_SECONDS:g}], got {args.round_seconds}")
    if not 0 < args.emulation_speed < math.inf:
        raise InputError(f"--emulation-speed must be a finite number > 0, got "
                         f"{args.emulation_speed}")
    policy_class(args.policy)       # (an unknown one: ``UnknownPolicy``, one line)
    from .replay import check_scales

    check_scales(args.time_scale, args.steps_scale)
    if args.trace:
        args.trace = str(Path(args.trace).resolve())
    elif (args.time_scale, args.steps_scale) != (1.0, 1.0):
        raise InputError("--time-scale and --steps-scale scale a --trace: give one, or drop "
                         "them")
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
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"--keep {args.keep}: cannot be the cluster's folder "
                             f"({err.strerror})") from None
        return _run(args, root, workers, table, first)
    with tempfile.TemporaryDirectory(prefix="gavel-local-") as tmp:
        return _run(args, Path(tmp), workers, table, first)


def _run(args, root: Path, workers: dict[str, int], table, first=()) -> int:
    """The demo on ``workers``: ``first`` (job requests submitted before the rest), then the
    mix, or the trace's jobs at their (scaled) arrival times."""
    from traces import default_prices

    from ..client.schedule import refusal_line, run_schedule
    from .drive import report, say_refused, show_progress

    cluster = make_cluster(args, root, workers, table)
    try:
        try:
            start_daemons(cluster, args, workers)
        except RuntimeError as err:     # a daemon that exited at start: its log's last line
            raise InputError(str(err)) from None
        sys.stderr.write(connect_line(cluster))
        if cluster.dashboard_url:
            sys.stderr.write(f"dashboard: {cluster.dashboard_url}\n")
        schedule = [(0.0, r) for r in first] + _schedule(args, workers, table)
        outcome = run_schedule(cluster, schedule, prices=default_prices(),
                               refused=refusal_line, solves=lambda: _solves(cluster.metrics_port),
                               show=show_progress, on_refused=say_refused,
                               wait_for_others=True)   # (stopping the cluster ends them)
    finally:
        cluster.stop()
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return report(outcome, args.json)


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)


def connect_line(cluster) -> str:
    """How to reach the cluster from another shell while it runs (issue #29: a first
    ``gavelsched status`` beside it found no scheduler at the default address)."""
    token = f" --token-file {cluster.token_file}" if cluster.token_file else ""
    return (f"scheduler: {cluster.address} (token file: {cluster.token_file or 'none'}); "
            f"from another shell: gavelsched status --scheduler {cluster.address}{token}\n")


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
