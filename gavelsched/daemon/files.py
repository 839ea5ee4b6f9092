"""The doors of the files an operator writes (the cluster YAML, the users file, a price
trace's path): text that must be UTF-8 YAML, and paths made absolute once, relative ones
from the folder of the file that names them (docs/design.md, Safety rules). Each refusal
is one line (``FileError``), which the caller prefixes with what it was reading."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from traces.checks import NotUtf8, shown, utf8


class FileError(ValueError):
    """A file or path that cannot be used (one line)."""


def parse_yaml(data: bytes) -> Any:
    """``data`` as YAML: ``FileError`` for bytes that are not UTF-8 or not YAML."""
    try:
        text = utf8(data)
    except NotUtf8 as err:
        raise FileError(f"not UTF-8 text at {err}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = str(getattr(err, "problem", None) or err).splitlines()[0]
        raise FileError(f"bad YAML{where}: {problem}") from None
    except RecursionError:
        raise FileError("bad YAML: nested too deeply") from None
    except (ValueError, OverflowError) as err:   # a date PyYAML cannot build: 2024-13-01
        raise FileError(f"bad YAML: {str(err).splitlines()[0]}") from None


def absolute_path(value: Any, base: str | Path) -> Path:
    """``value`` (text without control characters, ``~`` expanded) as an absolute path,
    a relative one taken from ``base``; ``FileError`` otherwise."""
    if not isinstance(value, str) or not value or any(c < " " or c == "\x7f" for c in value):
        raise FileError(f"must be a path, got {shown(value)}")
    try:
        p = Path(value).expanduser()
    except RuntimeError:   # "~user" of no such user
        raise FileError(f"cannot expand {shown(value)}: no such home directory") from None
    return Path(os.path.normpath(p if p.is_absolute() else Path(base).absolute() / p))
