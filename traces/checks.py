"""Checks of values that come from outside, written once for every door.

docs/design.md, "Safety rules": every value from outside (CLI, YAML, JSON, gRPC, trace and table
files) is validated once, at the door, into typed records: finite numbers in range, 64-bit
integers, UTF-8 text, known names; nothing behind the door re-checks or crashes on it. Each
door (``gavelsched/client/request.py``, ``gavelsched/daemon/submissions.py``,
``gavelsched/daemon/config.py``, ``traces/formats.py``, ``traces/throughputs.py``) calls
these helpers and turns a ``BadValue`` into its own one-line error (``InputError``,
``SubmissionError``, ``ConfigError``, ``TraceError``). This module sits in ``traces/``, the
bottom room, so that every door may import it (docs/architecture.md, rooms table).
"""

from __future__ import annotations

import math
from typing import Any

INT32_MAX = 2**31 - 1         # a proto int32 field (scale factors)
INT64_MAX = 2**63 - 1         # a proto int64 field (step counts)
# A job's steps: the scheduler counts steps left in float64 too, exact up to 2^53 (beyond
# it a lease's steps are lost to rounding, and 2^63 - 1 overflowed the core's int64).
MAX_STEPS = 2**53
# The longest duration a daemon's setting may give, in seconds (about 116 days): far under
# what a thread's wait can take (threading.TIMEOUT_MAX), so no timer overflows; and the
# shortest round it runs.
MAX_SECONDS = 1e7
MIN_ROUND_SECONDS = 0.1
# A scheduler's clock (seconds since its epoch) as a picture of it gives it: about 317
# years, far beyond any uptime, and small enough that times taken from it keep their
# precision (an infinite one made a replay's every period NaN).
MAX_CLOCK_S = 1e10
# A job's priority weight: beyond this range the policies' programs lose their accuracy
# (weights of 1e-300 or 1e300 make Clarabel fail), so one job could stop every re-solve.
PRIORITY_WEIGHT_MIN, PRIORITY_WEIGHT_MAX = 1e-6, 1e6
# The most a GPU-hour may cost, in dollars (more is a typo or a unit slip): a price near the
# largest float made a run's cost inf (the forecast door's fuzz found 1e308).
MAX_PRICE = 1e6
MAX_ARRAY = 10_000            # copies in one job array (submit --count)
MAX_GPUS_PER_SERVER = 4096    # GPUs one worker server registers: each a worker of the view
SHOWN_CHARS = 60              # a bad value is quoted in an error up to this many characters


class BadValue(ValueError):
    """A value refused at a door: ``field`` names it, ``need`` says what it must be (one
    line), ``value`` is the value refused (not shown with ``show=False``, e.g. for a
    missing key). ``reason`` is ``need, got VALUE``; ``str()`` is ``field: reason``."""

    def __init__(self, field: str, need: str, value: Any = None, *,
                 show: bool = True) -> None:
        self.field, self.need, self.value, self.show = field, need, value, show
        self.reason = f"{need}, got {shown(value)}" if show else need
        super().__init__(f"{field}: {self.reason}")


class NotUtf8(ValueError):
    """Bytes that are not UTF-8 text; ``line`` (from 1) and ``offset`` (from 0) locate the
    first bad byte. ``str()`` is ``line L, byte offset N (0xff)``."""

    def __init__(self, line: int, offset: int, byte: int) -> None:
        super().__init__(f"line {line}, byte offset {offset} ({byte:#04x})")
        self.line, self.offset, self.byte = line, offset, byte


def shown(value: Any) -> str:
    """``repr(value)``, cut to ``SHOWN_CHARS`` characters: a refusal stays one short line
    (a repr never holds a raw newline)."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8 (docs/design.md, Safety rules: UTF-8 text), or ``NotUtf8``
    naming the line and byte offset of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NotUtf8(data.count(b"\n", 0, err.start) + 1, err.start,
                      data[err.start]) from None


def number(value: Any, field: str, *, low: float | None = None, high: float | None = None,
           above: bool = False) -> float:
    """A finite float from an int or a float (not a bool), ``>= low`` (``> low`` with
    ``above``) and ``<= high`` (docs/design.md, Safety rules: finite numbers in range); NaN, ±inf
    and ints too large for a float are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadValue(field, "must be a number", value)
    try:
        result = float(value)
    except OverflowError:
        raise BadValue(field, "must be a finite number", value) from None
    if not math.isfinite(result):
        raise BadValue(field, "must be a finite number", value)
    if low is not None and (result <= low if above else result < low):
        raise BadValue(field, f"must be {'>' if above else '>='} {low:g}", value)
    if high is not None and result > high:
        raise BadValue(field, f"must be <= {high:g}", value)
    return result


def price(value: Any, field: str) -> float:
    """A $/GPU-hour: a finite number in [0, ``MAX_PRICE``] (every door of prices)."""
    return number(value, field, low=0.0, high=MAX_PRICE)


def slo(value: Any, field: str = "slo_s", *, none: float | None = None) -> float | None:
    """An SLO, seconds from submission: a finite number > 0; None for no SLO, which a door
    writes as null (YAML, JSONL) or ``none`` (0 on the wire, where unset is 0). Every door
    that takes an SLO checks it here, so a negative one is refused everywhere."""
    if value is None or (none is not None and not isinstance(value, bool) and value == none):
        return None
    result = number(value, field)
    if result <= 0:
        written = "null" if none is None else f"{none:g}"
        raise BadValue(field, f"must be > 0 seconds, or {written} for no SLO", value)
    return result


def integer(value: Any, field: str, *, low: int | None = None,
            high: int = INT64_MAX) -> int:
    """An int (not a bool, not a float) in ``[low, high]``; ``high`` defaults to the
    largest 64-bit integer, as a proto int64 holds (docs/design.md, Safety rules: 64-bit
    integers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadValue(field, "must be an integer", value)
    if low is not None and value < low:
        raise BadValue(field, f"must be >= {low}", value)
    if value > high:
        raise BadValue(field, f"must be <= {high}", value)
    if value < -INT64_MAX - 1:
        raise BadValue(field, f"must be >= {-INT64_MAX - 1}", value)
    return int(value)


def whole(value: float, field: str, *, low: int | None = None,
          high: int = INT64_MAX) -> int:
    """``value`` (an int, or a float already checked finite) as an int: a whole number in
    ``[low, high]`` (for formats whose numbers are all read as floats)."""
    if isinstance(value, float):
        if value != int(value):
            raise BadValue(field, "must be a whole number", value)
        value = int(value)
    return integer(value, field, low=low, high=high)


def text(value: Any, field: str, *, one_line: bool = True, empty: bool = True) -> str:
    """A str (docs/design.md, Safety rules: text): UTF-8 (no lone surrogate), no NUL (no
    process argument or path can hold one) and, for a name (``one_line``), no control
    character at all; ``empty=False`` refuses the empty string."""
    if not isinstance(value, str):
        raise BadValue(field, "must be a string", value)
    if not value.isascii():   # (a JSON "\ud800" escape makes a str no file can hold)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadValue(field, "must be UTF-8 text (it holds a lone surrogate)",
                           value) from None
    if not value and not empty:
        raise BadValue(field, "must not be empty", value)
    if "\0" in value:
        raise BadValue(field, "must not contain a NUL character", value)
    if one_line and any(c < " " or c == "\x7f" for c in value):
        raise BadValue(field, "must not contain control characters", value)
    return value
