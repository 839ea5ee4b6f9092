"""A loopback cluster for the daemon tests: ``gavelsched.daemon.local.LocalCluster`` (the
real scheduler and real worker daemons as subprocesses) with short rounds, fast heartbeat
checks, and jobs of the light ``steps`` workload (real processes stepping GavelIterator)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gavelsched.daemon.local import (LOOPBACK_ANY, LocalCluster, free_port, subprocess_env,
                                    wait_until)
from gavelsched.rpc import pb

ENV = subprocess_env()
JOB_TYPE = "A3C"           # 11 / 13 / 24 steps/s on k80 / p100 / v100 (catalog table)

__all__ = ["ENV", "JOB_TYPE", "LOOPBACK_ANY", "Cluster", "free_port", "running", "wait_until"]


class Cluster(LocalCluster):
    def __init__(self, root: Path, *, token: str | None = None, round_seconds: float = 2.0,
                 heartbeat_seconds: float = 0.3, policy: str = "max_min_fairness_perf",
                 extra: dict | None = None) -> None:
        # No ETA forecasts unless a test asks (``extra={"eta": True}``): a forecast process
        # per scheduler slowed the whole suite on two cores; the ETA tests turn it on.
        super().__init__(root, policy=policy, round_seconds=round_seconds,
                         heartbeat_seconds=heartbeat_seconds, token=token,
                         config={"min_resolve_interval_s": 0.0, "eta": False,
                                 **(extra or {})})

    def submit(self, total_steps: int, job_type: str = JOB_TYPE, **kw) -> str:  # type: ignore[override]
        return super().submit(pb.JobRequest(
            job_type=job_type, scale_factor=kw.pop("scale_factor", 1), total_steps=total_steps,
            workload=kw.pop("workload", "steps"), **kw))

    def stop(self) -> None:
        super().stop(grace_s=0.5)


@contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster's scheduler started; on exit, its in-test workers (``cluster.fakes``)
    and processes stopped."""
    cluster.fakes = []
    try:
        cluster.start_scheduler()
        yield cluster
    finally:
        for fake in cluster.fakes:
            fake.stop()
        cluster.stop()
