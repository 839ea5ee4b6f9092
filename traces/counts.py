"""How many GPUs (or workers) of each type, as text: ``"v100=36,p100=36,k80=0"``, or
Gavel's ``V100:P100:K80``. ``parse_counts`` is the one reader (the CLI's flags
``simulate --cluster``, ``--gpus-per-server``, ``trace show --cluster``, ``local-cluster
--workers``, ``vn plan --gpus``, and the benchmarks' own); ``counts_text`` writes what it
reads. Every refusal is a ``CountsError`` whose one line names the flag and the bad value.
"""

from __future__ import annotations

import re

__all__ = ["GAVEL_TYPE_ORDER", "CountsError", "counts_text", "parse_counts"]

# The types of Gavel's ``V100:P100:K80`` cluster notation, in its order.
GAVEL_TYPE_ORDER = ("v100", "p100", "k80")

_DIGITS = re.compile(r"[0-9]+")


class CountsError(ValueError):
    """Counts that cannot be read (one line, starting with the flag)."""


def parse_counts(text: str, *, what: str, allow_zero: bool = True,
                 every_type: bool = False) -> dict[str, int] | int:
    """``"v100=36,p100=36,k80=0"`` -> ``{"v100": 36, "p100": 36, "k80": 0}``.

    The rule, the same for every flag:

    - ``TYPE=N[,TYPE=N...]``, or Gavel's ``V100:P100:K80`` (exactly three counts, for
      v100, p100 and k80 in that order);
    - blanks around names, counts and entries are ignored; names keep their case;
    - ``N`` is a whole number written with the digits 0-9 (no sign, no ``_``), at least 0,
      or at least 1 with ``allow_zero=False``;
    - an empty entry (``v100=1,``), a name given twice, or counts that are all 0 are refused.

    With ``every_type``, a bare ``N`` (the same count for every type) is accepted too and
    returned as an ``int``. ``what`` (the flag) starts every refusal's message.
    """
    spec = text.strip()
    if "=" not in spec and ":" in spec:
        counts = spec.split(":")
        if len(counts) != len(GAVEL_TYPE_ORDER):
            raise CountsError(f"{what}: Gavel's form is V100:P100:K80, got {text!r}")
        pairs = list(zip(GAVEL_TYPE_ORDER, counts))
    elif every_type and "=" not in spec:
        return _count(spec, "every type", what, least=1)  # all 0 is refused: at least 1
    else:
        pairs = []
        for part in spec.split(","):
            name, sep, count = part.partition("=")
            if not sep or not name.strip():
                raise CountsError(f"{what}: expected TYPE=N[,TYPE=N...], got {part.strip()!r}")
            pairs.append((name.strip(), count))
    out: dict[str, int] = {}
    for name, count in pairs:
        if name in out:
            raise CountsError(f"{what}: {name!r} is given twice in {text!r}")
        out[name] = _count(count, repr(name), what, least=0 if allow_zero else 1)
    if not any(out.values()):
        raise CountsError(f"{what}: every count in {text!r} is 0")
    return out


def counts_text(counts: dict[str, int]) -> str:
    """``{"v100": 36, "k80": 2}`` -> ``"v100=36,k80=2"``: what ``parse_counts`` reads."""
    return ",".join(f"{name}={n}" for name, n in counts.items())


def _count(text: str, of: str, what: str, *, least: int) -> int:
    count = text.strip()
    if not _DIGITS.fullmatch(count) or int(count) < least:
        raise CountsError(f"{what}: the count of {of} must be a whole number >= {least}, "
                          f"got {count!r}")
    return int(count)
