"""Scheduler daemon under load (issue #8, Benchmarks: Load).

A real scheduler and ``--servers`` real worker daemons (``--gpus-per-server`` emulated GPUs
each, types v100/p100/k80 in turn) on loopback; ``--jobs`` jobs of the light ``steps``
workload (real processes stepping GavelIterator, no torch) are submitted over gRPC, far
more work than the rounds measured can finish, so every round re-plans the whole queue.
Reported, with the machine:

- submission: jobs/s through ``ClientToScheduler.Submit``;
- round cadence: the gaps between round starts seen by polling ``Status`` against
  ``--round-seconds`` (mean, worst), and rounds started in the measured span;
- scheduler memory: RSS after submission and at the end, and the peak (VmHWM);
- ``status`` latency: the RPC (median, worst over the polls), and the CLI
  ``gavelsched status --json`` in a fresh process (what a user pays; includes imports).

    python benchmarks/daemon_load.py                      # 10,000 jobs, 64 GPUs (~6 min)
    python benchmarks/daemon_load.py --jobs 500 --servers 4 --rounds 3   # smoke
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from host import describe  # (a sibling: this file runs as a script)

from gavelsched.daemon.jobs import RUNNING
from gavelsched.daemon.local import LocalCluster, subprocess_env, wait_until
from gavelsched.rpc import pb

TYPES = ("v100", "p100", "k80")
JOB_TYPES = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "Transformer (batch size 16)",
             "Recommendation (batch size 512)", "A3C")


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--gpus-per-server", type=int, default=4)
    parser.add_argument("--round-seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=6, help="rounds to measure")
    parser.add_argument("--policy", default="max_min_fairness_perf")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gavel-load-") as tmp:
        gpus = args.servers * args.gpus_per_server
        cluster = LocalCluster(Path(tmp), policy=args.policy, round_seconds=args.round_seconds,
                               heartbeat_seconds=2.0,
                               config={"expected_workers": gpus,
                                       "min_resolve_interval_s": args.round_seconds})
        try:
            cluster.start_scheduler()
            for i in range(args.servers):
                cluster.start_worker(TYPES[i % len(TYPES)], args.gpus_per_server,
                                     emulation_speed=0.05, grace_s=args.round_seconds)
            wait_until(lambda: cluster.alive_workers() == args.servers, 300, "the workers")
            pid = cluster.scheduler.pid
            rss_before, _ = rss_mib(pid)

            start = time.perf_counter()
            for i in range(args.jobs):
                cluster.submit(pb.JobRequest(job_type=JOB_TYPES[i % len(JOB_TYPES)],
                                             scale_factor=1, total_steps=10**7,
                                             workload="steps"))
            submit_s = time.perf_counter() - start
            rss_submitted, _ = rss_mib(pid)

            latencies, starts, by_round = [], [], []
            last_round = cluster.status().round
            while len(starts) < args.rounds + 1:
                t0 = time.perf_counter()
                status = cluster.status()
                latencies.append(time.perf_counter() - t0)
                if status.round != last_round:
                    starts.append(time.monotonic())
                    by_round.append(rss_mib(pid)[0])
                    last_round = status.round
                time.sleep(0.5)
            cli = []
            for _ in range(3):
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "gavelsched", "status", "--json",
                                "--scheduler", cluster.address], check=True,
                               stdout=subprocess.DEVNULL, env=subprocess_env())
                cli.append(time.perf_counter() - t0)
            rss_end, hwm = rss_mib(pid)
            jobs = cluster.status().jobs
            running = sum(1 for j in jobs if j.state == RUNNING)
        finally:
            cluster.stop()

    gaps = [b - a for a, b in itertools.pairwise(starts)]
    print(f"machine: {describe()}; {args.jobs} jobs, {args.servers} workers x "
          f"{args.gpus_per_server} GPUs, {args.round_seconds:g} s rounds, {args.policy}")
    print("| measure | value |")
    print("|---|---|")
    print(f"| submissions | {args.jobs / submit_s:.0f} jobs/s ({submit_s:.1f} s) |")
    print(f"| round gap, mean / worst (target {args.round_seconds:g} s) | "
          f"{statistics.mean(gaps):.2f} / {max(gaps):.2f} s over {len(gaps)} rounds |")
    print(f"| jobs running (process started) in the last poll | {running} of {gpus} GPUs |")
    print(f"| scheduler RSS: idle / after submit / end / peak | {rss_before:.0f} / "
          f"{rss_submitted:.0f} / {rss_end:.0f} / {hwm:.0f} MiB |")
    step = max(1, len(by_round) // 8)
    print(f"| scheduler RSS at round starts | "
          f"{' / '.join(f'{r:.0f}' for r in by_round[::step])} MiB |")
    print(f"| status RPC, median / worst | {statistics.median(latencies) * 1e3:.0f} / "
          f"{max(latencies) * 1e3:.0f} ms over {len(latencies)} calls |")
    print(f"| `gavelsched status --json`, fresh process, median | "
          f"{statistics.median(cli):.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
