"""The fault harness's verdicts (issue #17): what must hold after a fault, and how long
recovery took.

**Checks** (``Outcome.problems``): every job ends ``done``, or ``failed`` with a one-line
reason; a done job has ``steps_done == total_steps``, and each of its final states (the
result files the job writes when it finishes, and every state file of ``total_steps`` steps
in its checkpoint directory) has parameters equal to the standalone reference run
(``references``) within 1e-9 and a step log holding steps 1..total exactly once each; no GPU
lock was ever found held by another job (``violations.log``).

**Recovery time** (``Monitor.recovery_s``): from the fault's end (the link back up, the
killed daemon restarted and serving, netem removed; for a killed job process and a
corrupted checkpoint, the injection itself) until every job that was not finished at that
moment has made durable progress past its count at that moment (``steps_done`` in
``status``, polled every 0.25 s; the count "at that moment" is the first poll after it) or
reached a final state. Durable progress moves at checkpoints, so its resolution is about a
round.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gavelsched.daemon.local import FINAL_STATES, subprocess_env
from gavelsched.rpc import pb

from .cluster import NetnsCluster

log = logging.getLogger(__name__)

TOLERANCE = 1e-9


# ---- references -------------------------------------------------------------------------

def references(steps: Iterable[int], directory: Path) -> dict[int, list[list[float]]]:
    """The standalone runs' parameters for each step count (``python -m tests.faults.job
    --reference N``, run in parallel; kept in ``directory``)."""
    from . import job as faults_job

    directory.mkdir(parents=True, exist_ok=True)
    todo = {n: directory / f"reference-{n}.json" for n in sorted(set(steps))}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.faults.job", "--reference", str(n),
                               "--out", str(path)], env=subprocess_env(),
                              stderr=subprocess.PIPE)
             for n, path in todo.items() if not path.exists()]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"reference run failed: {err.decode(errors='replace')[-2000:]}")
    return {n: _params(faults_job.read_state(path)) for n, path in todo.items()}


def _params(body: dict) -> list[list[float]]:
    return [[float.fromhex(v) for v in p] for p in body["params"]]



# ---- verdicts -------------------------------------------------------------------------

@dataclass
class JobVerdict:
    id: str
    state: str
    steps_done: int
    total_steps: int
    reason: str
    problems: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.state == "done" and not self.problems


@dataclass
class Outcome:
    fault: str
    root: Path
    jobs: list[JobVerdict] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    recovery_s: float | None = None
    wall_s: float = 0.0
    skipped: str | None = None
    corrupted: str | None = None     # the job whose checkpoint was corrupted

    @property
    def problems(self) -> list[str]:
        out = list(self.errors)
        out += [f"job {j.id}: {p}" for j in self.jobs for p in j.problems]
        out += [f"GPU held by two jobs: {v}" for v in self.violations]
        return out

    @property
    def lost(self) -> int:
        return sum(1 for j in self.jobs if not j.exact)

    def report(self) -> str:
        lines = [f"fault {self.fault!r} (logs under {self.root}):"]
        lines += [f"  note: {n}" for n in self.notes]
        for j in self.jobs:
            lines.append(f"  job {j.id}: {j.state} {j.steps_done}/{j.total_steps}"
                         + (f" reason={j.reason!r}" if j.reason else ""))
            lines += [f"    - {p}" for p in j.problems]
        lines += [f"  violation: {v}" for v in self.violations]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


class Monitor:
    """Polls ``status`` every 0.25 s: (time, {job: (state, steps_done)}) samples."""

    def __init__(self, cluster: NetnsCluster) -> None:
        self.cluster = cluster
        self.samples: list[tuple[float, dict[str, tuple[str, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="faults-monitor")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                jobs = self.cluster.try_jobs()
            except Exception as err:  # noqa: BLE001 - a sample missed; the monitor goes on
                log.warning("status poll failed: %s", err)
                continue
            if jobs is not None:
                self.record(jobs)

    def record(self, jobs: dict[str, pb.JobStatus]) -> None:
        self.samples.append((time.monotonic(),
                             {j.id: (j.state, j.steps_done) for j in jobs.values()}))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def recovery_s(self, fault_end: float) -> float | None:
        """Seconds from ``fault_end`` until every job unfinished then has made durable
        progress or finished (None: never seen). The counts "then" are the first sample
        taken at or after ``fault_end``, so a sample from before the fault cannot make a
        checkpoint that landed just before it look like recovery."""
        after = [(t, s) for t, s in self.samples if t >= fault_end]
        if not after:
            return None
        waiting = {j: steps for j, (state, steps) in after[0][1].items()
                   if state not in FINAL_STATES}
        for t, sample in after:
            for j in list(waiting):
                state, steps = sample.get(j, ("", -1))
                if state in FINAL_STATES or steps > waiting[j]:
                    del waiting[j]
            if not waiting:
                return t - fault_end
        return None


def gpu_violations(lock_dir: Path) -> list[str]:
    """What the jobs wrote to the lock directory's violations file: a GPU found held by another job."""
    from . import job as faults_job

    path = lock_dir / faults_job.VIOLATIONS_FILE
    return [ln for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def check_job(cluster: NetnsCluster, status: pb.JobStatus,
              refs: dict[int, list[list[float]]]) -> JobVerdict:
    """The must-hold list for one job (module docstring, Checks)."""
    from . import job as faults_job

    v = JobVerdict(status.id, status.state, status.steps_done, status.total_steps, status.reason)
    if status.state == "failed":
        if not status.reason.strip() or "\n" in status.reason.strip():
            v.problems.append(f"failed without a one-line reason: {status.reason!r}")
        return v
    if status.state != "done":
        v.problems.append(f"ended {status.state!r}, not done or failed")
        return v
    total = status.total_steps
    if status.steps_done != total:
        v.problems.append(f"done with steps_done {status.steps_done} != total_steps {total}")
    finals = sorted((cluster.result_dir / status.id).glob("final-*.json"))
    for path in sorted((cluster.checkpoints / status.id).rglob(faults_job.STATE_FILE)):
        try:
            if faults_job.read_state(path)["steps"] == total:
                finals.append(path)
        except faults_job.StateError:
            continue
    if not finals:
        v.problems.append(f"no final state of {total} steps (no result file, no checkpoint)")
    ref = refs[total]
    for path in finals:
        where = path.relative_to(cluster.root)
        try:
            body = faults_job.read_state(path)
        except faults_job.StateError as err:
            v.problems.append(str(err))
            continue
        got = _params(body)
        diff = max(abs(a - b) for p, q in zip(got, ref) for a, b in zip(p, q))
        if diff > TOLERANCE:
            v.problems.append(f"{where}: parameters differ from the reference run by {diff:.3g}")
        v.problems += [f"{where}: {p}" for p in log_problems(body["log"], total)]
    return v


def log_problems(lines: Sequence[str], total: int) -> list[str]:
    """What is wrong with a step log that should hold steps 1..total once each."""
    seen: dict[int, list[str]] = {}
    for line in lines:
        seen.setdefault(int(line.split()[0]), []).append(line)
    problems = []
    twice = {k: ls for k, ls in seen.items() if len(ls) > 1}
    if twice:
        shown = "; ".join(" | ".join(ls) for _, ls in sorted(twice.items())[:3])
        problems.append(f"{len(twice)} steps trained more than once "
                        f"(steps {min(twice)}..{max(twice)}), e.g. {shown}")
    missing = [k for k in range(1, total + 1) if k not in seen]
    if missing:
        problems.append(f"{len(missing)} steps missing from the log, e.g. {missing[:5]}")
    extra = sorted(k for k in seen if not 1 <= k <= total)
    if extra:
        problems.append(f"steps outside 1..{total} in the log: {extra[:5]}")
    return problems
