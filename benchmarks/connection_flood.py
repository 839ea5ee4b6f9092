"""A flood of idle connections on the scheduler's port: what it takes of the scheduler, and
whether the scheduler answers during and after it (``gavelsched/rpc/limits.py``).

A real ``gavelsched scheduler`` (a fresh process, its soft limit of open files lifted to the
hard one) and flooding processes, each opening its share of ``--connections`` TCP
connections that send HTTP/2's preface and then nothing (no call, so no token is needed),
holding them ``--hold`` seconds. While they are held: the scheduler's open files
(``/proc/PID/fd``), how many of the flood's connections it closed, whether it logged that
it reached its file limit, and a ``gavelsched status`` (a fresh process). After the flood
ends: another ``status``. Each process opens at most ``PER_PROCESS`` connections (its own
limit of open files).

    python benchmarks/connection_flood.py                        # 24,000 connections (~1 min)
    python benchmarks/connection_flood.py --connections 2000     # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

from policy_solve import header  # (the machine line)

from gavelsched.daemon.local import free_port, subprocess_env

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes.fromhex("000000040000000000")
PER_PROCESS = 12_000
FILE_LIMIT_LINE = "File descriptor limit reached"


def flood(port: int, count: int, hold_s: float) -> None:
    """(In a child process.) Open ``count`` idle connections, hold them ``hold_s``, then
    print how many the server closed, as JSON."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(PREFACE)
        except OSError:
            break
        held.append(sock)
    time.sleep(hold_s)
    print(json.dumps({"opened": len(held), "closed": closed_by_peer(held)}), flush=True)


def closed_by_peer(sockets: list[socket.socket]) -> int:
    """How many of ``sockets`` the other end closed (what it sent meanwhile is read)."""
    closed = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            while sock.recv(65536):
                pass
            closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def status(port: int) -> tuple[int, float]:
    """A user's ``gavelsched status``: its exit code and wall time."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gavelsched", "status", "--scheduler",
                           f"127.0.0.1:{port}"], capture_output=True, env=subprocess_env(),
                          timeout=120, check=False)
    return done.returncode, time.perf_counter() - start


def run(connections: int, hold_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="gavel-flood-") as tmp:
        port = free_port()
        config = Path(tmp) / "cluster.yaml"
        config.write_text(f"listen: 127.0.0.1:{port}\npolicy: max_min_fairness_perf\n"
                          f"round_seconds: 30\nstate_dir: {tmp}/state\neta: false\n")
        log_path = Path(tmp) / "scheduler.log"
        with open(log_path, "w") as log:
            sched = subprocess.Popen([sys.executable, "-m", "gavelsched", "scheduler",
                                      "--config", str(config)], stdout=log, stderr=log,
                                     env=subprocess_env())
        try:
            deadline = time.monotonic() + 60
            while "listening on port" not in log_path.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            limits = Path(f"/proc/{sched.pid}/limits").read_text().splitlines()
            files = int(next(r for r in limits if r.startswith("Max open files")).split()[3])
            shares = [min(PER_PROCESS, connections - i) for i in range(0, connections,
                                                                          PER_PROCESS)]
            floods = [subprocess.Popen([sys.executable, __file__, "--flood", str(port),
                                        str(n), str(hold_s)], stdout=subprocess.PIPE,
                                       text=True, env=subprocess_env()) for n in shares]
            time.sleep(hold_s / 2)
            held = len(os.listdir(f"/proc/{sched.pid}/fd"))
            during = status(port)
            counts = [json.loads(f.communicate(timeout=hold_s + 120)[0]) for f in floods]
            after = status(port)
            hit_limit = FILE_LIMIT_LINE in log_path.read_text()
        finally:
            sched.terminate()
            sched.wait(30)
    return {"files": files, "connections": connections,
            "opened": sum(c["opened"] for c in counts),
            "closed": sum(c["closed"] for c in counts), "held_fds": held,
            "hit_limit": hit_limit, "during": during, "after": after}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--flood":
        flood(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=24_000,
                        help="idle connections opened on the scheduler's port")
    parser.add_argument("--hold", type=float, default=20.0, metavar="S",
                        help="seconds the flood holds them")
    args = parser.parse_args()
    print(header())
    r = run(args.connections, args.hold)
    print(f"scheduler: {r['files']:,} open files; flood: {r['opened']:,} of "
          f"{r['connections']:,} connections opened, {r['closed']:,} closed by the "
          f"scheduler; its open files while held: {r['held_fds']:,}; file limit reached: "
          f"{'yes' if r['hit_limit'] else 'no'}")
    for name in ("during", "after"):
        code, wall = r[name]
        print(f"status {name} the flood: exit {code}, {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
