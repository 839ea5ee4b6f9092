"""A worker's own profile of its GPU type (docs/runtime.md, "Profiling a new GPU type"):
read from a file ``gavelsched profile`` wrote, or measured by running that command in a
subprocess before registering (this daemon never imports torch), cached in
``WORK_DIR/profile-TYPE.json`` for the next start. The scheduler takes it as the type's
priors (thesis §5.3.3)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from traces.errors import TraceError
from traces.profiles import Profile, read_profile

log = logging.getLogger(__name__)


class ProfileMismatch(ValueError):
    """A profile file of another worker type than this worker's."""


def from_file(path: str | os.PathLike, worker_type: str) -> Profile:
    """A profile made earlier by ``gavelsched profile`` (``--profile-file``): TraceError
    when malformed, ProfileMismatch when it is of another type."""
    profile = read_profile(path)
    if profile.worker_type != worker_type:
        raise ProfileMismatch(f"{path}: a profile of {profile.worker_type!r}, not of "
                              f"--type {worker_type!r}")
    log.info("profile of %s from %s: %s", worker_type, path, profile.describe())
    return profile


def measured(work_dir: Path, worker_type: str, reduced: bool) -> Profile | None:
    """``--profile``: the profile cached by an earlier start when usable, else one measured
    now; None when measuring failed (the worker serves without one)."""
    path = cache_path(work_dir, worker_type)
    cached = _usable(path, worker_type, reduced)
    if cached is not None:
        log.info("profile of %s loaded from %s (measured %s): %s; delete the file to measure "
                 "again", worker_type, path, cached.measured_at or "earlier",
                 cached.describe())
        return cached
    return _measure(path, worker_type, reduced)


def cache_path(work_dir: Path, worker_type: str) -> Path:
    """Where ``--profile`` keeps this type's profile: ``WORK_DIR/profile-TYPE.json`` (a
    character a file name should not hold becomes ``_``)."""
    return work_dir / f"profile-{re.sub(r'[^A-Za-z0-9._-]', '_', worker_type)}.json"


def _usable(path: Path, worker_type: str, reduced: bool):
    """The profile cached at ``path`` when it is valid and measured this type the same
    way (``reduced``), else None (it is measured again)."""
    if not path.is_file():
        return None
    try:
        profile = read_profile(path)
    except (TraceError, OSError) as err:
        log.warning("cached profile unusable, measuring again: %s", str(err).splitlines()[0])
        return None
    if profile.worker_type != worker_type or profile.reduced != reduced:
        log.info("cached profile %s is of %s%s; measuring again", path, profile.worker_type,
                 " (reduced)" if profile.reduced else "")
        return None
    return profile


def _measure(path: Path, worker_type: str, reduced: bool):
    """Run ``gavelsched profile`` in a subprocess (its output in ``path`` with ``.log``);
    the profile it wrote (atomically), or None with a warning naming its last error line."""
    argv = [sys.executable, "-m", "gavelsched", "profile", "--type", worker_type,
            "-o", str(path), *(["--reduced"] if reduced else [])]
    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("measuring this machine's %s throughputs before registering: gavelsched %s",
             worker_type, " ".join(argv[3:]))
    start = time.monotonic()
    try:
        with open(path.with_suffix(".log"), "wb") as out:
            done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, check=False)
            out.write(done.stderr)
        why = _last_line(done.stderr) or f"exit code {done.returncode}"
        profile = read_profile(path) if done.returncode == 0 else None
        if profile is not None and profile.worker_type != worker_type:
            why, profile = f"it wrote a profile of {profile.worker_type!r}", None
    except (OSError, TraceError) as err:
        why, profile = str(err).splitlines()[0], None
    took = time.monotonic() - start
    if profile is None:
        log.warning("measuring %s failed after %.1f s (%s); registering without a profile",
                    worker_type, took, why)
        return None
    log.info("measured %s in %.1f s: %s; kept in %s", worker_type, took, profile.describe(),
             path)
    return profile


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")
