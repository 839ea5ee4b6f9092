"""The job contract: what a worker tells a job's processes, and what a job leaves for the
worker (thesis §5.6; docs/runtime.md, "Protocol"; docs/iterator.md).

The worker (``workers/daemon/launcher.py``) writes it and the job side
(``gavelsched/iterator.py``, the reference workloads) reads it, both through this module:

- every ``GAVEL_*`` environment variable is a ``*_VAR`` constant here, and no other module
  spells its name: **a new job-environment variable goes here**. The virtual-node variables
  (``GAVEL_VN_*``) are the virtual-node env's own spec, ``gavelsched.virtual.envspec``;
- ``JobContext`` is what the worker tells one rank: ``to_env()`` writes it (the launcher),
  ``from_env()`` reads it back (GavelIterator); ``worker_env()`` is the part every job on
  a server shares (server id, token file, TLS CA);
- the progress file (``progress_path``, ``write_progress``, ``read_progress``): the
  absolute step count a job saves beside its checkpoint, in each commit directory
  (``gavelsched.checkpoints``), which the worker reads at its exit;
- how a job fails (``fail_job``): a one-line reason as the last line of stderr, which the
  worker's round report quotes, and exit code ``EXIT_JOB_FAILED``; or, when the run was
  lost through no fault of the job's (its scheduler did not answer: ``SchedulerUnreachable``;
  its rendezvous port was taken), ``EXIT_RUN_LOST``: the run ends, not the job (the daemon
  counts it as a run without progress and launches it again);
- the lease's clock (``process_elapsed_s``): seconds since the job's process started, the
  moment the worker starts its kill timer.

Nothing here imports torch or grpc: the worker daemon imports it without the job side.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

log = logging.getLogger(__name__)

# ---- the environment ---------------------------------------------------------------------
# What the worker sets for every rank of a job (JobContext).
SCHEDULER_VAR = "GAVEL_SCHEDULER"          # HOST:PORT; unset: no scheduler (standalone run)
JOB_ID_VAR = "GAVEL_JOB_ID"
JOB_TYPE_VAR = "GAVEL_JOB_TYPE"            # the catalog job type (a workload's batch size)
ROUND_VAR = "GAVEL_ROUND"                  # the round this run was launched for
GENERATION_VAR = "GAVEL_GENERATION"        # this run's generation (gavelsched.checkpoints)
TOTAL_STEPS_VAR = "GAVEL_TOTAL_STEPS"
STEPS_DONE_VAR = "GAVEL_STEPS_DONE"        # durable steps the scheduler counted
CHECKPOINT_DIR_VAR = "GAVEL_CHECKPOINT_DIR"
SERVER_ID_VAR = "GAVEL_SERVER_ID"          # the worker's (worker_env)
TOKEN_FILE_VAR = "GAVEL_TOKEN_FILE"        # the worker's auth token file (worker_env)
TLS_CA_VAR = "GAVEL_TLS_CA"                # the CA the scheduler's TLS is checked with
EMULATE_STEPS_PER_S_VAR = "GAVEL_EMULATE_STEPS_PER_S"   # set only when the worker emulates
# What the scheduler sets in a RunJob's env (``scheduler_env``), which the worker passes on.
JOB_TOKEN_VAR = "GAVEL_JOB_TOKEN"          # this job's own token: its calls act on it only
ARRAY_INDEX_VAR = "GAVEL_ARRAY_INDEX"      # a copy's index in its array (0 .. count-1)
# What a user (or a test) may set for a job; the worker passes them through.
RENEW_AT_VAR = "GAVEL_RENEW_AT"            # GavelIterator's renew_at default
WORKLOAD_DTYPE_VAR = "GAVEL_WORKLOAD_DTYPE"   # the reference workloads' float type
WORKLOAD_AMP_VAR = "GAVEL_WORKLOAD_AMP"       # their mixed precision: fp32 (none) or bf16
WORKLOAD_DETERMINISTIC_VAR = "GAVEL_WORKLOAD_DETERMINISTIC"   # 1: deterministic kernels
# torchrun's, read into JobContext as well.
RANK_VAR = "RANK"
WORLD_SIZE_VAR = "WORLD_SIZE"

VARIABLES = (SCHEDULER_VAR, JOB_ID_VAR, JOB_TYPE_VAR, ROUND_VAR, GENERATION_VAR,
             TOTAL_STEPS_VAR, STEPS_DONE_VAR, CHECKPOINT_DIR_VAR, SERVER_ID_VAR, TOKEN_FILE_VAR, TLS_CA_VAR,
             EMULATE_STEPS_PER_S_VAR, JOB_TOKEN_VAR, ARRAY_INDEX_VAR, RENEW_AT_VAR,
             WORKLOAD_DTYPE_VAR, WORKLOAD_AMP_VAR, WORKLOAD_DETERMINISTIC_VAR)

PROGRESS_FILE = "gavel_progress.json"
EXIT_JOB_FAILED = 3
EXIT_RUN_LOST = 4


class JobFailed(RuntimeError):
    """The job cannot go on (missing or corrupt checkpoint); one-line reason."""

    exit_code = EXIT_JOB_FAILED


class SchedulerUnreachable(JobFailed):
    """This run cannot go on: its scheduler did not answer (an overloaded or restarting
    scheduler is no fault of the job's, which is tried again)."""

    exit_code = EXIT_RUN_LOST


class FailedExit(SystemExit):
    """What ``fail_job`` raises: ``SystemExit(code)`` that keeps its one-line ``reason`` (a
    hollow job's rank, a thread, writes it where its stderr would go)."""

    def __init__(self, reason: str, code: int = EXIT_JOB_FAILED) -> None:
        super().__init__(code)
        self.reason = reason


def worker_env(server_id: int, token_file: str | None = None,
               tls_ca: str | None = None) -> dict[str, str]:
    """The part of the environment every job on a worker shares: its server id (left out
    when negative) and the token file and TLS CA a job dials the scheduler with."""
    env = {SERVER_ID_VAR: str(server_id)} if server_id >= 0 else {}
    if token_file:
        env[TOKEN_FILE_VAR] = token_file
    if tls_ca:
        env[TLS_CA_VAR] = tls_ca
    return env


def scheduler_env(job_token: str | None, array_index: int | None) -> dict[str, str]:
    """What the scheduler adds to a job's environment: its own token (issue #28: a job's
    process may act only on its own job, so it is not given the worker's token file) and,
    for a copy of an array, its index."""
    env = {JOB_TOKEN_VAR: job_token} if job_token else {}
    if array_index is not None:
        env[ARRAY_INDEX_VAR] = str(array_index)
    return env


def without_worker_token(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the worker's token file when the job has a token of its own."""
    if env.get(JOB_TOKEN_VAR):
        env.pop(TOKEN_FILE_VAR, None)
    return env


@dataclass(frozen=True)
class JobContext:
    """What the worker tells one rank of a job through its environment (docs/runtime.md,
    protocol). ``to_env`` writes it, ``from_env`` reads it back."""

    scheduler: str
    job_id: str
    round: int
    total_steps: int
    steps_done: int
    checkpoint_dir: str | None
    server_id: int
    rank: int
    world_size: int
    token_file: str | None = None
    tls_ca: str | None = None
    emulate_steps_per_s: float | None = None
    job_type: str = ""
    generation: int = 0
    job_token: str | None = None       # the job's own token (used before the token file)
    array_index: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> JobContext | None:
        """The context in ``env`` (default ``os.environ``); None without GAVEL_SCHEDULER.
        Raises JobFailed naming a variable that is not a number."""
        env = os.environ if env is None else env
        scheduler = env.get(SCHEDULER_VAR, "").strip()
        if not scheduler:
            return None

        def number(name: str, default: str, kind: type = int) -> Any:
            raw = env.get(name, default) or default
            try:
                return kind(raw)
            except ValueError:
                raise JobFailed(f"bad environment variable {name}={raw!r}") from None

        pace = number(EMULATE_STEPS_PER_S_VAR, "0", float)
        if pace < 0 or not math.isfinite(pace):
            raise JobFailed(f"bad environment variable {EMULATE_STEPS_PER_S_VAR}={pace!r}")
        return cls(scheduler=scheduler, job_id=env.get(JOB_ID_VAR, ""),
                   round=number(ROUND_VAR, "0"),
                   total_steps=number(TOTAL_STEPS_VAR, "0"),
                   steps_done=number(STEPS_DONE_VAR, "0"),
                   checkpoint_dir=env.get(CHECKPOINT_DIR_VAR) or None,
                   server_id=number(SERVER_ID_VAR, "-1"),
                   rank=number(RANK_VAR, "0"), world_size=number(WORLD_SIZE_VAR, "1"),
                   token_file=env.get(TOKEN_FILE_VAR) or None,
                   tls_ca=env.get(TLS_CA_VAR) or None,
                   emulate_steps_per_s=pace or None,
                   job_type=env.get(JOB_TYPE_VAR, ""),
                   generation=number(GENERATION_VAR, "0"),
                   job_token=env.get(JOB_TOKEN_VAR) or None,
                   array_index=number(ARRAY_INDEX_VAR, "0") if env.get(ARRAY_INDEX_VAR)
                   else None)

    def to_env(self) -> dict[str, str]:
        """The variables that tell a rank this context (``from_env`` reads them back). A
        negative ``server_id``, no token file, no CA and no pace are left out: the launcher
        then keeps the worker's (``worker_env``) and drops a stale pace."""
        env = {
            SCHEDULER_VAR: self.scheduler,
            JOB_ID_VAR: self.job_id,
            JOB_TYPE_VAR: self.job_type,
            ROUND_VAR: str(self.round),
            GENERATION_VAR: str(self.generation),
            TOTAL_STEPS_VAR: str(self.total_steps),
            STEPS_DONE_VAR: str(self.steps_done),
            CHECKPOINT_DIR_VAR: self.checkpoint_dir or "",
            RANK_VAR: str(self.rank),
            WORLD_SIZE_VAR: str(self.world_size),
            **worker_env(self.server_id, self.token_file, self.tls_ca),
        }
        if self.emulate_steps_per_s:
            env[EMULATE_STEPS_PER_S_VAR] = repr(self.emulate_steps_per_s)
        env.update(scheduler_env(self.job_token, self.array_index))
        return env


# ---- the durable step count beside the user's checkpoint -----------------------------------

def progress_path(checkpoint_dir: str | os.PathLike) -> Path:
    """Where a job's absolute step count lives: ``CHECKPOINT_DIR/gavel_progress.json``."""
    return Path(checkpoint_dir) / PROGRESS_FILE


def read_progress(checkpoint_dir: str | os.PathLike) -> int | None:
    """The absolute step count saved in ``checkpoint_dir``; None when there is none.
    Raises JobFailed when the file exists but is unreadable."""
    path = progress_path(checkpoint_dir)
    try:
        data = json.loads(path.read_text())
        steps = data["steps"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise JobFailed(f"corrupt progress file {path}: {err}") from None
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise JobFailed(f"corrupt progress file {path}: steps={steps!r}")
    return steps


def write_progress(checkpoint_dir: str | os.PathLike, steps: int, **extra: Any) -> Path:
    """Write the absolute step count atomically (temp file, fsync, rename)."""
    path = progress_path(checkpoint_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{PROGRESS_FILE}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump({"steps": int(steps), "time": time.time(), **extra}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


# ---- how a job ends, and its clock ----------------------------------------------------------

def fail_job(reason: str, code: int = EXIT_JOB_FAILED) -> NoReturn:
    """End the job (or, with ``EXIT_RUN_LOST``, only this run of it): the reason as the last
    line of stderr, exit code ``code``."""
    line = " ".join(reason.split())
    log.error("job failed: %s", line)
    sys.stderr.write(f"gavel: {line}\n")
    sys.stderr.flush()
    raise FailedExit(line, code)


def process_elapsed_s() -> float:
    """Seconds since this process started (the lease's clock: the worker starts its kill
    timer at launch, so the iterator counts from the same moment, not from its import)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) - _process_start()


@functools.lru_cache(maxsize=1)
def _process_start() -> float:
    """This process's start on the CLOCK_BOOTTIME scale (Linux /proc; else import time)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
