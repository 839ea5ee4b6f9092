"""A scheduler's start with its history: how long a restart takes, and what memory the
scheduler holds, when its store has N jobs that ended long ago and none that is active.

The store keeps every job (``history JOB``, ``usage`` and the logs read it). A cluster that
runs 50,000 jobs a day has a million after three weeks. While a scheduler starts, no call is
answered: a job's process whose ``InitJob`` or renewal waits past its 30 s gives up
(``EXIT_RUN_LOST``). Each N is measured twice in one run: with ``ended_jobs_kept_s: 0``
(every job in the daemon's memory, as before issue #30's fix: read and checked at the
door at each start, docs/runtime.md) and with the default (a day: a job that ended longer
ago stays in the store alone, ``gavelsched/daemon/retired.py``).

For each N: a store of N done jobs (the ``steps`` workload, one GPU, each with the server
that ran it and its usage row; written through ``Store.add_jobs``, then marked done in one
SQL statement, all ended at least two days before the daemon's clock), ``gavelsched
scheduler`` in a fresh process on it, the seconds until it says it listens, its peak RSS
then (``VmHWM``), and one ``gavelsched status`` and ``gavelsched history`` as a user runs
them (fresh processes, wall time; ``history`` lists every job in memory).

    python benchmarks/history_restart.py                      # 0, 100k, 200k, 500k (~4 min)
    python benchmarks/history_restart.py --jobs 20000         # smoke
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]       # its neighbours; the project

from daemon_load import rss_mib  # (/proc RSS)
from policy_solve import header  # (the machine line)

from gavelsched.core import JobSpec
from gavelsched.daemon.config import DAY_S
from gavelsched.daemon.local import free_port, subprocess_env
from gavelsched.daemon.meta import EPOCH_UNIX
from gavelsched.daemon.store import JobRow, Store

BATCH = 10_000


def ended_store(state: Path, jobs: int) -> None:
    """A store of ``jobs`` jobs, each done long ago on server 0, with its run's usage row;
    the daemon's clock starts two days after the last ended."""
    store = Store(state)
    for first in range(0, jobs, BATCH):
        store.add_jobs([JobRow(JobSpec(id=str(i), job_type="A3C", scale_factor=1,
                                       total_steps=100), workload="steps", arrival_s=float(i))
                        for i in range(first, min(jobs, first + BATCH))])
    store.set_meta({EPOCH_UNIX.key(): time.time() - jobs - 100 - 2 * DAY_S})
    store.close()
    db = sqlite3.connect(state / "gavelsched.db")
    db.execute("UPDATE jobs SET state='done', steps_done=100, started_s=arrival_s+1, "
               "completion_s=arrival_s+100, ended_s=arrival_s+100")
    db.execute("INSERT INTO hosts(job_id, server_id) SELECT id, 0 FROM jobs")
    db.execute("INSERT INTO usage(job_id, generation, user, entity, worker_type, gpus, "
               "start_unix, end_unix, price, share) SELECT id, 1, 'alice', '', 'v100', 1, "
               "arrival_s + 1.0e9, arrival_s + 1.0e9 + 99, 0.0, 1.0 FROM jobs")
    db.commit()
    db.close()


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=subprocess_env())
    return time.perf_counter() - start, done.stdout


def one(root: Path, jobs: int, kept: str) -> dict:
    """The start on a store of ``jobs`` ended jobs, with ``ended_jobs_kept_s: kept`` (empty:
    the default)."""
    state = root / f"state-{jobs}"
    if not state.exists():
        ended_store(state, jobs)
    port = free_port()
    config = root / f"cluster-{jobs}-{kept}.yaml"
    config.write_text(f"listen: 127.0.0.1:{port}\npolicy: max_min_fairness_perf\n"
                      f"round_seconds: 30\nstate_dir: {state}\neta: false\n"
                      + (f"ended_jobs_kept_s: {kept}\n" if kept else ""))
    with open(root / f"scheduler-{jobs}-{kept}.log", "w") as log:
        return _measured(jobs, port, config, log)


def _measured(jobs: int, port: int, config: Path, log) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "scheduler", "--config",
                             str(config)], stdout=subprocess.PIPE, stderr=log, text=True,
                            env=subprocess_env())
    try:
        for line in proc.stdout:
            if "listening on port" in line:
                break
        up_s = time.perf_counter() - start
        _, peak = rss_mib(proc.pid)
        address = ["--scheduler", f"127.0.0.1:{port}"]
        status_s, _ = timed([sys.executable, "-m", "gavelsched", "status", *address])
        history_s, listed = timed([sys.executable, "-m", "gavelsched", "history", *address])
        return {"jobs": jobs, "up_s": up_s, "peak_mib": peak, "status_s": status_s,
                "history_s": history_s, "listed": len(listed.splitlines()) - 1}
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="0,100000,200000,500000",
                        help="comma list of ended jobs in the store")
    args = parser.parse_args()
    print(header())
    print(f"{'ended jobs':>10} {'kept':>10} {'start s':>8} {'peak RSS MiB':>12} "
          f"{'status s':>9} {'history s':>9} {'listed':>8}")
    with tempfile.TemporaryDirectory(prefix="gavel-history-") as tmp:
        for jobs in (int(n) for n in args.jobs.split(",")):
            for kept in ("0", ""):
                r = one(Path(tmp), jobs, kept)
                print(f"{r['jobs']:>10,} {kept or 'a day':>10} {r['up_s']:>8.2f} "
                      f"{r['peak_mib']:>12.0f} {r['status_s']:>9.2f} {r['history_s']:>9.2f} "
                      f"{r['listed']:>8,}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
