"""A RunJob for a job whose run is being launched (its process not yet known to the
launcher). Seen on a slow machine: the round's RunJob came while the monitor thread
launched the same run; both threads launched it, and the monitor thread died on its
bookkeeping (a ``KeyError``), so the worker started nothing again and the scheduler waited
for ever. A real worker daemon against a fake scheduler over real gRPC; real processes."""

from __future__ import annotations

import threading
import time

from .test_worker import cluster, run_job  # noqa: F401, F811 - cluster: the fixture

LAUNCH_S = 1.0     # each launch takes this long here, so that a RunJob lands inside one


def test_a_run_job_during_its_own_launch_extends_the_run(cluster, monkeypatch):  # noqa: F811
    sched, worker = cluster
    launch, launches = worker.launcher.launch, []

    def slow(spec):
        launches.append(spec.round)
        time.sleep(LAUNCH_S)
        return launch(spec)

    monkeypatch.setattr(worker.launcher, "launch", slow)
    stub = sched.worker_stub(worker.address)
    first = run_job("a", command="sleep 600", max_seconds=30.0)
    again = run_job("a", command="sleep 600", max_seconds=60.0)
    again.round = again.lease.round = 1
    sent = threading.Thread(target=stub.RunJob, args=(first,))   # its launch takes 1 s
    sent.start()
    sched.wait_for(lambda: launches)
    assert stub.RunJob(again).ok                    # while the first is being launched
    sent.join()
    sched.wait_for(lambda: worker.launcher.running_jobs() == ["a"])
    time.sleep(2 * LAUNCH_S)                        # (a second launch would be under way)
    assert launches == [0], launches                # launched once
    assert all(t.is_alive() for t in worker._threads)   # the monitor thread too
    sched.wait_for(lambda: worker.launcher.running()[0][2] == 1)   # its lease: round 1
