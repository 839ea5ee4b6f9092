"""What ``gavelsched profile`` costs a user, and the measured rows it writes (issue #19).

Runs ``gavelsched profile --type TYPE --amp P -o traces/data/measured/TYPE-P.json`` as a
fresh process for each precision (fp32, then bf16) on this machine's GPU, and records its
wall time (process start, imports and CUDA context included) and the peak resident memory
of the process. The rows are the committed measured data (``traces/profiles.py`` reads
them); the timings go to ``--out`` (JSON) for ``benchmarks/gpu_tables.py``.

Run on a machine with a GPU: ``python benchmarks/profile_row.py --type h200``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "traces" / "data" / "measured"


def profile(worker_type: str, precision: str, row: Path, extra: list[str]) -> dict:
    """One fresh ``gavelsched profile`` process: its wall seconds and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gavelsched", "profile", "--type",
                             worker_type, "--amp", precision, "-o", str(row), *extra], cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)     # this child's own peak memory
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"gavelsched profile --amp {precision} failed ({code})")
    measured = json.loads(row.read_text())
    return {"precision": precision, "wall_s": wall, "measure_s": measured["seconds"],
            "peak_rss_mb": usage.ru_maxrss / 1024, "job_types": len(measured["steps_per_s"]),
            "skipped": measured.get("skipped", {}), "row": row.name}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--type", required=True, dest="worker_type",
                        help="the GPU type the rows are for, e.g. h100")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--rows", type=Path, default=MEASURED,
                        help="folder for the measured rows")
    parser.add_argument("--out", type=Path, default=None,
                        help="timings JSON (default: print only)")
    parser.add_argument("extra", nargs="*", help="more arguments for gavelsched profile")
    args = parser.parse_args(argv)
    args.rows.mkdir(parents=True, exist_ok=True)
    results = [profile(args.worker_type, p, args.rows / f"{args.worker_type}-{p}.json",
                       args.extra) for p in args.precisions.split(",")]
    text = json.dumps({"worker_type": args.worker_type, "runs": results}, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
