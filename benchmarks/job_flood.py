"""One job that loops on its calls, with and without its budget (``job_calls_per_round``;
``gavelsched/daemon/budgets.py``; BENCHMARKS.md, "One job that loops on its calls").

A real scheduler daemon runs in this process (30-s rounds, two queued jobs). A client in a
process of its own, as a broken job's would be, sends one job's ``ReportSteps`` from
``--threads`` threads (default 4), back to back, for ``--seconds``. Meanwhile another
process reports for the other job every 0.25 s, within its budget, and times each call.
For each budget it prints the calls a second the flood made (and how many of them were
refused), the CPU of this process (the scheduler's), the other job's call times, and the
scheduler's log lines a second.

Usage::

    python benchmarks/job_flood.py                  # budgets 0 (none) and 32, 8 s each
    python benchmarks/job_flood.py --threads 4,8     # each with 4 and 8 threads (~40 s)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from host import describe  # (a sibling: this file runs as a script)

FLOOD = """
import sys, threading, time, grpc
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel
address, job, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
stub = pb_grpc.IteratorToSchedulerStub(channel(address))
counts = {"answered": 0, "refused": 0}
end = time.monotonic() + seconds
def loop():
    while time.monotonic() < end:
        try:
            stub.ReportSteps(pb.ReportStepsRequest(job_id=job, steps=1, seconds=1.0,
                                                   checkpointed=True), timeout=10)
            counts["answered"] += 1
        except grpc.RpcError as err:
            counts["refused" if err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                   else "answered"] += 1
threads = [threading.Thread(target=loop) for _ in range(int(sys.argv[4]))]
for t in threads: t.start()
for t in threads: t.join()
print(counts["answered"], counts["refused"])
"""

# Another job's process: a ReportSteps each 0.25 s (within its budget: 32 in a burst),
# each call's latency printed (seconds).
OTHER = """
import sys, time
from gavelsched.rpc import pb, pb_grpc
from gavelsched.rpc.security import channel
address, job, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
stub = pb_grpc.IteratorToSchedulerStub(channel(address))
end = time.monotonic() + seconds
while time.monotonic() < end:
    start = time.monotonic()
    stub.ReportSteps(pb.ReportStepsRequest(job_id=job, steps=1, seconds=1.0,
                                           checkpointed=True), timeout=10)
    print(time.monotonic() - start)
    time.sleep(0.25)
"""


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def run(budget: int, seconds: float, threads: int) -> dict:
    from gavelsched.daemon.config import load_config
    from gavelsched.daemon.server import SchedulerDaemon
    from gavelsched.rpc import pb, pb_grpc
    from gavelsched.rpc.security import channel

    root = Path(tempfile.mkdtemp(prefix="job_flood_"))
    (root / "cluster.yaml").write_text(yaml.safe_dump({
        "listen": "127.0.0.1:0", "policy": "max_min_fairness_perf", "round_seconds": 30,
        "state_dir": str(root / "state"), "eta": False, "job_calls_per_round": budget}))
    daemon = SchedulerDaemon(load_config(str(root / "cluster.yaml"))).start()
    lines = Lines()
    logging.getLogger("gavelsched").addHandler(lines)
    try:
        address = f"127.0.0.1:{daemon.port}"
        clients = pb_grpc.ClientToSchedulerStub(channel(address))
        job, other_job = (clients.Submit(pb.JobRequest(
            job_type="A3C", total_steps=1000, workload="steps"), timeout=10).job_id
            for _ in range(2))
        lines.count = 0
        flood = subprocess.Popen([sys.executable, "-c", FLOOD, address, job, str(seconds),
                                  str(threads)], stdout=subprocess.PIPE, text=True)
        cpu = time.process_time()
        other = subprocess.run([sys.executable, "-c", OTHER, address, other_job,
                                str(seconds)], capture_output=True, text=True, check=True)
        cpu = time.process_time() - cpu
        trips = sorted(float(x) for x in other.stdout.split())
        answered, refused = (int(x) for x in flood.communicate(timeout=60)[0].split())
        logged = lines.count
    finally:
        logging.getLogger("gavelsched").removeHandler(lines)
        daemon.stop()
    return {"budget": budget, "threads": threads, "calls_s": (answered + refused) / seconds,
            "refused_s": refused / seconds, "cpu": cpu / seconds,
            "trip_ms": 1e3 * statistics.median(trips),
            "trip_p90_ms": 1e3 * trips[int(0.9 * len(trips))], "lines_s": logged / seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="each flood's length")
    parser.add_argument("--budgets", default="0,32",
                        help="job_calls_per_round values, comma-separated (0: no limit)")
    parser.add_argument("--threads", default="4",
                        help="the flood's threads, comma-separated: each budget with each")
    args = parser.parse_args()
    try:
        budgets = [int(b) for b in args.budgets.split(",")]
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        parser.error(f"--budgets, --threads: integers, comma-separated, got "
                     f"{args.budgets!r}, {args.threads!r}")
    if args.seconds <= 0 or any(b < 0 for b in budgets) or any(t < 1 for t in threads):
        parser.error("--seconds must be > 0, every budget >= 0 and every --threads >= 1")
    logger = logging.getLogger("gavelsched")        # counted, not printed
    logger.setLevel(logging.INFO)
    logger.propagate = False
    print(describe())
    print("| budget | flood threads | flood calls/s | of them refused/s | scheduler CPU | "
          "another job's ReportSteps, median (p90) | scheduler log lines/s |")
    print("|---|---|---|---|---|---|---|")
    for n in threads:
        for budget in budgets:
            r = run(budget, args.seconds, n)
            print(f"| {r['budget'] or 'none'} | {n} | {r['calls_s']:.0f} | {r['refused_s']:.0f} | "
                  f"{100 * r['cpu']:.0f}% | {r['trip_ms']:.2f} ms ({r['trip_p90_ms']:.2f} ms) "
                  f"| {r['lines_s']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
