"""Each entity's share of the GPUs against its weight (issue #28, thesis §5.4.3), on real
daemons and in the simulator, for 2 entities (weights 2:1) and 4 entities (4:3:2:1).

Why: ``cluster.yaml``'s ``entities`` promise each backlogged team GPU time in proportion
to its weight under hierarchical water filling (``max_min_fairness_water_filling_perf``),
and the planner interleaves the teams round by round (``gavelsched/mechanism/shares.py``)
where a share is not a whole number of GPUs. This measures how close a real cluster comes,
and whether the simulator says the same.

Live: one real scheduler subprocess and one real worker daemon with emulated v100 GPUs:
3 for 2 entities (shares of 2 and 1 GPUs), 6 for 4 entities (2.4, 1.8, 1.2 and 0.6 GPUs:
rounds must take turns to give them) and 10 for 4 (4, 3, 2 and 1: whole GPUs each round);
rounds of ``--round-seconds``; each entity has as many 1-GPU jobs of the ``steps``
workload (real processes stepping GavelIterator) as there are GPUs, far longer than the
run, so every entity is backlogged throughout. From the first round in which a job ran,
``--rounds`` rounds are measured (e.g. 10 and 30: one run as long as the longest); then
every job is cancelled and the GPU-seconds each entity held are read from the usage rows
the scheduler metered (one per ended run), each run clipped to the window of the first N
rounds. Simulated: the same jobs (same entities, weights, GPUs, policy and the rules the
daemon published in its ``Status``) in ``simulator.simulate``, each entity's GPU-seconds
per round from the timeline, over the same first N rounds.

A share is an entity's GPU-seconds over all entities'; expected is its weight over the sum
of weights; error is (share - expected) / expected. ``busy`` is the GPU-seconds held over
GPUs x window (the live cluster loses some to start-ups and round changes).

    python benchmarks/entity_shares.py              # 10 and 30 rounds of 2 s (~4 min)
    python benchmarks/entity_shares.py --quick      # 6 rounds, a smoke run (~1 min)
    python benchmarks/entity_shares.py --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

from policy_solve import header  # noqa: E402  (the machine line)

from gavelsched.core.rules import DaemonRules  # noqa: E402
from gavelsched.daemon.local import LocalCluster, wait_until  # noqa: E402
from gavelsched.rpc import pb, pb_grpc  # noqa: E402
from gavelsched.rpc.security import new_token  # noqa: E402

POLICY = "max_min_fairness_water_filling_perf"
JOB_TYPE = "A3C"           # 24 steps/s on v100 (catalog table): light on the CPU
WORKER_TYPE = "v100"
TWO = {"team-a": 2.0, "team-b": 1.0}
FOUR = {"team-a": 4.0, "team-b": 3.0, "team-c": 2.0, "team-d": 1.0}
# (weights by entity, emulated GPUs): shares of 2 / 1 GPUs; 2.4 / 1.8 / 1.2 / 0.6 (not
# whole GPUs: the rounds must take turns); 4 / 3 / 2 / 1 (whole GPUs)
SETUPS = ((TWO, 3), (FOUR, 6), (FOUR, 10))


@dataclass(frozen=True)
class Row:
    """One entity over the first ``rounds`` rounds of one setup."""

    entities: int
    gpus: int
    rounds: int
    entity: str
    weight: float
    expected: float
    live: float
    simulated: float
    live_busy: float          # of the whole window's GPU-seconds, all entities together
    simulated_busy: float


def clipped_gpu_s(db: Path, start_unix: float, end_unix: float) -> dict[str, float]:
    """GPU-seconds each entity held within [start, end): every usage row clipped to it."""
    out: dict[str, float] = {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        for entity, gpus, start, end in con.execute(
                "SELECT entity, gpus, start_unix, end_unix FROM usage"):
            held = max(0.0, min(end, end_unix) - max(start, start_unix)) * gpus
            out[entity] = out.get(entity, 0.0) + held
    return out


def live(weights: dict[str, float], gpus: int, rounds: int, round_s: float, root: Path
         ) -> tuple[dict[int, dict[str, float]], float, DaemonRules]:
    """GPU-seconds per entity over the first N rounds (N up to ``rounds``) on a real
    scheduler and worker, the window start (Unix), and the rules the daemon published."""
    cluster = LocalCluster(root, policy=POLICY, round_seconds=round_s, heartbeat_seconds=0.3,
                           token=new_token(),
                           config={"entities": {e: {"weight": w} for e, w in weights.items()},
                                   "expected_workers": gpus, "min_resolve_interval_s": 0.0})
    try:
        cluster.start_scheduler()
        cluster.start_worker(WORKER_TYPE, gpus)
        wait_until(lambda: cluster.alive_workers() == 1, 60, "the worker")
        ids = [cluster.submit(pb.JobRequest(job_type=JOB_TYPE, total_steps=10**7,
                                            workload="steps", entity=entity))
               for _ in range(gpus) for entity in weights]

        def first_running():
            status = cluster.status()
            return status if any(j.state == "running" for j in status.jobs) else None

        first = wait_until(first_running, 60, "a job to run")
        start = first.epoch_unix + first.round_ends_s - first.round_seconds
        wait_until(lambda: cluster.status().round >= first.round + rounds,
                   3 * round_s * rounds + 60, f"{rounds} rounds")
        rules = DaemonRules.of_status(cluster.status())
        stub = pb_grpc.ClientToSchedulerStub(cluster.chan)
        for job_id in ids:
            stub.Cancel(pb.CancelRequest(job_id=job_id), timeout=30)
        wait_until(lambda: all(w.runs == 0 for w in cluster.status().workers), 60,
                   "the runs to end")
    finally:
        cluster.stop()
    db = root / "state" / "gavelsched.db"
    return ({n: clipped_gpu_s(db, start, start + n * round_s) for n in range(1, rounds + 1)},
            start, rules)


def simulated(weights: dict[str, float], gpus: int, rounds: int, round_s: float,
              rules: DaemonRules) -> list[dict[str, float]]:
    """GPU-seconds per entity in each of the first ``rounds`` rounds of the same jobs in the
    simulator, under the daemon's rules."""
    from policies import Entity, get_policy
    from simulator import simulate
    from simulator.twin import sim_config
    from traces import TraceJob, default_table

    table = default_table()
    # long enough that no job finishes within the rounds measured: all stay backlogged
    steps = int(2 * rounds * round_s * table.get(WORKER_TYPE, JOB_TYPE)) + 1
    jobs = [TraceJob(job_type=JOB_TYPE, scale_factor=1, total_steps=steps, arrival_s=0.0,
                     entity=entity) for _ in range(gpus) for entity in weights]
    policy = get_policy(POLICY)
    result = simulate(jobs, table, {WORKER_TYPE: gpus}, policy,
                      core_config=rules.core_config(policy, table, (WORKER_TYPE,)),
                      sim=sim_config(rules, record_timeline=True),
                      entities={e: Entity(e, weight=w) for e, w in weights.items()})
    timeline = result.timeline.entity_gpu_s
    if len(timeline) < rounds:
        raise RuntimeError(f"the simulation ran {len(timeline)} rounds, fewer than {rounds}")
    return timeline[:rounds]


def rows_of(weights: dict[str, float], gpus: int, measured: list[int], round_s: float,
            got: dict[int, dict[str, float]], sim: list[dict[str, float]]) -> list[Row]:
    total_w = sum(weights.values())
    rows = []
    for n in measured:
        sim_n = {e: sum(r.get(e, 0.0) for r in sim[:n]) for e in weights}
        live_total, sim_total = sum(got[n].values()), sum(sim_n.values())
        window = gpus * n * round_s
        for entity, weight in weights.items():
            rows.append(Row(len(weights), gpus, n, entity, weight, weight / total_w,
                            got[n].get(entity, 0.0) / live_total,
                            sim_n[entity] / sim_total, live_total / window,
                            sim_total / window))
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| entities (GPUs) | rounds | entity | weight | share expected | share live | "
             "share simulated | error live | error simulated | busy live / simulated |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.entities} ({r.gpus}) | {r.rounds} | {r.entity} | {r.weight:g} | "
            f"{r.expected:.3f} | {r.live:.3f} | {r.simulated:.3f} | "
            f"{(r.live - r.expected) / r.expected:+.1%} | "
            f"{(r.simulated - r.expected) / r.expected:+.1%} | "
            f"{r.live_busy:.0%} / {r.simulated_busy:.0%} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[10, 30],
                        help="windows measured, in rounds from the first (default 10 30)")
    parser.add_argument("--round-seconds", type=float, default=2.0)
    parser.add_argument("--quick", action="store_true", help="6 rounds only (a smoke run)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write every row here")
    args = parser.parse_args()
    measured = [6] if args.quick else sorted(set(args.rounds))
    if min(measured) < 1:
        parser.error("--rounds: each must be >= 1")
    machine = header()
    rows, walls = [], []
    for weights, gpus in SETUPS:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="gavel-shares-") as tmp:
            got, _, rules = live(weights, gpus, max(measured), args.round_seconds, Path(tmp))
        sim = simulated(weights, gpus, max(measured), args.round_seconds, rules)
        rows += rows_of(weights, gpus, measured, args.round_seconds, got, sim)
        walls.append(time.perf_counter() - t0)
    print(f"{machine}; policy {POLICY}, {JOB_TYPE} `steps` jobs (one per GPU per entity), "
          f"emulated {WORKER_TYPE} GPUs, {args.round_seconds:g} s rounds; "
          f"wall {' + '.join(f'{w:.0f}' for w in walls)} s")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
