"""Fenced checkpoint commits: how a job's checkpoints lie on disk (docs/runtime.md,
"Fencing"; thesis §5.6 leaves checkpoint safety to the job, Gavel trusts one writer).

Two processes may train one job at once: a worker cut off from the scheduler runs on while
the scheduler relaunches the job elsewhere. So a checkpoint is never written where another
run could read it half-done, and the scheduler alone says which one is loaded:

- every run has a *generation* the scheduler issues at launch (``GAVEL_GENERATION``);
- a save goes to a staging directory, ``.staging-step-<S>-gen-<G>``; when it is complete
  (every file fsync'd, the step count beside it) it is renamed, atomically, to its commit
  directory ``step-<S>-gen-<G>``; a half-written save is never a commit;
- the run then reports ``(S, G)`` as durable; the scheduler counts it only when ``G`` is
  the job's newest generation, and a relaunch loads exactly the commit the scheduler
  counted (``InitJobResponse.checkpoint_generation``). A commit of a fenced-out generation
  may lie on disk, but it can never become the checkpoint that is loaded;
- after the scheduler took a commit, the run deletes the commits older than it
  (``prune``): older generations, and its own earlier steps.

Pure file-system code; nothing here imports torch or grpc.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from gavelsched.jobenv import JobFailed, read_progress, write_progress

STAGING_PREFIX = ".staging-"
_COMMIT = re.compile(r"step-(\d+)-gen-(\d+)")


class Commit(NamedTuple):
    """One committed checkpoint: ``steps`` (absolute) written by run ``generation``."""

    steps: int
    generation: int
    path: Path

    @property
    def order(self) -> tuple[int, int]:
        """Newer generations first, then more steps (the order ``prune`` keeps)."""
        return self.generation, self.steps


def commit_name(steps: int, generation: int) -> str:
    return f"step-{int(steps)}-gen-{int(generation)}"


def commit_path(root: str | os.PathLike, steps: int, generation: int) -> Path:
    """Where the commit of ``steps`` by ``generation`` lives under the job's root."""
    return Path(root) / commit_name(steps, generation)


def staging_path(root: str | os.PathLike, steps: int, generation: int) -> Path:
    """Where a save of ``steps`` by ``generation`` is written before it is committed (the
    same on every rank, so that every saving rank writes into one directory)."""
    return Path(root) / f"{STAGING_PREFIX}{commit_name(steps, generation)}"


def begin(root: str | os.PathLike, steps: int, generation: int) -> Path:
    """An empty staging directory for a save (what was left there by a crash is gone)."""
    staging = staging_path(root, steps, generation)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def commit(root: str | os.PathLike, steps: int, generation: int, **extra: Any) -> Path:
    """Make the staged save of ``steps`` by ``generation`` a commit: the step count beside
    it, every file fsync'd, then one atomic rename. Returns the commit's path."""
    staging = staging_path(root, steps, generation)
    write_progress(staging, steps, generation=int(generation), **extra)
    _fsync_tree(staging)
    final = commit_path(root, steps, generation)
    if final.exists():   # the same steps saved again by the same run: the new one wins
        shutil.rmtree(final)
    os.replace(staging, final)
    _fsync_dir(Path(root))
    return final


def commits(root: str | os.PathLike) -> list[Commit]:
    """The job's commits, oldest first (``Commit.order``)."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        match = _COMMIT.fullmatch(name)
        if match:
            found.append(Commit(int(match[1]), int(match[2]), Path(root) / name))
    return sorted(found, key=lambda c: c.order)


def latest(root: str | os.PathLike, generation: int | None = None) -> Commit | None:
    """The newest commit (of ``generation`` only, when given), or None."""
    found = [c for c in commits(root) if generation is None or c.generation == generation]
    return found[-1] if found else None


def resolve(root: str | os.PathLike, steps: int, generation: int) -> Path | None:
    """The commit to resume from when the scheduler counted ``steps`` by ``generation``:
    None for a fresh start (``steps`` 0); raises ``JobFailed`` when it is missing or its
    step count disagrees with its name."""
    if steps <= 0:
        return None
    path = commit_path(root, steps, generation)
    saved = read_progress(path)
    if saved is None:
        raise JobFailed(f"checkpoint missing: {path} (the scheduler counted {steps} durable "
                        f"steps, written by run generation {generation})")
    if saved != steps:
        raise JobFailed(f"corrupt checkpoint {path}: it holds {saved} steps, not {steps}")
    return path


def prune(root: str | os.PathLike, steps: int, generation: int) -> list[Path]:
    """After the scheduler took commit ``(steps, generation)``: delete the commits older
    than it and the staging directories of older generations. Newer generations' files are
    never touched (a relaunch may be writing them). Returns what was deleted."""
    keep = (int(generation), int(steps))
    gone = [c.path for c in commits(root) if c.order < keep]
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        names = []
    for name in names:
        match = _COMMIT.fullmatch(name[len(STAGING_PREFIX):]) \
            if name.startswith(STAGING_PREFIX) else None
        if match and int(match[2]) < keep[0]:
            gone.append(Path(root) / name)
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone


def _fsync_tree(directory: Path) -> None:
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass          # some file systems cannot fsync a directory
    finally:
        os.close(fd)
