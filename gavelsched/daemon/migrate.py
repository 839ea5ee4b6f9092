"""A store file from before a column existed gets it (``store.Store`` calls ``migrate`` at
each open; thesis §5.6: the scheduler survives its own restart, across versions too)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

log = logging.getLogger(__name__)

# Columns added to ``jobs`` since the first schema, with the statement that fills them in
# an older file (done jobs ended when they were done).
ADDED_COLUMNS = {"started_s": None,
                 "ended_s": "UPDATE jobs SET ended_s=completion_s WHERE state='done'"}


def migrate(db: sqlite3.Connection,
            transaction: Callable[[], AbstractContextManager[sqlite3.Connection]],
            path: Path) -> None:
    """Add the ``jobs`` columns an older file lacks (``ADDED_COLUMNS``), in one
    transaction: its rows load as before, with what the new columns can tell; and
    ``usage.share`` (its runs were their jobs' own: 1)."""
    usage = {row[1] for row in db.execute("PRAGMA table_info(usage)")}
    if "share" not in usage:
        with transaction() as tx:
            tx.execute("ALTER TABLE usage ADD COLUMN share REAL NOT NULL DEFAULT 1.0")
    have = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    missing = [c for c in ADDED_COLUMNS if c not in have]
    if not missing:
        return
    with transaction() as tx:
        for column in missing:
            tx.execute(f"ALTER TABLE jobs ADD COLUMN {column} REAL")
            if ADDED_COLUMNS[column]:
                tx.execute(ADDED_COLUMNS[column])
    log.info("store %s: added the jobs columns %s", path, ", ".join(missing))
