"""How late a scheduler answers heartbeats, from a process of its own (issue #30;
BENCHMARKS.md, "The daemon at scale", point 8).

Every 0.5 s it sends a heartbeat of a server the scheduler does not know, which its handler
answers ``known=false`` at once, and times the answer; after ``SECONDS`` (or SIGTERM) it
prints the times as one JSON list. ``daemon_scale.py`` runs it over its measured rounds::

    python benchmarks/heartbeat_probe.py 127.0.0.1:50051 120 [--token-file FILE]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from gavelsched.rpc import pb, pb_grpc  # noqa: E402
from gavelsched.rpc.security import channel  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="the scheduler, HOST:PORT")
    parser.add_argument("seconds", type=float, help="how long to probe")
    parser.add_argument("--token-file", help="the scheduler's auth token, if it has one")
    args = parser.parse_args()
    token = Path(args.token_file).read_text().strip() if args.token_file else None
    stub = pb_grpc.WorkerToSchedulerStub(channel(args.address, token=token))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    answers: list[float] = []
    end = time.monotonic() + args.seconds
    while not stopped.wait(0.5) and time.monotonic() < end:
        began = time.monotonic()
        try:
            stub.Heartbeat(pb.HeartbeatRequest(server_id=-1), timeout=60)
        except grpc.RpcError:
            pass                     # (an error's answer is timed too)
        answers.append(time.monotonic() - began)
    print(json.dumps([round(a, 4) for a in answers]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
