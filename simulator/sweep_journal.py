"""A sweep's journal: each finished run's row, appended to ``DIR/runs.jsonl`` (one JSON
line, flushed to disk) as the run finishes. A sweep that stops (Ctrl-C, a lost machine, a
run that raised) loses only the runs in flight; run again with the same flags into the same
folder, it makes only the runs the journal lacks and writes the same CSV and plot.

The journal's first line names its sweep: a digest of everything but the grid
(``SweepSpec``) and of the package's version. A folder whose journal belongs to another
sweep is refused in one line rather than mixed into this one's rows. A line that cannot be
read (a write cut short, or not a row: edited by hand) is skipped with a warning, and its
run made again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

JOURNAL = "runs.jsonl"
FORMAT = 1

Key = tuple[str, float, int]      # (policy, rate, seed): a point of the grid


class JournalError(ValueError):
    """The output folder's journal cannot be resumed (another sweep's, or not a journal)."""


def key_of(row: Mapping[str, Any]) -> Key:
    return (str(row["policy"]), float(row["rate"]), int(row["seed"]))


def fingerprint(spec: Any) -> str:
    """A digest of ``spec`` (a dataclass of plain values, mappings, tables and functions)
    and of the package's version: equal for the same flags, whatever the process."""
    try:
        version = metadata.version("gavelsched")
    except metadata.PackageNotFoundError:     # (run from a checkout, not installed)
        version = "unknown"
    text = json.dumps([FORMAT, version, _plain(spec)], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data that does not depend on the process (no addresses)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return sorted(([_plain(k), _plain(v)] for k, v in value.items()), key=repr)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if callable(value):            # a trace function, or a partial of one
        func = getattr(value, "func", value)
        return [getattr(func, "__module__", ""), getattr(func, "__qualname__", repr(func)),
                _plain(getattr(value, "args", ())), _plain(getattr(value, "keywords", {}))]
    return value


class Journal:
    """The journal of the sweep ``spec`` in ``folder``: ``done`` holds the rows it already
    has by point (those ``accept`` takes: a line that is not a row is unreadable); ``add``
    appends one as its run finishes."""

    def __init__(self, folder: Path, spec: Any,
                 accept: Callable[[Mapping[str, Any]], bool] = lambda row: True) -> None:
        self.path = Path(folder) / JOURNAL
        self.sweep = fingerprint(spec)
        self._accept = accept
        self.done: dict[Key, dict] = {}
        if self.path.exists():
            self._read()
        else:
            self._append({"sweep": self.sweep, "format": FORMAT})

    def _read(self) -> None:
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):   # a write cut short: the next line apart
            with open(self.path, "ab") as f:
                f.write(b"\n")
        lines = data.split(b"\n")
        try:
            head = json.loads(lines[0])
            sweep = head["sweep"]
        except (ValueError, TypeError, KeyError, UnicodeDecodeError):
            raise JournalError(f"{self.path}: not a sweep journal; remove it, or give "
                               "another --output folder") from None
        if sweep != self.sweep:
            raise JournalError(f"{self.path} holds the runs of another sweep (other flags or "
                               "another version); give another --output folder, or remove "
                               "it to start over")
        unread = 0
        for line in lines[1:]:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not (isinstance(row, dict) and self._accept(row)):
                    raise ValueError("not a row")
                self.done[key_of(row)] = row
            except (ValueError, TypeError, KeyError, UnicodeDecodeError):
                unread += 1
        if unread:
            log.warning("%s: %d line%s could not be read (a write cut short?); %s made "
                        "again", self.path, unread, "" if unread == 1 else "s",
                        "its run is" if unread == 1 else "their runs are")

    def add(self, row: Mapping[str, Any]) -> None:
        """Record a finished run's row."""
        self.done[key_of(row)] = dict(row)
        self._append(row)

    def _append(self, record: Mapping[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

