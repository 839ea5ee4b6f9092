"""The scheduler daemon at scale, against hollow workers (issue #30; BENCHMARKS.md, "The
daemon at scale").

A real scheduler (``gavelsched scheduler``, its defaults but ``eta: false`` unless
``--eta``) and ``--gpus`` GPUs of hollow workers (``gavelsched worker --hollow``: the real
worker daemon, each job rank a thread stepping the real GavelIterator at its type's
emulated rate; ``workers/hollow.py``), ``--gpus-per-server`` GPUs each, types k80, p100
and v100 in turn, in ``--hollow-procs`` processes (one per 32 servers; ``--hollow-nice``,
``--hollow-idle``; 1,024 hollow GPUs take more than half a core). ``--jobs`` jobs (five
job types; 1, 2, 4 and 8 GPUs as 70/10/15/5 %, as in thesis §5.7.1's traces), far longer
than the run, are submitted as job arrays over gRPC, so every round plans the whole
queue. Then ``--rounds`` rounds are measured; reported per size:

- submission: jobs/s through ``Submit`` (arrays of up to 10,000 copies);
- round gap: the time between round starts (the scheduler's round line, less the time its
  launches took, which it states), mean and worst, against the round length (the target:
  within 1 s of it); and the launches: from a round's start to its line, every RunJob of
  the round handed to the dispatcher;
- the plan: how long it held the executor thread; with the launches, the executor's own
  work (its CPU seconds, which both lines state: the rest was its waits for the GIL);
  plan to dispatch: from a round's plan
  (``plan_lead_seconds`` before it starts) to the last of the plan's RunJobs answered by
  its worker, and from the round's start to the same (the scheduler's log: ``RunJobs
  answered``), mean and worst;
- the round's later RunJobs, counted apart in the same line: launches that waited for
  their job's last run to save, and refills of GPUs freed mid-round (per round, mean),
  with the last one's answer after the round's start (worst);
- the churn: last round's tasks that the plan kept on their GPUs, of all of them (mean a
  round; the same line). The policy decides it, and it sets most of a round's work for the
  scheduler and the fleet (launches, saves, reports): runs of one tree differ by it;
- the GPUs busy at the last round start (the log's round line);
- heartbeat answers: ``heartbeat_probe.py`` in a process of its own, a heartbeat of a
  server the scheduler does not know every 0.5 s over the measured rounds (answered
  ``known=false`` by its handler at once): the time to its answer, median / p99 / worst;
  and the servers the scheduler failed for missed heartbeats in those rounds (its log);
- the scheduler's CPU (its share of one core over the measured rounds) and its peak RSS;
  the hollow processes' CPU;
- ``Status`` over gRPC (all jobs, and ``active`` only), ``gavelsched status --json`` in a
  fresh process, and the dashboard's page and ``/api/status``, each timed three times in
  the last round measured (medians; they load the scheduler, so not in the others);
- the RPCs per second the scheduler served (``gavelsched_rpcs_total``), and the busiest
  methods;
- renewals in the measured rounds: those not answered within the iterator's deadline
  (DEADLINE_EXCEEDED) and those refused as busy (asked again; in brackets, those refused
  after waiting out the next round's plan, the others finding every seat for fleet calls
  taken), from the hollow processes' logs, of all the ``RenewLease`` calls the scheduler
  served; of those it answered, the share answered from the last plan's book
  (``gavelsched_renewals_total``; ``daemon/renewals.py``); and the renewals still open when
  their lease ended, answered after the lease's checkpoint (``lease_calls.RENEW_TIMEOUT_S``,
  ``RENEW_AGAIN_S``): extended (the run kept, in the same process; of them, those answered
  more than 10 s after they were sent, or asked again, which the tree before this wait
  ended), not extended, or no answer in time (the run ends as not renewed).
- the re-solves that settled in the measured rounds, their mean seconds, and the rounds
  planned on the allocation in force while one ran (``gavelsched_policy_solve_seconds``,
  ``gavelsched_plans_waited_total``).
- below the table: the calls the scheduler refused as busy in the measured rounds, by
  method (``gavelsched_calls_refused_total``), and which calls held the seats then: the
  mean over its log's lines, each a sample taken at a refusal (``service.Refusals``); and
  the runs whose process gave up on its InitJob in those rounds (after
  ``lease_calls.INIT_RETRY_S`` of retries; the hollow processes' logs), by the last answer's
  code: each run ends and its job is placed again; and of the InitJobs answered, the share
  answered from the book of launches (``gavelsched_init_jobs_total``; ``daemon/launches.py``);
  and the launches the scheduler did not make in those rounds, by round (a launch that
  waited for its job's last run to save, with less than its type's expected start-up
  left in the round: its GPUs stay idle to the round's end, ``batch.worth_launching``),
  with the fresh runs' start-ups from their round's start, which that expectation is the
  mean of (the scheduler's log).

With ``--entities N`` the jobs belong to N teams (``policy_scale.team_specs``, in the
scheduler's cluster.yaml), as the hierarchical policies read them.

    python benchmarks/daemon_scale.py --gpus 64 --jobs 500 --rounds 3 --round-seconds 10  # quick
    python benchmarks/daemon_scale.py --gpus 512,1024,2048 --jobs 20000,50000 --rounds 6
    python benchmarks/daemon_scale.py --gpus 2048 --jobs 20000 --rounds 8 --warmup 2 \
        --entities 20 --policy max_min_fairness_water_filling                # 20 teams
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gavelsched.daemon.config import GIL_SWITCH_MS  # noqa: E402
from gavelsched.daemon.dispatch import AFTER_SAVE, LATER, REFILL  # noqa: E402
from gavelsched.daemon.local import (LocalCluster, free_port, kill_tree,  # noqa: E402
                                     subprocess_env, wait_until)
from gavelsched.daemon.service import NOT_PLANNED  # noqa: E402
from gavelsched.rpc import pb, pb_grpc  # noqa: E402
from policies.registry import policy_class
from host import describe  # (a sibling: this file runs as a script)
from policy_scale import team_specs  # (a sibling too)

TYPES = ("k80", "p100", "v100")
JOB_TYPES = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "Transformer (batch size 16)",
             "Recommendation (batch size 512)", "A3C")
SCALES = ((1, 0.70), (2, 0.10), (4, 0.15), (8, 0.05))     # thesis §5.7.1's multi-GPU mix
MAX_ARRAY = 10_000
STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
ROUND_LINE = re.compile(STAMP + r" INFO gavelsched\.daemon\.executor: round (\d+): (\d+) jobs "
                        r"running.*GPUs (\d+) busy of (\d+)(?:.*; began -?[\d.]+ s after its "
                        r"boundary, launched in (?P<launch>[\d.]+) s(?: \((?P<work>[\d.]+) s "
                        r"of it the executor's own work\))?)?")
DISPATCH_LINE = re.compile(r"round (?P<round>\d+): planned in (?P<plan>[\d.]+) s(?:, "
                           r"(?P<work>[\d.]+) s of it the executor's own work)?(?: \(the "
                           r"allocation re-solved in [\d.]+ s\))?; \d+ RunJobs answered, the "
                           r"last (?P<dispatch>[\d.]+) s after its plan(?:, (?P<start>-?[\d.]+) s "
                           r"after its start)?(?P<later>.*)$", re.M)
# the scheduler's line for calls refused as busy (``service.Refusals``; since session 26)
REFUSED_LINE = re.compile(STAMP + r" WARNING gavelsched\.daemon\.service: refused \d+ "
                          r"(?P<kind>\w+) calls as busy (?:in the last [\d.]+ s )?"
                          r"\((?P<refused>[^)]*)\); (?:its|the) \d+ (?:\w+ )?seats were held by "
                          r"(?P<held>.*)")
FAILED_LINE = re.compile(STAMP + r" WARNING gavelsched\.daemon\.servers: worker (?P<server>\d+) "
                         r".* missed heartbeats: failed")
# the iterator's line for a renewal it got no lease from (in the hollow processes' logs;
# ``gavelsched.iterator`` in the trees before ``gavelsched.lease_calls``)
RENEW_FAILED = re.compile(STAMP + r" WARNING gavelsched\.(?:iterator|lease_calls): RenewLease "
                          r"failed \((?P<code>\w+)\); (?P<why>.*)")
# ... and for a renewal still open at its lease's end, answered after the lease's checkpoint
LATE_ANSWER = re.compile(STAMP + r" WARNING gavelsched\.iterator: job \S+: renewal answered "
                         r"after its checkpoint at step \d+, (?P<after>[\d.]+) s after it was "
                         r"sent(?P<again> \(asked again\))?: (?P<what>extended|not extended"
                         r"|no answer)")
# a run's process that gave up on its InitJob (``lease_calls.INIT_RETRY_S`` of retries, or
# a refusal): the run ends, and its job is placed again; FAILED_PRECONDITION is a run the
# job's newer run had replaced already (stale), not a run lost
INIT_FAILED = re.compile(STAMP + r" ERROR gavelsched\.jobenv: job failed: InitJob to "
                         r"scheduler \S+ failed: (?P<code>\w+)")
# a launch the scheduler did not make: it waited for its job's last run to save, and less
# than its type's start-up was left in the round (``runs.RunTable``; ``batch.worth_launching``)
NOT_LAUNCHED = re.compile(STAMP + r" INFO gavelsched\.daemon\.runs: job \S+: [\d.]+s left in "
                          r"round (?P<round>\d+), less than its start-up(?: \([\d.]+s "
                          r"expected\))?; not launched")
# a fresh run's start-up, from its round's start (a refill's: from its GPUs' release)
STARTED_UP = re.compile(STAMP + r" INFO gavelsched\.daemon\.runs: job \S+: its run in round "
                        r"(?P<round>\d+) started up in (?P<took>[\d.]+)s \(from its round's "
                        r"start")
# the deadline renewals had before they waited after the checkpoint (the other calls' still)
OLD_RENEW_DEADLINE_S = 10.0
LATE_OUTCOMES = ("extended", "not extended", "no answer")
METHOD_COUNT = re.compile(r"(\w+) (\d+)")
LATER_PART = re.compile(r"then (\d+) ([^,]+), the last (-?[\d.]+) s after its start")
KEPT_PART = re.compile(r"(\d+) of last round's (\d+) tasks kept on their GPUs")


def stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def round_starts(log_path: Path) -> list[tuple[float, int, int, int, float, float]]:
    """(start, round, GPUs busy, GPUs alive, launch seconds, the executor's own work in
    them) of each round line of the scheduler's log."""
    return [(stamp(m[1]) - float(m["launch"] or 0), int(m[2]), int(m[4]), int(m[5]),
             float(m["launch"] or 0), float(m["work"] or "nan"))
            for m in ROUND_LINE.finditer(log_path.read_text(errors="replace"))]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


def cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


# (metric, label) pairs ``rpc_counts`` sums by: a series of several labels counts under each.
COUNTED = (("rpcs", "method"), ("renewals", "answer"), ("calls_refused", "method"),
           ("init_jobs", "answer"), ("init_jobs", "why"), ("launches_not_made", "reason"))
SERIES = re.compile(r'^gavelsched_(\w+)_total\{([^}]*)\} ([\d.e+]+)$', re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')
SOLVES = re.compile(r"^gavelsched_(policy_solve_seconds_sum|policy_solve_seconds_count|"
                    r"plans_waited_total) ([\d.e+]+)$", re.MULTILINE)


def solve_totals(text: str) -> dict[str, float]:
    """From a /metrics ``scrape``: the policy's solves so far (``..._count``), their seconds
    (``..._sum``) and the rounds planned on the allocation in force while one ran."""
    return {name: float(value) for name, value in SOLVES.findall(text)}


def scrape(url: str) -> str:
    """The scheduler's /metrics; "" when it does not answer in time (a scrape of every
    job's gauges is slow on a busy machine)."""
    try:
        return urllib.request.urlopen(url, timeout=300).read().decode()
    except OSError:
        return ""


def rpc_counts(text: str) -> tuple[dict[str, float], ...]:
    """``gavelsched_rpcs_total`` by method, ``gavelsched_renewals_total`` by answer,
    ``gavelsched_calls_refused_total`` by method and ``gavelsched_init_jobs_total`` by answer
    and by why the book did not answer (``COUNTED``), from a /metrics ``scrape`` (empty
    without one)."""
    if not text:
        return tuple({} for _ in COUNTED)
    counts: dict[tuple[str, str], dict[str, float]] = {key: {} for key in COUNTED}
    for name, labels, value in SERIES.findall(text):
        found = dict(LABEL.findall(labels))
        for metric, label in COUNTED:
            if metric == name and found.get(label):
                by = counts[metric, label]
                by[found[label]] = by.get(found[label], 0.0) + float(value)
    return tuple(counts[key] for key in COUNTED)


def start_probe(cluster: LocalCluster) -> subprocess.Popen:
    """``heartbeat_probe.py`` against the scheduler, in a process of its own (a thread of
    this one waited on its log reads), until ``stop_probe``."""
    token = ["--token-file", str(cluster.root / "token")] if cluster.token else []
    return subprocess.Popen([sys.executable, str(Path(__file__).with_name(
        "heartbeat_probe.py")), cluster.address, "86400", *token],
        stdout=subprocess.PIPE, text=True, env=subprocess_env())


def stop_probe(probe: subprocess.Popen) -> list[float]:
    """The probe's answers (seconds), once it has stopped."""
    probe.terminate()
    out, _ = probe.communicate(timeout=120)
    return json.loads(out or "[]")


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


@dataclass
class Row:
    gpus: int
    jobs: int
    submit_jobs_s: float = math.nan
    gaps: list[float] = field(default_factory=list)
    launch_s: list[float] = field(default_factory=list)  # a round's start to its line
    launch_work_s: list[float] = field(default_factory=list)   # the executor's CPU in them
    plan_s: list[float] = field(default_factory=list)
    plan_work_s: list[float] = field(default_factory=list)     # the executor's CPU in them
    dispatch: list[float] = field(default_factory=list)
    after_start: list[float] = field(default_factory=list)
    saved: list[int] = field(default_factory=list)      # per round: launches after a save
    refills: list[int] = field(default_factory=list)    # per round: refills
    later_last: list[float] = field(default_factory=list)   # the last of those, after start
    kept: list[tuple[int, int]] = field(default_factory=list)   # per round: (kept, of those)
    busy: str = ""
    heartbeat_s: list[float] = field(default_factory=list)   # the probe's answers
    failed: int = 0                  # servers failed for missed heartbeats, measured rounds
    cpu_share: float = math.nan
    hollow_cpu_share: float = math.nan
    peak_mib: float = math.nan
    status_s: list[float] = field(default_factory=list)
    active_s: list[float] = field(default_factory=list)
    cli_s: float = math.nan
    page_s: list[float] = field(default_factory=list)
    api_s: list[float] = field(default_factory=list)
    rpcs_s: float = math.nan
    top: str = ""
    solves: int = 0                  # re-solves settled in the measured rounds
    solve_s: float = math.nan        # ... their mean seconds
    waited: int = 0                  # rounds planned on the allocation in force meanwhile
    renewals: float = math.nan       # RenewLease calls served in the measured rounds
    answers: dict[str, float] = field(default_factory=dict)   # ... by who answered them
    init_answers: dict[str, float] = field(default_factory=dict)   # InitJobs, by who answered
    init_whys: dict[str, float] = field(default_factory=dict)   # the rest: why not the book
    renew_late: int = 0              # ... past the iterator's deadline (the hollow logs)
    renew_busy: int = 0              # ... refused as busy
    renew_unplanned: int = 0         # ... of them, after waiting out the plan (not seats)
    busy_why: bool = False           # the iterator logs why it was refused (a newer tree)
    # ... answered after the lease's checkpoint: extended, not extended, no answer
    late: dict[str, int] = field(default_factory=dict)
    late_saved: int = 0              # ... extended, answered after 10 s or asked again
    note: str = ""
    refused: dict[str, int] = field(default_factory=dict)   # calls refused as busy, by method
    # the scheduler's lines on calls refused as busy: the seats held at each, by kind and
    # method (summed over the lines), and how many lines of each kind
    held: dict[str, dict[str, int]] = field(default_factory=dict)
    refusal_lines: dict[str, int] = field(default_factory=dict)
    init_failed: dict[str, int] = field(default_factory=dict)   # runs that gave up on InitJob
    not_launched: dict[int, int] = field(default_factory=dict)  # launches not made, by round
    not_made: dict[str, int] = field(default_factory=dict)  # ... by reason (/metrics)
    startups_s: list[float] = field(default_factory=list)      # start-ups from round starts


def job_mix(jobs: int, single_gpu: bool = False) -> list[tuple[str, int, int]]:
    """(job type, scale factor, copies) whose copies add up to ``jobs``; with
    ``single_gpu`` (a policy that schedules only those), every job on one GPU."""
    scales = ((1, 1.0),) if single_gpu else SCALES
    groups = [(t, s, share / len(JOB_TYPES)) for s, share in scales for t in JOB_TYPES]
    counts = [int(jobs * w) for _, _, w in groups]
    counts[0] += jobs - sum(counts)
    return [(t, s, n) for (t, s, _), n in zip(groups, counts) if n > 0]


def submit_all(cluster: LocalCluster, jobs: int, total_steps: int,
               single_gpu: bool = False, entities: int = 0) -> float:
    """Submit ``jobs`` jobs as arrays (``job_mix``), each kind's copies shared evenly among
    ``entities`` teams (``team_specs``' names; 0: no entity); the seconds it took."""
    stub = pb_grpc.ClientToSchedulerStub(cluster.chan)
    teams = list(team_specs(entities)) or [""]
    began = time.perf_counter()
    for job_type, scale, copies in job_mix(jobs, single_gpu):
        for k, team in enumerate(teams):
            left = copies // len(teams) + (k < copies % len(teams))
            while left > 0:
                count = min(left, MAX_ARRAY)
                stub.Submit(pb.JobRequest(job_type=job_type, scale_factor=scale,
                                          total_steps=total_steps, workload="steps",
                                          count=count, entity=team), timeout=600)
                left -= count
    return time.perf_counter() - began


def hollow_procs(cluster: LocalCluster, args, servers: int, root: Path) -> list:
    """The hollow workers, in ``--hollow-procs`` processes (types dealt evenly overall)."""
    return [hollow_proc(cluster, args, i, n, types, root)
            for i, (n, types) in enumerate(hollow_racks(args, servers))]


def hollow_racks(args, servers: int) -> list[tuple[int, str]]:
    """(servers, ``--type`` list) of each hollow process: ``--hollow-procs`` of them (0: one
    per 32 servers), the types dealt in turn across them all."""
    procs = max(1, args.hollow_procs or math.ceil(servers / 32))
    sizes = [servers // procs + (i < servers % procs) for i in range(procs)]
    out, first = [], 0
    for n in sizes:
        out.append((n, ",".join(TYPES[(first + k) % len(TYPES)] for k in range(len(TYPES)))))
        first += n
    return out


def hollow_proc(cluster: LocalCluster, args, i: int, servers: int, types: str,
                root: Path) -> subprocess.Popen:
    """Hollow process ``i``: ``servers`` hollow workers of ``types`` in turn (its log and
    work directory ``root/hollow{i}``, kept when it is started again)."""
    with open(root / f"hollow{i}.log", "ab") as log:
        return subprocess.Popen(
            [*(["chrt", "--idle", "0"] if args.hollow_idle else
               ["nice", "-n", str(args.hollow_nice)]),
             sys.executable, "-m", "gavelsched", "worker", "--hollow", str(servers), "--type",
             types, "--gpus", str(args.gpus_per_server), "--scheduler", cluster.address,
             "--work-dir", str(root / f"hollow{i}"), "--grace",
             str(args.round_seconds), "--emulation-speed", str(args.emulation_speed)],
            stdout=log, stderr=subprocess.STDOUT, env=subprocess_env())


def tear_down(cluster: LocalCluster, hollow: list, keep: bool) -> None:
    """Stop the hollow processes and the cluster; remove its directory unless ``keep``."""
    for proc in hollow:
        kill_tree(proc.pid)
        proc.wait()
    cluster.stop()
    if keep:
        print(f"  kept {cluster.root}", file=sys.stderr)
    else:
        shutil.rmtree(cluster.root, ignore_errors=True)


@contextlib.contextmanager
def pinned(pin: bool):
    """With ``pin``: what this thread starts inside (the scheduler) runs on CPU 0 alone, and
    what it starts after (the hollow workers, the probe, the clients) on the other CPUs."""
    if not pin:
        yield
        return
    others = os.sched_getaffinity(0) - {0}
    if not others:
        raise SystemExit("--pin needs a CPU besides CPU 0")
    os.sched_setaffinity(0, {0})
    try:
        yield
    finally:
        os.sched_setaffinity(0, others)


def scale_cluster(gpus: int, args, prefix: str = "gavel-scale-", **config) -> LocalCluster:
    """The scheduler's cluster (not started) in a fresh directory (in /dev/shm where there
    is one), its metrics and dashboard on free loopback ports, as ``args`` say; ``config``:
    more of its cluster.yaml."""
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=shm if shm.is_dir() else None))
    if args.entities:
        config = {"entities": team_specs(args.entities, args.entity_cap), **config}
    return LocalCluster(root, policy=args.policy, round_seconds=args.round_seconds,
                        heartbeat_seconds=args.heartbeat_seconds,
                        config={"expected_workers": gpus, "eta": args.eta,
                                "policy_options": args.policy_options,
                                "metrics_listen": f"127.0.0.1:{free_port()}",
                                "dashboard_listen": f"127.0.0.1:{free_port()}",
                                "gil_switch_ms": args.gil_switch_ms, **config})


def measure(gpus: int, jobs: int, args) -> Row:
    row = Row(gpus, jobs)
    servers = gpus // args.gpus_per_server
    cluster = scale_cluster(gpus, args)
    root, metrics_port = cluster.root, cluster.metrics_port
    dash_port = int(cluster.dashboard_address.rpartition(":")[2])
    log_path = root / "scheduler.log"
    hollow = []
    try:
        with pinned(args.pin):
            cluster.start_scheduler()
        hollow = hollow_procs(cluster, args, servers, root)
        wait_until(lambda: cluster.alive_workers() == servers or any(
            p.poll() is not None for p in hollow), 600, f"{servers} hollow workers")
        if any(p.poll() is not None for p in hollow):
            raise SystemExit(f"a hollow worker process exited; see {root}/hollow*.log")
        pid = cluster.scheduler.pid
        row.submit_jobs_s = jobs / submit_all(cluster, jobs, args.total_steps,
                                              policy_class(args.policy).TRAITS.single_gpu,
                                              args.entities)
        print(f"  {gpus} GPUs, {jobs} jobs: submitted at {row.submit_jobs_s:.0f} jobs/s; "
              f"waiting for {args.warmup} warm-up rounds", file=sys.stderr, flush=True)

        def starts():
            return round_starts(log_path)

        first = len(starts()) + args.warmup
        wait_until(lambda: len(starts()) >= first, 20 * args.round_seconds + 600,
                   "the warm-up rounds")
        cpu0, hollow0, t0 = cpu_s([pid]), cpu_s([p.pid for p in hollow]), time.monotonic()
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        scraped = scrape(metrics)
        rpcs0, answers0, refused0, inits0, whys0, skips0 = rpc_counts(scraped)
        solves0 = solve_totals(scraped)
        probe = start_probe(cluster)
        base = first - 1             # the index of the round start measuring begins at
        client = pb_grpc.ClientToSchedulerStub(cluster.chan)
        page = f"http://127.0.0.1:{dash_port}/"
        for k in range(1, args.rounds + 1):
            if k == args.rounds:     # in the last round only: they load the scheduler
                time.sleep(min(3.0, args.round_seconds / 4))      # past its launches
                for _ in range(3):
                    row.status_s.append(timed(lambda: client.Status(pb.StatusRequest(),
                                                                    timeout=120)))
                    row.active_s.append(timed(lambda: client.Status(
                        pb.StatusRequest(active=True), timeout=120)))
                    row.page_s.append(timed(lambda: urllib.request.urlopen(
                        page, timeout=120).read()))
                    row.api_s.append(timed(lambda: urllib.request.urlopen(
                        page + "api/status", timeout=120).read()))
            wait_until(lambda: len(starts()) > base + k, 20 * args.round_seconds + 600,
                       f"the end of round {k} measured")
            print(f"  round {k} of {args.rounds}", file=sys.stderr, flush=True)
        wall = time.monotonic() - t0
        row.heartbeat_s = stop_probe(probe)
        scraped = scrape(metrics)
        rpcs1, answers1, refused1, inits1, whys1, skips1 = rpc_counts(scraped)
        solved = {k: v - solves0.get(k, 0.0) for k, v in solve_totals(scraped).items()}
        row.solves = int(solved.get("policy_solve_seconds_count", 0))
        row.solve_s = (solved.get("policy_solve_seconds_sum", math.nan) / row.solves
                       if row.solves else math.nan)
        row.waited = int(solved.get("plans_waited_total", 0))
        row.cpu_share = (cpu_s([pid]) - cpu0) / wall
        row.hollow_cpu_share = (cpu_s([p.pid for p in hollow]) - hollow0) / wall
        row.peak_mib = peak_rss_mib(pid)
        row.cli_s = timed(lambda: subprocess.run(
            [sys.executable, "-m", "gavelsched", "status", "--json", "--scheduler",
             cluster.address], check=True, stdout=subprocess.DEVNULL, env=subprocess_env()))
        if rpcs0 and rpcs1:
            rates = {m: (rpcs1.get(m, 0) - rpcs0.get(m, 0)) / wall for m in rpcs1}
            row.rpcs_s = sum(rates.values())
            row.renewals = rates.get("RenewLease", 0.0) * wall
            row.answers = {a: n - answers0.get(a, 0) for a, n in answers1.items()}
            row.init_answers = {a: n - inits0.get(a, 0) for a, n in inits1.items()}
            row.init_whys = {w: n - whys0.get(w, 0) for w, n in whys1.items()}
            row.not_made = {r: int(n - skips0.get(r, 0)) for r, n in skips1.items()}
            row.refused = {m: int(n - refused0.get(m, 0)) for m, n in refused1.items()}
            row.top = ", ".join(f"{m} {r:.0f}" for m, r in
                                sorted(rates.items(), key=lambda kv: -kv[1])[:3])
        else:
            row.top = "/metrics did not answer in 300 s"
        text = log_path.read_text(errors="replace")
        measured = starts()[base:base + args.rounds + 1]
        row.gaps = [b[0] - a[0] for a, b in itertools.pairwise(measured)]
        row.launch_s = [m[4] for m in measured[1:]]
        row.launch_work_s = [m[5] for m in measured[1:]]
        rounds = {m[1] for m in measured}
        lines = [m for m in DISPATCH_LINE.finditer(text) if int(m["round"]) in rounds]
        row.plan_s = [float(m["plan"]) for m in lines]
        row.plan_work_s = [float(m["work"] or "nan") for m in lines]
        row.dispatch = [float(m["dispatch"]) for m in lines]
        row.after_start = [float(m["start"]) for m in lines if m["start"]]
        for m in lines:
            later = {kind: (int(n), float(last))
                     for n, kind, last in LATER_PART.findall(m["later"])}
            row.saved.append(later.get(LATER[AFTER_SAVE], (0, 0.0))[0])
            row.refills.append(later.get(LATER[REFILL], (0, 0.0))[0])
            row.later_last += [last for _, last in later.values()]
            row.kept += [(int(k), int(n)) for k, n in KEPT_PART.findall(m["later"])]
        _, _, busy, total, _, _ = measured[-1]
        row.busy = f"{busy} of {total}"
        row.not_launched = dict(Counter(int(m["round"]) for m in NOT_LAUNCHED.finditer(text)
                                        if int(m["round"]) in rounds))
        row.startups_s = [float(m["took"]) for m in STARTED_UP.finditer(text)
                          if int(m["round"]) in rounds]
        row.failed = sum(measured[0][0] <= stamp(m[1]) <= measured[-1][0]
                         for m in FAILED_LINE.finditer(text))
        for m in REFUSED_LINE.finditer(text):
            if measured[0][0] <= stamp(m[1]) <= measured[-1][0]:
                kind = m["kind"]
                row.refusal_lines[kind] = row.refusal_lines.get(kind, 0) + 1
                held = row.held.setdefault(kind, {})
                for method, n in METHOD_COUNT.findall(m["held"]):
                    held[method] = held.get(method, 0) + int(n)
        for path in root.glob("hollow*.log"):
            log = path.read_text(errors="replace")
            for m in RENEW_FAILED.finditer(log):
                if measured[0][0] <= stamp(m[1]) <= measured[-1][0]:
                    row.renew_late += m["code"] == "DEADLINE_EXCEEDED"
                    row.renew_busy += "too busy" in m["why"]
                    row.renew_unplanned += NOT_PLANNED in m["why"]
                    row.busy_why |= "too busy to take it (" in m["why"]
            for m in INIT_FAILED.finditer(log):
                if measured[0][0] <= stamp(m[1]) <= measured[-1][0]:
                    row.init_failed[m["code"]] = row.init_failed.get(m["code"], 0) + 1
            for m in LATE_ANSWER.finditer(log):
                if measured[0][0] <= stamp(m[1]) <= measured[-1][0]:
                    row.late[m["what"]] = row.late.get(m["what"], 0) + 1
                    row.late_saved += m["what"] == "extended" and bool(
                        m["again"] or float(m["after"]) > OLD_RENEW_DEADLINE_S)
    finally:
        tear_down(cluster, hollow, args.keep)
    return row


def policy_options(pairs: list[str]) -> dict:
    """``--policy-option KEY=VALUE`` flags as cluster.yaml's ``policy_options`` (a value
    read as YAML: a number stays a number)."""
    if any("=" not in pair for pair in pairs):
        raise SystemExit(f"--policy-option: KEY=VALUE, got {pairs}")
    return {key: yaml.safe_load(value) for key, value in (p.split("=", 1) for p in pairs)}


def show(values: list[float], unit: str = "s", digits: int = 2) -> str:
    if not values:
        return "-"
    return f"{statistics.mean(values):.{digits}f} / {max(values):.{digits}f} {unit}"


def heartbeats(row: Row) -> str:
    """The probe's heartbeat answers (median / p99 / worst) and the servers failed."""
    if not row.heartbeat_s:
        return "-"
    q = statistics.quantiles(row.heartbeat_s, n=100, method="inclusive") \
        if len(row.heartbeat_s) > 1 else row.heartbeat_s * 99
    return (f"{statistics.median(row.heartbeat_s):.2f} / {q[98]:.2f} / "
            f"{max(row.heartbeat_s):.2f} s; {row.failed}")


def later(row: Row) -> str:
    """The round's later RunJobs: launches after a save / refills a round (mean), and the
    last one's answer after the round's start (worst)."""
    if not row.saved:
        return "-"
    last = f", {max(row.later_last):.2f} s" if row.later_last else ""
    return f"{statistics.mean(row.saved):,.0f} / {statistics.mean(row.refills):,.0f}{last}"


def kept(row: Row) -> str:
    """Last round's tasks the plan kept on their GPUs (a lease extension; the rest were
    preempted or ended), mean a round: the churn, which the policy decides and which sets
    most of the round's work (launches, saves, reports) for the scheduler and the fleet."""
    if not row.kept:
        return "-"
    return (f"{statistics.mean(k for k, _ in row.kept):,.0f} of "
            f"{statistics.mean(n for _, n in row.kept):,.0f}")


def fleet_arguments(parser: argparse.ArgumentParser, *, gpus: str, rounds: int,
                    rounds_help: str, hollow_procs: int, hollow_procs_help: str) -> None:
    """The flags of the cluster, its hollow fleet and its jobs (here and in
    ``scale_faults.py``, with their own defaults for the four that differ)."""
    parser.add_argument("--gpus", default=gpus,
                        help="cluster sizes (comma list), multiples of --gpus-per-server")
    parser.add_argument("--jobs", default="20000,50000", help="queue sizes (comma list)")
    parser.add_argument("--rounds", type=int, default=rounds, help=rounds_help)
    parser.add_argument("--warmup", type=int, default=2,
                        help="rounds after the submission before measuring")
    parser.add_argument("--round-seconds", type=float, default=30.0)
    parser.add_argument("--heartbeat-seconds", type=float, default=2.0)
    parser.add_argument("--gpus-per-server", type=int, default=8)
    parser.add_argument("--hollow-procs", type=int, default=hollow_procs,
                        help=hollow_procs_help)
    parser.add_argument("--hollow-nice", type=int, default=0,
                        help="the hollow processes' niceness (on a machine of one's own, 10 "
                             "puts the scheduler first, as if the workers were elsewhere; on "
                             "a shared one, others' processes then starve their heartbeats)")
    parser.add_argument("--hollow-idle", action="store_true",
                        help="run the hollow processes at SCHED_IDLE (chrt --idle 0): a CPU "
                             "runs them only when the scheduler and the clients leave it "
                             "idle. Niceness weighs each thread, so hundreds of the fleet's "
                             "runnable threads still outweigh the scheduler's few; this does "
                             "not (the fleet's own calls then come late instead)")
    parser.add_argument("--emulation-speed", type=float, default=0.05,
                        help="the hollow jobs' time dilation (docs/runtime.md, Emulation)")
    parser.add_argument("--total-steps", type=int, default=10**9)
    parser.add_argument("--policy", default="max_min_fairness_perf")
    parser.add_argument("--entities", type=int, default=0, metavar="N",
                        help="the jobs belong to N teams (policy_scale.py's: weights 1-3, "
                             "fairness and FIFO inside in turn), as the hierarchical "
                             "policies (max_min_fairness_water_filling*) read them")
    parser.add_argument("--entity-cap", type=int, metavar="GPUS",
                        help="with --entities, each team's cap in GPUs (default: none)")
    parser.add_argument("--policy-option", action="append", default=[], metavar="KEY=VALUE",
                        help="the scheduler's policy_options (repeatable), e.g. partitions=4: "
                             "POP's sub-problems for a re-solve over 100,000 jobs")
    parser.add_argument("--gil-switch-ms", type=float, default=GIL_SWITCH_MS,
                        help="the scheduler's GIL switch interval (cluster.yaml's "
                             "gil_switch_ms; Python's default is 5)")
    parser.add_argument("--eta", action="store_true", help="keep the ETA forecasts on")
    parser.add_argument("--pin", action="store_true",
                        help="the scheduler alone on CPU 0, the hollow workers and every "
                             "client on the others: the scheduler measured without the "
                             "fleet's threads on its core, as on a machine of its own")
    parser.add_argument("--keep", action="store_true", help="keep the logs and state")


def fleet_sizes(parser: argparse.ArgumentParser, args) -> list[tuple[int, int]]:
    """The (GPUs, jobs) pairs ``args`` name, checked (``parser.error`` on a bad one); sets
    ``args.policy_options``."""
    sizes = [int(g) for g in args.gpus.split(",")]
    queues = [int(j) for j in args.jobs.split(",")]
    if any(g <= 0 or g % args.gpus_per_server for g in sizes):
        parser.error(f"--gpus {args.gpus}: each a positive multiple of --gpus-per-server "
                     f"({args.gpus_per_server})")
    if any(j <= 0 for j in queues) or args.rounds < 1 or args.warmup < 0:
        parser.error("--jobs, --rounds must be positive and --warmup not negative")
    if args.entities < 0 or (args.entity_cap is not None and args.entity_cap < 1):
        parser.error("--entities: 0 or more teams; --entity-cap: 1 GPU or more")
    args.policy_options = policy_options(args.policy_option)
    return list(itertools.product(sizes, queues))


def unplanned(row: Row) -> str:
    """Of the renewals refused as busy, those that waited out the plan, in brackets (none
    when the iterator did not say why: a tree before session 26)."""
    return f" ({row.renew_unplanned:,})" if row.busy_why else ""


def booked(row: Row) -> str:
    """The share of the renewals answered that the book answered (``-``: no such metric,
    a scheduler before it)."""
    answered = sum(row.answers.values())
    return f"{row.answers.get('book', 0) / answered:.0%}" if answered else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    fleet_arguments(parser, gpus="512,1024,2048", rounds=6, rounds_help="rounds measured per size",
                    hollow_procs=0, hollow_procs_help="processes the hollow workers share (0: "
                    "one per 32 servers; one of 128 servers fell behind its heartbeats at "
                    "1,024 GPUs)")
    args = parser.parse_args()
    pairs = fleet_sizes(parser, args)
    # a SIGTERM ends the run through the ``finally`` that stops the daemons it started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM"))
    options = "".join(f" {k}={v}" for k, v in args.policy_options.items())
    print(f"machine: {describe(load=False)}; load average {os.getloadavg()[0]:.1f} at the start; "
          f"{args.policy}{options}, {args.round_seconds:g} s rounds, {args.rounds} rounds measured "
          f"after {args.warmup}, heartbeats {args.heartbeat_seconds:g} s, servers of "
          f"{args.gpus_per_server} GPUs, hollow jobs at {args.emulation_speed:g}x ("
          f"{'SCHED_IDLE' if args.hollow_idle else f'nice {args.hollow_nice}'}), "
          f"ETAs {'on' if args.eta else 'off'}, GIL switch "
          f"{args.gil_switch_ms:g} ms"
          + ("; the scheduler pinned to CPU 0, the rest to the others" if args.pin else ""))
    print()
    print("| GPUs | jobs | submit | round gap mean / worst | launches mean / worst (the "
          "executor's own work) | plan mean / worst (the executor's own work) | plan to last "
          "RunJob mean / worst | round start to last RunJob | later RunJobs: after a save / "
          "refills, last after start | tasks kept of last round's | GPUs busy | heartbeat "
          "answer median / p99 / worst; servers failed | scheduler CPU | "
          "peak RSS | Status all / active | status --json | dashboard / api | RPCs/s (top 3) "
          "| renewals past their deadline / refused as busy (of them, not yet planned), of "
          "all; answered from the book | answered after the lease's checkpoint: extended "
          "(of them, after 10 s or asked again) / not extended / no answer | "
          "hollow CPU | re-solves settled (mean s); rounds planned while one ran |")
    print("|---" * 22 + "|", flush=True)
    rows = []
    for gpus, jobs in pairs:
        try:
            r = measure(gpus, jobs, args)      # each row as soon as it is measured
        except TimeoutError as err:            # (it stopped keeping its rounds)
            print(f"| {gpus:,} | {jobs:,} | {err} |", flush=True)
            continue
        rows.append(r)
        print(f"| {r.gpus:,} | {r.jobs:,} | {r.submit_jobs_s:,.0f} jobs/s | {show(r.gaps)} | "
              f"{show(r.launch_s)} ({show(r.launch_work_s)}) | "
              f"{show(r.plan_s)} ({show(r.plan_work_s)}) | {show(r.dispatch)} | "
              f"{show(r.after_start)} | "
              f"{later(r)} | {kept(r)} | {r.busy} | {heartbeats(r)} | "
              f"{r.cpu_share:.0%} | {r.peak_mib:,.0f} MiB | "
              f"{statistics.median(r.status_s):.2f} / {statistics.median(r.active_s):.2f} s | "
              f"{r.cli_s:.1f} s | {statistics.median(r.page_s):.2f} / "
              f"{statistics.median(r.api_s):.2f} s | {r.rpcs_s:,.0f} ({r.top}) | "
              f"{r.renew_late:,} / {r.renew_busy:,}{unplanned(r)} of {r.renewals:,.0f}; "
              f"{booked(r)} | "
              f"{r.late.get(LATE_OUTCOMES[0], 0):,} ({r.late_saved:,}) / "
              f"{' / '.join(f'{r.late.get(w, 0):,}' for w in LATE_OUTCOMES[1:])} | "
              f"{r.hollow_cpu_share:.0%} | {settled(r)}; {r.waited} |",
              flush=True)
    print()
    for r in rows:
        print(refusals(r))
        print(init_failures(r))
        print(launches_not_made(r))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


def settled(row: Row) -> str:
    """The re-solves settled in the measured rounds, with their mean time if any did."""
    return f"{row.solves} ({row.solve_s:.2f} s)" if row.solves else "0"


def refusals(row: Row) -> str:
    """The calls the scheduler refused as busy in the measured rounds, by method (its
    metric), and which calls held the seats then: the mean over its log's lines, each a
    sample taken at a refusal."""
    refused = {m: n for m, n in row.refused.items() if n}
    line = (f"{row.gpus:,} GPUs x {row.jobs:,} jobs: calls refused as busy: "
            f"{sum(refused.values()):,}")
    if refused:
        line += " (" + ", ".join(f"{m} {n:,}" for m, n in _most_first(refused)) + ")"
    for kind, lines in sorted(row.refusal_lines.items()):
        line += (f"; {kind} seats held then (the mean of {lines} log line"
                 f"{'s' * (lines != 1)}): " + ", ".join(
                     f"{m} {n / lines:.0f}" for m, n in _most_first(row.held[kind])))
    return line


def init_failures(row: Row) -> str:
    """The runs whose process gave up on its InitJob in the measured rounds, by the last
    answer's code (the hollow processes' logs): each one's round is lost and its job placed
    again, unless the code is FAILED_PRECONDITION (a run already replaced)."""
    lost = {c: n for c, n in row.init_failed.items() if c != "FAILED_PRECONDITION"}
    line = (f"{row.gpus:,} GPUs x {row.jobs:,} jobs: runs that gave up on InitJob: "
            f"{sum(lost.values()):,}")
    if lost:
        line += " (" + ", ".join(f"{c} {n:,}" for c, n in _most_first(lost)) + ")"
    stale = row.init_failed.get("FAILED_PRECONDITION", 0)
    line += f"; {stale:,} more were stale (already replaced)" if stale else ""
    book, executor = row.init_answers.get("book", 0), row.init_answers.get("executor", 0)
    if book + executor:
        line += (f"; of {book + executor:,.0f} InitJobs answered, "
                 f"{book / (book + executor):.0%} from the book of launches")
    refused = {a: n for a, n in row.init_answers.items()
               if n and a not in ("book", "executor")}
    if refused:      # (stale, unknown, ask_again: gavelsched_init_jobs_total)
        line += "; refused: " + ", ".join(f"{a} {n:,.0f}" for a, n in _most_first(refused))
    whys = {w: n for w, n in row.init_whys.items() if n}
    if whys:         # (launches.Launches.why_not)
        line += ("; not in the book because: "
                 + ", ".join(f"{w} {n:,.0f}" for w, n in _most_first(whys)))
    return line


def launches_not_made(row: Row) -> str:
    """The launches the scheduler did not make in the measured rounds, by round: each had
    waited for its job's last run to save, and less than its type's start-up was left in
    the round, so its GPUs stay idle to the round's end (what the GPUs busy column misses);
    the scheduler's own count of them, with the placements not launched for other reasons
    (``gavelsched_launches_not_made_total``); and the fresh runs' start-ups, from their round's start, that the expected start-up is
    the mean of."""
    line = (f"{row.gpus:,} GPUs x {row.jobs:,} jobs: launches not made (less than their "
            f"start-up left in the round): {sum(row.not_launched.values()):,}")
    if row.not_launched:
        line += " (" + ", ".join(f"round {r}: {n:,}"
                                 for r, n in sorted(row.not_launched.items())) + ")"
    if row.not_made:
        line += ("; the scheduler's gavelsched_launches_not_made_total over the measured "
                 "rounds: " + ", ".join(f"{r} {n:,}" for r, n in sorted(row.not_made.items())))
    if row.startups_s:
        line += (f"; fresh runs' start-ups from their round's start: mean "
                 f"{statistics.mean(row.startups_s):.1f} s, worst {max(row.startups_s):.1f} s "
                 f"({len(row.startups_s):,} runs)")
    return line


def _most_first(counts: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(counts.items(), key=lambda mn: -mn[1])


if __name__ == "__main__":
    sys.exit(main())
