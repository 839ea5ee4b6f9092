"""The fault tests' training job (issue #17): linear regression in float64, trained with SGD
(momentum 0.9), where the batch of step k (k = 1, 2, ...) is a function of k alone (a
``torch.Generator`` seeded with k). A run that resumes from a checkpoint taken at step S
therefore retraces the reference trajectory exactly, and any step trained twice or skipped
changes the parameters far beyond 1e-9.

Under a gavelsched worker (``GAVEL_SCHEDULER`` set; submit it with ``command: python -m
tests.faults.job``) it steps ``GavelIterator`` with a loader of step indices that starts at
the iterator's absolute step, and:

- **checkpoints** through the iterator's ``save_checkpoint(dir)`` / ``load_checkpoint(dir)``
  only: one JSON file, ``faults_state.json``, holding the parameters, the momentum buffers
  and the *step log* (one line per step trained: the step, then where and by which
  process), sealed with a SHA-256 of its body, so a truncated or overwritten file is
  refused with a one-line reason. The log is restored with the parameters, so the final
  log is the job's durable history;
- **holds its GPUs**: before anything else it takes an exclusive ``flock`` on
  ``$FAULTS_GPU_LOCK_DIR/<host>-gpu<i>.lock`` for each GPU in ``CUDA_VISIBLE_DEVICES``
  (host: ``$FAULTS_HOST``, else the worker's server id). A lock already held is a GPU
  holding two jobs at once: the job appends a line to ``violations.log`` there, then waits
  for the lock;
- **says when it trains**: from its first step until its lease ends, the file
  ``$FAULTS_RESULT_DIR/<job id>/running-<host>-<pid>`` exists (holding the first step), so
  the harness can strike while a run trains past its last checkpoint;
- **reports its end**: when it has trained ``total_steps`` it writes its final state to
  ``$FAULTS_RESULT_DIR/<job id>/final-<host>-<pid>.json``.

The worker's environment carries ``FAULTS_*`` (set by ``tests.faults.cluster`` when it starts a
worker daemon); jobs inherit it.

Standalone: ``python -m tests.faults.job --reference N --out FILE`` trains steps 1..N in one
process, without a scheduler, and writes the same state document (the reference run).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gavelsched import jobenv
from gavelsched.iterator import GavelIterator
from gavelsched.jobenv import JOB_ID_VAR, ROUND_VAR, SCHEDULER_VAR, SERVER_ID_VAR

log = logging.getLogger("tests.faults.job")

STATE_FILE = "faults_state.json"
FORMAT = "faults-job/1"
LOCK_DIR_VAR = "FAULTS_GPU_LOCK_DIR"
RESULT_DIR_VAR = "FAULTS_RESULT_DIR"
HOST_VAR = "FAULTS_HOST"
VIOLATIONS_FILE = "violations.log"
RUNNING_PREFIX = "running-"
# the run's generation, when the worker sets one (for the step log's lines only)
GENERATION_VAR = getattr(jobenv, "GENERATION_VAR", "GAVEL_GENERATION")

DIM = 4
BATCH = 8
LR = 0.05
MOMENTUM = 0.9
W_TRUE = (1.5, -2.0, 0.5, 3.0)
B_TRUE = 0.25
INIT_SEED = 20240917


class StateError(ValueError):
    """A state file that cannot be used; the message is one line naming the file."""


def make_batch(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of step ``k``: a function of k alone."""
    gen = torch.Generator().manual_seed(k)
    x = torch.randn(BATCH, DIM, generator=gen, dtype=torch.float64)
    noise = torch.randn(BATCH, 1, generator=gen, dtype=torch.float64)
    w = torch.tensor(W_TRUE, dtype=torch.float64).reshape(DIM, 1)
    return x, x @ w + B_TRUE + 0.1 * noise


def _hex(t: torch.Tensor) -> list[str]:
    return [float.hex(v) for v in t.detach().reshape(-1).tolist()]


def _tensor(values: Sequence[str], like: torch.Tensor) -> torch.Tensor:
    if len(values) != like.numel():
        raise ValueError(f"expected {like.numel()} values, got {len(values)}")
    return torch.tensor([float.fromhex(v) for v in values],
                        dtype=torch.float64).reshape(like.shape)


class Trainer:
    """The model, its optimizer and the step log (one line per step trained)."""

    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(INIT_SEED)
        self.model = nn.Linear(DIM, 1, dtype=torch.float64)
        with torch.no_grad():
            self.model.weight.copy_(0.1 * torch.randn(1, DIM, generator=gen, dtype=torch.float64))
            self.model.bias.zero_()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        self.log: list[str] = []

    @property
    def params(self) -> list[torch.Tensor]:
        return list(self.model.parameters())

    def step(self, k: int, tag: str) -> None:
        x, y = make_batch(k)
        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.mean((self.model(x) - y) ** 2)
        loss.backward()
        self.optimizer.step()
        self.log.append(f"{k} {tag}".rstrip())

    # -- the state document ---------------------------------------------------------------
    def body(self) -> dict[str, Any]:
        momentum = []
        for p in self.params:
            buf = self.optimizer.state.get(p, {}).get("momentum_buffer")
            momentum.append(None if buf is None else _hex(buf))
        return {"steps": len(self.log), "params": [_hex(p) for p in self.params],
                "momentum": momentum, "log": list(self.log)}

    def load_body(self, body: Mapping[str, Any]) -> None:
        params = body["params"]
        momentum = body["momentum"]
        if len(params) != len(self.params) or len(momentum) != len(self.params):
            raise ValueError("wrong number of tensors")
        with torch.no_grad():
            for p, values in zip(self.params, params):
                p.copy_(_tensor(values, p))
        self.optimizer.state.clear()
        for p, values in zip(self.params, momentum):
            if values is not None:
                self.optimizer.state[p]["momentum_buffer"] = _tensor(values, p)
        log_lines = [str(line) for line in body["log"]]
        if len(log_lines) != int(body["steps"]):
            raise ValueError(f"log has {len(log_lines)} lines for {body['steps']} steps")
        self.log = log_lines


def seal(body: Mapping[str, Any]) -> dict[str, Any]:
    """The state document: the body and its SHA-256."""
    text = json.dumps(body, sort_keys=True)
    return {"format": FORMAT, "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "body": body}


def read_state(path: str | os.PathLike) -> dict[str, Any]:
    """The body of a state document; ``StateError`` (one line) when it is missing,
    truncated, overwritten or not one."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        body = doc["body"]
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        if digest != doc.get("sha256"):
            raise ValueError("checksum mismatch")
        return body
    except FileNotFoundError:
        raise StateError(f"{path} is missing") from None
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise StateError(f"{path} is corrupt: {first}") from None


def write_state(path: str | os.PathLike, body: Mapping[str, Any]) -> Path:
    """Write a state document atomically (a temporary file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as out:
        json.dump(seal(body), out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def hold_gpus(env: Mapping[str, str]) -> list[int]:
    """Lock every GPU this process was given (open descriptors, held until exit). A lock
    already held means a GPU holds two jobs at once: recorded, then waited for."""
    lock_dir = env.get(LOCK_DIR_VAR)
    if not lock_dir:
        return []
    host = env.get(HOST_VAR) or f"server{env.get(SERVER_ID_VAR, '')}"
    me = (f"job {env.get(JOB_ID_VAR, '?')} pid {os.getpid()} round {env.get(ROUND_VAR, '?')} "
          f"gen {env.get(GENERATION_VAR, '-')}")
    fds = []
    for gpu in (g for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g):
        name = f"{host}-gpu{gpu}"
        fd = os.open(Path(lock_dir) / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "?"
            line = f"{time.time():.3f} {name}: {me} found it held by {holder}\n"
            with open(Path(lock_dir) / VIOLATIONS_FILE, "a") as out:
                out.write(line)
            log.error("GPU held by another job: %s", line.strip())
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
        fds.append(fd)
    return fds


class StepLoader:
    """Step indices from the iterator's absolute step on: a resumed run's loader is
    iterated from its start, so it must start where the checkpoint left off."""

    def __init__(self) -> None:
        self.iterator: GavelIterator | None = None

    def __iter__(self) -> Iterator[int]:
        start = self.iterator.steps + 1 if self.iterator is not None else 1
        return itertools.count(start)


def run_under_scheduler(env: Mapping[str, str]) -> int:
    """Train under the worker's leases until this run's lease ends; the exit code."""
    hold_gpus(env)
    trainer = Trainer()

    def save(directory: str) -> None:
        write_state(Path(directory) / STATE_FILE, trainer.body())

    def load(directory: str) -> None:
        trainer.load_body(read_state(Path(directory) / STATE_FILE))

    loader = StepLoader()
    iterator = GavelIterator(loader, None, load, save)
    loader.iterator = iterator
    start = iterator.steps
    if trainer.log and len(trainer.log) != start:
        log.warning("the restored state holds %d steps, the iterator resumes at %d",
                    len(trainer.log), start)
    host = env.get(HOST_VAR) or f"server{env.get(SERVER_ID_VAR, '')}"
    tag = (f"{host}/gpu{env.get('CUDA_VISIBLE_DEVICES', '')} pid={os.getpid()} "
           f"round={env.get(ROUND_VAR, '')} gen={env.get(GENERATION_VAR, '-')}")
    results = Path(env[RESULT_DIR_VAR]) / env.get(JOB_ID_VAR, "job") \
        if env.get(RESULT_DIR_VAR) else None
    marker = results / f"{RUNNING_PREFIX}{host}-{os.getpid()}" if results else None
    while not iterator.done:
        for k in iterator:
            trainer.step(k, tag)
            if marker is not None and k == start + 1:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(f"{k}\n")
    if marker is not None:
        marker.unlink(missing_ok=True)
    iterator.close()
    log.info("trained steps %d..%d in this run (%s)%s", start + 1, iterator.steps, tag,
             ", finished" if iterator.finished else "")
    if iterator.finished and results is not None:
        write_state(results / f"final-{host}-{os.getpid()}.json", trainer.body())
    return 0


def reference(steps: int) -> Trainer:
    """Steps 1..``steps`` in one process, without a scheduler (GavelIterator standalone)."""
    trainer = Trainer()
    iterator = GavelIterator(StepLoader(), None, None, None, env={})
    for k in itertools.islice(iterator, steps):
        trainer.step(k, "reference")
    return trainer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.job",
                                     description="The fault tests' float64 training job.")
    parser.add_argument("--reference", type=int, metavar="N",
                        help="without a scheduler: train steps 1..N and write --out")
    parser.add_argument("--out", metavar="FILE", help="the reference run's state document")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    if args.reference is not None:
        if args.reference <= 0 or not args.out:
            parser.error("--reference N needs N > 0 and --out FILE")
        write_state(args.out, reference(args.reference).body())
        return 0
    if not os.environ.get(SCHEDULER_VAR):
        parser.error(f"no scheduler ({SCHEDULER_VAR} unset): give --reference N --out FILE")
    return run_under_scheduler(os.environ)


if __name__ == "__main__":
    sys.exit(main())
