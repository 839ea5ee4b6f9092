"""A sweep's points as tasks on an existing Ray cluster (issue #30): ``gavelsched simulate
sweep --ray ADDRESS`` (or ``auto``: the cluster ``ray start`` left on this machine).

Each (point, spec) pair of ``sweep.run_points`` becomes one Ray task running the same
``run_point`` as a local worker process, so the rows, and the CSV and plot made of them,
are the local run's row for row (but ``wall_s``, each point's own time). The packages the
simulation imports travel with the job (``runtime_env`` ``py_modules``): the cluster's
nodes run this checkout's code, whatever they have installed. Ray is an optional extra
(``pip install 'gavelsched[ray]'``); without it, or without a cluster at the address,
``RaySweepError`` says so in one line.
"""

from __future__ import annotations

import importlib
import logging
import socket
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


def run_on_ray(tasks: Sequence, address: str, run, bar=None) -> list[dict]:
    """``run((i, task)) -> (i, row)`` for every task, as Ray tasks on the cluster at
    ``address``; the rows in the order of ``tasks``. ``bar``: a progress bar to update."""
    ray = connect(address)
    try:
        remote = ray.remote(num_cpus=1)(run)
        pending = [remote.remote(item) for item in enumerate(tasks)]
        rows: list[dict | None] = [None] * len(tasks)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            i, row = ray.get(done[0])
            rows[i] = row
            if bar is not None:
                bar.update(1)
        return rows  # type: ignore[return-value]
    finally:
        ray.shutdown()
