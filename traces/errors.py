"""The one error type of bad trace and table files."""

from __future__ import annotations


class TraceError(ValueError):
    """A malformed trace or throughput file. The message names the file, line and field:
    ``trace.jsonl:12: field 'total_steps': must be > 0, got -5``."""

    def __init__(self, path, line: int | None, field: str | None, message: str) -> None:
        where = str(path) + (f":{line}" if line is not None else "")
        what = f"field {field!r}: " if field else ""
        super().__init__(f"{where}: {what}{message}")
        self.path, self.line, self.field = path, line, field
