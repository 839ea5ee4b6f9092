"""Faults on separate network hosts (issue #17): the real scheduler and two real worker
daemons, each in its own network namespace, three float64 jobs (``tests.faults.job``)
training, and one fault injected while they train (``tests.faults.faults``: what each fault
is; ``tests.faults.verdicts``: what is checked).

For every fault, every job ends ``done``, or ``failed`` with a one-line reason (the
corrupted job's reason says the checkpoint is corrupt). A done job has exactly its total
steps, its parameters equal a standalone run's within 1e-9, its step log holds each step
once, and no GPU ever held two jobs at once. The fault scenarios need root (``ip netns
add``) and are skipped with the reason elsewhere; netem runs on userspace cables where the
kernel has no netem (``tests.faults.cable``), and is skipped where neither exists. The small
tests at the top check that the checks themselves can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from gavelsched.daemon.local import subprocess_env, wait_until

from . import job
from .faults import FAULTS, Setup, run_fault
from .network import netem_fault_unavailable, netns_unavailable
from .verdicts import log_problems, references

# ---- the checks can fail --------------------------------------------------------------------


def test_a_resumed_run_retraces_the_reference_and_a_repeated_step_does_not():
    ref = job.reference(60)
    first = job.Trainer()
    for k in range(1, 26):
        first.step(k, "a")
    resumed = job.Trainer()
    resumed.load_body(first.body())
    for k in range(26, 61):
        resumed.step(k, "b")
    assert [p.tolist() for p in resumed.params] == [p.tolist() for p in ref.params]
    assert log_problems(resumed.log, 60) == []
    again = job.Trainer()
    again.load_body(first.body())
    for k in range(25, 60):              # step 25 twice, step 60 never
        again.step(k, "c")
    diff = max((p - q).abs().max().item() for p, q in zip(again.params, ref.params))
    assert diff > 1e-6
    problems = log_problems(again.log, 60)
    assert len(problems) == 2
    assert "1 steps trained more than once (steps 25..25)" in problems[0]
    assert "[60]" in problems[1]


def test_a_truncated_or_edited_state_file_is_refused_in_one_line(tmp_path):
    trainer = job.Trainer()
    for k in range(1, 4):
        trainer.step(k, "x")
    path = job.write_state(tmp_path / job.STATE_FILE, trainer.body())
    assert job.read_state(path)["steps"] == 3
    text = path.read_text()
    path.write_text(text.replace('"steps": 3', '"steps": 2'))
    with pytest.raises(job.StateError, match="checksum mismatch"):
        job.read_state(path)
    path.write_text(text[: len(text) // 3])
    with pytest.raises(job.StateError, match="is corrupt") as err:
        job.read_state(path)
    assert "\n" not in str(err.value)


def test_a_gpu_lock_held_by_another_job_is_recorded_as_a_violation(tmp_path):
    env = {job.LOCK_DIR_VAR: str(tmp_path), job.HOST_VAR: "w0", "CUDA_VISIBLE_DEVICES": "1",
           "GAVEL_JOB_ID": "7"}
    holder = subprocess.Popen(      # job 3 holds w0's GPU 1 until its stdin closes
        [sys.executable, "-c", ("import os, sys; from tests.faults.job import hold_gpus; "
                                "hold_gpus(os.environ); print('held', flush=True); "
                                "sys.stdin.read()")],
        env={**subprocess_env(), **env, "GAVEL_JOB_ID": "3"}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE)
    got: list[int] = []
    second = threading.Thread(target=lambda: got.extend(job.hold_gpus(env)))
    violations = tmp_path / job.VIOLATIONS_FILE
    try:
        assert holder.stdout.readline().strip() == b"held"
        second.start()
        wait_until(violations.exists, 60, "the violation to be recorded")
        assert second.is_alive()            # job 7 waits for the GPU
        holder.stdin.close()
        second.join(60)
        assert not second.is_alive() and len(got) == 1
    finally:
        holder.kill()
        holder.wait()
        for fd in got:
            os.close(fd)
    lines = violations.read_text().splitlines()
    assert len(lines) == 1
    assert "w0-gpu1: job 7" in lines[0] and "held by job 3" in lines[0]


# ---- the faults -----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def refs(tmp_path_factory):
    """The standalone reference runs; skips every fault scenario without namespaces."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(f"network namespaces are not available: {reason}")
    return references(Setup().total_steps, tmp_path_factory.mktemp("faults-references"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_job_ends_done_and_exact_or_failed_with_a_reason(fault, refs, tmp_path):
    if fault == "netem" and (reason := netem_fault_unavailable()):
        pytest.skip(reason)
    outcome = run_fault(fault, tmp_path / "cluster", refs)
    if outcome.skipped:
        pytest.skip(outcome.skipped)
    print(outcome.report())
    assert outcome.jobs and not outcome.problems, outcome.report()
