"""A sweep's points as tasks on an existing Ray cluster (issue #30): ``gavelsched simulate
sweep --ray ADDRESS`` (or ``auto``: the cluster ``ray start`` left on this machine).

Each (point, spec) pair of ``sweep.run_points`` becomes one Ray task running the same
``run_point`` as a local worker process, so the rows, and the CSV and plot made of them,
are the local run's row for row (but ``wall_s``, each point's own time). Tasks spread over
the nodes (Ray's SPREAD, best effort: a worker that is free takes the next task); one lost
with its node (or worker) runs again on a node still alive, up to ``MAX_RETRIES`` times,
and ``summary`` says which node made how many rows. The packages the simulation imports
travel with the job (``runtime_env`` ``py_modules``): the cluster's nodes run this
checkout's code, whatever they have installed. Ray is an optional extra (``pip install
'gavelsched[ray]'``); without it, or without a cluster at the address, ``RaySweepError``
says so in one line."""

from __future__ import annotations

import importlib
import logging
import socket
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

PACKAGES = ("gavelsched", "policies", "simulator", "traces", "workers")
EXTRA = "pip install 'gavelsched[ray]'"


class RaySweepError(RuntimeError):
    """Ray is missing, or no cluster answers at the address (one line)."""


def require_ray():
    """The ``ray`` module, or ``RaySweepError`` naming the extra."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RaySweepError(f"--ray needs Ray, an optional extra: {EXTRA}") from None


def connect(address: str):
    """``ray`` joined to the cluster at ``address`` (``host:port``, ``ray://host:port`` or
    ``auto``), with this checkout's packages shipped to its workers; ``RaySweepError``
    when there is no such cluster."""
    ray = require_ray()
    _probe(address)
    modules = [str(Path(importlib.import_module(name).__file__).parent) for name in PACKAGES]
    try:
        ray.init(address=address, runtime_env={"py_modules": modules},
                 logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, TimeoutError, ValueError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RaySweepError(f"--ray {address}: no Ray cluster there ({first})") from None
    return ray


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """A head's ``host:port`` (plain or ``ray://``) that takes no TCP connection is
    refused at once: Ray itself would retry it for a minute or more."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RaySweepError(f"--ray {address}: give host:port, ray://host:port or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise RaySweepError(f"--ray {address}: no Ray cluster there "
                            f"({err.strerror or err})") from None


MAX_RETRIES = 3   # a task lost with its node runs again, on a node still alive


def run_on_ray(tasks: Sequence, address: str, run, done=None
               ) -> tuple[list[dict], list[str]]:
    """``run((i, task)) -> (i, row)`` for every task, as Ray tasks on the cluster at
    ``address``, spread over its nodes and run again (up to ``MAX_RETRIES`` times) when
    their node or worker is lost, never when ``run`` raises (that is the same on any
    node); the rows in the order of ``tasks``, and the id of the node that made each.
    ``done``: called with each row as it comes."""
    ray = connect(address)
    try:
        remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False,
                            scheduling_strategy="SPREAD")(run_task)
        pending = {remote.remote(run, item): item for item in enumerate(tasks)}
        rows: list[dict | None] = [None] * len(tasks)
        nodes: list[str] = [""] * len(tasks)
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            i, task = pending.pop(ref)
            try:
                _, rows[i], nodes[i] = ray.get(ref)
            except ray.exceptions.RayTaskError as err:   # run's own error, as a local run
                cause = getattr(err, "cause", None)        # raises it (Ray's own str is its
                if isinstance(cause, Exception):           # remote traceback's header)
                    raise cause from None
                raise
            except ray.exceptions.RayError as err:
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise RaySweepError(f"--ray {address}: {task[0]} lost after "
                                    f"{MAX_RETRIES} retries ({first})") from None
            if done is not None:
                done(rows[i])
        return rows, nodes  # type: ignore[return-value]
    finally:
        ray.shutdown()


def run_task(run, item) -> tuple[int, dict, str]:
    """The Ray task: ``run(item)``, and the id of the node that ran it."""
    i, row = run(item)
    return i, row, importlib.import_module("ray").get_runtime_context().get_node_id()


def summary(nodes: Sequence[str]) -> str:
    """One line: how many rows each node made, by node id (its first 8 characters), e.g.
    ``ray: 90 runs on 2 nodes (3f2a91c0: 46, 9b01d2e4: 44)``."""
    per_node = sorted(Counter(nodes).items())
    return (f"ray: {_count(len(nodes), 'run')} on {_count(len(per_node), 'node')}"
            f" ({', '.join(f'{node[:8]}: {n}' for node, n in per_node)})")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
