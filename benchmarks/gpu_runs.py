"""Per-run costs of jobs under a real worker, read from its logs: the thesis Table 5.4
analogue (§5.7.2) as the runs paid it.

For every run (one launch of a job's process) its worker's log gives its launch and exit
times, and the job's own log (``WORK_DIR/logs/JOB/roundR-rank0.err``) the moment its
iterator was up (``starts at step S``) and its lease ended (``ends at step E``). So a run
splits into start-up (launch to the first InitJob: process start, imports, CUDA context,
model and checkpoint load), training (InitJob to lease end, at ``steps / s``) and the end
(lease end to exit: the checkpoint save, its durable report and the process teardown).
The fixed cost of a round that starts a new process is start-up + end; at the thesis's
6-minute rounds it costs that over 360 s.

Run: ``python benchmarks/gpu_runs.py WORK`` where WORK is ``gpu_check.py``'s
``--out/work/cluster`` folder, or a ``.tgz`` of ``--out`` (``benchmarks/results/``).
"""

from __future__ import annotations

import math
import re
import statistics
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REFERENCE_ROUND_S = 360.0
_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_LAUNCH = re.compile(_STAMP + r" .*job (\S+) round (\d+): launched \S+ -m workers\.workloads\.(\w+)")
_EXIT = re.compile(_STAMP + r" .*job (\S+) round (\d+): exited (-?\d+) after ([0-9.]+) s")
_START = re.compile(_STAMP + r" .*: starts at step (\d+) of (\d+)")
_END = re.compile(_STAMP + r" .*lease of round \d+ ends at step (\d+)")


@dataclass(frozen=True)
class RunCost:
    job_id: str
    workload: str
    round: int
    startup_s: float
    train_s: float
    end_s: float
    steps: int
    exit_code: int
    launched: float     # (epoch seconds, from the worker's log)


def _time(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def runs(cluster: Path) -> list[RunCost]:
    """Every run of the workers ``cluster/workerN`` that started up and ended its lease, in
    the order they were launched."""
    out = [run for log in sorted(cluster.glob("worker*.log")) for run in _runs_of(log)]
    return sorted(out, key=lambda run: run.launched)


def _runs_of(worker_log: Path) -> list[RunCost]:
    """The runs of one worker (its log ``workerN.log``, its jobs' logs under ``workerN/``).
    A run's exit is its job's first after its launch and before the job's next launch: a
    run whose lease was extended exits under a later round's number than it was launched
    with."""
    text = worker_log.read_text(errors="replace")
    launches = sorted((_time(m[1]), m[2], int(m[3]), m[4]) for m in _LAUNCH.finditer(text))
    exits = sorted((_time(m[1]), m[2], int(m[4])) for m in _EXIT.finditer(text))
    out = []
    for k, (launched, job, rnd, workload) in enumerate(launches):
        until = next((t for t, j, _, _ in launches[k + 1:] if j == job), math.inf)
        exited = next(((t, code) for t, j, code in exits if j == job and launched <= t < until),
                      None)
        log = worker_log.with_suffix("") / "logs" / job / f"round{rnd}-rank0.err"
        body = log.read_text(errors="replace") if log.exists() else ""
        start, end = _START.search(body), _END.search(body)
        if exited is None or start is None or end is None:
            continue            # killed before it was up, or still running at the end
        up, over = _time(start[1]), _time(end[1])
        out.append(RunCost(job, workload, rnd, up - launched, over - up, exited[0] - over,
                           int(end[2]) - int(start[2]), exited[1], launched))
    return out


def table(costs: list[RunCost]) -> str:
    """Median per workload, and the overhead of a new process every 6-minute round."""
    lines = ["| workload | runs | start-up (s) | training per run (s) | steps/s in a run | "
             "save + exit (s) | fixed per new-process round (s) | overhead at 360 s rounds |",
             "|---|---|---|---|---|---|---|---|"]
    for workload in dict.fromkeys(c.workload for c in costs):
        mine = [c for c in costs if c.workload == workload]
        startup = statistics.median(c.startup_s for c in mine)
        end = statistics.median(c.end_s for c in mine)
        rate = statistics.median(c.steps / c.train_s for c in mine if c.train_s > 0)
        fixed = startup + end
        lines.append(f"| {workload} | {len(mine)} | {startup:.2f} | "
                     f"{statistics.median(c.train_s for c in mine):.2f} | {rate:.0f} | "
                     f"{end:.2f} | {fixed:.2f} | {100 * fixed / REFERENCE_ROUND_S:.1f}% |")
    return "\n".join(lines)


@contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """The folder holding ``worker0.log`` in ``path`` (a folder or a ``.tgz`` of one)."""
    with tempfile.TemporaryDirectory() as tmp:
        if path.suffix == ".tgz":
            with tarfile.open(path) as archive:
                archive.extractall(tmp, filter="data")
            path = Path(tmp)
        found = next((p.parent for p in path.rglob("worker0.log")), None)
        if found is None:
            raise SystemExit(f"gpu_runs: no worker0.log under {path}")
        yield found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python benchmarks/gpu_runs.py WORK_DIR_OR_TGZ")
    with unpacked(Path(args[0])) as cluster:
        print(table(runs(cluster)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
