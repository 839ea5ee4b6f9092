"""docs/iterator.md's example is the real thing: its diff is under 10 lines and the script
after it runs alone and under a scheduler (thesis §5.6: a narrow API)."""

from __future__ import annotations

import re
from pathlib import Path

from gavelsched import checkpoints
from tests.workers.fake_scheduler import FakeJob, FakeScheduler, job_environment, steps_lease

DOC = Path(__file__).resolve().parents[3] / "docs" / "iterator.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_the_diff_changes_fewer_than_10_lines_and_matches_the_script():
    (diff,) = blocks("diff")
    lines = diff.splitlines()
    changed = [ln for ln in lines if ln.startswith(("+", "-"))]
    assert 0 < len(changed) < 10
    after = "\n".join(ln[1:] for ln in lines if not ln.startswith("-"))
    assert after.strip() == blocks("python")[0].strip()


def test_the_example_runs_without_a_scheduler(monkeypatch):
    monkeypatch.delenv("GAVEL_SCHEDULER", raising=False)
    scope: dict = {}
    exec(compile(blocks("python")[0].replace("range(1000)", "range(2)"), str(DOC), "exec"),  # noqa: S102 - the documented script
         scope)
    assert scope["loader"].done is False


def test_the_example_runs_under_leases_and_resumes(monkeypatch, tmp_path):
    sched = FakeScheduler()
    sched.start()
    try:
        sched.jobs["doc"] = FakeJob(total_steps=30, lease=steps_lease(sched, 12))
        for var, value in job_environment(sched.address, "doc", tmp_path).items():
            monkeypatch.setenv(var, value)
        code = compile(blocks("python")[0], str(DOC), "exec")
        for expected in (12, 24, 30):
            scope: dict = {}
            exec(code, scope)  # noqa: S102 - the documented script
            assert scope["loader"].done and scope["loader"].steps == expected
            assert (checkpoints.latest(tmp_path).steps == expected
                    == sched.jobs["doc"].steps_done)
        assert scope["loader"].finished
        assert (checkpoints.latest(tmp_path).path / "ckpt.pt").exists()
    finally:
        sched.stop()
