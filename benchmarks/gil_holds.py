"""How long a view of many jobs stops the scheduler's other threads (issue #30;
BENCHMARKS.md, "Renewals answered off the executor").

A C call holds the GIL until it returns, whatever ``gil_switch_ms`` says: while one runs,
no heartbeat, renewal or plan of the scheduler moves. Two views made such calls over every
job: the dashboard's ``/api/status`` (json's C encoder over all of them) and a ``Status``
answered to another caller than its snapshot's (protobuf's copy of all of them into a new
answer). Both now go in chunks (``dashboard.encoded``, ``snapshot.COPY_CHUNK``). For each
way, in one process, over a snapshot of ``--jobs`` jobs: its wall time, and the longest a
thread that asks for the GIL every millisecond waited for it meanwhile (median of
``--repeat`` runs). The gRPC answer's serialization (one C call, unchanged) is a row of
its own.

    python benchmarks/gil_holds.py                  # 50,000 jobs, 5 runs (~1 min)
    python benchmarks/gil_holds.py --jobs 5000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from host import describe  # (a sibling: this file runs as a script)

from gavelsched.daemon.dashboard import encoded  # noqa: E402
from gavelsched.daemon.snapshot import Snapshot  # noqa: E402
from gavelsched.daemon.statusjson import status_dict  # noqa: E402
from gavelsched.rpc import pb  # noqa: E402


def snapshot(jobs: int) -> Snapshot:
    """A picture of ``jobs`` queued jobs with the fields a real one fills."""
    reply = pb.StatusResponse(round=5, policy="max_min_fairness_perf", round_seconds=30.0,
                              caller="daemon", jobs=[pb.JobStatus(
                                  id=f"{i // 100}_{i % 100}", state="queued", steps_done=i,
                                  total_steps=10**9, job_type="ResNet-18 (batch size 16)",
                                  scale_factor=1, worker_type="v100", gpus=0,
                                  reason="waiting for a GPU", arrival_s=float(i),
                                  started_s=-1, ended_s=-1, completion_s=-1, user="alice",
                                  array_id=f"{i // 100}", array_index=i % 100, run_s=0.0,
                                  eta_start_s=-1, eta_finish_s=-1,
                                  allocation={"v100": 0.1, "p100": 0.2, "k80": 0.3},
                                  received={"v100": 3.0}) for i in range(jobs)])
    return Snapshot(5, "max_min_fairness_perf", 30.0, 100.0, reply)


def held(fn) -> tuple[float, float]:
    """(wall seconds of ``fn()``, the longest a 1 ms ticker waited meanwhile, seconds)."""
    gaps, done = [], threading.Event()

    def tick():
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    began = time.perf_counter()
    fn()
    wall = time.perf_counter() - began
    done.set()
    ticker.join()
    return wall, max(gaps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    snap = snapshot(args.jobs)
    answer = status_dict(snap.response)
    other = snap.status(caller="admin")
    r = snap.response
    ways = [
        ("dashboard answer, one json call (before)", lambda: json.dumps(answer).encode()),
        ("dashboard answer, in chunks (`dashboard.encoded`)", lambda: encoded(answer)),
        ("Status to another caller, one copy (before)",
         lambda: pb.StatusResponse(round=r.round, caller="admin", jobs=r.jobs)),
        ("Status to another caller, in chunks (`Snapshot.status`)",
         lambda: snap.status(caller="admin")),
        ("its serialization for gRPC (one call)", other.SerializeToString),
    ]
    print(f"# {describe()}; {args.jobs:,} jobs, median of {args.repeat}")
    print("| view | wall s | longest wait of another thread |")
    print("|---|---|---|")
    for name, fn in ways:
        runs = [held(fn) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in runs)
        stall = statistics.median(s for _, s in runs)
        print(f"| {name} | {wall:.2f} | {1e3 * stall:,.0f} ms |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
