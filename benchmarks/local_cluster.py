"""The physical demo's cost: ``gavelsched local-cluster`` with its defaults (a scheduler and
three emulated workers on loopback, six reference torch jobs), run in a fresh process as a
user runs it. Prints one table: wall time, the peak RSS of any process of the run, the
demo's own makespan and average JCT, and the machine (issue #8: under 5 min on 2 cores).

    python benchmarks/local_cluster.py [-- extra local-cluster flags]
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        load = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gavelsched", "local-cluster", "--json",
                        str(out), *argv], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        result = json.loads(out.read_text())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average "
          f"{load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| run | wall s | peak RSS MiB (largest process) | makespan s | avg JCT s | jobs done |")
    print("|---|---|---|---|---|---|")
    done = sum(1 for j in result["jobs"] if j["completion_s"] is not None)
    print(f"| local-cluster {' '.join(argv) or '(defaults)'} | {wall:.0f} | {peak:.0f} | "
          f"{result['makespan_s']:.0f} | {result['avg_jct_s']:.0f} | "
          f"{done}/{len(result['jobs'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
