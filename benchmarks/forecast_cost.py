"""The scheduler's ETA replay: its cost per picture, and proof that it never delays a
round's plan (issue #29; ``gavelsched/daemon/forecast.py``, ``simulator/forecast.py``).

1. **Cost per picture.** A Status picture (a real ``pb.StatusResponse``, the fields
   ``simulator.live.state_of`` reads) of ``--sizes`` unfinished jobs on a cluster sized like
   production (``--gpus``: 2,048 GPUs of the catalog's three types in servers of 8), the
   jobs a §5.7.1 trace's (``traces.generator``, 1- to 8-GPU jobs, 10^1.5 to 10^4 minutes on
   a V100), some half done, those that fit running this round. Each size is fed through
   the scheduler's own ``Forecaster`` to a fresh ``python -m simulator.forecast`` process
   (niced, as the scheduler runs it): the first picture (imports included: what the
   scheduler pays once), then ``--repeats`` more in the same process (``--big-repeats``
   from 10,000 jobs). Reported: the picture's serialization, each replay's wall time, the
   forecast process's peak RSS, and how many finishes lie past the replay's horizon
   (``twin.HORIZON_ROUNDS``, extrapolated).
2. **The round's plan is not delayed.** A real scheduler daemon (``--round-seconds`` rounds,
   ``max_min_fairness_perf``) with hollow in-process workers (``tests/daemon/fake_worker.py``:
   they answer ``RunJob`` with a thread that speaks the iterator protocol, no job
   processes; ``--servers`` x 4 GPUs) and ``--jobs`` jobs far longer than the run, once
   with ``eta: true`` and once with ``eta: false``, the same jobs. Reported per run: the
   gaps between round starts (from the scheduler's log) against the round length, the
   policy solves, the forecasts answered and their replay seconds (from the metrics), and
   the age of the ETAs each ``Status`` carried (its ``now_s - eta_computed_s``).

    python benchmarks/forecast_cost.py                # the BENCHMARKS.md figures (~22 min)
    python benchmarks/forecast_cost.py --jobs 1000    # without the 10,000-job daemons (~8 min)
    python benchmarks/forecast_cost.py --sizes 100 --jobs 200 --rounds 3   # smoke
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from host import describe  # (a sibling: this file runs as a script)

from gavelsched.daemon.forecast import Forecaster  # noqa: E402
from gavelsched.daemon.local import LocalCluster, free_port, wait_until  # noqa: E402
from gavelsched.rpc import pb  # noqa: E402
from simulator.twin import HORIZON_ROUNDS  # noqa: E402
from tests.daemon.fake_worker import FakeWorker  # noqa: E402
from traces.catalog import default_table  # noqa: E402
from traces.generator import generate_trace  # noqa: E402

POLICY = "max_min_fairness_perf"
TYPES = ("v100", "p100", "k80")                 # fastest first: a running job's type
SERVER_GPUS = 8
STARTUP_S = 20.0                                 # each job type's mean start-up
LOAD_JOB_TYPES = ("ResNet-18 (batch size 16)", "LM (batch size 5)",
                  "Transformer (batch size 16)", "Recommendation (batch size 512)", "A3C")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---- 1. the replay's cost per picture ----------------------------------------------------
def picture(jobs: int, gpus: dict[str, int], round_s: float, seed: int) -> pb.StatusResponse:
    """A Status picture 100.3 rounds into a run: ``jobs`` unfinished jobs of a §5.7.1
    trace, 60% of them started and up to half done; those that fit hold GPUs this round
    (fastest type first), half of them kept from the round before."""
    table = default_table()
    rng = np.random.default_rng(seed)
    now = 100.3 * round_s
    began = 100 * round_s
    reply = pb.StatusResponse(policy=POLICY, round_seconds=round_s, now_s=now,
                              epoch_unix=time.time() - now, resolve="responsive",
                              round_ends_s=began + round_s, plan_lead_s=0.1 * round_s,
                              min_resolve_interval_s=1920.0 * round_s / 360.0, round=100)
    for t, count in gpus.items():
        for _ in range(count // SERVER_GPUS):
            reply.workers.add(id=str(len(reply.workers)), type=t, gpus=SERVER_GPUS,
                              alive=True)
    free = dict(gpus)
    for i, job in enumerate(generate_trace(jobs, 0.0, table=table, seed=seed,
                                           multi_gpu=True)):
        rates = {t: table.get(t, job.job_type, job.scale_factor) for t in gpus}
        started = rng.random() < 0.6
        entry = reply.jobs.add(
            id=f"job{i}", state="queued", job_type=job.job_type,
            scale_factor=job.scale_factor, total_steps=job.total_steps,
            steps_done=int(job.total_steps * rng.uniform(0, 0.5)) if started else 0,
            steps_per_s=rates, priority_weight=1.0, startup_s=STARTUP_S,
            started_s=10.0 if started else -1.0, ended_s=-1.0, completion_s=-1.0,
            run_began_s=-1.0, run_up_s=-1.0)
        if not started:
            continue
        entry.state = "preempted"
        on = next((t for t in gpus if free[t] >= job.scale_factor and rates[t] > 0), None)
        if on is not None:
            free[on] -= job.scale_factor
            entry.state, entry.worker_type, entry.gpus = "running", on, job.scale_factor
            entry.run_began_s = began - (round_s if rng.random() < 0.5 else 0.0)
            entry.run_up_s = entry.run_began_s + STARTUP_S
    return reply


class Picture:
    """What the ``Forecaster`` reads of a ``Snapshot``: the picture of unfinished jobs."""

    def __init__(self, reply: pb.StatusResponse) -> None:
        self.reply = reply

    def status(self, request: pb.StatusRequest) -> pb.StatusResponse:
        return self.reply


def forecast_cost(jobs: int, repeats: int, args) -> dict:
    gpus = dict(zip(TYPES, args.gpus))
    reply = picture(jobs, gpus, args.picture_round_seconds, args.seed)
    began = time.perf_counter()
    size = len(reply.SerializeToString())
    serialize_s = time.perf_counter() - began
    ready = threading.Event()
    forecaster = Forecaster(ready.set)
    times = []
    try:
        for _ in range(1 + repeats):
            ready.clear()
            forecaster.offer(Picture(reply))
            ready.wait()
            got = forecaster.latest
            if got.error:
                raise SystemExit(f"the forecast failed at {jobs} jobs: {got.error}")
            times.append(got.replay_s)
        peak = peak_rss_mib(forecaster._process.pid)   # (the forecast process's own)
    finally:
        forecaster.close()
    horizon = reply.round_ends_s + HORIZON_ROUNDS * reply.round_seconds
    return {"jobs": jobs, "first": times[0], "later": times[1:], "bytes": size,
            "serialize": serialize_s, "rss": peak, "predicted": len(got.finish_s),
            "beyond": sum(1 for f in got.finish_s.values() if f > horizon)}


def cost_table(rows: list[dict], args) -> None:
    gpus = " + ".join(f"{n:,} {t}" for t, n in zip(TYPES, args.gpus))
    print(f"\nReplay cost per picture: {gpus} GPUs, {args.picture_round_seconds:g} s rounds, "
          f"{POLICY}, horizon {HORIZON_ROUNDS:,} rounds\n")
    print("| unfinished jobs | picture | serialize | first picture, fresh process "
          "(imports included) | later pictures, median / max (n) | forecast process "
          "peak RSS | finishes past the horizon (extrapolated) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        later = ("-" if not r["later"] else f"{r['later'][0]:.2f} s (1)"
                 if len(r["later"]) == 1 else
                 f"{statistics.median(r['later']):.2f} / {max(r['later']):.2f} s "
                 f"({len(r['later'])})")
        print(f"| {r['jobs']:,} | {r['bytes'] / 1024:,.0f} KiB | {r['serialize'] * 1e3:.1f} ms "
              f"| {r['first']:.2f} s | {later} | {r['rss']:.0f} MiB | "
              f"{r['beyond']:,} of {r['predicted']:,} |")


# ---- 2. the round's plan with and without forecasts --------------------------------------
ROUND_LINE = re.compile(r"^(\S+ \S+) INFO gavelsched\.daemon\.executor: round (\d+): ")


def round_starts(log: Path) -> list[float]:
    """The scheduler's round starts (its log's one line per round start), Unix seconds."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if (m := ROUND_LINE.match(line)):
            out.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return out


def metric(text: str, name: str) -> float:
    """An unlabelled sample's value from a Prometheus text page (0: none)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def daemon_run(jobs: int, eta: bool, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="gavel-forecast-") as tmp:
        port = free_port()
        cluster = LocalCluster(Path(tmp), policy=POLICY, round_seconds=args.round_seconds,
                               heartbeat_seconds=2.0,
                               config={"expected_workers": 4 * args.servers, "eta": eta,
                                       "seed": args.seed,
                                       "metrics_listen": f"127.0.0.1:{port}",
                                       "min_resolve_interval_s": args.round_seconds})
        workers: list[FakeWorker] = []
        try:
            cluster.start_scheduler()
            workers = [FakeWorker(cluster.address, TYPES[i % len(TYPES)], gpus=4,
                                  speed=args.speed) for i in range(args.servers)]
            wait_until(lambda: cluster.alive_workers() == args.servers, 120, "the workers")
            for i in range(jobs):
                cluster.submit(pb.JobRequest(job_type=LOAD_JOB_TYPES[i % len(LOAD_JOB_TYPES)],
                                             scale_factor=1, total_steps=10**7,
                                             workload="steps"))
            ages, first_round = [], None
            while True:
                status = cluster.status()
                first_round = status.round if first_round is None else first_round
                if eta:
                    ages.append(status.now_s - status.eta_computed_s
                                if status.eta_computed_s >= 0 else None)
                if status.round - first_round >= args.rounds + 1:
                    break
                time.sleep(1.0)
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                          timeout=30).read().decode()
            starts = round_starts(Path(tmp) / "scheduler.log")
        finally:
            for worker in workers:          # their job threads stop stepping first
                worker.silence()
            time.sleep(2.0)
            cluster.stop()
            for worker in workers:
                worker.stop()
    gaps = [b - a for a, b in itertools.pairwise(starts[-(args.rounds + 1):])]
    return {"jobs": jobs, "eta": eta, "gaps": gaps, "ages": ages,
            "solves": metric(page, "gavelsched_policy_solve_seconds_count"),
            "solve_s": metric(page, "gavelsched_policy_solve_seconds_sum"),
            "forecasts": metric(page, "gavelsched_eta_replay_seconds_count"),
            "replay_s": metric(page, "gavelsched_eta_replay_seconds_sum")}


def plan_table(runs: list[dict], args) -> None:
    print(f"\nRound plans with and without forecasts: {args.servers} hollow workers x 4 GPUs, "
          f"{args.round_seconds:g} s rounds, {POLICY}, {args.rounds} rounds each\n")
    print("| jobs | eta | round gap, mean / worst (target) | late starts (> 0.1 s) | policy "
          "solves, n / mean | forecasts answered / mean replay | ETA age at each Status, "
          "median / worst |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in runs:
        gaps = r["gaps"]
        late = sum(1 for g in gaps if g > args.round_seconds + 0.1)
        solve = (f"{r['solves']:.0f} / {r['solve_s'] / r['solves'] * 1e3:.0f} ms"
                 if r["solves"] else "0")
        if not r["eta"]:
            answered = age = "- (off)"
        else:
            answered = (f"{r['forecasts']:.0f} / {r['replay_s'] / r['forecasts']:.2f} s"
                        if r["forecasts"] else "0 (first replay still running)")
            known = [a for a in r["ages"] if a is not None]
            age = (f"{statistics.median(known):.1f} / {max(known):.1f} s ({len(known)} of "
                   f"{len(r['ages'])} polls had ETAs)" if known else
                   f"none in {len(r['ages'])} polls")
        print(f"| {r['jobs']:,} | {'on' if r['eta'] else 'off'} | "
              f"{statistics.mean(gaps):.2f} / {max(gaps):.2f} s ({args.round_seconds:g} s) | "
              f"{late} of {len(gaps)} | {solve} | {answered} | {age} |")
    by = {(r["jobs"], r["eta"]): r for r in runs}
    print()
    for jobs in args.jobs:
        on, off = by.get((jobs, True)), by.get((jobs, False))
        if on and off:
            ratio = statistics.mean(on["gaps"]) / statistics.mean(off["gaps"])
            worst = max(on["gaps"]) - max(off["gaps"])
            print(f"- {jobs:,} jobs: mean round gap on/off {ratio:.4f}; worst gap on - off "
                  f"{worst:+.2f} s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000],
                   help="unfinished jobs per picture (part 1)")
    p.add_argument("--gpus", type=int, nargs=3, default=[1024, 512, 512],
                   metavar=("V100", "P100", "K80"), help="the pictures' cluster")
    p.add_argument("--picture-round-seconds", type=float, default=360.0)
    p.add_argument("--repeats", type=int, default=3, help="later pictures per size")
    p.add_argument("--big-repeats", type=int, default=1,
                   help="later pictures from 10,000 jobs (each takes minutes)")
    p.add_argument("--jobs", type=int, nargs="+", default=[1000, 10_000],
                   help="jobs on the real scheduler (part 2); none: skip it")
    p.add_argument("--servers", type=int, default=16, help="hollow workers, 4 GPUs each")
    p.add_argument("--round-seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=8, help="rounds measured per run")
    p.add_argument("--speed", type=float, default=0.1,
                   help="the hollow workers' steps/s, as a fraction of the catalog's")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    began = time.monotonic()
    print(f"machine before: {describe()}")
    rows = [forecast_cost(n, args.big_repeats if n >= 10_000 else args.repeats, args)
            for n in args.sizes]
    print(f"machine after part 1: {describe()}")
    runs = [daemon_run(n, eta, args) for n in args.jobs for eta in (True, False)]
    print(f"machine after: {describe()}; {(time.monotonic() - began) / 60:.1f} min in all")
    if rows:
        cost_table(rows, args)
    if runs:
        plan_table(runs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
