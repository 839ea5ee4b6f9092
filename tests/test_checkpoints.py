"""Fenced checkpoint commits (``gavelsched.checkpoints``; docs/runtime.md, "Fencing"): a
save is a commit only once it is whole, a run resumes from exactly the commit the scheduler
counted, and no interleaving of an old generation's writes with a new one's can make a
fenced-out commit the one that is loaded, or delete the counted one."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gavelsched import checkpoints
from gavelsched.jobenv import JobFailed, read_progress


def save(root: Path, steps: int, gen: int, payload: str = "state") -> Path:
    staging = checkpoints.begin(root, steps, gen)
    (staging / "model.txt").write_text(f"{payload} {steps} {gen}")
    return checkpoints.commit(root, steps, gen)


def test_a_staged_save_is_not_a_commit_until_it_is_committed(tmp_path):
    staging = checkpoints.begin(tmp_path, 10, 3)
    (staging / "model.txt").write_text("half")
    assert checkpoints.commits(tmp_path) == [] and checkpoints.latest(tmp_path) is None
    path = checkpoints.commit(tmp_path, 10, 3)
    assert path == tmp_path / "step-10-gen-3" and not staging.exists()
    assert read_progress(path) == 10 and (path / "model.txt").read_text() == "half"
    assert checkpoints.latest(tmp_path) == checkpoints.Commit(10, 3, path)


def test_resume_is_from_exactly_the_counted_commit(tmp_path):
    save(tmp_path, 10, 1)
    save(tmp_path, 20, 1)
    save(tmp_path, 30, 1)          # counted by nobody: its report was refused
    assert checkpoints.resolve(tmp_path, 0, 0) is None            # a fresh start
    assert checkpoints.resolve(tmp_path, 20, 1) == tmp_path / "step-20-gen-1"
    with pytest.raises(JobFailed, match="checkpoint missing: .*step-20-gen-2"):
        checkpoints.resolve(tmp_path, 20, 2)
    (tmp_path / "step-10-gen-1" / "gavel_progress.json").write_text('{"steps": 11}')
    with pytest.raises(JobFailed, match="holds 11 steps, not 10"):
        checkpoints.resolve(tmp_path, 10, 1)


def test_prune_keeps_the_counted_commit_and_everything_newer(tmp_path):
    for steps, gen in ((10, 1), (25, 1), (15, 2), (20, 2), (5, 3)):
        save(tmp_path, steps, gen)
    checkpoints.begin(tmp_path, 30, 1)          # a cut-off run's save, never committed
    checkpoints.begin(tmp_path, 40, 3)          # a newer run, saving now
    gone = checkpoints.prune(tmp_path, 20, 2)
    assert {p.name for p in gone} == {"step-10-gen-1", "step-25-gen-1", "step-15-gen-2",
                                      ".staging-step-30-gen-1"}
    assert [c.path.name for c in checkpoints.commits(tmp_path)] == ["step-20-gen-2",
                                                                     "step-5-gen-3"]
    assert (tmp_path / ".staging-step-40-gen-3").is_dir()


# Events: a new generation is issued (a relaunch), or run k saves its next commit.
EVENTS = st.lists(st.one_of(st.just(("issue", 0)),
                            st.tuples(st.just("save"), st.integers(0, 3)),
                            st.tuples(st.just("steps"), st.integers(1, 5))),
                  min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(EVENTS)
def test_no_interleaving_of_old_and_new_runs_loads_a_fenced_out_commit(events):
    """A model of the protocol: the scheduler takes a commit only from the newest
    generation (``fences``); a taken commit is pruned below; every run keeps saving
    whatever it is told. After every event the counted commit is on disk, whole, and is
    what a relaunch would load."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        newest, count = 1, (0, 0)                # count: (steps, generation) taken
        runs = {1: 0}                            # generation -> its own step count
        stride = 1
        for kind, arg in events:
            if kind == "issue":
                newest += 1
                runs[newest] = count[0]          # it loads the counted commit
            elif kind == "steps":
                stride = arg
            else:
                gen = sorted(runs)[min(arg, len(runs) - 1)]
                runs[gen] += stride
                save(root, runs[gen], gen, payload=f"run {gen}")
                if gen == newest and runs[gen] > count[0]:   # the scheduler takes it
                    count = (runs[gen], gen)
                    checkpoints.prune(root, *count)
            path = checkpoints.resolve(root, *count)
            if count[0]:
                assert path.name == checkpoints.commit_name(*count)
                # ... written by the run that was newest when it was taken
                assert (path / "model.txt").read_text() == \
                    f"run {count[1]} {count[0]} {count[1]}"
