"""Parsers for flag values that more than one sub-command reads.

``parse_counts`` reads "how many of each GPU type" flags (``simulate --cluster``,
``--gpus-per-server``, ``trace show --cluster``, ``local-cluster --workers``, ``vn plan
--gpus``) by ``traces.counts``' one rule; every refusal is an ``InputError`` (exit code 2)
whose one line names the flag and the bad value.
"""

from __future__ import annotations

from traces.counts import CountsError, counts_text
from traces.counts import parse_counts as read_counts

from . import InputError

__all__ = ["counts_text", "parse_counts"]


def parse_counts(text: str, *, what: str, allow_zero: bool = True,
                 every_type: bool = False) -> dict[str, int] | int:
    """``traces.counts.parse_counts`` at the CLI's door: a refusal is an ``InputError``."""
    try:
        return read_counts(text, what=what, allow_zero=allow_zero, every_type=every_type)
    except CountsError as err:
        raise InputError(str(err)) from None
