"""A sweep locally and on a two-node Ray cluster (issue #30): ``gavelsched simulate sweep``
of 3 policies x 10 rates x 3 seeds at 1,000 jobs (90 runs), three times, each timed from
the command's start to its end:

1. locally, in one worker process per CPU;
2. with ``--ray`` on a head and a second node started here (``tests/simulator/ray_nodes.py``:
   each a ``ray start --block`` in its own temp dir, one CPU each, so the cluster has the
   machine's CPUs, no more);
3. the same on a fresh cluster, its second node killed (every process of it, SIGKILL)
   once a third of the runs are done, while it runs one: Ray notices with its default
   health checks and runs the lost runs again on the head.

The three CSVs must be equal row for row (but ``wall_s``, each run's own time); the script
fails otherwise (all rows there, and equal: the runs lost with node 2 ran again). It
prints a markdown table, with the 1-minute load average as each run starts. On a machine of
few cores Ray is no faster than local processes (the same CPUs, plus Ray's own processes
and a job's start-up): the table says what the cluster costs, and that the rows survive a
lost node.

    python benchmarks/sweep_cluster.py            # BENCHMARKS.md (~10 min on 2 cores)
    python benchmarks/sweep_cluster.py --jobs 100 --rates 2,4 --seeds 0   # smoke
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host import describe  # noqa: E402

from simulator.ray_sweep import run_task  # noqa: E402
from tests.simulator.ray_nodes import RayNodes, missing  # noqa: E402

POLICIES = "max_min_fairness,max_min_fairness_perf,fifo_perf"
RATES = "0.6,1.2,1.8,2.4,3.0,3.6,4.2,4.8,5.4,6.0"
TASK = run_task.__name__                # a worker running one is titled ray::TASK
DONE = re.compile(r"^sweep: (\d+)/(\d+) runs done")
SUMMARY = re.compile(r"^ray: \d+ runs? on (\d+) nodes? \((.*)\)$")


def sweep_command(args, out: Path, ray: str | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "gavelsched", "simulate", "sweep", "--jobs", str(args.jobs),
           "--policies", args.policies, "--rates", args.rates, "--seeds", args.seeds,
           "-o", str(out)]
    return cmd + (["--ray", ray] if ray else [])


def timed(cmd: list[str], env=None, on_line=None) -> tuple[float, list[str]]:
    """Run ``cmd``; its wall time and its stderr lines (each passed to ``on_line``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))
        if on_line is not None:
            on_line(line)
    if proc.wait() != 0:
        raise SystemExit(f"{' '.join(cmd[2:5])} failed:\n" + "\n".join(lines[-20:]))
    return time.perf_counter() - start, lines


def rows(out: Path) -> list[dict]:
    """sweep.csv's rows without ``wall_s``."""
    with open(out / "sweep.csv") as f:
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(f)]


def per_node(lines: list[str]) -> str:
    """From the sweep's summary line: the runs each node made."""
    found = [m for m in map(SUMMARY.match, lines) if m]
    if not found:
        raise SystemExit("no 'ray: ...' summary line:\n" + "\n".join(lines[-20:]))
    return found[0].group(2)


def on_ray(args, out: Path, kill_at: int | None = None) -> dict:
    """One sweep on a fresh two-node cluster (the second node killed after ``kill_at``
    runs are done, while it runs one)."""
    with RayNodes() as nodes:
        started = time.perf_counter()
        address = nodes.head(cpus=args.cpus_per_node)
        node2 = nodes.add("node2", cpus=args.cpus_per_node)
        up_s = time.perf_counter() - started
        killed: list[tuple[float, int]] = []   # when, and the runs lost with the node

        def watch(line: str) -> None:
            m = DONE.match(line)
            if kill_at is None or killed or not m or int(m.group(1)) < kill_at:
                return
            deadline = time.perf_counter() + 120
            while not node2.running(TASK):
                if time.perf_counter() > deadline:
                    raise SystemExit("sweep_cluster: node 2 ran no more runs to be killed in")
                time.sleep(0.05)
            lost = node2.running(TASK)
            node2.kill()
            killed.append((time.perf_counter() - begun, lost))

        begun = time.perf_counter()
        wall, lines = timed(sweep_command(args, out, address), env=nodes.env, on_line=watch)
    return {"wall": wall, "up": up_s, "per_node": per_node(lines),
            "killed": killed[0] if killed else (0.0, 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--rates", default=RATES)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--cpus-per-node", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args()
    why = missing()
    if why:
        raise SystemExit(f"sweep_cluster: {why}")
    load_before = describe()
    with tempfile.TemporaryDirectory(prefix="sweep-cluster-") as tmp:
        tmp = Path(tmp)
        loads = [os.getloadavg()[0]]
        local_s, _ = timed(sweep_command(args, tmp / "local"))
        total = len(rows(tmp / "local"))
        loads.append(os.getloadavg()[0])
        ray = on_ray(args, tmp / "ray")
        loads.append(os.getloadavg()[0])
        death = on_ray(args, tmp / "death", kill_at=max(1, total // 3))
        reference = rows(tmp / "local")
        for name in ("ray", "death"):
            if rows(tmp / name) != reference:
                raise SystemExit(f"sweep_cluster: the {name} run's rows differ from the local's")
    print(f"{total} runs ({args.policies} x rates {args.rates} x seeds {args.seeds}, "
          f"{args.jobs} jobs each); rows of all three runs equal row for row (but wall_s)\n")
    print("| run | wall s | cluster start s | runs per node | runs lost with node 2, "
          "run again | load at start |")
    print("|---|---:|---:|---|---:|---:|")
    print(f"| local, {os.cpu_count()} processes | {local_s:.1f} | - | - | - | {loads[0]:.1f} |")
    print(f"| Ray, 2 nodes x {args.cpus_per_node} CPU | {ray['wall']:.1f} | {ray['up']:.1f} | "
          f"{ray['per_node']} | 0 | {loads[1]:.1f} |")
    at, lost = death["killed"]
    print(f"| Ray, node 2 killed at {at:.0f} s | {death['wall']:.1f} | {death['up']:.1f} | "
          f"{death['per_node']} | {lost} | {loads[2]:.1f} |")
    print(f"\nmachine before: {load_before}; after: {describe()}")


if __name__ == "__main__":
    main()
