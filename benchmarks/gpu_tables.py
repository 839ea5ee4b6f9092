"""BENCHMARKS.md's GPU tables (issue #19), from what the GPU runs wrote.

Inputs, all committed: the measured rows ``traces/data/measured/TYPE-{fp32,bf16}.json``
(``gavelsched profile``), the profile timings ``benchmarks/results/profile-TYPE.json``
(``benchmarks/profile_row.py --out``), the check's record
``benchmarks/results/gpu_check-TYPE.json`` (``benchmarks/gpu_check.py``; its
``gpu_check.json``) and its daemon and job logs ``benchmarks/results/gpu_check-TYPE-logs.tgz``
(a tar of its ``--out``, read by ``benchmarks/gpu_runs.py``), and the two-rank trial run
on its own ``benchmarks/results/two_ranks-TYPE.json`` (``gpu_runner.py two-ranks``).
Prints markdown: steps/s per job type in fp32 and bf16 with the speed-up over the
catalog's V100 beside the thesis's V100/K80 ratio (Table 6.1), the Table 5.4 analogue on
this GPU (§5.7.2), the check's results, and what measuring a row costs.

Run: ``python benchmarks/gpu_tables.py --type h200``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from traces.catalog import default_catalog  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MEASURED = ROOT / "traces" / "data" / "measured"


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _families() -> dict:
    import yaml

    return yaml.safe_load(default_catalog().path.read_text())["meta"]["families"]


def speed_table(fp32: dict, bf16: dict | None) -> str:
    catalog = default_catalog()
    families = _families()
    head = (f"{fp32['device']}, torch {fp32['torch']}, CUDA {fp32['cuda']}, measured "
            f"{fp32['measured_at'][:10]}; steps/s at scale factor 1 (one step = one "
            "mini-batch of the job type's batch size).")
    lines = [head, "", "| job type | fp32 steps/s | bf16 steps/s | bf16/fp32 | V100 "
             "(catalog) steps/s | fp32 speed-up over V100 | thesis V100/K80 |",
             "|---|---|---|---|---|---|---|"]
    for job_type, rate in fp32["steps_per_s"].items():
        info = catalog.job_types.get(job_type)
        v100 = catalog.table.get("v100", job_type, 1)
        family = families.get(info.family, {}) if info else {}
        thesis = family.get("speedup_vs_k80", {}).get("v100")
        source = "T6.1" if family.get("speedup_source") == "T6.1" else "not in T6.1"
        half = (bf16 or {}).get("steps_per_s", {}).get(job_type)
        lines.append(
            f"| {job_type} | {rate:.4g} | {f'{half:.4g}' if half else '-'} | "
            f"{f'{half / rate:.2f}x' if half else '-'} | {v100:.4g} | "
            f"{rate / v100:.1f}x | {f'{thesis}x ({source})' if thesis else '-'} |")
    skipped = {**fp32.get("skipped", {}), **(bf16 or {}).get("skipped", {})}
    if skipped:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())]
    lines += ["", "What was run, and where it differs from what Gavel profiled:", ""]
    lines += [f"- {family}: {text}" for family, text in fp32.get("architectures", {}).items()]
    return "\n".join(lines)


def check_table(check: dict, trial: dict | None = None) -> str:
    """The check's record; ``trial``: the two-rank trial run again on its own (the
    check's record of it may predate ``gpu_runner.py``'s per-rank account)."""
    env = check["environment"]
    lines = [f"{env.get('device')} ({env.get('memory_gb', 0):.0f} GiB), torch {env['torch']}, "
             f"CUDA {env['cuda']}: {'passed' if check['passed'] else 'FAILED'} in "
             f"{check['seconds']:.0f} s.", "",
             "| workload | job type | total steps | runs (preemptions) | final parameters vs "
             "uninterrupted run |", "|---|---|---|---|---|"]
    for w, job in check.get("jobs", {}).items():
        runs, same = check["runs"][w], check["comparison"][w]
        verdict = (f"bit-equal ({same['tensors']} tensors)" if same.get("equal")
                   else f"differ: {same}")
        lines.append(f"| {w} | {job.get('job_type', '')} | {job['steps']} | {runs} "
                     f"({runs - 1}) | {verdict} |")
    vn = check.get("vn", {})
    if vn:
        lines += ["", "Virtual nodes on CUDA, float64: " + ", ".join(
            f"{m} {d:.2g}" for m, d in vn.get("mappings", {}).items())
            + " (largest difference from one process running every node; limit 1e-9)."]
    if check.get("paths"):
        lines += ["", "CUDA paths run:"] + [f"- {p['path']}: {p['result']}"
                                            for p in check["paths"]]
    two = trial or check.get("two_ranks")
    if two:
        again = " (run again on its own: `gpu_runner.py two-ranks`)" if trial else ""
        lines += ["", f"Tried{again}: {two['path']}: {two['result']}."]
    return "\n".join(lines)


def cost_table(timings: dict) -> str:
    lines = ["| precision | job types | wall, fresh process (s) | of which measuring (s) | "
             "peak RSS (MiB) |", "|---|---|---|---|---|"]
    for run in timings["runs"]:
        lines.append(f"| {run['precision']} | {run['job_types']} | {run['wall_s']:.1f} | "
                     f"{run['measure_s']:.1f} | {run['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--type", required=True, dest="worker_type")
    parser.add_argument("--rows", type=Path, default=MEASURED)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    fp32 = _read(args.rows / f"{args.worker_type}-fp32.json")
    bf16 = _read(args.rows / f"{args.worker_type}-bf16.json")
    check = _read(args.results / f"gpu_check-{args.worker_type}.json")
    trial = _read(args.results / f"two_ranks-{args.worker_type}.json")
    timings = _read(args.results / f"profile-{args.worker_type}.json")
    logs = args.results / f"gpu_check-{args.worker_type}-logs.tgz"
    parts = []
    if logs.exists():   # (a check's own record has the same table: ``costs``)
        from gpu_runs import runs, table, unpacked

        with unpacked(logs) as cluster:
            parts += ["### Runs on the GPU under a real worker (thesis Table 5.4 analogue)",
                      table(runs(cluster))]
    if check:
        parts += ["### The GPU check", check_table(check, trial)]
    if fp32:
        parts += ["### Steps/s per job type", speed_table(fp32, bf16)]
    if timings:
        parts += ["### Measuring a row: `gavelsched profile`", cost_table(timings)]
    if not parts:
        print(f"gpu_tables: nothing found for {args.worker_type}", file=sys.stderr)
        return 2
    print("\n\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
