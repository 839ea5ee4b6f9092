"""ETA error against real finishes (issues #18, #29): how far the scheduler's own ETAs
(``status --eta``, ``--json``'s ``eta_finish_s``, the dashboard) are from what a real
``local-cluster`` run then does.

1. Start a loopback cluster as ``gavelsched local-cluster`` does (its ``make_cluster`` and
   ``start_daemons``: a scheduler, one emulated worker per type, priors scaled by
   ``--emulation-speed``, a re-solve at any round boundary after a change).
2. Submit ``--jobs`` jobs of the demo's catalog job types, each 1.5-4.5 rounds of work on
   the fastest type; the last ``--later`` arrive one every ``--gap`` rounds. Workload
   ``steps`` (no torch, start-up ~0.4 s) or ``reference`` (torch, several seconds).
3. Right after each submission and every ``--every`` s (default 1.3 rounds, so that
   predictions fall at every point of a round), read every unfinished job's ETA as the
   scheduler computed it (``Status``: ``eta_finish_s``, ``eta_start_s``, computed at
   ``eta_computed_s``, ``gavelsched/daemon/forecast.py``), in this process, and every
   ``--fresh-every``-th time as a user does, ``gavelsched status --json`` in a fresh
   process.
4. Once all jobs are done, compare each predicted finish with the job's ``completion_s``
   (by how much of the job was left; in s and in % of the time it really had left; the
   share of predictions that are early, and of those off by ``EXACT_S`` or more: a
   forecast closer than that is exact, and its sign says nothing), each predicted start
   of a queued job with its ``started_s``, and each job's consecutive predictions (two
   forecasts in a row: how much the finish moved, with or without an arrival or an end
   between them). The same Status pictures are replayed client-side with one
   simplification of ``simulator/twin.py`` changed at a time (``WHAT_IF``) to see where
   the error comes from, and the whole run from its start with every arrival known (the
   simulator's own per-job fidelity; the thesis reports its simulator within 8% of its
   physical cluster, §5.7.2).

    python benchmarks/eta_error.py [--round-seconds 6] [--workload steps|reference]
                                   [--json OUT] [--keep DIR]
    python benchmarks/eta_error.py --report OUT    # the tables of a saved run, again
    python benchmarks/eta_error.py --pooled OUT...  # several runs' finish errors, pooled
    python benchmarks/eta_error.py --startups DIR/scheduler.log...   # start-ups by wave
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

from gavelsched.client.local import MIX, make_cluster, start_daemons
from gavelsched.daemon.jobs import FINAL, PREEMPTED, QUEUED, RUNNING
from gavelsched.daemon.local import subprocess_env
from gavelsched.daemon.statusjson import status_dict
from gavelsched.rpc import pb, pb_grpc
from simulator.live import state_of
from simulator.twin import replay
from traces import default_table
from traces.counts import parse_counts

ROUNDS_OF_WORK = (1.5, 2.5, 3.5, 4.5)     # as local-cluster: never a whole number of rounds
BUCKETS = ((">75% left", 0.75, 1.01), ("25-75% left", 0.25, 0.75), ("<25% left", 0.0, 0.25))
POLL_S = 0.5
EXACT_S = 0.5       # a forecast closer than this is exact (reports land ~0.1 s late)
WHAT_IF_TIMEOUT_S = 3.0      # a replay takes 0.01-0.05 s here; a longer one never ends


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="k80=1,p100=1,v100=1", metavar="TYPE=N,...")
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--later", type=int, default=4, help="of them, arriving later (default 4)")
    p.add_argument("--gap", type=float, default=2.0, help="rounds between late arrivals")
    p.add_argument("--round-seconds", type=float, default=6.0)
    p.add_argument("--policy", default="max_min_fairness_perf")
    p.add_argument("--emulation-speed", type=float, default=0.1)
    p.add_argument("--workload", default="steps", help="'steps' or 'reference' (torch)")
    p.add_argument("--every", type=float, metavar="S", help="seconds between predictions")
    p.add_argument("--fresh-every", type=int, default=4, metavar="N",
                   help="every Nth prediction (the first too) in a fresh process")
    p.add_argument("--replay-timeout", type=float, default=10.0, metavar="S",
                   help="a replay still running after S counts as unavailable")
    p.add_argument("--timeout", type=float, default=330.0, metavar="S", help="give up after S")
    p.add_argument("--json", metavar="OUT", help="write every prediction and table here")
    p.add_argument("--keep", metavar="DIR", help="keep the cluster's state and logs here")
    p.add_argument("--report", metavar="JSON", help="print the tables of a run saved with "
                   "--json again (finish, consecutive forecasts, what-ifs); runs nothing")
    p.add_argument("--pooled", metavar="JSON", nargs="+", help="the finish errors of runs "
                   "saved with --json, one row each and their predictions pooled (one "
                   "run's 26-60 predictions of 5-10 jobs move its share early by tens of "
                   "points); runs nothing")
    p.add_argument("--startups", metavar="LOG", nargs="+", help="the start-ups that "
                   "schedulers' logs record (a --keep DIR's scheduler.log), by the processes "
                   "launched at once on their machine, pooled; runs nothing")
    args = p.parse_args(argv)
    args.dashboard, args.every = False, args.every or 1.3 * args.round_seconds
    return args


def requests(args, workers) -> list[tuple[float, pb.JobRequest]]:
    """(seconds after the start, request) per job, in arrival order."""
    table, out = default_table(), []
    for i in range(args.jobs):
        kind, late = MIX[i % len(MIX)], i - (args.jobs - args.later)
        rounds = ROUNDS_OF_WORK[i % len(ROUNDS_OF_WORK)] * args.round_seconds
        steps = rounds * max(table.get(t, kind, 1) for t in workers) * args.emulation_speed
        out.append(((late + 1) * args.gap * args.round_seconds if late >= 0 else 0.0,
                    pb.JobRequest(job_type=kind, scale_factor=1, total_steps=max(1, int(steps)),
                                  workload="" if args.workload == "reference" else args.workload)))
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
    """``status --eta --json``'s ``eta`` per job of a Status picture, or ({}, why).
    ``what_if(state, reply)``: (the state to replay instead, finishes known without it)."""
    state, known = state_of(reply), {}
    if what_if is not None:
        state, known = what_if(state, reply)
    try:
        with deadline(limit):
            etas = {k: e.on_clock(state.now_s) for k, e in replay(state).items()}
        return {**etas, **{k: {"start_s": None, "finish_s": v} for k, v in known.items()}}, None
    except Exception as err:   # noqa: BLE001 - the CLI prints "unavailable (why)"
        return {}, f"{type(err).__name__}: {err}"


def active(cluster):
    """A picture with the allocation period in progress, as the scheduler's forecast
    replays it (``StatusRequest.period``)."""
    return pb_grpc.ClientToSchedulerStub(cluster.chan).Status(
        pb.StatusRequest(active=True, period=True), timeout=30)


def scheduler_etas(jobs, computed_s) -> dict:
    """Per job, the scheduler's ETA as ``status --json`` gives it (null: none)."""
    return {j["id"]: {"start_s": j["eta_start_s"], "finish_s": j["eta_finish_s"],
                      "computed_s": computed_s} for j in jobs}


def in_process(cluster, limit: float) -> dict:
    """One ``Status`` RPC: the scheduler's ETAs, and the picture the what-ifs replay."""
    start = time.perf_counter()
    reply = active(cluster)
    age = time.time() - reply.epoch_unix - reply.now_s     # how old the picture is
    took, out = time.perf_counter() - start, status_dict(reply)
    etas = scheduler_etas(out["jobs"], out["eta_computed_s"])
    for job in out["jobs"]:
        job["eta"] = etas[job["id"]]
    return {"source": "in-process", "wall_s": took, "now_s": reply.now_s,
            "why": out["eta_error"], "status": out, "reply": reply, "age_s": age}


def fresh(cluster, limit: float) -> dict:
    """``gavelsched status --json`` in a new process, as a user runs it: output, wall
    time, and the peak RSS of every such process so far (the daemons are reaped only at
    the end)."""
    reply = active(cluster)           # the picture the what-if replays start from
    cmd = [sys.executable, "-m", "gavelsched", "status", "--json", "--scheduler",
           cluster.address, "--token-file", str(cluster.token_file)]
    start, why = time.perf_counter(), None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit,
                              env=subprocess_env())
        why = None if done.returncode == 0 else f"exit {done.returncode}"
    except subprocess.TimeoutExpired:
        why = f"still running after {limit:g} s"
    took, status = time.perf_counter() - start, {"jobs": []} if why else json.loads(done.stdout)
    if not why:
        etas = scheduler_etas(status["jobs"], status["eta_computed_s"])
        for job in status["jobs"]:
            job["eta"] = etas[job["id"]]
        why = status["eta_error"]
    return {"source": "fresh process", "wall_s": took, "why": why, "status": status,
            "rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "now_s": reply.now_s, "reply": reply}


def run_cluster(args, root: Path) -> tuple[list[dict], list[float], dict]:
    """(the predictions taken, the rounds' starts on the scheduler's clock, the final
    status of every job)."""
    workers = parse_counts(args.workers, what="--workers", allow_zero=False)
    cluster = make_cluster(args, root, workers, default_table())
    snaps, final = [], None
    try:
        start_daemons(cluster, args, workers)
        todo, t0, next_at = requests(args, workers), time.monotonic(), 0.0
        while final is None and time.monotonic() - t0 < args.timeout:
            elapsed = time.monotonic() - t0
            due = [r for at, r in todo if at <= elapsed]
            todo = [(at, r) for at, r in todo if at > elapsed]
            for request in due:
                cluster.submit(request)
            reply = cluster.status()
            if not todo and all(j.state in FINAL for j in reply.jobs):
                final = status_dict(reply)
            elif due or elapsed >= next_at:
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


def round_starts(log: Path, epoch_unix: float) -> list[float]:
    """From the scheduler's lines ``<local date> INFO ...executor: round N: ...``."""
    line = re.compile(r"^(\S+ \S+) INFO gavelsched\.daemon\.executor: round \d+:")
    got = (line.match(text) for text in log.read_text().splitlines())
    return sorted(datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() - epoch_unix
                  for m in got if m)


STARTED_UP = re.compile(r"INFO gavelsched\.daemon\.runs: job \S+: its run in round \d+ started "
                        r"up in ([\d.]+)s \(from (its GPUs' release|its round's start), "
                        r"(\d+) launched at once")


def startups(logs) -> list[tuple[str, float]]:
    """Each start-up the schedulers' ``logs`` record: (``refill`` or the processes its round
    launched at once on its machine, seconds; ``gavelsched/core/waves.py``)."""
    out = []
    for log in logs:
        for m in STARTED_UP.finditer(Path(log).read_text()):
            out.append(("refill" if "release" in m[2] else m[3], float(m[1])))
    return out


def startup_table(samples) -> list[str]:
    """Start-ups by launch wave: how many, their mean and median."""
    out = ["| start-up, launched at once on its machine | start-ups | mean s | median s |",
           "|---|---|---|---|"]
    for wave in sorted({w for w, _ in samples}, key=lambda w: (w == "refill", w.zfill(4))):
        got = [x for w, x in samples if w == wave]
        name = "a refill (alone, from its GPUs' release)" if wave == "refill" else wave
        out.append(f"| {name} | {len(got)} | {np.mean(got):.3f} | {np.median(got):.3f} |")
    return out


# ---- what-if replays of the same pictures (after the run, off the clock) ---------------
def as_shipped(state, reply, began):
    return state, {}


def running_never_charged(state, reply, began):
    """Before issue #29: a job running now paid no start-up in any later run either."""
    running = {j.id for j in state.jobs if j.running_on}
    return replace(state, jobs=tuple(replace(j, startup_s=0.0) if j.id in running else j
                                     for j in state.jobs)), {}


def runs_as_kept(state, reply, began):
    """Before issue #29: every run of this round taken as kept from its start (no run
    start or start-up time: a run restarted this round made steps from the round's
    start)."""
    return replace(state, jobs=tuple(replace(j, run_began_s=None, run_up_s=None)
                                     for j in state.jobs)), {}


def no_plan_lead(state, reply, began):
    """Rounds planned at their boundary (``DaemonRules.plan_lead_s`` 0), as before the
    replay had the daemon's plan lead."""
    return replace(state, rules=replace(state.rules, plan_lead_s=0.0)), {}


def counts_at_round_start(state, reply, began):
    """Before two of issue #29's fixes: a run's durable count taken as of this round's
    start (a run kept across rounds whose lease spans them has not reported since; one
    kept from a refill has not reported at all)."""
    start = None if state.round_ends_s is None else state.round_ends_s - state.round_seconds
    return replace(state, jobs=tuple(replace(j, run_reported_s=start) for j in state.jobs)), {}


WHAT_IF = {"twin.py (same picture)": as_shipped,
           "running jobs never charged": running_never_charged,
           "runs taken as kept": runs_as_kept, "no plan lead": no_plan_lead,
           "counts as of the round's start": counts_at_round_start}


def whole_run(root: Path, args) -> dict[str, float]:
    """Each job's finish in a replay of the whole run from its start (every arrival known,
    the rates and start-ups the daemon measured, the priors it planned on until its runs
    moved them, under the run's own ``DaemonRules``: physical_vs_simulated.py's row with
    the daemon's knowledge); {} if it does not end."""
    from physical_vs_simulated import kept_rules, measured_trace
    from simulator import make_policy, simulate
    from simulator.twin import sim_config

    measured = measured_trace(root / "state")
    rules, jobs, table = kept_rules(root, measured), measured.jobs, measured.table
    workers, policy = parse_counts(args.workers, what="--workers"), make_policy(args.policy)
    config = rules.core_config(policy, table, list(workers),
                               rows=[job.throughputs for job in jobs])
    try:
        with deadline(WHAT_IF_TIMEOUT_S * 10):
            result = simulate(jobs, table, workers, policy, core_config=config,
                              sim=sim_config(rules, arrivals=True, priors=measured.priors))
    except TimeoutError:
        return {}
    return {job_id: rec.completion_s for job_id, rec in zip(measured.ids, result.jobs)}


def predictions(snaps, starts, final, round_s) -> list[dict]:
    """One row per (prediction, job that ended done): what it said, what happened."""
    real = {j["id"]: j for j in final["jobs"] if j["completion_s"] is not None}
    last_arrival = max(j["arrival_s"] for j in final["jobs"])
    rows = []
    for n, snap in enumerate(snaps):
        t = snap["now_s"]
        snap["began"] = max((s for s in starts if s <= t), default=t)
        for job in (j for j in snap["status"]["jobs"] if j["id"] in real):
            got, truth = job.get("eta") or {}, real[job["id"]]
            rows.append({
                "prediction": n, "source": snap["source"], "job": job["id"], "at_s": t,
                "phase": (t - snap["began"]) / round_s, "state": job["state"],
                "left": 1.0 - job["steps_done"] / job["total_steps"],
                "arrivals_after": t < last_arrival, "finish": got.get("finish_s"),
                "real_finish": truth["completion_s"], "real_start": truth["started_s"],
                "start": got.get("start_s") if job["started_s"] is None else None,
                "computed_s": got.get("computed_s")})
    return rows


def add_what_ifs(rows, snaps) -> None:
    for n, snap in enumerate(snaps):
        mine = [r for r in rows if r["prediction"] == n]
        for row in mine:
            row["what_if"] = {}
        for name, change in WHAT_IF.items():
            etas, _ = replay_dict(snap["reply"], WHAT_IF_TIMEOUT_S,
                                  lambda st, r, c=change: c(st, r, snap["began"]))
            for row in mine:
                row["what_if"][name] = (etas.get(row["job"]) or {}).get("finish_s")


# ---- tables ----------------------------------------------------------------------------
def spread(errs, bases=None) -> str:
    """``n | median | p90 | worst`` of |errs| (s; and in % of ``bases``) ``| signed median``."""
    e = np.abs(np.asarray(errs, float))
    cells = [len(e), *(f"{v:.1f}" for v in (np.median(e), np.percentile(e, 90), e.max()))]
    if bases is not None:
        pct = 100.0 * e / np.maximum(np.asarray(bases, float), 1e-9)
        cells += [f"{v:.0f}%" for v in (np.median(pct), np.percentile(pct, 90), pct.max())]
    return " | ".join(map(str, cells)) + f" | {np.median(errs):+.1f} |"


def finish_table(rows, whole, final) -> list[str]:
    rows = [r for r in rows if r["finish"] is not None]
    out = _finish_head("job left at prediction")
    groups = [(name, [r for r in rows if lo <= r["left"] < hi]) for name, lo, hi in BUCKETS]
    for name, group in [*groups, ("all", rows), ("all, made after the last arrival",
                                                 [r for r in rows if not r["arrivals_after"]])]:
        if group:
            out.append(f"| {name} | " + _finish_cells(group) + " |")
    done = [j for j in final["jobs"] if whole.get(j["id"]) is not None]
    return out + ["| whole run replayed from its start (% of JCT) | " + (spread(
        [whole[j["id"]] - j["completion_s"] for j in done], [j["jct_s"] for j in done])
        + " - | - |" if done else "did not end |")]


def consecutive(rows, final) -> list[dict]:
    """Each job's consecutive forecasts (distinct ``computed_s``): how far its predicted
    finish moved, and whether a job arrived or ended between the two."""
    events = sorted([j["arrival_s"] for j in final["jobs"]]
                    + [j["ended_s"] for j in final["jobs"] if j["ended_s"] is not None])
    out = []
    for job in {r["job"] for r in rows}:
        seen = {}
        for r in sorted((r for r in rows if r["job"] == job and r["finish"] is not None
                         and r["computed_s"] is not None), key=lambda r: r["at_s"]):
            seen.setdefault(r["computed_s"], r)
        made = sorted(seen.values(), key=lambda r: r["computed_s"])
        for a, b in zip(made, made[1:]):
            out.append({"job": job, "moved": b["finish"] - a["finish"],
                        "left": b["real_finish"] - b["computed_s"],
                        "events": any(a["computed_s"] < t <= b["computed_s"] for t in events)})
    return out


def stability_table(rows, final) -> list[str]:
    """|change| between a job's consecutive forecasts, in s and in % of its time left."""
    pairs = consecutive(rows, final)
    out = ["| consecutive forecasts of a job | pairs | abs change s: median | p90 | worst | "
           "% of time left: median | p90 | worst | signed median s |", "|---|" + "---|" * 8]
    for name, group in (("a job arrived or ended between", [p for p in pairs if p["events"]]),
                        ("nothing but time between", [p for p in pairs if not p["events"]]),
                        ("all", pairs)):
        if group:
            out.append(f"| {name} | " + spread([p["moved"] for p in group],
                                               [p["left"] for p in group]))
    return out


def what_if_table(rows) -> list[str]:
    """Median |error| (signed median) of each replay, by when in its round the prediction
    was made and the job's state then."""
    out = ["| made at | job state | ETAs | " + " | ".join(WHAT_IF) + " |",
           "|---|---|---|" + "---|" * len(WHAT_IF)]
    cells = [(f"{lo:.0%}-{min(hi, 1):.0%} of its round", "/".join(states),
              [r for r in rows if lo <= r["phase"] < hi and r["state"] in states])
             for lo, hi in ((0.0, 0.5), (0.5, 9.0))
             for states in ((RUNNING,), (QUEUED, PREEMPTED))]
    late = ("after the last arrival", "any", [r for r in rows if not r["arrivals_after"]])
    for when, state, group in [*cells, ("any", "any", rows), late]:
        line = f"| {when} | {state} | {len(group)} |"
        for name in WHAT_IF:
            e = [r["what_if"][name] - r["real_finish"] for r in group
                 if r["what_if"][name] is not None]
            line += f" {np.median(np.abs(e)):.1f} ({np.median(e):+.1f}) |" if e else " - |"
        out.append(line)
    return out


def start_and_cost_tables(rows, snaps) -> list[str]:
    queued = [r["start"] - r["real_start"] for r in rows if r["start"] is not None]
    out = ["| start of a queued job | ETAs | abs error s: median | p90 | worst | signed "
           "median s |", "|---|---|---|---|---|---|",
           "| predicted - real first `InitJob` | " + spread(queued or [np.nan]), "",
           "| one `status` | calls | wall s: median | max | no ETAs | peak RSS MiB |",
           "|---|---|---|---|---|---|"]
    for source in ("fresh process", "in-process"):
        mine = [s for s in snaps if s["source"] == source]
        if not mine:
            continue
        wall, rss = [s["wall_s"] for s in mine], max(s.get("rss_mib", 0) for s in mine)
        out.append(f"| {source} | {len(mine)} | {np.median(wall):.2f} | {max(wall):.2f} | "
                   f"{sum(1 for s in mine if s['why'])} | {f'{rss:.0f}' if rss else '-'} |")
    return out


def report(path: str) -> int:
    """The finish, consecutive-forecast and what-if tables of a run saved with ``--json``."""
    saved = json.loads(Path(path).read_text())
    rows, final = saved["rows"], saved["final"]
    for lines in (finish_table(rows, saved["whole_run"], final), stability_table(rows, final),
                  what_if_table(rows)):
        print("\n" + "\n".join(lines))
    return 0


def pooled(paths: list[str]) -> int:
    """The finish errors of each saved run and of all their predictions together."""
    print("\n".join(_finish_head("runs")))
    runs = {path: [r for r in json.loads(Path(path).read_text())["rows"]
                   if r["finish"] is not None] for path in paths}
    for name, rows in [*runs.items(), (f"all {len(paths)}", sum(runs.values(), []))]:
        print(f"| {name} | " + _finish_cells(rows) + " |")
    return 0


def _finish_head(first: str) -> list[str]:
    """The header of a table of finish errors (``_finish_cells``), its first column's."""
    return [f"| {first} | ETAs | abs error s: median | p90 | worst | % of time left: median "
            f"| p90 | worst | signed median s | early | early, of those off by >= {EXACT_S:g} "
            "s |", "|---|" + "---|" * 10]


def _finish_cells(rows) -> str:
    """``spread`` of the finish errors of ``rows`` (s, % of the time left), the share
    early and the share early of those off by ``EXACT_S`` or more."""
    errs = np.asarray([r["finish"] - r["real_finish"] for r in rows])
    off = errs[np.abs(errs) >= EXACT_S]
    return (spread(errs, [r["real_finish"] - r["at_s"] for r in rows])
            + f" {np.mean(errs < 0):.0%} | "
            + (f"{np.mean(off < 0):.0%} of {len(off)}" if len(off) else "-"))


def main(argv=None) -> int:
    args, load, wall = parse_args(argv), [os.getloadavg()[0]], time.perf_counter()
    if args.report:
        return report(args.report)
    if args.pooled:
        return pooled(args.pooled)
    if args.startups:
        print("\n".join(startup_table(startups(args.startups))))
        return 0
    with tempfile.TemporaryDirectory(prefix="gavel-eta-") as tmp:
        root = Path(args.keep or tmp).resolve()
        snaps, starts, final = run_cluster(args, root)
        wall, load = time.perf_counter() - wall, [*load, os.getloadavg()[0]]
        whole = whole_run(root, args)
        waves = startups([root / "scheduler.log"])
    rows = predictions(snaps, starts, final, args.round_seconds)
    add_what_ifs(rows, snaps)
    tables = {"finish": finish_table(rows, whole, final),
              "consecutive": stability_table(rows, final), "what-if": what_if_table(rows),
              "start, cost": start_and_cost_tables(rows, snaps),
              "start-ups": startup_table(waves)}
    ages = [s["age_s"] for s in snaps if "age_s" in s] or [np.nan]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, load average {load[0]:.1f} -> {load[1]:.1f}; "
          f"{args.workers}, {args.jobs} jobs ({args.later} late), {args.round_seconds:g} s "
          f"rounds, workload {args.workload}, {args.policy}; run {wall:.0f} s wall, makespan "
          f"{max(j['completion_s'] or 0 for j in final['jobs']):.0f} s; {len(snaps)} "
          f"predictions, {len(rows)} job ETAs; Status picture age median {np.median(ages):.1f}"
          f" s, max {max(ages):.1f} s")
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
