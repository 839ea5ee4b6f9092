"""``eta`` in the cluster YAML (issue #29; ``gavelsched/daemon/config.py``): by default the
scheduler computes ETAs (its forecast process, ``python -m simulator.forecast``, runs and
``Status`` carries them); ``eta: false`` starts no forecast process and ``Status`` carries
none, on a live loopback cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cluster import Cluster, running, wait_until
from .fake_worker import FakeWorker


def forecast_children(pid: int) -> list[str]:
    """The command lines of ``pid``'s children that are the forecast process."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += (task / "children").read_text().split()
        except OSError:
            pass
    lines = []
    for child in children:
        try:
            lines.append((Path("/proc") / child / "cmdline").read_bytes().replace(b"\0", b" ")
                         .decode())
        except OSError:
            pass
    return [line for line in lines if "simulator.forecast" in line]


@pytest.mark.parametrize("eta", [None, False], ids=["default", "eta-false"])
def test_eta_in_the_cluster_yaml(tmp_path, eta):
    extra = {"eta": eta}      # (None: the key is null, read as unset: the default)
    with running(Cluster(tmp_path, round_seconds=1.0, extra=extra)) as cluster:
        cluster.fakes.append(FakeWorker(cluster.address, "v100", speed=0.5))
        wait_until(lambda: cluster.alive_workers() == 1, 60, "a worker")
        cluster.submit(10**6)
        cluster.submit(10**6)
        wait_until(lambda: any(j.state == "running" for j in cluster.jobs().values()), 60,
                   "a job to run")
        if eta is None:
            def predicted():      # (a picture taken between the two arrivals has one job)
                reply = cluster.status()
                return reply.eta_computed_s >= 0 and all(
                    j.eta_finish_s > reply.eta_computed_s for j in reply.jobs) and reply
            assert wait_until(predicted, 60, "the scheduler's ETAs").eta_error == ""
            assert forecast_children(cluster.scheduler.pid)
            return
        # three round starts after a job ran: each would have offered a forecast
        first = cluster.status().round
        wait_until(lambda: cluster.status().round >= first + 3, 60, "three rounds")
        reply = cluster.status()
        assert reply.eta_computed_s < 0 and reply.eta_error == ""
        assert all(j.eta_finish_s < 0 and j.eta_start_s < 0 for j in reply.jobs)
        assert forecast_children(cluster.scheduler.pid) == []
