"""A long re-solve against the daemon's calls and rounds (BENCHMARKS.md, "Solves off the
executor"; docs/runtime.md).

A real scheduler (``gavelsched scheduler``) with ``--policy`` (default
``min_total_duration_packed``, whose re-solve takes about a minute at 20,000 jobs on 2,048
GPUs), hollow workers of ``--gpus`` GPUs (``daemon_scale.py``'s fleet), ``--jobs`` jobs
submitted at once, and ``min_resolve_interval_s`` of ``--resolve-interval`` so that the
long solve comes back within the run. While the scheduler makes its first plan and then
``--rounds`` rounds, a probe in this process submits one more job every second, with the
CLI's 30-s deadline, and times each answer. Reported:

- first round: from the first Submit of the jobs to the first round's launches sent (its
  line in the log; its plan waited for its re-solve: an idle scheduler has no allocation
  to plan on);
- Submit: the answers' median, p99 and worst, and the Submits that failed (their deadline
  passed: the scheduler did not get to them);
- round gap: between round starts (the scheduler's round lines, less their launches), mean
  and worst, against ``--round-seconds``;
- the rounds planned on the allocation in force, their re-solve still running
  (``gavelsched_plans_waited_total``; none before that counter existed);
- the scheduler's peak RSS.

It measures the tree it is in (its row names the commit). For a tree from before the solve
went off the executor, copy this file and ``daemon_scale.py`` into that tree's
``benchmarks/`` (a worktree) and run it there, right after this one::

    python benchmarks/solve_cadence.py --gpus 2048 --jobs 20000 --rounds 6
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import grpc
from daemon_scale import (
    fleet_arguments,
    fleet_sizes,
    hollow_procs,
    peak_rss_mib,
    round_starts,
    scale_cluster,
    submit_all,
    tear_down,
    wait_until,
)
from host import describe

from gavelsched.rpc import pb, pb_grpc

DEADLINE_S = 30.0           # the CLI's (``gavelsched submit``)


class SubmitProbe:
    """One job submitted every second until ``stop``; each answer's seconds, or None for a
    Submit that failed."""

    def __init__(self, chan) -> None:
        self.stub = pb_grpc.ClientToSchedulerStub(chan)
        self.answers: list[float | None] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            began = time.monotonic()
            try:
                self.stub.Submit(pb.JobRequest(job_type="A3C", total_steps=10**9,
                                               workload="steps"), timeout=DEADLINE_S)
                self.answers.append(time.monotonic() - began)
            except grpc.RpcError:
                self.answers.append(None)

    def stop(self) -> list[float | None]:
        self._stop.set()
        self._thread.join(DEADLINE_S + 5)
        return self.answers


def plans_waited(port: int) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read()
    for line in text.decode().splitlines():
        if line.startswith("gavelsched_plans_waited_total "):
            return float(line.split()[1])
    return None


def measure(gpus: int, jobs: int, args) -> dict:
    """One run: the figures the docstring lists."""
    cluster = scale_cluster(gpus, args, prefix="gavel-cadence-",
                            min_resolve_interval_s=args.resolve_interval)
    log_path, hollow = cluster.root / "scheduler.log", []
    try:
        cluster.start_scheduler()
        servers = gpus // args.gpus_per_server
        hollow = hollow_procs(cluster, args, servers, cluster.root)
        wait_until(lambda: cluster.alive_workers() == servers, 600, f"{servers} workers")
        began = time.time()
        submit_all(cluster, jobs, args.total_steps, entities=args.entities)
        probe = SubmitProbe(cluster.chan)
        wait_until(lambda: round_starts(log_path), 1800, "the first round")
        start, *_, launch, _ = round_starts(log_path)[0]
        first_round_s = start + launch - began        # (its line: its launches sent)
        wait_until(lambda: len(round_starts(log_path)) > args.rounds, 1800 + 300 * args.rounds,
                   f"{args.rounds} rounds")
        answers = probe.stop()
        starts = [start for start, *_ in round_starts(log_path)]
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        waited = plans_waited(cluster.metrics_port)
        return {"first_round_s": first_round_s,
                "answered": sorted(a for a in answers if a is not None),
                "failed": sum(a is None for a in answers), "gaps": gaps,
                "plans_waited": waited, "peak_mib": peak_rss_mib(cluster.scheduler.pid)}
    finally:
        tear_down(cluster, hollow, args.keep)


def row(name: str, got: dict, round_s: float) -> str:
    ok = got["answered"]
    q = (lambda p: ok[min(len(ok) - 1, int(p * len(ok)))]) if ok else (lambda p: float("nan"))
    gaps = got["gaps"]
    waited = "-" if got["plans_waited"] is None else f"{got['plans_waited']:.0f}"
    return (f"| {name} | {got['first_round_s']:.1f} | {q(0.5):.3f} / {q(0.99):.3f} / "
            f"{(ok or [float('nan')])[-1]:.3f} | {got['failed']} of "
            f"{len(ok) + got['failed']} | {statistics.fmean(gaps) - round_s:+.2f} / "
            f"{max(gaps) - round_s:+.2f} | {waited} | {got['peak_mib']:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    fleet_arguments(parser, gpus="2048", rounds=6, rounds_help="rounds after the first",
                    hollow_procs=0, hollow_procs_help="hollow processes (0: one per 32 "
                    "servers)")
    parser.set_defaults(jobs="20000", policy="min_total_duration_packed")
    parser.add_argument("--resolve-interval", type=float, default=60.0,
                        help="the scheduler's min_resolve_interval_s (an expensive solve "
                             "comes back after it)")
    args = parser.parse_args()
    (gpus, jobs), *more = fleet_sizes(parser, args)
    if more:
        parser.error("one --gpus and one --jobs")
    got = measure(gpus, jobs, args)
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True, check=False).stdout.strip() or "?"
    print(f"# {describe()}")
    print(f"# {gpus} GPUs, {jobs} jobs, {args.policy}, rounds of {args.round_seconds:g} s, "
          f"min_resolve_interval_s {args.resolve_interval:g}; one Submit a second "
          f"({DEADLINE_S:g} s deadline)")
    print("| tree | first round launched after the first Submit (s) | Submit answered: median / p99 / worst "
          "(s) | Submits failed | round gap less the round: mean / worst (s) | rounds "
          "planned while solving | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|")
    print(row(commit, got, args.round_seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
