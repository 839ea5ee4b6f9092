"""Length-prefixed protobuf frames over a pipe: the scheduler and its forecast process
(``gavelsched/daemon/forecast.py``, ``simulator/forecast.py``) talk this way. A frame is a
4-byte big-endian length and that many bytes of one serialized message."""

from __future__ import annotations

import struct
from typing import BinaryIO

HEADER = struct.Struct(">I")
MAX_FRAME = 1 << 30        # 1 GiB: a Status of a million jobs is far below it


class FrameError(ValueError):
    """The pipe ended inside a frame, or a frame's length is not believable."""


def write_frame(stream: BinaryIO, message) -> None:
    """Write ``message`` (anything with ``SerializeToString``) as one frame and flush."""
    data = message.SerializeToString()
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's bytes; None at a clean end of the stream (before a header)."""
    head = _read(stream, HEADER.size, allow_eof=True)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        raise FrameError(f"a frame of {size} bytes is more than the {MAX_FRAME} allowed")
    return _read(stream, size, allow_eof=False)


def _read(stream: BinaryIO, size: int, *, allow_eof: bool) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            if allow_eof and left == size:
                return None
            raise FrameError(f"the pipe ended {size - left} bytes into a {size}-byte read")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
