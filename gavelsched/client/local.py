"""A scheduler and emulated typed workers on loopback, for ``gavelsched local-cluster``
(the physical demo, thesis §5.6-5.7), the API's examples, tests and benchmarks: the demo's
cluster (``make_cluster``, ``start_daemons``) and its jobs (``job_mix``,
``elastic_gpt_job``).

Emulation (docs/runtime.md): each worker paces its jobs to the throughput table's steps/s
for its type times the emulation speed; the scheduler gets the table scaled by the same
speed as its priors, so what it expects is what the workers run. The daemons share a fresh
random token (``<root>/token``, mode 0600): no other local user can reach them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Protocol

from .errors import InputError

__all__ = ["ELASTIC_JOB_TYPE", "MIX", "ROUNDS_OF_WORK", "DemoOptions", "elastic_gpt_job",
           "job_mix", "make_cluster", "start_daemons"]

# Job types of the mix, one per reference workload family (traces/workloads.py).
MIX = ("ResNet-18 (batch size 16)", "LM (batch size 5)", "Transformer (batch size 16)",
       "Recommendation (batch size 512)")
ROUNDS_OF_WORK = (1.5, 2.5, 3.5)
ELASTIC_JOB_TYPE = "Transformer (batch size 16)"   # paced by the table's rates at 2, 4, 8


class DemoOptions(Protocol):
    """What the demo's cluster is made with (``local-cluster``'s flags have these names)."""

    policy: str
    round_seconds: float
    emulation_speed: float


def job_mix(n: int, fastest_rate, round_seconds: float, speed: float,
            workload: str | None, job_type: str | None = None, mixed: int = 0) -> list:
    """The demo's ``pb.JobRequest``s: the MIX job types in turn (or ``job_type``), each
    ``ROUNDS_OF_WORK`` rounds of work on its fastest type (``fastest_rate(job_type)``
    steps/s, times ``speed``); the first ``mixed`` of them mixed-capable."""
    from ..rpc import pb
    out = []
    for i in range(n):
        kind = job_type or MIX[i % len(MIX)]
        rounds = ROUNDS_OF_WORK[i % len(ROUNDS_OF_WORK)]
        steps = max(1, int(rounds * round_seconds * fastest_rate(kind) * speed))
        out.append(pb.JobRequest(job_type=kind, scale_factor=1, total_steps=steps,
                                 workload=workload or "", mixed=i < mixed))
    return out


def elastic_gpt_job(workers: dict[str, int], rate, round_seconds: float, speed: float):
    """The ``--elastic-gpt`` job (issue #10; Varuna §4): ``workers.workloads.gpt`` with
    one replica (a pipeline of P = GPUs stages, so a morph changes the layer-to-stage
    mapping) on the largest type's n GPUs, elastic down to n // 2, with 3 rounds of work
    at n GPUs (``rate(type, job_type, n)`` steps/s). Raises ``InputError`` when no type
    has 2 GPUs."""
    from ..rpc import pb

    worker_type, n = max(workers.items(), key=lambda kv: (kv[1], kv[0]))
    if n < 2:
        raise InputError(f"--elastic-gpt needs a worker type with >= 2 GPUs, got "
                         f"{','.join(f'{t}={k}' for t, k in workers.items())}")
    steps = max(1, int(3 * round_seconds * rate(worker_type, ELASTIC_JOB_TYPE, n) * speed))
    return pb.JobRequest(job_type=ELASTIC_JOB_TYPE, scale_factor=n, min_scale_factor=n // 2,
                         total_steps=steps,
                         command=f"{sys.executable} -m workers.workloads.gpt --replicas 1")


def make_cluster(options: DemoOptions, root: Path, workers: dict[str, int], table,
                 *, dashboard: bool = False) -> Any:
    """The demo's ``LocalCluster`` in ``root`` (not started; metrics on ``metrics_port``): the
    priors ``table`` scaled to the emulation, re-solving at any round boundary after a
    change, and a fresh random token (``root/token``, mode 0600) that its scheduler,
    workers and client use, so that no other local user can reach them even on loopback.
    ``gavelsched -v`` (or ``-q``) on the command moves the daemons' logging as well.
    ``dashboard`` (or ``options.dashboard``): serve the dashboard on a free port."""
    from traces.throughputs import dump_table

    from ..daemon.local import LOOPBACK_ANY, LocalCluster
    from ..rpc.security import new_token

    dashboard = dashboard or getattr(options, "dashboard", False)
    listen = {"dashboard_listen": LOOPBACK_ANY} if dashboard else {}
    root.mkdir(parents=True, exist_ok=True)
    priors = root / "throughputs.json"
    dump_table(table.scaled(options.emulation_speed), priors)
    # Re-solve at any round boundary after a change (the daemon's default waits Gavel's
    # 1920 s scaled to the round, too long for a demo of a few minutes).
    cluster = LocalCluster(root, policy=options.policy, round_seconds=options.round_seconds,
                           token=new_token(), verbosity=_verbosity(options),
                           config={"expected_workers": sum(workers.values()),
                                   "min_resolve_interval_s": options.round_seconds,
                                   "metrics_listen": LOOPBACK_ANY,
                                   "throughputs": str(priors), **listen})
    return cluster


def _verbosity(options) -> int:
    """``gavelsched -v``/``-q`` given to the command, passed on to its daemons."""
    return getattr(options, "verbose", 0) - getattr(options, "quiet", 0)


def start_daemons(cluster, options: DemoOptions, workers: dict[str, int]) -> None:
    """Start ``cluster``'s scheduler and one emulated worker per type; return once every
    worker is alive."""
    from ..daemon.local import wait_until

    cluster.start_scheduler()
    for worker_type, gpus in workers.items():
        cluster.start_worker(worker_type, gpus, emulation_speed=options.emulation_speed,
                             grace_s=max(10.0, options.round_seconds))
    wait_until(lambda: cluster.alive_workers() == len(workers), 120, "the workers")
