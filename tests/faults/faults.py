"""The fault harness (issue #17): a scheduler and two workers on separate network hosts
(``tests.faults.network``, ``tests.faults.cluster``), with faults injected while
``tests.faults.job`` jobs train, and the outcome checked (``tests.faults.verdicts``).

**Faults** (``FAULTS``), each injected once while three jobs train on a ``v100`` worker with
two GPUs and a ``k80`` worker with one, at a moment when a job's process trains past its last
checkpoint (the job's ``running-`` marker; the fault strikes that process, or its host): a
worker's link down for three rounds and a second (the lease is a round); ``kill -9``
of a worker daemon (restarted with the same work dir), of a job process, and of the
scheduler (restarted on the same state dir); 200 ms delay and 5% loss each way on a
worker's link (``tc netem``; where the kernel has no netem, every host's link is a userspace
cable that does the same, ``tests.faults.cable``; skipped, with the reason, where neither can
be had); and a checkpoint corrupted (the job's process killed, then the state file in its
newest checkpoint directory truncated).

    python -m tests.faults.faults FAULT [--root DIR]    # one scenario, its outcome printed
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gavelsched.daemon.local import FINAL_STATES, wait_until
from gavelsched.rpc import pb

from .cluster import JOB_COMMAND, JobProcess, NetnsCluster
from .network import NETEM, Net, needs_cables, netem_unavailable, netns_unavailable
from .verdicts import JobVerdict, Monitor, Outcome, check_job, gpu_violations, references


# ---- scenarios --------------------------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """The cluster and the jobs of every fault scenario."""

    round_seconds: float = 2.0
    heartbeat_seconds: float = 0.3
    policy: str = "max_min_fairness_perf"
    job_type: str = "A3C"          # 24 / 11 steps/s on v100 / k80 (the catalog's table)
    total_steps: tuple[int, ...] = (200, 250, 300)
    workers: tuple[tuple[str, str, int], ...] = (("w0", "v100", 2), ("w1", "k80", 1))
    # x4: ~96 / 44 steps/s, so that a run's lease holds ~100 steps although a torch job's
    # start-up (3-4 s on a busy 2-core machine) is longer than a 2 s round
    emulation_speed: float = 4.0
    timeout_s: float = 240.0       # for every job to reach a final state after the fault


class Skip(Exception):
    """The fault cannot be injected on this machine; the message says why."""


class Trial:
    """One scenario's cluster, jobs and notes, handed to a fault's injector."""

    def __init__(self, cluster: NetnsCluster, setup: Setup, jobs: list[str],
                 outcome: Outcome) -> None:
        self.cluster = cluster
        self.net = cluster.net
        self.setup = setup
        self.jobs = jobs
        self.outcome = outcome

    def note(self, text: str) -> None:
        self.outcome.notes.append(text)

    def training(self, timeout: float = 120.0) -> tuple[pb.JobStatus, JobProcess]:
        """A job with durable progress (a checkpoint to resume from) whose process is
        training past it now (its ``running-`` marker is at least half a second old): the
        least advanced such job, and that process."""
        from . import job as faults_job

        def pick():
            jobs = self.cluster.try_jobs() or {}
            procs = {p.pid: p for p in self.cluster.job_processes()}
            found = []
            for marker in self.cluster.result_dir.glob(f"*/{faults_job.RUNNING_PREFIX}*"):
                status = jobs.get(marker.parent.name)
                pid = marker.name.rsplit("-", 1)[-1]
                proc = procs.get(int(pid)) if pid.isdigit() else None
                try:
                    age = time.time() - marker.stat().st_mtime
                except OSError:
                    continue
                if (status is not None and proc is not None and status.state == "running"
                        and 0 < status.steps_done < 0.7 * status.total_steps and age >= 0.5):
                    found.append((status.steps_done / status.total_steps, status.id, status,
                                  proc))
            return min(found)[2:] if found else None

        return wait_until(pick, timeout, "a job training past its first checkpoint")

    def wait_dead(self, name: str, timeout: float = 60.0) -> None:
        wait_until(lambda: not self.cluster.alive_by_host()[name], timeout,
                   f"the scheduler to fail worker {name}")


def fault_link_down(trial: Trial) -> float:
    job, proc = trial.training()
    name = proc.host
    host = trial.net.hosts[name]
    down_s = 3 * trial.setup.round_seconds + 1.0
    trial.net.link(host, up=False)
    trial.note(f"link of {name} down for {down_s:.0f}s while job {job.id} trained there "
               f"(process {proc.pid}) past {job.steps_done}/{job.total_steps} durable")
    time.sleep(down_s)
    alive = trial.cluster.alive_by_host()[name]
    trial.note(f"the scheduler had {'not ' if alive else ''}failed {name} when it came back")
    trial.net.link(host, up=True)
    return time.monotonic()


def fault_kill_worker(trial: Trial) -> float:
    job, proc = trial.training()
    name = proc.host
    orphans = [p for p in trial.cluster.job_processes() if p.host == name]
    trial.cluster.kill9_daemon(name)
    trial.note(f"kill -9 of worker daemon {name} while job {job.id} trained there past "
               f"{job.steps_done}/{job.total_steps} durable; its job processes live on: "
               f"{[(p.job_id, p.pid) for p in orphans]}")
    trial.wait_dead(name)
    trial.cluster.restart_worker(name)
    trial.note(f"worker {name} restarted with the same work dir")
    return time.monotonic()


def fault_kill_job(trial: Trial) -> float:
    job, proc = trial.training()
    os.kill(proc.pid, signal.SIGKILL)
    trial.note(f"kill -9 of job {job.id}'s process {proc.pid} on {proc.host}, training past "
               f"{job.steps_done}/{job.total_steps} durable")
    return time.monotonic()


def fault_kill_scheduler(trial: Trial) -> float:
    job, proc = trial.training()
    trial.cluster.kill9_scheduler()
    trial.note(f"kill -9 of the scheduler while job {job.id} trained on {proc.host} past "
               f"{job.steps_done}/{job.total_steps} durable")
    time.sleep(trial.setup.round_seconds / 2)
    trial.cluster.reconnect()
    trial.cluster.start_scheduler()
    trial.note("scheduler restarted on the same state dir")
    return time.monotonic()


def fault_netem(trial: Trial) -> float:
    if trial.net.cables is None and (reason := netem_unavailable()):
        raise Skip(reason)
    job, proc = trial.training()
    name = proc.host
    host = trial.net.hosts[name]
    window = 5 * trial.setup.round_seconds
    how = trial.net.impair(host, True)
    delay_ms, loss = NETEM
    trial.note(f"{delay_ms:g} ms delay and {100 * loss:g}% loss by {how} on both ends of "
               f"{name}'s link for {window:.0f}s (job {job.id} trained there past "
               f"{job.steps_done}/{job.total_steps} durable)")
    try:
        time.sleep(window)
    finally:
        trial.note(f"removed from {name}'s link: {trial.net.impair(host, False)}")
    return time.monotonic()


def newest_state_file(checkpoints: Path) -> Path | None:
    """The job's state file (``tests.faults.job.STATE_FILE``) written last, anywhere under
    its checkpoint directory."""
    from . import job as faults_job

    files = [p for p in checkpoints.rglob(faults_job.STATE_FILE) if p.is_file()]
    return max(files, key=lambda p: p.stat().st_mtime_ns) if files else None


def fault_corrupt_checkpoint(trial: Trial) -> float:
    from . import job as faults_job

    job, proc = trial.training()
    os.kill(proc.pid, signal.SIGKILL)         # nothing writes a newer checkpoint now
    path = newest_state_file(trial.cluster.checkpoints / job.id)
    if path is None:
        trial.outcome.errors.append(f"job {job.id} had durable steps but no "
                                    f"{faults_job.STATE_FILE} under its checkpoint dir")
        return time.monotonic()
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 3)
    trial.note(f"kill -9 of job {job.id}'s process {proc.pid}, training past "
               f"{job.steps_done}/{job.total_steps} durable, then "
               f"{path.relative_to(trial.cluster.root)} truncated from {size} to {size // 3} bytes")
    trial.outcome.corrupted = job.id
    return time.monotonic()


FAULTS: dict[str, Callable[[Trial], float]] = {
    "link-down": fault_link_down,
    "kill-worker": fault_kill_worker,
    "kill-job": fault_kill_job,
    "kill-scheduler": fault_kill_scheduler,
    "netem": fault_netem,
    "corrupt-checkpoint": fault_corrupt_checkpoint,
}
TITLES = {
    "none": "no fault",
    "link-down": "worker link down 3 rounds + 1 s",
    "kill-worker": "kill -9 worker daemon, restart",
    "kill-job": "kill -9 job process",
    "kill-scheduler": "kill -9 scheduler, restart",
    "netem": "200 ms delay + 5% loss each way",
    "corrupt-checkpoint": "corrupt newest checkpoint",
}


def run_fault(fault: str, root: Path, refs: dict[int, list[list[float]]],
              setup: Setup = Setup()) -> Outcome:
    """Start the cluster, submit the jobs, inject ``fault`` ("none": no fault) once they
    train, wait for every job to finish, and check the outcome. Always cleans up."""
    root = Path(root)
    outcome = Outcome(fault, root)
    started = time.monotonic()
    net = Net(cables=fault == "netem" and needs_cables())
    try:
        cluster = NetnsCluster(root, net, round_seconds=setup.round_seconds,
                               heartbeat_seconds=setup.heartbeat_seconds, policy=setup.policy,
                               expected_gpus=sum(g for _, _, g in setup.workers),
                               emulation_speed=setup.emulation_speed)
    except BaseException:
        net.destroy()
        raise
    monitor: Monitor | None = None
    try:
        cluster.start_scheduler()
        for name, worker_type, gpus in setup.workers:
            cluster.start_host_worker(name, worker_type, gpus)
        wait_until(lambda: cluster.alive_workers() == len(setup.workers), 60,
                   "the workers to register")
        jobs = [cluster.submit(pb.JobRequest(job_type=setup.job_type, total_steps=n,
                                             command=JOB_COMMAND))
                for n in setup.total_steps]
        monitor = Monitor(cluster)
        trial = Trial(cluster, setup, jobs, outcome)
        fault_end = None
        if fault != "none":
            try:
                fault_end = FAULTS[fault](trial)
            except Skip as why:
                outcome.skipped = str(why)
                return outcome
        done = None
        try:
            done = wait_until(lambda: _all_final(cluster, jobs), setup.timeout_s,
                              "every job to finish")
        except TimeoutError as err:
            outcome.errors.append(str(err))
        monitor.stop()
        if done:
            monitor.record(done)     # the poll that saw every job final
        if fault_end is not None:
            outcome.recovery_s = monitor.recovery_s(fault_end)
        final = done or cluster.try_jobs() or {}
        outcome.jobs = [check_job(cluster, final[j], refs) if j in final else
                        JobVerdict(j, "?", 0, 0, "", ["missing from status"]) for j in jobs]
        for verdict in outcome.jobs:
            if verdict.id == outcome.corrupted and verdict.state == "failed" \
                    and "corrupt" not in verdict.reason:
                verdict.problems.append("failed after its checkpoint was corrupted, but the "
                                        f"reason does not say so: {verdict.reason!r}")
        outcome.violations = gpu_violations(cluster.lock_dir)
    except Exception as err:  # noqa: BLE001 - a harness failure is the outcome's error
        outcome.errors.append(f"{type(err).__name__}: {err}")
    finally:
        if monitor is not None:
            monitor.stop()
        cluster.stop()
        outcome.wall_s = time.monotonic() - started
        (root / "outcome.txt").write_text(outcome.report() + "\n")
    return outcome


def _all_final(cluster: NetnsCluster, jobs: list[str]) -> dict[str, pb.JobStatus] | None:
    got = cluster.try_jobs()
    if got and all(j in got and got[j].state in FINAL_STATES for j in jobs):
        return got
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m tests.faults.faults",
                                     description="Run one fault scenario and print its outcome.")
    parser.add_argument("fault", choices=["none", *FAULTS])
    parser.add_argument("--root", type=Path, help="keep the cluster's files here")
    args = parser.parse_args(argv)
    reason = netns_unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    root = args.root or Path(tempfile.mkdtemp(prefix="gavelfaults-"))
    refs = references(Setup().total_steps, root / "references")
    outcome = run_fault(args.fault, root / "cluster", refs)
    print(outcome.report())
    print(json.dumps({"skipped": outcome.skipped, "lost": outcome.lost,
                      "recovery_s": outcome.recovery_s, "wall_s": round(outcome.wall_s, 1),
                      "problems": outcome.problems}, indent=1))
    return 1 if outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main())
