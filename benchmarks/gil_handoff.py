"""What a busy thread costs the scheduler's other threads, by GIL switch interval (issue #30;
cluster.yaml's ``gil_switch_ms``; BENCHMARKS.md, "The daemon at scale", point 9).

The scheduler is one process of many threads: the executor, gRPC's polling thread and its
handlers, the thread that builds a Status. A thread that lets go of the GIL (a sqlite call,
gRPC's poll for the next call) waits up to a switch interval to get it back from a thread
that keeps busy in Python (a plan; a Status of 50,000 jobs). In one process, beside one
such busy thread, for each interval:

- ``store``: sqlite writes a second from a second thread, one autocommit statement each (the
  executor's store writes), and the busy thread's own work rate (what a plan loses);
- ``grpc``: a real gRPC server (the standard health service) in this process, and a client
  in a process of its own sending calls from 8 threads: calls answered a second and their
  latency (the heartbeats' path in).

Usage::

    python benchmarks/gil_handoff.py               # both parts, 5, 1 and 0.5 ms (~40 s)
    python benchmarks/gil_handoff.py --seconds 3 --intervals 5,1
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

from host import describe  # (a sibling: this file runs as a script)

CLIENT = """
import sys, threading, time, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
address, seconds = sys.argv[1], float(sys.argv[2])
stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(address))
stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
lat, end = [], time.monotonic() + seconds
def call():
    while time.monotonic() < end:
        t = time.monotonic()
        stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
        lat.append(time.monotonic() - t)
threads = [threading.Thread(target=call) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join(f"{x:.6f}" for x in lat))
"""


class Busy:
    """A thread that keeps busy in Python until stopped; ``rate``: its loops a second."""

    def __init__(self) -> None:
        self._stop, self._loops = threading.Event(), 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            n = 0
            for _ in range(1000):
                n += 1
            self._loops += 1

    def __enter__(self) -> Busy:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.rate = self._loops / (time.monotonic() - self._start)


def store(seconds: float) -> tuple[float, float]:
    """(writes a second beside the busy thread, the busy thread's loops a second)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(os.path.join(tmp, "s.db"), isolation_level=None,
                             check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
        writes = 0
        with Busy() as busy:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                db.execute("INSERT INTO meta VALUES('k', ?) ON CONFLICT(key) DO UPDATE SET "
                           "value=excluded.value", (str(writes),))
                writes += 1
        db.close()
    return writes / seconds, busy.rate


def grpc_calls(seconds: float) -> tuple[float, float, float, float]:
    """(calls answered a second, median and p99 latency in s, the busy thread's loops a
    second) with a gRPC server in this process beside the busy thread."""
    import grpc
    from grpc_health.v1 import health, health_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Busy() as busy:
            out = subprocess.run([sys.executable, "-c", CLIENT, f"127.0.0.1:{port}",
                                  str(seconds)], capture_output=True, text=True, check=True)
    finally:
        server.stop(0)
    lat = sorted(float(x) for x in out.stdout.split())
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return len(lat) / seconds, statistics.median(lat), p99, busy.rate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="per part and interval")
    ap.add_argument("--intervals", default="5,1,0.5", help="switch intervals in ms")
    ap.add_argument("--part", choices=("store", "grpc", "both"), default="both")
    args = ap.parse_args(argv)
    intervals = [float(x) / 1e3 for x in args.intervals.split(",")]
    print(f"# {describe()}")
    default = sys.getswitchinterval()
    rows = []
    try:
        for interval in intervals:
            sys.setswitchinterval(interval)
            row = {"interval": interval}
            if args.part in ("store", "both"):
                row["writes"], row["busy_store"] = store(args.seconds)
            if args.part in ("grpc", "both"):
                row["calls"], row["p50"], row["p99"], row["busy_grpc"] = grpc_calls(args.seconds)
            rows.append(row)
    finally:
        sys.setswitchinterval(default)
    first = rows[0]
    print("| switch interval | sqlite writes/s (x first) | busy thread beside them (x first) "
          "| gRPC calls/s (x first) | call p50 / p99 | busy thread beside them (x first) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        def cell(key: str, fmt: str = "{:,.0f}") -> str:
            return (f"{fmt.format(r[key])} (x{r[key] / first[key]:.2f})"
                    if key in r else "-")
        lat = f"{1e3 * r['p50']:.1f} / {1e3 * r['p99']:.1f} ms" if "p50" in r else "-"
        print(f"| {1e3 * r['interval']:g} ms | {cell('writes')} | {cell('busy_store')} | "
              f"{cell('calls')} | {lat} | {cell('busy_grpc')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
