"""PipeDream-2BW weight versions (thesis §3.2.1): double-buffered weights, ≤ 2 versions.

Input k (1-based, across mini-batches of m micro-batches) runs forward and backward with
weight version max(⌊(k−1)/m⌋ − 1, 0); a stage makes version t+1 once it has finished the
backward of every micro-batch of mini-batch t, giving W(t+1) = W(t) − ν∇f(W(t−1)).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops import Op
from .simulate import SimResult


def weight_version(k: int, microbatches: int) -> int:
    """The weight version 2BW uses for input ``k`` (1-based)."""
    if k < 1 or microbatches < 1:
        raise ValueError(f"weight_version: k={k} and microbatches={microbatches} must be >= 1")
    return max((k - 1) // microbatches - 1, 0)


@dataclass(frozen=True)
class VersionReport:
    """Per device: the version each input's forward used and the most versions held."""

    used: dict[int, dict[int, int]]   # device -> {k (1-based): version}
    max_held: tuple[int, ...]


def check_versions(result: SimResult, microbatches: int) -> VersionReport:
    """Replay a simulated 2BW timeline: each forward must find its version already made, and
    a device may hold at most 2 versions (those of in-flight inputs plus the newest).

    Raises ValueError naming the device and input when either fails.
    """
    used: dict[int, dict[int, int]] = {}
    max_held = []
    for d in range(result.stages):
        events = sorted((t for t in result.timeline if t.device == d), key=lambda t: t.start)
        backwards_done: dict[int, int] = {}
        newest = 0
        in_flight: dict[int, int] = {}  # k -> version
        peak = 1
        used[d] = {}
        for t in events:
            k = t.action.mb + 1
            if t.action.op is Op.F:
                version = weight_version(k, microbatches)
                if version > newest:
                    raise ValueError(f"2bw: device {d} runs input {k} needing version {version} "
                                     f"but only version {newest} exists")
                in_flight[k] = version
                used[d][k] = version
            elif t.action.op is Op.B:
                in_flight.pop(k)
                batch = (k - 1) // microbatches
                backwards_done[batch] = backwards_done.get(batch, 0) + 1
                if backwards_done[batch] == microbatches:
                    newest = batch + 1
            held = len(set(in_flight.values()) | {newest})
            if held > 2:
                raise ValueError(f"2bw: device {d} holds {held} weight versions after {t.action}")
            peak = max(peak, held)
        max_held.append(peak)
    return VersionReport(used, tuple(max_held))
