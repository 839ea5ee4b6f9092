"""GavelIterator against a fake scheduler over real gRPC (thesis §5.6; docs/runtime.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gavelsched import GavelIterator
from gavelsched import checkpoints
from gavelsched.iterator import EXIT_JOB_FAILED, PROGRESS_FILE
from gavelsched.rpc import pb
from tests.workers.fake_scheduler import (LEASE_S, FakeJob, FakeScheduler, job_environment,
                                          steps_lease)

REPO = Path(__file__).resolve().parents[3]


def job_env(sched: FakeScheduler, ckpt: Path, job: str = "j1", **extra: str) -> dict[str, str]:
    return job_environment(sched.address, job, ckpt, **extra)


class Saver:
    """A user's save/load pair: the state is the list of steps seen."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.saves = 0
        self.loads = 0

    def save(self, directory: str) -> None:
        self.saves += 1
        Path(directory, "user.json").write_text(json.dumps(self.seen))

    def load(self, directory: str) -> None:
        self.loads += 1
        self.seen = json.loads(Path(directory, "user.json").read_text())


def run(iterator: GavelIterator, saver: Saver) -> None:
    while not iterator.done:
        for item in iterator:
            saver.seen.append(item)


def test_without_a_scheduler_the_loader_is_unchanged(monkeypatch):
    monkeypatch.delenv("GAVEL_SCHEDULER", raising=False)
    loader = [object(), object(), object()]
    iterator = GavelIterator(loader)
    assert list(iterator) == loader
    assert list(iterator) == loader      # every epoch, as the loader itself
    assert iterator.done is False and len(iterator) == 3


def test_stops_at_the_lease_checkpoints_and_resumes(sched, tmp_path):
    sched.jobs["j1"] = FakeJob(total_steps=12, lease=steps_lease(sched, 5))
    first = Saver()
    it = GavelIterator(range(4), None, first.load, first.save, env=job_env(sched, tmp_path))
    run(it, first)
    assert it.done and not it.finished and it.steps == 5
    assert first.saves == 1 and first.loads == 0
    assert checkpoints.latest(tmp_path).steps == 5 and sched.jobs["j1"].steps_done == 5
    assert [c.path.name for c in checkpoints.commits(tmp_path)] == ["step-5-gen-0"]
    assert [r.checkpointed for r in sched.log.steps] == [True]

    # A second process resumes from the checkpoint; the absolute steps add up.
    second = Saver()
    it = GavelIterator(range(4), None, second.load, second.save, env=job_env(sched, tmp_path))
    assert second.loads == 1 and it.steps == 5
    run(it, second)
    assert it.steps == 10 and sched.jobs["j1"].steps_done == 10
    third = Saver()
    it = GavelIterator(range(4), None, third.load, third.save, env=job_env(sched, tmp_path))
    run(it, third)
    assert it.finished and it.steps == 12 and sched.jobs["j1"].steps_done == 12
    assert len(third.seen) == 12    # every step ran once over the three processes
    # each process starts a fresh loader (data position is the user's state, not ours)
    assert third.seen == [0, 1, 2, 3, 0] * 2 + [0, 1]


def test_time_lease_ends_iteration(sched, tmp_path):
    sched.jobs["j1"] = FakeJob(total_steps=10**6, lease=lambda job, rank: pb.Lease(
        max_steps=10**6, max_seconds=5.0))
    ticks = iter(range(10**6))
    saver = Saver()
    it = GavelIterator(range(100), None, saver.load, saver.save, env=job_env(sched, tmp_path),
                       clock=lambda: next(ticks) * 0.1)
    run(it, saver)
    assert it.done and saver.saves == 1
    assert 40 <= it.steps <= 50                  # about 5 s of 0.1 s clock ticks
    assert checkpoints.latest(tmp_path).steps == it.steps
    # rank 0 asked for a renewal with its absolute step count before the end
    assert len(sched.log.renewals) == 1 and 0 < sched.log.renewals[0].steps <= it.steps


def test_fast_first_steps_do_not_skip_the_lease_check(sched, tmp_path):
    """The first steps of a run (before pacing or warm-up shows) can look arbitrarily
    fast; the check interval must not jump past the lease's end because of them."""
    sched.jobs["j1"] = FakeJob(total_steps=10**6, lease=lambda job, rank: pb.Lease(
        max_steps=10**6, max_seconds=5.0))
    readings = iter([0.0, 0.0, 0.0, 1e-6, *(0.1 * k for k in range(1, 10**6))])
    saver = Saver()
    it = GavelIterator(range(100), None, saver.load, saver.save, env=job_env(sched, tmp_path),
                       clock=lambda: next(readings))
    run(it, saver)
    assert it.done and it.steps <= 60           # ~5 s of 0.1 s steps, not a 200-step jump


def test_extended_lease_continues_but_checkpoints_at_the_round_boundary(sched, tmp_path):
    def renew(request):
        if request.round == 0:
            return pb.Lease(max_steps=12, max_seconds=LEASE_S, round=1, extended=True)
        return pb.Lease(round=request.round)

    sched.jobs["j1"] = FakeJob(total_steps=100, renew=renew, lease=lambda job, rank: pb.Lease(
        max_steps=6, max_seconds=LEASE_S, round=0))
    saver = Saver()
    it = GavelIterator(range(100), None, saver.load, saver.save, env=job_env(sched, tmp_path))
    epochs = 0
    while not it.done:
        epochs += 1
        for item in it:
            saver.seen.append(item)
    assert epochs == 1                      # no restart at the boundary
    assert it.steps == 12 and saver.seen == list(range(12))
    assert saver.saves == 2                 # the boundary save and the final one
    assert [(r.round, r.steps) for r in sched.log.steps] == [(0, 6), (1, 12)]
    assert [r.round for r in sched.log.renewals] == [0, 1]
    assert sched.jobs["j1"].steps_done == 12


def fail_reason(capfd, build) -> str:
    with pytest.raises(SystemExit) as exc:
        build()
    assert exc.value.code == EXIT_JOB_FAILED
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()]
    return lines[-1]


def test_missing_checkpoint_fails_with_one_line(sched, tmp_path, capfd):
    sched.jobs["j1"] = FakeJob(total_steps=10, steps_done=4)
    saver = Saver()
    line = fail_reason(capfd, lambda: GavelIterator(range(3), None, saver.load, saver.save,
                                                    env=job_env(sched, tmp_path)))
    assert "checkpoint missing" in line and "4 durable steps" in line


def test_corrupt_checkpoint_fails_with_one_line(sched, tmp_path, capfd):
    sched.jobs["j1"] = FakeJob(total_steps=10, steps_done=4)
    commit = checkpoints.commit_path(tmp_path, 4, 0)
    commit.mkdir()
    (commit / PROGRESS_FILE).write_text(json.dumps({"steps": 4}))
    (commit / "user.json").write_text("{not json")
    saver = Saver()
    line = fail_reason(capfd, lambda: GavelIterator(range(3), None, saver.load, saver.save,
                                                    env=job_env(sched, tmp_path)))
    assert line.startswith(f"gavel: corrupt checkpoint {commit}") and "Expecting" in line
    (commit / PROGRESS_FILE).write_text("garbage")
    line = fail_reason(capfd, lambda: GavelIterator(range(3), None, saver.load, saver.save,
                                                    env=job_env(sched, tmp_path)))
    assert "corrupt progress file" in line


TWO_RANKS = """
import json, sys, time, torch.distributed as dist
from gavelsched import GavelIterator
dist.init_process_group("gloo", init_method="env://")
t0 = time.monotonic()   # lease seconds from here, not from the (slow) torch import
it = GavelIterator(range(10**6), None, lambda d: None, lambda d: None,
                   clock=lambda: time.monotonic() - t0)
while not it.done:
    for _ in it:
        pass
json.dump({"rank": dist.get_rank(), "steps": it.steps}, open(sys.argv[1], "w"))
dist.destroy_process_group()
"""


def run_two_ranks(sched: FakeScheduler, tmp_path: Path, script: str) -> list[int]:
    """Job j1 as two gloo ranks in two processes running ``script`` (at 200 steps/s): the
    steps each ended at."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in (0, 1):
        env = {**job_env(sched, tmp_path), "RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONPATH": str(REPO),
               "GAVEL_EMULATE_STEPS_PER_S": "200", "PATH": "/usr/bin:/bin"}
        procs.append(subprocess.Popen([sys.executable, "-c", script,
                                       str(tmp_path / f"rank{rank}.json")], env=env,
                                      stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    return [json.loads((tmp_path / f"rank{r}.json").read_text())["steps"] for r in (0, 1)]


def test_two_gloo_ranks_with_different_lease_timing_stop_at_the_same_step(sched, tmp_path):
    # Rank 1's lease ends after 1.5 s, rank 0's after 60 s: both must stop at one step.
    sched.jobs["j1"] = FakeJob(total_steps=10**6, lease=lambda job, rank: pb.Lease(
        max_steps=10**6, max_seconds=60.0 if rank == 0 else 1.5))
    steps = run_two_ranks(sched, tmp_path, TWO_RANKS)
    assert steps[0] == steps[1] > 0
    assert steps[0] < 60 * 200 / 4     # rank 0 stopped long before its own lease end
    assert checkpoints.latest(tmp_path).steps == steps[0] == sched.jobs["j1"].steps_done
    # only rank 0 reports
    assert {r.rank for r in sched.log.steps} == {0}


def test_the_same_lease_sent_again_is_not_an_extension(sched, tmp_path):
    """A renewal answered with the lease the job already holds (same round) ends the lease:
    the job saves and stops once, instead of 'extending' at every step."""
    held = pb.Lease(max_steps=5, max_seconds=LEASE_S, round=3, extended=True)
    sched.jobs["j1"] = FakeJob(total_steps=100, lease=lambda job, rank: held,
                               renew=lambda request: held)
    saver = Saver()
    it = GavelIterator(range(100), None, saver.load, saver.save, env=job_env(sched, tmp_path))
    run(it, saver)
    assert it.done and not it.finished and it.steps == 5
    assert saver.saves == 1 and len(sched.log.renewals) == 1


def test_a_scheduler_that_does_not_answer_ends_the_run_not_the_job(monkeypatch, tmp_path,
                                                                   capfd):
    # issue #30: at 2,048 GPUs an overloaded scheduler's InitJob timeouts failed 640 jobs
    # for good; the process now says its run could not go on (the daemon tries it again)
    from gavelsched import lease_calls
    from gavelsched.daemon.leases import free_port
    from gavelsched.jobenv import EXIT_RUN_LOST

    monkeypatch.setattr(lease_calls, "INIT_RETRY_S", 0.0)
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(SystemExit) as exc:
        GavelIterator(range(3), None, Saver().load, Saver().save,
                      env=job_environment(address, "j1", tmp_path))
    assert exc.value.code == EXIT_RUN_LOST
    last = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()][-1]
    assert last.startswith(f"gavel: InitJob to scheduler {address} failed: UNAVAILABLE"), last


def test_an_initjob_the_transport_cancelled_is_tried_again_not_the_job_failed(tmp_path):
    # issue #30: at 4,096 GPUs the first round's InitJobs came back CANCELLED by the
    # thousand (an overloaded scheduler), and 383 jobs were failed for good
    import grpc

    class DropsTheFirstInitJob(FakeScheduler):
        dropped: list[str] = []

        def InitJob(self, request, context):
            if not self.dropped:
                self.dropped.append(request.job_id)
                context.abort(grpc.StatusCode.CANCELLED, "CANCELLED")
            return super().InitJob(request, context)

    sched = DropsTheFirstInitJob()
    sched.start()
    try:
        sched.jobs["j1"] = FakeJob(total_steps=3)
        saver = Saver()
        it = GavelIterator(range(3), None, saver.load, saver.save, env=job_env(sched, tmp_path))
        run(it, saver)
    finally:
        sched.stop()
    assert sched.dropped == ["j1"] and len(sched.log.inits) == 1   # then answered
    assert it.finished and sched.jobs["j1"].steps_done == 3


class RenewalLog(FakeScheduler):
    """A fake scheduler that also logs, in one list, the RenewLease calls it takes (each
    first offered to ``refuse``) and the checkpoints reported, in the order they came."""

    def __init__(self, refuse, **kwargs) -> None:
        super().__init__(**kwargs)
        self.refuse = refuse          # (calls so far, request, context) -> aborts, or None
        self.events: list[tuple[str, int]] = []

    def RenewLease(self, request, context):
        calls = sum(kind == "renew" for kind, _ in self.events)
        self.events.append(("renew", request.round))
        self.refuse(calls, request, context)
        return super().RenewLease(request, context)

    def ReportSteps(self, request, context):
        self.events.append(("checkpoint", request.steps))
        return super().ReportSteps(request, context)


def extends_round_0(request):
    """Round 0's lease (100 steps) is extended to 200 steps in round 1; round 1's is not."""
    if request.round == 0:
        return pb.Lease(max_steps=200, max_seconds=LEASE_S, round=1, extended=True)
    return pb.Lease(round=request.round)


def run_against(sched: FakeScheduler, tmp_path) -> tuple[GavelIterator, int]:
    """One job of 1,000 steps (a first lease of 100) in this process: the iterator and how
    many epochs it took (one lease after another in the same process: one)."""
    sched.start()
    try:
        sched.jobs["j1"] = FakeJob(total_steps=1000, renew=extends_round_0,
                                   lease=lambda job, rank: pb.Lease(max_steps=100,
                                                                    max_seconds=LEASE_S, round=0))
        saver = Saver()
        it = GavelIterator(range(1000), None, saver.load, saver.save,
                           env=job_env(sched, tmp_path))
        epochs = 0
        while not it.done:
            epochs += 1
            for item in it:
                saver.seen.append(item)
    finally:
        sched.stop()
    return it, epochs


@pytest.mark.parametrize("refusal", ["busy", "over_budget"])
def test_a_renewal_the_scheduler_was_too_busy_to_take_is_asked_again(tmp_path, refusal):
    # issue #30: at 2,048 GPUs a round's RenewLeases were refused by the hundred while every
    # seat for fleet calls was taken (UNAVAILABLE, "busy"); each was read as "not renewed"
    # and ended a run the plan kept. Asked again (while the lease lasts, or after its
    # checkpoint when the refusal comes at its end), the lease is extended: no restart.
    # A renewal refused over the job's budget of calls (RESOURCE_EXHAUSTED with the seconds
    # to wait, ``daemon/budgets.py``) is asked again the same way.
    import grpc

    from gavelsched.rpc.codes import BUSY, RETRY_AFTER

    def busy_once(calls, request, context):
        if calls == 0 and refusal == "busy":
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          f"{BUSY}: 384 fleet calls already wait on it; try again")
        if calls == 0:
            context.set_trailing_metadata(((RETRY_AFTER, "0.400"),))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "job 'j1' made more than 32 RenewLease and ReportSteps calls in "
                          "360 s (a round); try again in 0.40 s")

    sched = RenewalLog(busy_once)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.steps == 200 and not it.finished
    assert sorted(sched.events[:3]) == [("checkpoint", 100), ("renew", 0), ("renew", 0)]


class AnswersLate(RenewalLog):
    """``RenewalLog`` whose first RenewLease is answered ``delay_s`` late, logged when
    answered (``("answered", round)``)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(lambda *_: None)
        self.delay_s = delay_s

    def RenewLease(self, request, context):
        late = not any(kind == "renew" for kind, _ in self.events)
        reply = super().RenewLease(request, context)
        if late:
            time.sleep(self.delay_s)
            self.events.append(("answered", request.round))
        return reply


def test_a_renewal_answered_after_the_lease_s_end_is_waited_for_after_its_checkpoint(
        monkeypatch, tmp_path):
    # issue #30: at 2,048 GPUs x 50,000 jobs, in process-wide stalls of 10-18 s, thousands of
    # renewals a run got no answer within the iterator's 10 s (the other calls' deadline);
    # each was read as "not renewed" and ended a run the plan had kept, which then paid a
    # restart. Now a renewal has a deadline of its own, and a run whose lease ends first
    # saves its checkpoint, then waits for the answer: extended, it goes on in the same
    # process, with no call asked again.
    from gavelsched import lease_calls

    monkeypatch.setattr(lease_calls, "RPC_TIMEOUT_S", 0.5)     # the other calls'
    monkeypatch.setattr(lease_calls, "RENEW_TIMEOUT_S", 5.0)
    sched = AnswersLate(delay_s=1.5)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.steps == 200 and not it.finished
    assert sched.events[:3] == [("renew", 0), ("checkpoint", 100), ("answered", 0)]
    assert sched.jobs["j1"].steps_done == 200 and it.checkpoints == 2


def test_a_renewal_not_answered_within_its_deadline_ends_the_run_without_asking_again(
        monkeypatch, tmp_path):
    # A scheduler that cannot answer in RENEW_TIMEOUT_S is not asked again: more calls
    # would only add to its load. The steps are on disk; the run ends, not the job.
    from gavelsched import lease_calls

    monkeypatch.setattr(lease_calls, "RENEW_TIMEOUT_S", 0.5)
    sched = AnswersLate(delay_s=1.5)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.done and not it.finished and it.steps == 100
    assert [kind for kind, _ in sched.events if kind != "answered"] == ["renew", "checkpoint"]
    assert sched.jobs["j1"].steps_done == 100


def test_a_renewal_that_did_not_reach_the_scheduler_is_asked_again_after_the_checkpoint(
        tmp_path):
    # A scheduler restarting meets the same: once its steps are safe on disk, the run asks
    # again, and the scheduler back in time keeps it.
    import grpc

    def not_reached_once(calls, request, context):
        if calls == 0:
            context.abort(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")

    sched = RenewalLog(not_reached_once)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.steps == 200 and not it.finished
    assert sched.events[:3] == [("renew", 0), ("checkpoint", 100), ("renew", 0)]
    assert sched.jobs["j1"].steps_done == 200 and it.checkpoints == 2


def test_a_scheduler_gone_for_good_ends_the_run_after_asking_again_for_a_while(
        monkeypatch, tmp_path):
    # The run asks again after its checkpoint for RENEW_AGAIN_S, with pauses, then ends as
    # not renewed: its steps are on disk, the job is not failed.
    import grpc

    from gavelsched import lease_calls

    monkeypatch.setattr(lease_calls, "RENEW_AGAIN_S", 1.5)
    monkeypatch.setattr(lease_calls, "INIT_PAUSES_S", (0.2, 0.4))

    def never(calls, request, context):
        context.abort(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")

    sched = RenewalLog(never)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.done and not it.finished and it.steps == 100
    assert sched.jobs["j1"].steps_done == 100
    kinds = [kind for kind, _ in sched.events]
    assert kinds[:2] == ["renew", "checkpoint"]
    assert 2 <= kinds.count("renew") - 1 <= 8         # asked again, with pauses, then ended


def test_a_scheduler_busy_at_the_lease_s_end_is_asked_again_at_most_twice(monkeypatch,
                                                                          tmp_path):
    # issue #30: asked again until RENEW_AGAIN_S was out, renewals refused as busy at the
    # lease's end added thousands of calls a run to an overloaded scheduler at 2,048 GPUs.
    # After the checkpoint a busy scheduler is asked at most RENEW_BUSY_ASKS times.
    import grpc

    from gavelsched import lease_calls
    from gavelsched.rpc.codes import BUSY

    monkeypatch.setattr(lease_calls, "INIT_PAUSES_S", (0.05, 0.1))

    def always_busy(calls, request, context):
        context.abort(grpc.StatusCode.UNAVAILABLE, f"{BUSY}: 384 fleet calls wait; try again")

    sched = RenewalLog(always_busy)
    it, epochs = run_against(sched, tmp_path)
    assert epochs == 1 and it.done and not it.finished and it.steps == 100
    kinds = [kind for kind, _ in sched.events]
    after_save = kinds[kinds.index("checkpoint") + 1:]
    assert after_save == ["renew"] * lease_calls.RENEW_BUSY_ASKS
    assert sched.jobs["j1"].steps_done == 100


TWO_RANKS_RENEWED = TWO_RANKS.replace("range(10**6)", "range(1000)")


def test_two_ranks_go_on_together_after_a_renewal_asked_again(tmp_path):
    # Rank 0's renewal is not reached; after the checkpoint it asks again and is extended:
    # both ranks must agree on it and stop together at the extended lease's end.
    import grpc

    def not_reached_once(calls, request, context):
        if calls == 0:
            context.abort(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")

    sched = RenewalLog(not_reached_once)
    sched.start()
    try:
        sched.jobs["j1"] = FakeJob(total_steps=1000, renew=extends_round_0,
                                   lease=lambda job, rank: pb.Lease(max_steps=100,
                                                                    max_seconds=LEASE_S, round=0))
        steps = run_two_ranks(sched, tmp_path, TWO_RANKS_RENEWED)
    finally:
        sched.stop()
    assert steps == [200, 200]
    assert sched.events[:3] == [("renew", 0), ("checkpoint", 100), ("renew", 0)]
    assert checkpoints.latest(tmp_path).steps == 200 == sched.jobs["j1"].steps_done
