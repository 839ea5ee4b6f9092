"""``benchmarks/host.py``: the machine line a benchmark's figures carry, which tells apart
two VMs that give the same CPU model but run the same code at different speeds."""

from __future__ import annotations

import os
import platform

from tests.benchmark_modules import loaded

CPUINFO = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw

processor\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512bw
"""


def test_the_line_names_the_model_its_widest_vector_extension_cores_and_python(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    with loaded("host") as host:
        line = host.describe(load=False, cpuinfo=info)
        older = host.describe(load=False, cpuinfo=_without(info, "avx512f avx512bw"))
    python = f"{platform.python_implementation()} {platform.python_version()}"
    assert line == f"AMD EPYC (avx512f), {os.cpu_count()} cores, {python}"
    assert older == f"AMD EPYC (avx2), {os.cpu_count()} cores, {python}"


def test_without_cpuinfo_the_line_still_says_what_it_can_and_the_load(tmp_path):
    with loaded("host") as host:
        line = host.describe(cpuinfo=tmp_path / "missing")
    assert f"{os.cpu_count()} cores" in line and "(" not in line.split(",")[0]
    assert line.rsplit(", ", 1)[1].startswith("load average ")


def _without(info, flags: str):
    trimmed = info.with_name("trimmed")
    trimmed.write_text(info.read_text().replace(f" {flags}", ""))
    return trimmed
