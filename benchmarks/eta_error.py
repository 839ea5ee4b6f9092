"""ETA error against real finishes (issue #18): how far ``gavelsched status --eta`` is from
what a real ``local-cluster`` run then does.

1. Start a loopback cluster as ``gavelsched local-cluster`` does (its ``make_cluster`` and
   ``start_daemons``: scheduler, one emulated worker per type, priors scaled by
   ``--emulation-speed``, re-solve at any round boundary after a change).
2. Submit ``--jobs`` single-GPU jobs of the catalog's job types (the demo's mix), each
   sized 2-5 rounds of work on the fastest type; the last ``--later`` arrive one every
   ``--gap`` rounds. Workload ``steps`` (no torch, start-up ~1 s) or ``reference``.
3. Every ``--every`` seconds (default 1.3 rounds, so predictions fall at every phase of a
   round) and right after each submission, take the ETA of every unfinished job by the
   CLI's own path: ``Status`` -> ``eta.state_of`` -> ``eta.replay`` -> ``eta.eta_dict``
   (``cli/client.py:status``) in this process, and every ``--fresh-every``-th time as the
   user does: ``gavelsched status --eta --json`` in a fresh process (its wall time and
   peak RSS are the cost of one call).
4. Once every job is done, compare each predicted finish with the job's ``completion_s``
   and each predicted start of a job still queued with its ``started_s`` (the daemon's
   first ``InitJob``, so one start-up after the round start the simulator reports). Errors
   by how much of the job was left, in seconds and in % of the time it really had left;
   the what-if replays (``WHAT_IF``) of the same pictures say which simplification of
   ``gavelsched/cli/eta.py`` an error comes from.

The simulator the replay runs is the thesis's (§5.7.2 reports it within 8% of the physical
cluster on whole traces); an ETA asks more of it: one job's finish from a mid-run state.

    python benchmarks/eta_error.py [--round-seconds 6] [--workload steps|reference]
                                   [--json OUT] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
from google.protobuf.json_format import MessageToDict

from gavelsched.cli import eta
from gavelsched.cli.args import parse_counts
from gavelsched.cli.jobviews import status_dict
from gavelsched.cli.local_cluster import MIX, make_cluster, start_daemons
from gavelsched.daemon.leases import MIN_LEASE_FRACTION
from gavelsched.daemon.local import FINAL_STATES, subprocess_env
from gavelsched.rpc import pb, pb_grpc
from traces import default_table

ROUNDS_OF_WORK = (2.0, 3.0, 4.0, 5.0)
BUCKETS = ((">75% left", 0.75, 1.01), ("25-75% left", 0.25, 0.75), ("<25% left", 0.0, 0.25))
POLL_S = 0.5


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="k80=1,p100=1,v100=1", metavar="TYPE=N,...")
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--later", type=int, default=4, help="of them, arriving later (default 4)")
    p.add_argument("--gap", type=float, default=2.0, help="rounds between late arrivals")
    p.add_argument("--round-seconds", type=float, default=6.0)
    p.add_argument("--policy", default="max_min_fairness_perf")
    p.add_argument("--emulation-speed", type=float, default=0.1)
    p.add_argument("--workload", default="steps",
                   help="'steps' (no torch) or 'reference' (each job type's torch workload)")
    p.add_argument("--every", type=float, default=None, metavar="S",
                   help="seconds between predictions (default 1.3 rounds)")
    p.add_argument("--fresh-every", type=int, default=4, metavar="N",
                   help="every Nth prediction by `gavelsched status --eta --json` in a fresh "
                        "process (default 4; the first always)")
    p.add_argument("--replay-timeout", type=float, default=20.0, metavar="S")
    p.add_argument("--timeout", type=float, default=330.0, metavar="S", help="give up after S")
    p.add_argument("--json", metavar="OUT", help="write every prediction and table here")
    p.add_argument("--keep", metavar="DIR", help="keep the cluster's state and logs here")
    args = p.parse_args(argv)
    args.dashboard = False
    args.every = args.every or 1.3 * args.round_seconds
    return args


def requests(args, workers) -> list[tuple[float, pb.JobRequest]]:
    """(arrival seconds after the start, request) per job, the late ones last."""
    table, out = default_table(), []
    for i in range(args.jobs):
        kind = MIX[i % len(MIX)]
        fastest = max(table.get(t, kind, 1) for t in workers)
        rounds = ROUNDS_OF_WORK[i % len(ROUNDS_OF_WORK)]
        steps = max(1, int(rounds * args.round_seconds * fastest * args.emulation_speed))
        late = i - (args.jobs - args.later)
        at = (late + 1) * args.gap * args.round_seconds if late >= 0 else 0.0
        workload = "" if args.workload == "reference" else args.workload
        out.append((at, pb.JobRequest(job_type=kind, scale_factor=1, total_steps=steps,
                                      workload=workload)))
    return out


@contextmanager
def deadline(seconds: float):
    """TimeoutError in this (main) thread after ``seconds``: a replay can run forever."""
    def ring(*_):
        raise TimeoutError(f"replay still running after {seconds:g} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def replay_dict(reply, limit: float, what_if=None) -> tuple[dict, str | None]:
    """``status --eta --json``'s ``eta`` per job for a Status picture (``client.status``:
    ``state_of``, ``replay``, ``eta_dict``), or ({}, why). ``what_if(state, reply)``
    returns the state to replay instead, and finishes it knows without a replay."""
    state, known = eta.state_of(reply), {}
    if what_if is not None:
        state, known = what_if(state, reply)
    try:
        with deadline(limit):
            etas = eta.eta_dict(state, eta.replay(state))
        return {**etas, **{k: {"start_s": None, "finish_s": v} for k, v in known.items()}}, None
    except Exception as err:   # noqa: BLE001 - the CLI prints "unavailable (why)"
        return {}, f"{type(err).__name__}: {err}"


def active(cluster):
    """``Status`` of the unfinished jobs, as ``status --eta`` asks for it."""
    return pb_grpc.ClientToSchedulerStub(cluster.chan).Status(pb.StatusRequest(active=True),
                                                              timeout=30)


def in_process(cluster, limit: float) -> dict:
    start = time.perf_counter()
    reply = active(cluster)
    etas, why = replay_dict(reply, limit)
    took = time.perf_counter() - start
    out = status_dict(reply)
    for job in out["jobs"]:
        job["eta"] = etas.get(job["id"])
    return {"source": "in-process", "wall_s": took, "now_s": reply.now_s, "why": why,
            "status": out, "reply": reply}


def fresh(cluster, limit: float) -> dict:
    """``gavelsched status --eta --json`` in a new process: its output, wall time and the
    peak RSS of every such process so far (RUSAGE_CHILDREN: the daemons are not reaped
    until the end)."""
    reply = active(cluster)           # the picture the what-if replays start from
    cmd = [sys.executable, "-m", "gavelsched", "status", "--eta", "--json", "--scheduler",
           cluster.address, "--token-file", str(cluster.token_file)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                              env=subprocess_env())
        why = None if done.returncode == 0 else f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        why = f"still running after {limit:g} s"
    took = time.perf_counter() - start
    status = {"jobs": []} if why else json.loads(done.stdout)
    nows = [j["eta"]["finish_s"] - j["eta"]["finish_in_s"] for j in status["jobs"]
            if j.get("eta") and j["eta"]["finish_s"] is not None]
    return {"source": "fresh process", "wall_s": took, "why": why, "status": status,
            "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "now_s": nows[0] if nows else reply.now_s, "reply": reply}


def run_cluster(args, root: Path) -> tuple[list[dict], list[float], dict]:
    """Run the jobs; (predictions taken, the rounds' starts on the scheduler's clock, the
    final status of every job)."""
    workers = parse_counts(args.workers, what="--workers", allow_zero=False)
    cluster, _ = make_cluster(args, root, workers, default_table())
    snaps, final = [], None
    try:
        start_daemons(cluster, args, workers)
        todo = sorted(requests(args, workers), key=lambda r: r[0])
        t0, next_at = time.monotonic(), 0.0
        while time.monotonic() - t0 < args.timeout:
            elapsed = time.monotonic() - t0
            due = [r for at, r in todo if at <= elapsed]
            todo = [(at, r) for at, r in todo if at > elapsed]
            for request in due:
                cluster.submit(request)
            reply = cluster.status()
            if not todo and all(j.state in FINAL_STATES for j in reply.jobs):
                final = status_dict(reply)
                break
            if due or elapsed >= next_at:
                take = fresh if len(snaps) % args.fresh_every == 0 else in_process
                snaps.append(take(cluster, args.replay_timeout))
                next_at = elapsed + args.every
                sys.stderr.write(f"t={elapsed:5.1f}s round {reply.round:3d}: ETA {len(snaps)} "
                                 f"({snaps[-1]['source']}, {snaps[-1]['wall_s']:.2f} s) "
                                 f"{snaps[-1]['why'] or ''}\n")
            time.sleep(POLL_S)
    finally:
        cluster.stop()
    if final is None:
        raise SystemExit(f"not every job finished in {args.timeout:g} s")
    return snaps, round_starts(root / "scheduler.log", reply.epoch_unix), final


# ---- what-if replays of the same pictures (after the run, off the clock) ---------------
def running_kept(state, reply, began):
    """A job running now keeps its workers: no start-up (eta.py restarts it fresh)."""
    running = {j.id for j in reply.jobs if j.state == "running"}
    return replace(state, jobs=tuple(replace(j, startup_s=0.0) if j.id in running else j
                                     for j in state.jobs)), {}


def startup_capped(state, reply, began):
    """The daemon's floor (``leases``): a fresh run makes steps for at least
    MIN_LEASE_FRACTION of a round, so it loses at most (1 - that) x round to start-up."""
    cap = (1.0 - MIN_LEASE_FRACTION) * state.round_seconds
    return replace(state, jobs=tuple(replace(j, startup_s=min(j.startup_s, cap))
                                     for j in state.jobs)), {}


def from_next_boundary(state, reply, began):
    """Replay from the next round boundary: ``steps_done`` is durable (checkpointed at the
    last lease end, i.e. this round's start), so a job running now first makes this
    round's steps on its worker type (after its start-up): it finishes within the round
    or goes on from the boundary without a new start-up. Nothing else starts before the
    boundary. (eta.py replays from now, with the round-start count.)"""
    end = began + state.round_seconds
    on = {j.id: j.worker_type for j in reply.jobs if j.state == "running"}
    jobs, known = [], {}
    for job in state.jobs:
        rate = job.steps_per_s.get(on.get(job.id), 0.0)
        made = rate * max(0.0, end - began - job.startup_s)
        if rate > 0 and made >= job.steps_left:
            known[job.id] = began + job.startup_s + job.steps_left / rate
        else:
            jobs.append(replace(job, steps_left=job.steps_left - int(made), startup_s=0.0)
                        if rate > 0 else job)
    return replace(state, now_s=end, jobs=tuple(jobs)), known


def as_shipped(state, reply, began):
    return state, {}


WHAT_IF = {"eta.py (same picture)": as_shipped, "running kept": running_kept,
           "start-up capped": startup_capped, "from next boundary": from_next_boundary}


def whole_run(root: Path, args, workers) -> dict[str, float]:
    """Each job's finish when the whole run is replayed from its start, every arrival
    known, with the rates and start-ups the daemon measured (physical_vs_simulated.py):
    the simulator's own per-job fidelity on this run."""
    from physical_vs_simulated import measured_trace
    from gavelsched.core.driver import config_for
    from simulator import SimConfig, make_policy, simulate

    jobs, table, overhead = measured_trace(root / "state")
    policy = make_policy(args.policy)
    config = config_for(policy, table, list(workers), round_seconds=args.round_seconds,
                        resolve="responsive", min_resolve_interval_s=args.round_seconds)
    try:
        with deadline(args.replay_timeout):
            result = simulate(jobs, table, workers, policy, core_config=config, sim=SimConfig(
                round_ends_at_last_finish=False, preemption_overhead_s=overhead))
    except TimeoutError:
        return {}
    return {job.job_type.split("#")[-1]: rec.completion_s for job, rec in zip(jobs, result.jobs)}


def round_starts(log: Path, epoch_unix: float) -> list[float]:
    """Each round's start on the scheduler's clock, from the scheduler's log lines
    ``<local date> INFO gavelsched.daemon.executor: round N: ...``."""
    line = re.compile(r"^(\S+ \S+) INFO gavelsched\.daemon\.executor: round \d+:")
    got = (line.match(text) for text in log.read_text().splitlines())
    return sorted(datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() - epoch_unix
                  for m in got if m)


def predictions(snaps, starts, final, round_s) -> list[dict]:
    """One row per (prediction, job): what it said and what happened."""
    real = {j["id"]: j for j in final["jobs"]}
    last_arrival = max(j["arrival_s"] for j in final["jobs"])
    rows = []
    for n, snap in enumerate(snaps):
        t = snap["now_s"]
        snap["began"] = max((s for s in starts if s <= t), default=t)
        for job in snap["status"]["jobs"]:
            got, truth = job.get("eta") or {}, real[job["id"]]
            if truth["completion_s"] is None:     # failed or cancelled: nothing to compare
                continue
            rows.append({
                "prediction": n, "source": snap["source"], "job": job["id"], "at_s": t,
                "phase": (t - snap["began"]) / round_s, "state": job["state"],
                "left": 1.0 - job["steps_done"] / job["total_steps"],
                "arrivals_after": t < last_arrival,
                "finish": got.get("finish_s"), "real_finish": truth["completion_s"],
                "start": got.get("start_s") if job["started_s"] is None else None,
                "real_start": truth["started_s"], "what_if": {}})
    return rows


def add_what_ifs(rows, snaps, limit: float) -> None:
    for n, snap in enumerate(snaps):
        for name, change in WHAT_IF.items():
            etas, _ = replay_dict(snap["reply"], limit,
                                  lambda st, r, c=change: c(st, r, snap["began"]))
            for row in (r for r in rows if r["prediction"] == n):
                row["what_if"][name] = (etas.get(row["job"]) or {}).get("finish_s")


# ---- tables ----------------------------------------------------------------------------
def spread(errs, bases=None) -> str:
    """``n | median | p90 | worst`` of |errs| (s; and in % of ``bases``) ``| signed median``."""
    e = np.abs(np.asarray(errs, float))
    cells = [len(e), *(f"{v:.1f}" for v in (np.median(e), np.percentile(e, 90), e.max()))]
    if bases is not None:
        pct = 100.0 * e / np.maximum(np.asarray(bases, float), 1e-9)
        cells += [f"{v:.0f}%" for v in (np.median(pct), np.percentile(pct, 90), pct.max())]
    return " | ".join(map(str, cells)) + f" | {np.median(errs):+.1f}"


def groups(rows):
    out = [(name, [r for r in rows if lo <= r["left"] < hi]) for name, lo, hi in BUCKETS]
    return out + [("all", rows), ("all, none arrived later", [r for r in rows
                                                              if not r["arrivals_after"]])]


def finish_table(rows, whole, final) -> list[str]:
    out = ["| job left at prediction | ETAs | abs error s: median | p90 | worst | % of time "
           "left: median | p90 | worst | signed median s |", "|---|" + "---|" * 8]
    for name, group in groups([r for r in rows if r["finish"] is not None]):
        if group:
            out.append(f"| {name} | " + spread([r["finish"] - r["real_finish"] for r in group],
                                               [r["real_finish"] - r["at_s"] for r in group])
                       + " |")
    done = [j for j in final["jobs"] if whole.get(j["id"]) is not None]
    return out + ["| whole run replayed from its start: did not finish |"] if not done else out + ["| whole run replayed from its start, every arrival known (% of JCT) | "
                  + spread([whole[j["id"]] - j["completion_s"] for j in done],
                           [j["jct_s"] for j in done]) + " |"]


def what_if_table(rows) -> list[str]:
    """Median |error| (signed median) of each what-if replay, by when in its round the
    prediction was made and the job's state then."""
    out = ["| made at | job state | ETAs | " + " | ".join(WHAT_IF) + " |",
           "|---|---|---|" + "---|" * len(WHAT_IF)]
    cells = [(f"{lo:.0%}-{min(hi, 1):.0%} of its round", "/".join(states),
              [r for r in rows if lo <= r["phase"] < hi and r["state"] in states])
             for lo, hi in ((0.0, 0.5), (0.5, 9.0))
             for states in (("running",), ("queued", "preempted"))]
    late = ("any, none arrived later", "any", [r for r in rows if not r["arrivals_after"]])
    for when, state, group in [*cells, ("any", "any", rows), late]:
        line = f"| {when} | {state} | {len(group)} |"
        for name in WHAT_IF:
            e = [r["what_if"][name] - r["real_finish"] for r in group
                 if r["what_if"].get(name) is not None]
            line += f" {np.median(np.abs(e)):.1f} ({np.median(e):+.1f}) |" if e else " - |"
        out.append(line)
    return out


def start_table(rows) -> list[str]:
    queued = [r for r in rows if r["start"] is not None and r["real_start"] is not None]
    return ["| start of a queued job | ETAs | abs error s: median | p90 | worst | "
            "signed median s |", "|---|---|---|---|---|---|",
            "| predicted - real first `InitJob` | "
            + spread([r["start"] - r["real_start"] for r in queued] or [np.nan]) + " |"]


def cost_table(snaps) -> list[str]:
    out = ["| one `status --eta` | calls | wall s: median | max | peak RSS MiB |",
           "|---|---|---|---|---|"]
    for source in ("fresh process", "in-process"):
        wall = [s["wall_s"] for s in snaps if s["source"] == source]
        rss = max((s.get("rss_mib", 0) for s in snaps if s["source"] == source), default=0)
        if wall:
            out.append(f"| {source} | {len(wall)} | {np.median(wall):.2f} | {max(wall):.2f} "
                       f"| {f'{rss:.0f}' if rss else '-'} |")
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    load = [os.getloadavg()[0]]
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gavel-eta-") as tmp:
        root = Path(args.keep or tmp).resolve()
        snaps, starts, final = run_cluster(args, root)
        wall = time.perf_counter() - wall
        load.append(os.getloadavg()[0])
        whole = whole_run(root, args, parse_counts(args.workers, what="--workers"))
    rows = predictions(snaps, starts, final, args.round_seconds)
    add_what_ifs(rows, snaps, args.replay_timeout)
    failed = [s["why"] for s in snaps if s["why"]]
    tables = {"finish": finish_table(rows, whole, final), "what-if": what_if_table(rows),
              "start": start_table(rows),
              "cost": cost_table(snaps)}
    ends = [j["completion_s"] for j in final["jobs"]]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {load[0]:.1f} -> {load[1]:.1f}; "
          f"{args.workers}, {args.jobs} jobs ({args.later} late), {args.round_seconds:g} s "
          f"rounds, workload {args.workload}, {args.policy}; run {wall:.0f} s wall, "
          f"makespan {max(ends):.0f} s, {len(snaps)} predictions of {len(rows)} job ETAs"
          f"{f', {len(failed)} unavailable ({failed[0]})' if failed else ''}")
    for lines in tables.values():
        print("\n" + "\n".join(lines))
    if args.json:
        dump = {"args": vars(args), "load": load, "wall_s": wall, "round_starts": starts,
                "final": final, "whole_run": whole, "rows": rows, "tables": tables,
                "snapshots": [{**{k: v for k, v in s.items() if k != "reply"},
                               "reply": MessageToDict(s["reply"])} for s in snaps]}
        Path(args.json).write_text(json.dumps(dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
