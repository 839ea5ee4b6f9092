"""What a Prometheus scrape of ``/metrics`` costs the scheduler with many jobs queued
(issue #30; the cluster YAML's ``metrics_job_series``, ``gavelsched/daemon/metrics.py``).

For each cap in ``--caps``: a real scheduler (``LocalCluster``, ``max_min_fairness_perf``,
``--round-seconds`` rounds, ETAs off) with that ``metrics_job_series``, a process of hollow
workers (``gavelsched worker --hollow``, ``--gpus`` GPUs in servers of 8), and ``--jobs``
jobs submitted as arrays (``daemon_scale``'s mix), far more than the GPUs hold, so every job
has a share of the allocation. Once a round has started with them all, ``/metrics`` is
scraped ``--repeat`` times over HTTP: the first scrape's wall time on its own row (what a
fresh scheduler pays once), the median and worst of the others, the scheduler's CPU
seconds over all of them (its process's, per scrape), the size of an answer in lines and
MiB, and the scheduler's peak RSS. The schedulers run one after the other.

    python benchmarks/metrics_scrape.py                  # 100,000 jobs, capped and not (~4 min)
    python benchmarks/metrics_scrape.py --jobs 2000 --repeat 2 --caps 5000,100   # smoke
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

# a process's CPU seconds and peak RSS, the machine line, the job mix
from daemon_scale import cpu_s, peak_rss_mib, submit_all  # noqa: E402
from host import describe

from gavelsched.daemon.config import METRICS_JOB_SERIES  # noqa: E402
from gavelsched.daemon.local import (LocalCluster, free_port, kill_tree,  # noqa: E402
                                     subprocess_env, wait_until)
from gavelsched.rpc import pb, pb_grpc  # noqa: E402


def scrapes(jobs: int, cap: int, args) -> dict:
    """One scheduler with ``metrics_job_series: cap``: its scrapes."""
    root = Path(tempfile.mkdtemp(prefix="gavel-scrape-"))
    port = free_port()
    cluster = LocalCluster(root, round_seconds=args.round_seconds,
                           config={"expected_workers": args.gpus, "eta": False,
                                   "metrics_job_series": cap,
                                   "metrics_listen": f"127.0.0.1:{port}"})
    hollow = None
    try:
        cluster.start_scheduler()
        with open(root / "hollow.log", "ab") as log:
            hollow = subprocess.Popen(
                [sys.executable, "-m", "gavelsched", "worker", "--hollow",
                 str(args.gpus // 8), "--type", "k80,p100,v100", "--gpus", "8",
                 "--scheduler", cluster.address, "--work-dir", str(root / "hollow"),
                 "--emulation-speed", "0.05"],
                stdout=log, stderr=subprocess.STDOUT, env=subprocess_env())
        wait_until(lambda: cluster.alive_workers() == args.gpus // 8, 300, "hollow workers")
        submit_all(cluster, jobs, 10**9)
        client = pb_grpc.ClientToSchedulerStub(cluster.chan)

        def planned() -> bool:      # a round started with every job in the allocation
            reply = client.Status(pb.StatusRequest(), timeout=120)
            return len(reply.jobs) == jobs and any(j.state == "running" for j in reply.jobs)

        wait_until(planned, 20 * args.round_seconds + 300, "a round with every job")
        url = f"http://127.0.0.1:{port}/metrics"
        pid = cluster.scheduler.pid
        walls, cpu0 = [], cpu_s([pid])
        for _ in range(args.repeat):
            began = time.perf_counter()
            text = urllib.request.urlopen(url, timeout=600).read()
            walls.append(time.perf_counter() - began)
        cpu = (cpu_s([pid]) - cpu0) / args.repeat
        rest = walls[1:] or walls
        return {"cap": cap, "first_s": walls[0], "median_s": statistics.median(rest),
                "worst_s": max(rest), "cpu_s": cpu, "lines": text.count(b"\n"),
                "mib": len(text) / 2**20, "peak_mib": peak_rss_mib(pid)}
    finally:
        if hollow is not None:
            kill_tree(hollow.pid)
        cluster.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--gpus", type=int, default=64, help="hollow GPUs (servers of 8)")
    p.add_argument("--caps", default=f"{METRICS_JOB_SERIES},1000000",
                   help="metrics_job_series values, one scheduler each (comma list; the "
                        "default's first is the YAML's default)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--round-seconds", type=float, default=30.0)
    args = p.parse_args(argv)
    print(f"# {describe(load=False)}; {args.jobs} jobs queued on {args.gpus} hollow GPUs, "
          f"{args.repeat} scrapes each")
    print("| metrics_job_series | first scrape s | then median / worst s | scheduler CPU s a "
          "scrape | lines | MiB | scheduler peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for cap in (int(c) for c in args.caps.split(",")):
        r = scrapes(args.jobs, cap, args)
        print(f"| {cap:,} | {r['first_s']:.2f} | {r['median_s']:.2f} / {r['worst_s']:.2f} | "
              f"{r['cpu_s']:.2f} | {r['lines']:,} | {r['mib']:.1f} | {r['peak_mib']:.0f} MiB |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
