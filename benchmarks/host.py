"""The machine a benchmark ran on, in one line, for the header of its figures.

Two VMs of this project's kind both call themselves "AMD EPYC" and ran the same code 2.5-2.8x
apart, and moved issue #30's two simulator targets in opposite directions (BENCHMARKS.md,
session 47): the CPU's widest vector extension tells them apart, so it is named too.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

# The widest first: the one named is the widest the CPU has.
VECTOR_EXTENSIONS = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")


def describe(*, load: bool = True, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``AMD EPYC (avx512f), 2 cores, CPython 3.11.7, load average 0.71``: the CPU's
    model and widest vector extension (from ``cpuinfo`` where there is one), the cores,
    the interpreter and (``load``) the 1-minute load average."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model in (platform.processor(), platform.machine()):
                model = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    widest = next((ext for ext in VECTOR_EXTENSIONS if ext in flags), None)
    text = (f"{model}{f' ({widest})' if widest else ''}, {os.cpu_count()} cores, "
            f"{platform.python_implementation()} {platform.python_version()}")
    if load and hasattr(os, "getloadavg"):
        text += f", load average {os.getloadavg()[0]:.2f}"
    return text


if __name__ == "__main__":
    print(describe())
