"""Same results as an older tree: ``gavelsched simulate --json`` on fixed traces, run by
this tree and by the tree in ``--before DIR``, compared as JSON (wall and solve times
left out). A refactoring that must not change behaviour shows ``identical`` on every row;
a row that differs prints its average JCT and makespan on both trees. Usage::

    git worktree add /tmp/before COMMIT
    python benchmarks/same_results.py --before /tmp/before
    python benchmarks/same_results.py --before /tmp/before --case lead-fifo

The first five cases are those the round-driver refactoring (BENCHMARKS.md, "one round
recipe for both executors") compared; the ``lead-`` cases replay the daemon's plan lead
(``--plan-lead``, with refills as the daemon makes them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name: (trace (jobs, rate per hour, multi-GPU), cluster, policy, extra flags)
CASES = {
    "las-1500": ((1500, 6.0, False), "36:36:36", "max_min_fairness", []),
    "perf-1500": ((1500, 6.0, False), "36:36:36", "max_min_fairness_perf", []),
    "packed-300": ((300, 6.0, False), "8:8:8", "max_min_fairness_packed", []),
    "fifo-multi-500": ((500, 2.6, True), "16:16:16", "fifo_perf", []),
    "ftf-300": ((300, 4.0, False), "8:8:8", "finish_time_fairness_perf", []),
    "lead-fifo": ((300, 8.0, False), "4:4:4", "fifo_perf",
                  ["--plan-lead", "108", "--refill", "--round-seconds", "360"]),
    "lead-perf": ((300, 8.0, False), "4:4:4", "max_min_fairness_perf",
                  ["--plan-lead", "108", "--refill", "--round-seconds", "360"]),
    "lead-static": ((60, 0.0, True), "8:8:8", "max_min_fairness_perf",
                    ["--plan-lead", "108", "--refill", "--round-seconds", "360"]),
}


def trace_file(folder: Path, jobs: int, rate: float, multi: bool) -> Path:
    """The case's trace, generated once by this tree (both trees read the same file)."""
    path = folder / f"trace-{jobs}-{rate:g}-{int(multi)}.jsonl"
    if not path.exists():
        cmd = [sys.executable, "-m", "gavelsched", "trace", "generate", "--jobs", str(jobs),
               "--rate", str(rate), "--seed", "0", "-o", str(path)]
        subprocess.run(cmd + (["--multi-gpu"] if multi else []), check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    return path


def result(tree: Path, trace: Path, cluster: str, policy: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "gavelsched", "simulate", "--trace", str(trace),
           "--cluster", cluster, "--policy", policy, "--quiet", "--json", "-", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tree,
                         env={**os.environ, "PYTHONPATH": str(tree)}).stdout
    data = json.loads(out)
    for volatile in ("wall_s", "solve_s"):
        data.pop(volatile, None)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", metavar="DIR", required=True,
                        help="a checkout of the older tree (git worktree add DIR COMMIT)")
    parser.add_argument("--case", choices=sorted(CASES), action="append",
                        help="run only this case (repeatable)")
    args = parser.parse_args()
    before = Path(args.before).resolve()
    print("| case | policy | result | avg JCT h before | after | makespan h before | after |")
    print("|---|---|---|---|---|---|---|")
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.case or CASES:
            (jobs, rate, multi), cluster, policy, extra = CASES[name]
            trace = trace_file(Path(tmp), jobs, rate, multi)
            old = result(before, trace, cluster, policy, extra)
            new = result(REPO, trace, cluster, policy, extra)
            same = old == new
            differ += not same
            print(f"| {name} | `{policy}` | {'identical' if same else 'differs'} | "
                  f"{old['avg_jct_s'] / 3600:.4f} | {new['avg_jct_s'] / 3600:.4f} | "
                  f"{old['makespan_s'] / 3600:.4f} | {new['makespan_s'] / 3600:.4f} |",
                  flush=True)
    print(f"\n{differ} of {len(args.case or CASES)} cases differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
