"""Faults at scale (issue #30; BENCHMARKS.md, "Faults at scale"): a rack of hollow workers
lost and brought back, then the scheduler killed and restarted, on a cluster of ``--gpus``
hollow GPUs with ``--jobs`` jobs queued (the set-up of ``daemon_scale.py``: a real
``gavelsched scheduler``, ``gavelsched worker --hollow`` processes, jobs far longer than
the run, submitted as arrays).

After ``--warmup`` rounds, three events, each followed by ``--rounds`` rounds:

- **rack lost**: the last hollow process (``--gpus`` / ``--hollow-procs`` GPUs, "a rack")
  is killed (SIGKILL): its servers and their jobs' runs die at once;
- **rack back**: the same process is started again, with the same work directories;
- **scheduler restarted**: the scheduler is killed (SIGKILL) a third of a round after a
  round began (``--restart-after``), and started again on its state directory, while the
  hollow workers and their runs go on.

Reported per event:

- **servers**: the rack's servers failed for missed heartbeats (rack lost), registered
  again (rack back; the restart: every server), and the seconds after the event when the
  last of them was (the scheduler's log; for the restart, its ``Status``);
- **serving**: the restart only: seconds from the new process's start to its first answer;
- **next round**: the first round that starts after the event (the scheduler's round line),
  seconds after it; the worst gap between round starts from the last round before the event
  to the last measured after it;
- **GPUs busy of alive**: at the last round before the event, the first after it, and the
  last measured;
- **runs kept**: the restart only: the runs the new scheduler found going on and kept on
  their GPUs (its "is kept on its GPUs" lines; docs/runtime.md, "The runs going on are
  kept"; the workers list their runs as they register), how many of those then renewed
  their lease with it (its "kept run renewed" lines: a kept run whose renewal found no
  scheduler serving ends with its lease), how many of those had started up (InitJob)
  before their server had registered again (its "asked to come again" lines: a
  scheduler before f19210d ended such runs), and what its first plan kept of the runs found
  by then (its dispatch line, "K of last round's N tasks kept on their GPUs"); beside
  them, what the last plan logged before the crash kept of its last round's tasks (with
  more jobs than GPUs the policy moves many runs at any round);
- **alive servers failed**: servers failed for missed heartbeats in those rounds other than
  the rack's (a restarted scheduler that fails the servers coming back to it restarts
  their runs);
- **jobs lost**: jobs gone, failed, or whose durable steps went back, against ``Status``
  just before the event.

None of the last two is the pass mark: the script exits 1 on any.

    python benchmarks/scale_faults.py --gpus 64 --jobs 500 --round-seconds 10   # quick
    python benchmarks/scale_faults.py --gpus 2048 --jobs 20000,50000
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from daemon_scale import (FAILED_LINE, STAMP, fleet_arguments, fleet_sizes,  # noqa: E402
                          hollow_proc, hollow_racks, peak_rss_mib, pinned,
                          round_starts, scale_cluster, stamp, submit_all, tear_down)
from host import describe

from gavelsched.daemon.local import kill_tree, wait_until  # noqa: E402
from gavelsched.rpc import pb, pb_grpc  # noqa: E402

PLAN_KEPT = re.compile(STAMP + r" INFO gavelsched\.daemon\.dispatch: round \d+: planned .*; "
                       r"(\d+) of last round's (\d+) tasks kept on their GPUs$", re.M)
RENEWED_LINE = re.compile(STAMP + r" INFO gavelsched\.daemon\.runs: job (?P<job>\S+): its kept "
                          r"run renewed", re.M)
KEPT_LINE = re.compile(STAMP + r" INFO gavelsched\.daemon\.orphans: job (?P<job>\S+): its "
                       r"run found going on .* is kept on its GPUs", re.M)
ASKED_LINE = re.compile(STAMP + r" INFO gavelsched\.daemon\.processes: job (?P<job>\S+): its "
                        r"process started up before its server", re.M)
REGISTERED_LINE = re.compile(STAMP + r" INFO gavelsched\.daemon\.servers: worker "
                             r"(?P<server>\d+) \(.*\) at \S+ registered$", re.M)
# How often the servers (a Status each) and the scheduler's log are read.
POLL_S = 1.0
# A Status that carries the servers and no job (no job is ever cancelled here): cheap to
# poll at 50,000 jobs.
SERVERS_ONLY = pb.StatusRequest(states=["cancelled"])


@dataclass
class Event:
    name: str
    servers: str = "-"
    serving_s: float | None = None
    next_round_s: float = float("nan")
    worst_gap_s: float = float("nan")
    busy: str = "-"
    kept: str = "-"
    wrongly_failed: int = 0     # servers failed after it that were alive
    lost: list[str] | None = None
    peak_mib: float = float("nan")


def durable(client) -> dict[str, tuple[str, int]]:
    """(state, durable steps) of every job, from ``Status``."""
    reply = client.Status(pb.StatusRequest(), timeout=600)
    return {j.id: (j.state, j.steps_done) for j in reply.jobs}


def lost_jobs(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]) -> list[str]:
    """Each job of ``before`` that is gone from ``after``, failed, or has fewer durable
    steps, with what happened (empty: none lost)."""
    out = []
    for job, (state, steps) in before.items():
        now = after.get(job)
        if now is None:
            out.append(f"{job} gone")
        elif now[0] == "failed" and state != "failed":
            out.append(f"{job} failed")
        elif now[1] < steps:
            out.append(f"{job} steps {steps} -> {now[1]}")
    return out


def alive_servers(client) -> set[str]:
    """The ids of the servers ``Status`` shows alive (none while it does not answer)."""
    try:
        reply = client.Status(SERVERS_ONLY, timeout=60)
    except Exception:       # (a scheduler starting, or too busy to answer in time)
        return set()
    return {w.id for w in reply.workers if w.alive}


def rack_addresses(proc) -> set[str]:
    """The loopback addresses the hollow process ``proc`` serves its workers on."""
    ports = {c.laddr.port for c in psutil.Process(proc.pid).net_connections("tcp")
             if c.status == psutil.CONN_LISTEN}
    return {f"127.0.0.1:{p}" for p in ports}


def rounds_after(log_path: Path, since: float, rounds: int, round_s: float) -> list:
    """Wait for ``rounds`` round starts after ``since`` (Unix time); the round starts from
    the last one before ``since`` on."""
    def after():
        starts = round_starts(log_path)
        later = [s for s in starts if s[0] > since]
        return starts if len(later) >= rounds else None
    starts = wait_until(after, 20 * round_s + 600, f"{rounds} rounds after an event",
                        every=POLL_S)
    first = next(i for i, s in enumerate(starts) if s[0] > since)
    return starts[max(first - 1, 0):first + rounds]


def run(gpus: int, jobs: int, args) -> list[Event]:
    servers = gpus // args.gpus_per_server
    cluster = scale_cluster(gpus, args, "gavel-faults-")
    root, log_path = cluster.root, cluster.root / "scheduler.log"
    racks = hollow_racks(args, servers)
    procs = []
    events = []
    try:
        with pinned(args.pin):
            cluster.start_scheduler()
        procs = [hollow_proc(cluster, args, i, n, t, root) for i, (n, t) in enumerate(racks)]
        client = pb_grpc.ClientToSchedulerStub(cluster.chan)
        wait_until(lambda: len(alive_servers(client)) == servers, 600,
                   f"{servers} hollow workers", every=POLL_S)
        submit_all(cluster, jobs, args.total_steps, entities=args.entities)
        print(f"  {gpus} GPUs, {jobs} jobs submitted; {args.warmup} warm-up rounds",
              file=sys.stderr, flush=True)
        rounds_after(log_path, time.time(), args.warmup, args.round_seconds)

        if "rack" in args.events:
            events += _rack_events(cluster, client, procs, racks, args)
        if "restart" in args.events:
            events.append(_restart_event(cluster, servers, args))
    finally:
        tear_down(cluster, procs, args.keep)
    return events


def _rack_events(cluster, client, procs: list, racks: list, args) -> list[Event]:
    """A rack lost, then back: ``procs[-1]`` killed, then started again in its place."""
    root, log_path = cluster.root, cluster.root / "scheduler.log"
    k = len(racks) - 1
    addresses = rack_addresses(procs[k])
    rack = {int(w.id) for w in client.Status(SERVERS_ONLY, timeout=60).workers
            if w.address in addresses}
    before = durable(client)
    lost = Event("rack lost")
    began = time.time()
    kill_tree(procs[k].pid)
    procs[k].wait()
    failed = wait_until(lambda: _last_of(FAILED_LINE, log_path, began, rack), 600,
                        "the rack's servers failed", every=POLL_S)
    lost.servers = f"{len(rack)} failed, the last {failed - began:.1f} s after"
    _settle(lost, log_path, began, args, before, client, rack)

    before = durable(client)
    back = Event("rack back")
    began = time.time()
    procs[k] = hollow_proc(cluster, args, k, *racks[k], root)
    last = wait_until(lambda: _last_of(REGISTERED_LINE, log_path, began, rack), 600,
                      "the rack back", every=POLL_S)
    back.servers = f"{len(rack)} registered, the last {last - began:.1f} s after"
    _settle(back, log_path, began, args, before, client)
    return [lost, back]


def _restart_event(cluster, servers: int, args) -> Event:
    """The scheduler killed (SIGKILL) ``--restart-after`` of a round (default a third) after
    a round began, and started again on its state directory. Not at the round's start by
    default: the runs' renewals of the round before come at 95% of it and their answers may
    wait behind its start; a run whose renewal the crash left unanswered ends with its
    lease. The runs' next renewals, at 95% of this round, find the new scheduler serving if
    it is back by then. Early in a round (``--restart-after 0.03``) the round's runs are
    still starting up: their InitJobs come to the new scheduler."""
    log_path = cluster.root / "scheduler.log"
    start = rounds_after(log_path, time.time(), 1, args.round_seconds)[-1][0]
    time.sleep(max(0.0, start + args.round_seconds * args.restart_after - time.time()))
    before = durable(pb_grpc.ClientToSchedulerStub(cluster.chan))
    event = Event("scheduler restarted")
    began = time.time()
    cluster.kill9_scheduler()
    started = time.time()
    with pinned(args.pin):
        cluster.start_scheduler(timeout=600)
    event.serving_s = time.time() - started
    client = pb_grpc.ClientToSchedulerStub(cluster.chan)
    everyone = set(range(servers))
    last = wait_until(lambda: _last_of(REGISTERED_LINE, log_path, began, everyone), 600,
                      "every server registered again", every=POLL_S)
    event.servers = f"{servers} registered, the last {last - began:.1f} s after"
    _settle(event, log_path, began, args, before, client)
    text = log_path.read_text(errors="replace")
    kept, renewed, early = ({m["job"] for m in line.finditer(text) if stamp(m[1]) > began}
                            for line in (KEPT_LINE, RENEWED_LINE, ASKED_LINE))
    plans = [(stamp(m[1]), int(m[2]), int(m[3])) for m in PLAN_KEPT.finditer(text)]
    first = next((f"{k:,} of {n:,}" for at, k, n in plans if at > began), "-")
    ordinary = next((f"{k:,} of {n:,}" for at, k, n in reversed(plans) if at <= began), "-")
    event.kept = (f"{len(kept):,} ({len(kept & renewed):,} renewed, {len(kept & early):,} "
                  f"started up before their server was back); its first plan: "
                  f"{first}; a plan before: {ordinary}")
    event.peak_mib = peak_rss_mib(cluster.scheduler.pid)
    return event


def _settle(event: Event, log_path: Path, began: float, args, before, client,
            expected: set[int] = frozenset()) -> None:
    """``event``'s round figures over the ``--rounds`` rounds after it, the servers failed
    in them that were not ``expected`` to be, and the jobs lost against ``before``."""
    window = rounds_after(log_path, began, args.rounds, args.round_seconds)
    event.next_round_s = window[1][0] - began
    event.worst_gap_s = max(b[0] - a[0] for a, b in itertools.pairwise(window))
    event.busy = " / ".join(f"{s[2]:,} of {s[3]:,}" for s in (window[0], window[1], window[-1]))
    event.wrongly_failed = sum(server not in expected
                               for server, _ in _failures(log_path, began, window[-1][0]))
    event.lost = lost_jobs(before, durable(client))
    print(f"  {event.name}: {event.servers}", file=sys.stderr, flush=True)


def _failures(log_path: Path, since: float, until: float = math.inf) -> list[tuple[int, float]]:
    """(server, when) of each server failed for missed heartbeats between ``since`` and
    ``until`` (Unix times), per the scheduler's log."""
    return _server_lines(FAILED_LINE, log_path, since, until)


def _server_lines(line: re.Pattern, log_path: Path, since: float,
                  until: float = math.inf) -> list[tuple[int, float]]:
    """(server, when) of each of the scheduler's log lines ``line`` matches (its group
    ``server``) between ``since`` and ``until`` (Unix times)."""
    return [(int(m["server"]), stamp(m[1]))
            for m in line.finditer(log_path.read_text(errors="replace"))
            if since < stamp(m[1]) <= until]


def _last_of(line: re.Pattern, log_path: Path, since: float, servers: set[int]) -> float | None:
    """When the last of ``servers`` had a line ``line`` (registered, failed) after ``since``
    (Unix time), per the scheduler's log; None while one of them has not."""
    when = {server: at for server, at in _server_lines(line, log_path, since)
            if server in servers}
    return max(when.values()) if len(when) == len(servers) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    fleet_arguments(parser, gpus="2048", rounds=3, rounds_help="rounds measured per event",
                    hollow_procs=8, hollow_procs_help="processes the hollow workers share: the "
                    "last is the rack lost")
    parser.add_argument("--events", default="rack,restart",
                        help="which events, in this order: rack (lost, then back), restart")
    parser.add_argument("--restart-after", type=float, default=1 / 3, metavar="FRACTION",
                        help="how far into a round the scheduler is killed, as a fraction of "
                        "the round (early: the round's runs are still starting up; "
                        "default: %(default).3g)")
    args = parser.parse_args()
    args.events = args.events.split(",")
    if not args.events or set(args.events) - {"rack", "restart"}:
        parser.error(f"--events {','.join(args.events)}: rack, restart or both")
    pairs = fleet_sizes(parser, args)
    if args.hollow_procs < 2 or any(g // args.gpus_per_server < args.hollow_procs
                                    for g, _ in pairs):
        parser.error("--hollow-procs: at least 2, and at most one per server")
    if not 0.0 <= args.restart_after < 1.0:
        parser.error("--restart-after: a fraction of a round, from 0 to below 1")
    if args.rounds < 2 or args.warmup < 1:
        parser.error("--rounds must be at least 2, --warmup at least 1")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    print(f"machine: {describe(load=False)}; load average {os.getloadavg()[0]:.1f} at the start; "
          f"{args.policy}, {args.round_seconds:g} s rounds, {args.rounds} rounds after each "
          f"event, heartbeats {args.heartbeat_seconds:g} s, {args.hollow_procs} hollow "
          f"processes (a rack: 1 of them), hollow jobs at {args.emulation_speed:g}x")
    print()
    print("| GPUs | jobs | event | servers | serving | next round | worst round gap | GPUs busy "
          "of alive: before / first round / last | runs kept | alive servers failed | "
          "jobs lost | scheduler peak RSS |")
    print("|---" * 12 + "|", flush=True)
    bad = 0
    for gpus, jobs in pairs:
        for e in run(gpus, jobs, args):
            bad += len(e.lost) + e.wrongly_failed
            serving = "-" if e.serving_s is None else f"{e.serving_s:.1f} s"
            rss = "-" if e.peak_mib != e.peak_mib else f"{e.peak_mib:,.0f} MiB"
            print(f"| {gpus:,} | {jobs:,} | {e.name} | {e.servers} | {serving} | "
                  f"{e.next_round_s:.1f} s | {e.worst_gap_s:.2f} s | {e.busy} | {e.kept} | "
                  f"{e.wrongly_failed} | {len(e.lost)} | {rss} |", flush=True)
            for what in e.lost[:10]:
                print(f"  lost: {what}", file=sys.stderr)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
