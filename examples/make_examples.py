"""Writes the generated example files the README's tour uses (run from the repository root:
``python examples/make_examples.py``); the others are written by hand. Deterministic:
``tests/cli/test_readme.py`` checks that the shipped files are what this writes.

- ``big.json``: a Problem of 256 one-GPU jobs of the catalog's job types on 64 GPUs of each
  type, for ``solve --partitions`` (POP);
- ``gavel_throughputs.json``: the catalog's one-job throughputs in Gavel's JSON format.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from traces import default_table  # noqa: E402
from traces.throughputs import table_to_gavel_dict  # noqa: E402
from traces.types import ThroughputTable  # noqa: E402

JOBS, GPUS, SEED = 256, 64, 0


def big_problem(table: ThroughputTable) -> dict:
    rng = np.random.default_rng(SEED)
    kinds = [k for k in table.job_keys if k[1] == 1]
    jobs = []
    for i in range(JOBS):
        job_type, sf = kinds[int(rng.integers(len(kinds)))]
        jobs.append({"id": str(i), "scale_factor": sf,
                     "throughputs": {t: table.get(t, job_type, sf) for t in table.worker_types},
                     "remaining_steps": int(rng.integers(1000, 100000))})
    return {"cluster": {t: GPUS for t in table.worker_types}, "jobs": jobs}


def files() -> dict[str, str]:
    """Each generated file's name and text."""
    table = default_table()
    solo = ThroughputTable(table.solo, {})
    return {"big.json": json.dumps(big_problem(table), separators=(",", ":")) + "\n",
            "gavel_throughputs.json": json.dumps(table_to_gavel_dict(solo), indent=1) + "\n"}


if __name__ == "__main__":
    for name, text in files().items():
        (HERE / name).write_text(text)
        print(f"wrote examples/{name}")
