"""Parsers for flag values that more than one sub-command reads, and the check of what a
command needs installed (``needs_torch``).

``parse_counts`` reads "how many of each GPU type" flags (``simulate --cluster``,
``--gpus-per-server``, ``trace show --cluster``, ``local-cluster --workers``, ``vn plan
--gpus``) by ``traces.counts``' one rule; every refusal is an ``InputError`` (exit code 2)
whose one line names the flag and the bad value.
"""

from __future__ import annotations

import importlib.util

from traces.counts import CountsError, counts_text
from traces.counts import parse_counts as read_counts

from . import InputError

__all__ = ["counts_text", "needs_torch", "parse_counts"]

TORCH_INSTALL = "pip install 'torch>=2.3' (the CPU build: pip install torch==2.13.0)"


def needs_torch(what: str) -> None:
    """An ``InputError`` (one line, exit code 2) before anything starts when torch is not
    installed and ``what`` needs it (``vn check``, ``profile``, ``local-cluster``'s torch
    workloads); torch itself is not imported here."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):     # (a torch module set to None, a broken one)
        found = False
    if not found:
        raise InputError(f"{what} needs torch, which is not installed: {TORCH_INSTALL}")


def seed(text: str) -> int:
    """A ``--seed``'s value (an argparse ``type``: its ``ValueError`` reads "invalid seed
    value"): an integer >= 0, as numpy's generators take (a negative one failed deep in
    the run, a sweep's in its worker processes)."""
    value = int(text)
    if value < 0:
        raise ValueError(f"a seed is an integer >= 0, got {value}")
    return value


def parse_counts(text: str, *, what: str, allow_zero: bool = True,
                 every_type: bool = False) -> dict[str, int] | int:
    """``traces.counts.parse_counts`` at the CLI's door: a refusal is an ``InputError``."""
    try:
        return read_counts(text, what=what, allow_zero=allow_zero, every_type=every_type)
    except CountsError as err:
        raise InputError(str(err)) from None
