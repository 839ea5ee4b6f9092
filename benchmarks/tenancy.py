"""What teams and users cost the scheduler (issue #28): the round's solve and plan with
entities, the authorisation check of every call, and ``status --mine`` at 10,000 jobs.

Three parts (``--part``), each a ratio measured in one run against the same without the
feature, since absolute times on a shared 2-core machine are noisy:

- ``solve``: ``SchedulerCore`` driven as the daemon drives it (``DaemonRules``: responsive
  re-solves, 360 s rounds), under ``max_min_fairness_water_filling_perf``, with 2,048
  1-GPU jobs of the catalog's 26 job types on 512 GPUs (128 v100, 192 p100, 192 k80, 4 to
  a server), the jobs spread over 8 entities of weights 1..8 (fairness inside; also FIFO
  inside) against the same jobs with no entity. Twice: with the catalog's steps/s (what
  the daemon plans with when jobs arrive: the jobs of a type are alike, and water filling
  solves for each kind of job once) and with each job's own (its type's within +-10%, as
  once the daemon has measured them, thesis §5.3.3: 2,048 distinct jobs). Each variant
  runs in a fresh process
  (``--child``): the one-time import of the core and the policies, submitting the jobs,
  round 1 (``start_round``: admit, solve, plan), round 2 after one more job arrived
  (re-solve, plan), round 3 with no change (plan only), and the process's peak RSS
  (``ru_maxrss``). A round's solve is the policy's ``Allocation.solve_s``; the rest is
  admitting, the policy's ``Problem``, installing the allocation and the plan. Each
  variant runs ``--repeat`` times, the variants in turn; medians.
- ``auth``: ``Identities.identify`` per call (``timeit``, ns, best of 5) for a user's token
  (a users file of 10 users), the daemon token, a job token, a wrong token, and the single
  token of a cluster without a users file. Then, end to end, ``Status`` over gRPC (one
  client thread, loopback, an empty cluster: the fixed cost of a call) to two real
  schedulers started side by side, one with only the single token and one with a users
  file: calls per second, and the scheduler's CPU time per call (``psutil``; the machine's
  load stretches it less). On the second, a user's token, the daemon token (checked as
  cheaply as the single token: what is left is the two processes' own difference) and a
  wrong token (refused). ``--repeat`` blocks of 2 s each, taken in turn.
- ``mine``: a real scheduler with a users file of 10 users and one worker (1 emulated
  GPU); each user submits 1,000 ``steps`` jobs as one array (``Client.submit_array``):
  10,000 jobs. Once a round has planned them, one user runs ``gavelsched status --mine``
  and ``gavelsched status`` (every job), with and without ``--json``, ``--repeat`` times
  each in a fresh process under GNU ``time`` (wall, CPU, bytes printed, its peak RSS; as
  ``benchmarks/status_scale.py`` measures them).

    python benchmarks/tenancy.py                        # all three (~3 min)
    python benchmarks/tenancy.py --part solve --repeat 5
    python benchmarks/tenancy.py --quick                # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from types import SimpleNamespace

import psutil

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

POLICY = "max_min_fairness_water_filling_perf"
CLUSTER = {"v100": 128, "p100": 192, "k80": 192}    # 512 GPUs
ROUND_S = 360.0
VARIANTS = ("none", "fairness", "fifo")             # no entities; 8 entities, inner policy
RATES = ("catalog", "measured")                     # the table's priors; each job's own
USERS = 10


# ---- solve ---------------------------------------------------------------------------------
def child(variant: str, rates: str, jobs: int, entities: int) -> dict:
    """Rounds 1-3 of a fresh core in this (fresh) process (module docstring)."""
    start = time.perf_counter()
    import numpy as np

    from gavelsched.core import JobSpec, SchedulerCore
    from gavelsched.core.driver import RoundDriver
    from gavelsched.core.rules import DaemonRules
    from gavelsched.mechanism import ClusterView
    from policies import Entity, get_policy
    from traces import default_table
    imported = time.perf_counter() - start

    table = default_table()
    policy = get_policy(POLICY)
    view = ClusterView.build(CLUSTER, 4)
    config = DaemonRules(ROUND_S).core_config(policy, table, view.worker_types, seed=0,
                                              on_solve_error="keep")
    named = {} if variant == "none" else {
        f"e{k}": Entity(f"e{k}", weight=float(k + 1), policy=variant) for k in range(entities)}
    core = SchedulerCore(policy, view, table, config, entities=named)
    rng = np.random.default_rng(0)
    kinds = table.job_types
    steps = (10 ** rng.uniform(4, 6, jobs + 1)).astype(int)
    who = rng.integers(entities, size=jobs + 1)

    noise = rng.uniform(0.9, 1.1, (jobs + 1, len(view.worker_types)))

    def spec(i: int) -> JobSpec:
        return JobSpec(id=str(i), job_type=kinds[i % len(kinds)], scale_factor=1,
                       total_steps=int(steps[i]), entity=f"e{who[i]}" if named else None)

    def own(i: int) -> dict[str, float] | None:
        """``measured``: the job's own steps/s, its type's prior within +-10%."""
        if rates == "catalog":
            return None
        kind = kinds[i % len(kinds)]
        return {t: table.get(t, kind) * noise[i, k] for k, t in enumerate(view.worker_types)}

    t0 = time.perf_counter()
    for i in range(jobs):
        core.submit(spec(i), 0.0, throughputs=own(i))
    submitted = time.perf_counter() - t0
    rounds = []
    driver = RoundDriver(core)          # the round recipe both executors run
    plan = None
    for r in range(3):
        now = r * ROUND_S
        if r == 1:
            core.submit(spec(jobs), now, throughputs=own(jobs))   # an arrival: a re-solve
        if plan is not None:            # the last round ends (not timed)
            driver.end(now, np.full(len(plan.batch), ROUND_S))
        t0 = time.perf_counter()
        plan = driver.plan(now).round
        wall = time.perf_counter() - t0
        solve = plan.resolved.solve_s if plan.resolved is not None else 0.0
        rounds.append({"wall_s": wall, "solve_s": solve, "plan_s": wall - solve,
                       "resolved": plan.resolved is not None, "tasks": len(plan.batch)})
    return {"import_s": imported, "submit_s": submitted, "rounds": rounds,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def fresh(variant: str, rates: str, jobs: int, entities: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", variant, rates, str(jobs),
                          str(entities)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def solve_part(jobs: int, entities: int, repeat: int) -> None:
    cases = [(rates, variant) for rates in RATES for variant in VARIANTS]
    runs: dict[tuple[str, str], list[dict]] = {case: [] for case in cases}
    for _ in range(repeat):
        for case in cases:                        # in turn: the machine's load hits each
            runs[case].append(fresh(case[1], case[0], jobs, entities))

    def med(case, pick) -> float:
        return statistics.median(pick(r) for r in runs[case])

    def rounds12(r: dict) -> float:
        return r["rounds"][0]["wall_s"] + r["rounds"][1]["wall_s"]

    print(f"\n## solve: {POLICY}, {jobs:,} jobs, {sum(CLUSTER.values())} GPUs "
          f"({', '.join(f'{n} {t}' for t, n in CLUSTER.items())}), {ROUND_S:g} s rounds; "
          f"median of {repeat} fresh processes each")
    print("| steps/s | entities | round 1: solve s | round 1: the rest s | "
          "round 2 (an arrival): solve s | round 2: the rest s | round 3 (no change) s | "
          "rounds 1+2 vs none | peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rates, variant in cases:
        got = runs[rates, variant]
        if not all(r["rounds"][0]["resolved"] and r["rounds"][1]["resolved"]
                   and not r["rounds"][2]["resolved"] for r in got):
            print(f"| {rates} | {variant} | (unexpected: rounds 1 and 2 must re-solve, "
                  "round 3 not) |")
        name = "none" if variant == "none" else f"{entities}, {variant} inside"
        ratio = med((rates, variant), rounds12) / med((rates, "none"), rounds12)
        cells = [med((rates, variant), lambda r, k=k, part=part: r["rounds"][k][part])
                 for k, part in ((0, "solve_s"), (0, "plan_s"), (1, "solve_s"), (1, "plan_s"),
                                 (2, "plan_s"))]
        print(f"| {rates} | {name} | " + " | ".join(f"{c:.3f}" for c in cells) +
              f" | {ratio:.1f}x | {max(r['rss_mib'] for r in got):.0f} MiB |")
    every = [r for case in cases for r in runs[case]]
    print(f"| one-time: import of the core and the policies | | "
          f"{statistics.median(r['import_s'] for r in every):.2f} s | | | | | | |")
    print(f"| one-time: submitting the {jobs:,} jobs to the core | | "
          f"{statistics.median(r['submit_s'] for r in every):.2f} s | | | | | | |")


# ---- auth ----------------------------------------------------------------------------------
def identify_ns() -> list[tuple[str, float]]:
    """ns per ``Identities.identify`` call, best of 5, for each kind of token."""
    from gavelsched.rpc.identity import Identities, UserEntry, job_token, token_hash
    from gavelsched.rpc.security import new_token

    daemon = new_token()
    tokens = [new_token() for _ in range(USERS)]
    users = [UserEntry(f"u{i}", "user", frozenset(), token_hash(t)) for i, t in
             enumerate(tokens)]
    with_file, single = Identities(daemon, users), Identities(daemon, None)
    cases = [("users file: a user's token", with_file, tokens[3]),
             ("users file: the daemon token", with_file, daemon),
             ("users file: a job token", with_file, job_token(daemon, "1234_5")),
             ("users file: a wrong token", with_file, new_token()),
             ("no users file: the single token", single, daemon),
             ("no users file: a wrong token", single, new_token())]
    out = []
    for what, ids, token in cases:
        assert (ids.identify(token) is None) == ("wrong" in what), what
        number = 20_000
        best = min(timeit.repeat(lambda: ids.identify(token), number=number, repeat=5))
        out.append((what, best / number * 1e9))
    return out


def calls_per_s(stub, request, block_s: float, server: psutil.Process) -> tuple[float, float]:
    """Status calls in ``block_s`` seconds, one after another (refusals count as calls):
    (calls/s, the scheduler's CPU microseconds per call)."""
    import grpc
    cpu0 = sum(server.cpu_times()[:2])
    calls, end = 0, time.perf_counter() + block_s
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        try:
            stub.Status(request, timeout=30)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.UNAUTHENTICATED:
                raise
        calls += 1
    wall = time.perf_counter() - t0
    return calls / wall, (sum(server.cpu_times()[:2]) - cpu0) / calls * 1e6


def auth_part(repeat: int, block_s: float) -> None:
    from gavelsched.daemon.local import LocalCluster, wait_until
    from gavelsched.daemon.users import add_user
    from gavelsched.rpc import pb, pb_grpc
    from gavelsched.rpc.security import channel, new_token

    print("\n## auth: `Identities.identify`, ns per call (best of 5 x 20,000)")
    print("| token | ns per call |")
    print("|---|---|")
    for what, ns in identify_ns():
        print(f"| {what} | {ns:,.0f} |")

    with tempfile.TemporaryDirectory(prefix="gavel-auth-") as tmp:
        root = Path(tmp)
        users_file = root / "b" / "users.yaml"
        users_file.parent.mkdir()
        tokens = [add_user(users_file, f"u{i}", "user", []) for i in range(USERS)]
        single = LocalCluster(root / "a", token=new_token(), round_seconds=ROUND_S)
        filed = LocalCluster(root / "b", token=new_token(), round_seconds=ROUND_S,
                             config={"users_file": str(users_file)})
        try:
            single.start_scheduler()
            filed.start_scheduler()
            wait_until(lambda: single.healthy() and filed.healthy(), 60, "the schedulers")
            cases = [("no users file: the single token", single, single.token),
                     ("users file: a user's token", filed, tokens[3]),
                     ("users file: the daemon token", filed, filed.token),
                     ("users file: a wrong token (refused)", filed, new_token())]
            channels = [channel(c.address, token=token) for _, c, token in cases]
            calls = [(what, pb_grpc.ClientToSchedulerStub(chan), psutil.Process(c.scheduler.pid))
                     for (what, c, _), chan in zip(cases, channels)]
            request = pb.StatusRequest()
            got: dict[str, list[tuple[float, float]]] = {what: [] for what, _, _ in calls}
            for what, stub, server in calls:
                calls_per_s(stub, request, 0.5, server)          # warm up
            for _ in range(repeat):
                for what, stub, server in calls:
                    got[what].append(calls_per_s(stub, request, block_s, server))
            for chan in channels:
                chan.close()
        finally:
            single.stop()
            filed.stop()
    base = [statistics.median(x[k] for x in got[cases[0][0]]) for k in (0, 1)]
    print(f"\n## auth: `Status` over gRPC (one client thread, an empty cluster; "
          f"median of {repeat} blocks of {block_s:g} s, taken in turn)")
    print("| scheduler and token | calls/s | min - max | vs the single token | "
          "scheduler CPU per call | vs the single token |")
    print("|---|---|---|---|---|---|")
    for what, runs in got.items():
        rate = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| {what} | {rate:,.0f} | {min(r[0] for r in runs):,.0f} - "
              f"{max(r[0] for r in runs):,.0f} | {rate / base[0]:.3f}x | {cpu:,.0f} µs | "
              f"{cpu / base[1]:.3f}x |")


# ---- mine ----------------------------------------------------------------------------------
def mine_part(jobs_each: int, repeat: int, round_s: float) -> None:
    from daemon_load import rss_mib
    from status_scale import run as run_cli

    from gavelsched.client.api import connect
    from gavelsched.client.request import JobRequest
    from gavelsched.daemon.local import LocalCluster, wait_until
    from gavelsched.daemon.users import add_user
    from gavelsched.rpc.security import new_token, write_token

    with tempfile.TemporaryDirectory(prefix="gavel-mine-") as tmp:
        root = Path(tmp)
        users_file = root / "users.yaml"
        tokens = [add_user(users_file, f"u{i}", "user", []) for i in range(USERS)]
        me = root / "u0.token"
        write_token(me, tokens[0])
        cluster = LocalCluster(root, round_seconds=round_s, heartbeat_seconds=2.0,
                               token=new_token(),
                               config={"users_file": str(users_file), "expected_workers": 1,
                                       "min_resolve_interval_s": round_s})
        try:
            cluster.start_scheduler()
            cluster.start_worker("v100", 1, emulation_speed=0.05, grace_s=round_s)
            wait_until(lambda: cluster.alive_workers() == 1, 120, "the worker")
            job = JobRequest(job_type="A3C", total_steps=10**7, workload="steps")
            t0 = time.perf_counter()
            for token in tokens:
                with connect(cluster.address, token=token) as client:
                    client.submit_array(job, jobs_each)
            submit_s = time.perf_counter() - t0
            planned = cluster.status().round
            wait_until(lambda: cluster.status().round > planned, 3 * round_s + 60,
                       "a round to plan the queue")
            me_cluster = SimpleNamespace(address=cluster.address, token_file=me)
            rows = []
            for argv in (["status", "--mine"], ["status"], ["status", "--mine", "--json"],
                         ["status", "--json"]):
                runs = [run_cli(me_cluster, argv) for _ in range(repeat)]
                walls = [r[0] for r in runs]
                rows.append((" ".join(argv), runs[-1][2], statistics.median(walls), max(walls),
                             statistics.median(r[1] for r in runs), max(r[3] for r in runs)))
            rss, hwm = rss_mib(cluster.scheduler.pid)
        finally:
            cluster.stop()
    total = USERS * jobs_each
    print(f"\n## mine: {total:,} jobs ({USERS} users x {jobs_each:,}, one array each, "
          f"submitted in {submit_s:.1f} s), one worker, {round_s:g} s rounds; user u0 runs "
          f"each command {repeat} times, each in a fresh process")
    print("| command (as u0) | printed | wall s, median | wall s, worst | CPU s, median | "
          "peak RSS of the command |")
    print("|---|---|---|---|---|---|")
    for what, printed, median, worst, cpu, peak in rows:
        shown = f"{printed:,} B" if printed < 10240 else f"{printed / 1024:,.0f} KiB"
        print(f"| `gavelsched {what}` | {shown} | {median:.2f} | {worst:.2f} | {cpu:.2f} | "
              f"{peak:.0f} MiB |")
    print(f"| scheduler RSS, now / peak | {rss:.0f} / {hwm:.0f} MiB | | | | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("solve", "auth", "mine"), action="append",
                        help="the parts to run (repeatable; default all)")
    parser.add_argument("--jobs", type=int, default=2048, help="jobs of the solve part")
    parser.add_argument("--entities", type=int, default=8, help="entities of the solve part")
    parser.add_argument("--jobs-per-user", type=int, default=1000,
                        help="jobs each of the 10 users submits (the mine part)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--round-seconds", type=float, default=20.0,
                        help="rounds of the mine part's scheduler")
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, rates, jobs, entities = args.child
        print(json.dumps(child(variant, rates, int(jobs), int(entities))))
        return 0
    if args.quick:
        args.jobs, args.jobs_per_user, args.repeat = 256, 50, 2
    from policy_solve import header

    print(header())
    parts = args.part or ["solve", "auth", "mine"]
    if "solve" in parts:
        solve_part(args.jobs, args.entities, args.repeat)
    if "auth" in parts:
        auth_part(args.repeat, 0.5 if args.quick else 2.0)
    if "mine" in parts:
        mine_part(args.jobs_per_user, args.repeat, args.round_seconds)
    print(f"\n# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
