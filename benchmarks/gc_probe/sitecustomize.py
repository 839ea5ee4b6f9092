"""Every full garbage collection of every Python process started with this folder on
``PYTHONPATH``, one line each in ``$GC_PROBE_DIR/gc-PID.log`` (default ``/tmp/gc-probe``):
the Unix time it ended, its seconds, the objects it freed, and the process's command.
What measured the scheduler's collections at 100,000 jobs (BENCHMARKS.md, "The daemon at
scale"; ``gavelsched/daemon/collector.py``)::

    PYTHONPATH=benchmarks/gc_probe python benchmarks/daemon_scale.py --gpus 2048 \\
        --jobs 100000 --rounds 3
    python benchmarks/gc_probe/sitecustomize.py /tmp/gc-probe     # a row per process
"""

from __future__ import annotations

import gc
import os
import sys
import time

DIR = os.environ.get("GC_PROBE_DIR", "/tmp/gc-probe")
_began = [0.0]


def _timed(phase: str, info: dict) -> None:
    if info["generation"] != 2:
        return
    if phase == "start":
        _began[0] = time.perf_counter()
        return
    took = time.perf_counter() - _began[0]
    command = " ".join(a for a in sys.argv[1:4] if not a.startswith("/"))[:60] or "python"
    try:
        os.makedirs(DIR, exist_ok=True)
        with open(os.path.join(DIR, f"gc-{os.getpid()}.log"), "a") as fh:
            fh.write(f"{time.time():.1f}\t{took:.3f}\t{info['collected']}\t{command}\n")
    except OSError:
        pass


def summary(folder: str) -> None:
    """Per process: its full collections, their seconds in all and the longest."""
    print(f"{'pid':>7} {'collections':>11} {'s in all':>9} {'longest s':>9}  command")
    for name in sorted(os.listdir(folder)):
        if name.startswith("gc-") and name.endswith(".log"):
            with open(os.path.join(folder, name)) as fh:
                rows = [line.rstrip("\n").split("\t") for line in fh if line.strip()]
            took = [float(r[1]) for r in rows]
            print(f"{name[3:-4]:>7} {len(rows):>11} {sum(took):>9.2f} {max(took):>9.3f}  "
                  f"{rows[-1][3]}")


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else DIR)
else:
    gc.callbacks.append(_timed)
