"""What the scheduler sends for one planned micro-task (thesis §5.5-5.6): one RunJob per
server hosting its GPUs, and the leases that bound a run.

Pure functions over the core's ``MicroTask``, the cluster view and the daemon's job rows.
Step counts are absolute (the job's count since submission): ``Lease.max_steps`` is the
count to stop at, ``Lease.max_seconds`` the time since the process started.

Leases are *round-aligned*: every lease ends at the wall-clock end of its round, so a fresh
run's start-up eats into its own round (``startup_lease``) and no run holds its GPUs into
the next round. This is what the simulator models as preemption overhead (a task that
starts on new workers makes throughput x (round - overhead) steps; thesis §5.6-5.7). One
exception keeps jobs progressing when start-up is as long as a round (short rounds on a
busy machine): a fresh run always gets ``MIN_LEASE_FRACTION`` of a round after its
start-up, past its round's end if need be.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Mapping
from pathlib import Path

from ..core import MicroTask
from ..core.batch import MIN_LEASE_FRACTION  # noqa: F401 - the lease floor, stated once
from ..mechanism import ClusterView
from ..rpc import pb
from .mixed import mixed_env
from .store import JobRow

# free_port's draws: from here to the kernel's ephemeral range (above Ray's worker ports,
# 10002-19999 by default, which a Ray node beside a scheduler would refuse to share)
PORTS_FROM = 20000
_DRAW = random.SystemRandom()   # not the global generator, which a test may have seeded


def new_lease(round_index: int, steps_done: int, lease_steps: int, total_steps: int,
              seconds_left: float) -> pb.Lease:
    """A fresh run's lease: this round's steps on top of the durable count, and the time
    left in the round (the run is launched now, so its clock starts about now)."""
    return pb.Lease(max_steps=min(total_steps, steps_done + max(1, int(lease_steps))),
                    max_seconds=seconds_left, round=round_index, extended=False)


def startup_lease(lease: pb.Lease, steps_done: int, steps_per_s: float, seconds_left: float,
                  max_seconds: float) -> pb.Lease:
    """The lease a run gets once its process has started up (its first ``InitJob``): the
    steps it can make in the ``seconds_left`` until its lease's round ends at its expected
    ``steps_per_s`` (never more than planned, at least one step past its durable count),
    and ``max_seconds`` since its process started, which end at that same moment."""
    budget = steps_done + max(1, int(steps_per_s * max(0.0, seconds_left)))
    return pb.Lease(max_steps=min(int(lease.max_steps), budget), max_seconds=max_seconds,
                    round=lease.round, extended=lease.extended)


def extended_lease(old: pb.Lease, round_index: int, lease_steps: int, total_steps: int,
                   max_seconds: float) -> pb.Lease:
    """The next round on the same workers: the old lease plus this round's steps, and the
    time bound moved to the end of the next round (``max_seconds`` since the run began)."""
    return pb.Lease(max_steps=min(total_steps, old.max_steps + max(1, int(lease_steps))),
                    max_seconds=max_seconds, round=round_index, extended=True)


def rebased_lease(round_index: int, ends: float, steps_per_s: float, total_steps: int,
                  steps: int, seconds: float, arrived: float) -> pb.Lease:
    """A run found going on after a restart and kept (``orphans``), at its first renewal:
    it had made ``steps`` with its process ``seconds`` old when the renewal came
    (``arrived``, monotonic); the lease runs to its round's end (``ends``) at its planned
    rate, ``max_seconds`` counted from its process's start (``arrived - seconds``)."""
    left = max(0.0, ends - arrived)
    return pb.Lease(max_steps=min(total_steps, steps + max(1, int(steps_per_s * left))),
                    max_seconds=ends - (arrived - max(0.0, seconds)), round=round_index,
                    extended=True)


def stop_lease(steps: int, seconds: float = 0.0) -> pb.Lease:
    """A lease that is already over: stop at the count reached (and checkpoint)."""
    return pb.Lease(max_steps=steps, max_seconds=seconds, round=-1, extended=False)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on this machine now (the rendezvous port of a multi-GPU job; on a
    remote master it is only likely free). It is drawn below the kernel's ephemeral range:
    a port that ``bind(0)`` hands out is also where the outgoing connections of every
    process take their local ports, and one of them took such a port between this probe
    and the job's bind (a mixed job failed with EADDRINUSE)."""
    bind_host = host if host in ("127.0.0.1", "localhost") else ""
    low = _ephemeral_low()
    for _ in range(64):
        port = _DRAW.randrange(PORTS_FROM, low) if low > PORTS_FROM + 1024 else 0
        with socket.socket() as s:
            try:
                s.bind((bind_host, port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    with socket.socket() as s:
        s.bind((bind_host, 0))
        return int(s.getsockname()[1])


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port of the kernel's ephemeral range (Linux's default where unreadable)."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def host_of(address: str) -> str:
    return address.rpartition(":")[0].strip("[]")


def run_requests(task: MicroTask, member: int, job: JobRow, lease: pb.Lease,
                 view: ClusterView, addresses: Mapping[int, str], *, round_index: int,
                 scheduler_address: str, checkpoint_dir: str, generation: int,
                 master_port: int = 0, job_env: Mapping[str, str] | None = None,
                 partner: JobRow | None = None) -> dict[int, pb.RunJobRequest]:
    """RunJob requests of member ``member`` of ``task``, by server id: local GPU indices,
    the first global rank on each server, torchrun-style rendezvous for multi-GPU jobs.
    Every request carries the run's ``generation`` (``fences``). A mixed-capable job's
    requests all carry its virtual-node layout in ``env``, dealt
    over the task's ranks by its split plan (``mixed.mixed_env``); ranks follow
    ``task.workers``, the plan's order, and each server launches only its own. ``job_env``:
    what else the job's processes get (its token, its array index: ``jobenv.scheduler_env``).
    ``partner``: the task's other member (a co-located pair, named in each request)."""
    by_server: dict[int, list[int]] = {}
    for w in task.workers:
        by_server.setdefault(view.server_of[w], []).append(w)
    local = {s.id: s.workers for s in view.servers if s.id in by_server}
    world = len(task.workers)
    first = next(iter(by_server))
    master_addr = host_of(addresses[first]) if world > 1 else ""
    if world > 1 and not master_port:
        master_port = free_port(master_addr)
    env = dict(job_env or {})
    if job.spec.mixed:
        env.update(mixed_env(job, task.worker_types or (task.worker_type,) * world, task.split))
    out, rank = {}, 0
    for server_id, workers in by_server.items():
        out[server_id] = pb.RunJobRequest(
            job_id=job.id, round=round_index, job_type=job.spec.job_type, workload=job.workload,
            command=job.command, total_steps=job.spec.total_steps, steps_done=job.steps_done,
            lease=lease, gpus=[local[server_id].index(w) for w in workers], rank=rank,
            world_size=world, master_addr=master_addr,
            master_port=master_port if world > 1 else 0,
            scheduler_address=scheduler_address,
            expected_steps_per_s=float(task.throughputs[member]),
            checkpoint_dir=checkpoint_dir, env=env, generation=generation,
            colocated_job_id=partner.id if partner else "",
            colocated_job_type=partner.spec.job_type if partner else "")
        rank += len(workers)
    return out
