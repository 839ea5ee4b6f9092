"""Faults on separate network hosts (issue #17): the real scheduler and two worker daemons,
each in its own network namespace, three float64 jobs training, and one fault injected while
they train (``tests/faults/faults.py`` runs a scenario, ``tests/faults/job.py`` is the job).
Each fault is run ``--runs`` times (and "none", no fault, as the baseline); prints one
markdown table and the machine.

Columns:

- **runs**: runs made (a fault this machine cannot inject is skipped, with the reason);
- **jobs**: jobs over all runs (three a run: 200, 250 and 300 steps);
- **exact**: jobs that ended ``done`` with ``steps_done == total_steps``, parameters within
  1e-9 of the standalone reference run, and a step log holding each step once;
- **lost**: jobs not done, or done but not exact. A job that *failed* with a one-line reason
  counts as lost here (the corrupted checkpoint's job should: its history is gone), and its
  reason is printed under the table;
- **bad**: problems of the must-hold list (``Outcome.problems``: a done job not exact, a
  failure without a one-line reason, a GPU held by two jobs, a job not finished within the
  timeout); 0 is the pass mark;
- **recovery s**: median (max) over the runs of the *recovery time*: seconds from the fault's
  end (the link back up, the killed daemon restarted and serving, netem removed; for a killed
  job process and a corrupted checkpoint, the injection itself) until every job that was not
  finished at that moment has made durable progress past its count then (``steps_done`` in
  ``status``, polled every 0.25 s; "then" is the first poll after the fault's end) or
  reached a final state. Durable steps move at
  checkpoints, so the resolution is about a round (2 s), and a job that restarts pays its
  start-up (3-4 s for a torch job on a busy 2-core machine);
- **wall s**: median wall time of a run (cluster start to every job final, and clean-up).

    python benchmarks/faults.py [--runs 2] [--faults link-down,kill-job] [--keep DIR]

Needs root (``ip netns add``); ``tc`` netem where the kernel has it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host import describe

from tests.faults.faults import FAULTS, TITLES, Setup, run_fault
from tests.faults.network import netem_fault_unavailable, netns_unavailable
from tests.faults.verdicts import Outcome, references


def row(fault: str, outcomes: list[Outcome], skipped: str | None) -> str:
    if skipped:
        return f"| {TITLES[fault]} | 0 | – | – | – | – | skipped: {skipped} | – |"
    jobs = [j for o in outcomes for j in o.jobs]
    exact = sum(1 for j in jobs if j.exact)
    bad = sum(len(o.problems) for o in outcomes)
    times = [o.recovery_s for o in outcomes if o.recovery_s is not None]
    if fault == "none":
        recovery = "–"
    elif times:
        recovery = f"{statistics.median(times):.1f} ({max(times):.1f})"
    else:
        recovery = "never"
    if len(times) < len(outcomes) and fault != "none":
        recovery += f", {len(outcomes) - len(times)} never"
    wall = statistics.median(o.wall_s for o in outcomes)
    return (f"| {TITLES[fault]} | {len(outcomes)} | {len(jobs)} | {exact} | "
            f"{sum(o.lost for o in outcomes)} | {bad} | {recovery} | {wall:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each fault (default 2)")
    parser.add_argument("--faults", default=",".join(["none", *FAULTS]),
                        help="comma-separated faults (default: none and every fault)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep every run's cluster files (logs, checkpoints) under DIR")
    args = parser.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = [f for f in faults if f != "none" and f not in FAULTS]
    if unknown or args.runs < 1:
        parser.error(f"unknown faults {unknown}; known: none, {', '.join(FAULTS)}"
                     if unknown else "--runs must be at least 1")
    reason = netns_unavailable()
    if reason:
        print(f"skipped: network namespaces are not available: {reason}")
        return 0
    base = args.keep or Path(tempfile.mkdtemp(prefix="gavelfaults-"))
    base.mkdir(parents=True, exist_ok=True)
    setup = Setup()
    start_load = describe()
    started = time.monotonic()
    refs = references(setup.total_steps, base / "references")
    rows, notes = [], []
    try:
        for fault in faults:
            skipped = netem_fault_unavailable() if fault == "netem" else None
            outcomes: list[Outcome] = []
            for r in range(0 if skipped else args.runs):
                root = base / f"{fault}-{r}"
                outcome = run_fault(fault, root, refs, setup)
                if outcome.skipped:
                    skipped = outcome.skipped
                    break
                outcomes.append(outcome)
                print(f"{fault} run {r + 1}: {outcome.wall_s:.0f}s, lost {outcome.lost}, "
                      f"problems {len(outcome.problems)}, recovery {outcome.recovery_s}",
                      file=sys.stderr, flush=True)
                for j in outcome.jobs:
                    if not j.exact:
                        notes.append(f"{fault} run {r + 1}, job {j.id}: {j.state} "
                                     f"{j.steps_done}/{j.total_steps}"
                                     + (f", reason: {j.reason}" if j.reason else "")
                                     + "".join(f"; {p}" for p in j.problems))
                notes += [f"{fault} run {r + 1}: {p}" for p in outcome.problems
                          if not p.startswith("job ")]
                if not args.keep:
                    shutil.rmtree(root, ignore_errors=True)
            rows.append(row(fault, outcomes, skipped))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"machine: {start_load} at start; {time.monotonic() - started:.0f} s in all")
    print(f"setup: scheduler + {len(setup.workers)} workers ("
          + ", ".join(f"{t} x{g}" for _, t, g in setup.workers)
          + f") in separate network namespaces, {len(setup.total_steps)} jobs of "
          + "/".join(str(n) for n in setup.total_steps)
          + f" steps, {setup.round_seconds:g} s rounds, heartbeats {setup.heartbeat_seconds:g} s, "
          + f"policy {setup.policy}, emulation x{setup.emulation_speed:g}")
    print()
    print("| fault | runs | jobs | exact | lost | bad | recovery s, median (max) | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for line in rows:
        print(line)
    if notes:
        print()
        for note in notes:
            print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
