"""Preemption overhead of gavelsched's leases, per reference workload: the analogue of the
thesis's Table 5.4 (§5.7.2), plus where GavelIterator should ask for its lease renewal.

Part 1, overhead. For each workload (fresh processes, CPU):
- *plain*: the same training step in a plain loop, no GavelIterator: start-up (process start
  to first step done) and steady seconds per step ``t``;
- *components*, measured directly: checkpoint save and load (torch.save/torch.load of model +
  optimizer), the iterator's cost per step (GavelIterator over a no-op loop under a
  scheduler), and a ReportSteps round trip;
- *end to end at short rounds* (a cross-check, noisy on a shared machine): a worker daemon
  (in this process) runs the job under a fake scheduler for ``--rounds`` rounds of
  ``--round-seconds``, without renewals (a new process every round: start-up, load, train,
  save) and with renewals (one process; a save and a durable report at each round
  boundary); the table shows the steps each round achieved.

Extrapolation to 6-minute rounds: a round's fixed costs do not grow with the round, so
overhead(360 s) = fixed per-round seconds / 360 + the iterator's per-step cost / step time,
with fixed = start-up + load + save (no renewals) or save + report (renewals).

Part 2, renewal point (``--sweep``): a fake scheduler that, like gavelsched/daemon, plans
round r+1 ``lead`` x round before round r ends and holds a renewal that comes before its plan
for at most W (the daemon's 8 s, scaled to the round: 8/360 of it); a renewal held longer is
answered "not extended" and the job restarts. Each ``renew_at`` runs the resnet workload
for ``--sweep-rounds`` rounds; the table counts the boundaries extended and prices each
boundary with Part 1's costs (a restart, or a save + report) at 6-minute rounds.

Run: ``python benchmarks/preemption_overhead.py [--round-seconds 10] [--rounds 3] [--sweep]``
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from host import describe  # (a sibling: this file runs as a script)

WORKLOADS = ("resnet", "lstm", "transformer", "recoder")
REFERENCE_ROUND_S = 360.0
DAEMON_RENEW_WAIT_S = 8.0


# ---- part 0: a plain loop in a fresh process ---------------------------------------------

def plain_child(name: str, seconds: float) -> None:
    """Child mode: start-up and seconds per step of a plain training loop (JSON on stdout)."""
    from workers.workloads import common

    wl = importlib.import_module(f"workers.workloads.{name}").WORKLOAD
    state = common.setup(wl)
    common.train_step(wl, state, state.batches[0])
    startup = _process_elapsed()
    for batch in state.batches[:3]:      # warm-up
        common.train_step(wl, state, batch)
    windows, steps, end = [], 0, time.perf_counter() + seconds
    while time.perf_counter() < end:     # median of short windows: robust to a busy machine
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 0.5:
            common.train_step(wl, state, state.batches[steps % len(state.batches)])
            n, steps = n + 1, steps + 1
        windows.append((time.perf_counter() - t0) / n)
    step_s = sorted(windows)[len(windows) // 2]
    json.dump({"startup_s": startup, "step_s": step_s,
               "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}, sys.stdout)


def _process_elapsed() -> float:
    from gavelsched.iterator import process_elapsed_s

    return process_elapsed_s()


def plain(name: str, seconds: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--plain", name, str(seconds)],
                         capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout)


# ---- part 1a: components ---------------------------------------------------------------

def checkpoint_costs(name: str, tmp: Path) -> tuple[float, float]:
    """Seconds to save and to load one checkpoint (median of 5)."""
    from workers.workloads import common

    wl = importlib.import_module(f"workers.workloads.{name}").WORKLOAD
    state = common.setup(wl)
    common.train_step(wl, state, state.batches[0])
    saves, loads = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        common.save_checkpoint(tmp / "c.pt", state.model, state.optimizer, 1)
        saves.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        common.load_checkpoint(tmp / "c.pt", state.model, state.optimizer)
        loads.append(time.perf_counter() - t0)
    return sorted(saves)[2], sorted(loads)[2]


def iterator_costs(sched, tmp: Path, steps: int = 200_000) -> tuple[float, float]:
    """(seconds per step of GavelIterator over a no-op loop, minus the bare loop; seconds of
    one ReportSteps round trip)."""
    from fake import FakeJob

    from gavelsched import GavelIterator
    from gavelsched.rpc import pb

    sched.jobs["micro"] = FakeJob(total_steps=10**9, lease=lambda job, rank: pb.Lease(
        max_steps=10**9, max_seconds=3600))
    env = {"GAVEL_SCHEDULER": sched.address, "GAVEL_JOB_ID": "micro",
           "GAVEL_CHECKPOINT_DIR": str(tmp / "micro")}
    data = range(steps)
    t0 = time.perf_counter()
    for _ in data:
        pass
    bare = time.perf_counter() - t0
    it = GavelIterator(data, None, None, None, env=env)
    t0 = time.perf_counter()
    for _ in it:
        pass
    wrapped = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(20):
        it._client.report(0, 1, 0.0)
    rpc = (time.perf_counter() - t0) / 20
    it.close()
    return max(0.0, (wrapped - bare) / steps), rpc


# ---- part 1b: end to end through a worker daemon ------------------------------------------

class Rig:
    """A fake scheduler and one in-process worker daemon (1 GPU, no emulation)."""

    def __init__(self, tmp: Path) -> None:
        from fake import FakeScheduler

        from workers.daemon.worker import Worker, WorkerConfig

        self.sched = FakeScheduler(heartbeat_seconds=1.0)
        self.sched.start()
        self.worker = Worker(WorkerConfig(scheduler=self.sched.address, worker_type="v100",
                                          gpus=1, work_dir=tmp / "worker", grace_s=120.0))
        self.worker.start()
        self.stub = self.sched.worker_stub(self.worker.address)
        self.tmp = tmp

    def close(self) -> None:
        self.worker.stop()
        self.sched.stop()

    def run(self, job: str, name: str, round_s: float, round_: int,
            env: dict[str, str] | None = None):
        """RunJob one round; returns the ReportRound once the processes exited."""
        from gavelsched.rpc import pb

        seen = len(self.sched.log.rounds)
        spec = self.sched.jobs[job]
        ack = self.stub.RunJob(pb.RunJobRequest(
            job_id=job, round=round_, job_type="", workload=name,
            total_steps=spec.total_steps, steps_done=spec.steps_done, gpus=[0], world_size=1,
            scheduler_address=self.sched.address, checkpoint_dir=str(self.tmp / job),
            env=env or {},
            lease=pb.Lease(max_steps=spec.total_steps, max_seconds=round_s, round=round_)))
        assert ack.ok, ack.message
        return self.sched.wait_for(lambda: len(self.sched.log.rounds) > seen and
                                   self.sched.log.rounds[seen], timeout=round_s * 10 + 60)


def without_renewals(rig: Rig, name: str, round_s: float, rounds: int) -> dict:
    from fake import FakeJob

    from gavelsched.rpc import pb

    job = f"{name}-restart"
    rig.sched.jobs[job] = FakeJob(total_steps=10**9, lease=lambda j, r: pb.Lease(
        max_steps=10**9, max_seconds=round_s, round=0))
    held, steps, before = 0.0, 0, 0
    for k in range(rounds):
        t0 = time.monotonic()
        report = rig.run(job, name, round_s, k)
        held += time.monotonic() - t0
        assert not report.failed, report.reason
        steps += report.steps - before
        before = report.steps
    return {"held_s": held, "steps": steps}


def with_renewals(rig: Rig, name: str, round_s: float, rounds: int) -> dict:
    from fake import FakeJob

    from gavelsched.rpc import pb

    job = f"{name}-renew"

    def renew(request):
        if request.round + 1 >= rounds:
            return pb.Lease(round=request.round)
        return pb.Lease(max_steps=10**9, max_seconds=(request.round + 2) * round_s,
                        round=request.round + 1, extended=True)

    rig.sched.jobs[job] = FakeJob(total_steps=10**9, renew=renew, lease=lambda j, r: pb.Lease(
        max_steps=10**9, max_seconds=round_s, round=0))
    first = len(rig.sched.log.steps)
    report = rig.run(job, name, round_s, 0)
    assert not report.failed, report.reason
    times = rig.sched.log.step_times[first:]
    counts = [r.steps for r in rig.sched.log.steps[first:]]
    # Rounds after the first lie wholly inside the process: boundary to boundary.
    spans = [(t1 - t0, s1 - s0) for t0, t1, s0, s1 in
             zip(times, times[1:], counts, counts[1:])]
    held = sum(t for t, _ in spans)
    steps = sum(s for _, s in spans)
    return {"held_s": held, "steps": steps, "extended": len(spans)}


# ---- part 2: the renewal point --------------------------------------------------------------

def sweep_point(rig: Rig, renew_at: float, lead: float, round_s: float,
                rounds: int) -> dict:
    """One ``renew_at`` against a scheduler that plans ``lead`` x round before each round's
    end and holds an early renewal for at most W = 8/360 of a round."""
    from fake import FakeJob

    from gavelsched.rpc import pb

    job = f"sweep-{renew_at}-{lead}"
    wait = DAEMON_RENEW_WAIT_S / REFERENCE_ROUND_S * round_s
    state = {"t0": 0.0, "first": 0, "granted": 0}   # this process: start, first round, grants

    def renew(request):
        planned = state["t0"] + (request.round - state["first"] + 1 - lead) * round_s
        delay = planned - time.monotonic()
        if delay > wait or request.round + 1 >= rounds:
            time.sleep(min(wait, max(0.0, delay)))  # the daemon gives up waiting for its plan
            return pb.Lease(round=request.round)
        time.sleep(max(0.0, delay))
        state["granted"] += 1
        return pb.Lease(max_steps=10**9, round=request.round + 1, extended=True,
                        max_seconds=(request.round + 2 - state["first"]) * round_s)

    rig.sched.jobs[job] = FakeJob(total_steps=10**9, renew=renew, lease=lambda j, r: pb.Lease(
        max_steps=10**9, max_seconds=round_s, round=state["first"]))
    extended = steps = before = 0
    k = 0
    while k < rounds:
        state.update(t0=time.monotonic(), first=k, granted=0)
        report = rig.run(job, "resnet", round_s, k, env={"GAVEL_RENEW_AT": str(renew_at)})
        assert not report.failed, report.reason
        extended += state["granted"]
        steps += report.steps - before
        before = report.steps
        k += 1 + state["granted"]
    return {"renew_at": renew_at, "lead": lead, "extended": extended,
            "boundaries": rounds - 1, "restarts": rounds - 1 - extended}


# ---- driver -------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--round-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--sweep", action="store_true", help="also measure the renewal point")
    parser.add_argument("--sweep-round-seconds", type=float, default=6.0)
    parser.add_argument("--sweep-rounds", type=int, default=4)
    parser.add_argument("--plain", nargs=2, metavar=("NAME", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain:
        plain_child(args.plain[0], float(args.plain[1]))
        return
    sys.path.insert(0, str(ROOT / "tests" / "workers"))
    import fake_scheduler

    sys.modules["fake"] = fake_scheduler
    import logging

    logging.basicConfig(level=logging.WARNING)
    print(f"machine: {describe()}")
    R, K = args.round_seconds, args.rounds
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        rig = Rig(tmp)
        try:
            iter_step_s, rpc_s = iterator_costs(rig.sched, tmp)
            print(f"GavelIterator per step: {iter_step_s * 1e6:.2f} us; ReportSteps round trip: "
                  f"{rpc_s * 1e3:.2f} ms")
            rows = []
            for name in args.workloads.split(","):
                base = plain(name, 4.0)
                save_s, load_s = checkpoint_costs(name, tmp)
                nr = without_renewals(rig, name, R, K)
                wr = with_renewals(rig, name, R, K)
                rows.append((name, base, save_s, load_s, nr, wr))
            print(f"\nPart 1: fixed costs per round, extrapolated to {REFERENCE_ROUND_S:g} s "
                  "rounds as fixed / 360 s + iterator cost per step / step time")
            print("| workload | step ms | start-up s | load ms | save ms | iterator/step | "
                  "no renewals: fixed s/round | at 6 min | renewals: fixed s/round | "
                  "at 6 min | peak RSS MB |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for name, base, save_s, load_s, nr, wr in rows:
                per_step = iter_step_s / base["step_s"]
                fixed_nr = base["startup_s"] + load_s + save_s
                fixed_wr = save_s + rpc_s
                print(f"| {name} | {base['step_s'] * 1e3:.1f} | {base['startup_s']:.2f} | "
                      f"{load_s * 1e3:.1f} | {save_s * 1e3:.1f} | {per_step:.4%} | "
                      f"{fixed_nr:.2f} | {fixed_nr / REFERENCE_ROUND_S + per_step:.2%} | "
                      f"{fixed_wr:.3f} | {fixed_wr / REFERENCE_ROUND_S + per_step:.3%} | "
                      f"{base['rss_mb']:.0f} |")
            print(f"\nEnd to end through a worker daemon, rounds of {R:g} s x {K}: steps per "
                  "round; a plain loop would do R / step time (noisy on a shared machine)")
            print("| workload | plain loop | no renewals | renewals |")
            print("|---|---|---|---|")
            for name, base, _save, _load, nr, wr in rows:
                print(f"| {name} | {R / base['step_s']:.0f} | {nr['steps'] / K:.0f} | "
                      f"{wr['steps'] / max(1, wr['extended']):.0f} |")
            if args.sweep:
                Rs = args.sweep_round_seconds
                resnet = next(r for r in rows if r[0] == "resnet") if any(
                    r[0] == "resnet" for r in rows) else None
                restart_s = (resnet[1]["startup_s"] + resnet[2] + resnet[3]) if resnet else None
                keep_s = (resnet[2] + rpc_s) if resnet else None
                print(f"\nPart 2: renewal point, resnet, rounds of {Rs:g} s x "
                      f"{args.sweep_rounds}; the scheduler plans lead x round before each end "
                      f"and holds an early renewal for at most "
                      f"{DAEMON_RENEW_WAIT_S / REFERENCE_ROUND_S * Rs:.2f} s (8 s at 6 min). "
                      "A boundary not extended costs a restart (start-up + load + save), an "
                      "extended one a save + report (Part 1's resnet row).")
                print("| plan lead | renew_at | boundaries extended | restarts | "
                      "overhead at 6 min |")
                print("|---|---|---|---|---|")
                for lead in (0.3, 0.05):
                    for renew_at in (0.5, 0.75, 0.9, 0.95, 1.0):
                        r = sweep_point(rig, renew_at, lead, Rs, args.sweep_rounds)
                        cost = "-"
                        if restart_s is not None:
                            per_round = (r["restarts"] * restart_s + r["extended"] * keep_s) \
                                / r["boundaries"]
                            cost = f"{per_round / REFERENCE_ROUND_S:.2%}"
                        print(f"| {lead:.0%} | {renew_at:.2f} | {r['extended']}/"
                              f"{r['boundaries']} | {r['restarts']} | {cost} |")
        finally:
            rig.close()


if __name__ == "__main__":
    main()
