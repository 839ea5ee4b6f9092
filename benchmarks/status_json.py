"""``status --json`` at scale, the client's side (issue #30): a ``StatusResponse`` of
``--jobs`` queued jobs (made here, as the scheduler would send it) parsed and written as
the JSON of the contract two ways, each timed in CPU seconds in this process, best of
``--repeat``:

- *records*: ``ClusterStatus.from_pb(reply).to_dict()``, the typed records of
  ``Client.status`` and back, as ``status --json`` did before issue #30;
- *direct*: ``status_dict(reply)``, the JSON's one writer, as ``status --json`` does now.

Both print the same bytes (checked). Usage::

    python benchmarks/status_json.py [--jobs 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gavelsched.client.status import ClusterStatus  # noqa: E402
from gavelsched.daemon.statusjson import status_dict  # noqa: E402
from gavelsched.rpc import pb  # noqa: E402

TYPES = ("k80", "p100", "v100")


def reply(jobs: int) -> bytes:
    """A reply of ``jobs`` queued array jobs, each with its allocation, received time and
    rates on three types, serialised as it travels."""
    r = pb.StatusResponse(round=5, now_s=1000.0, epoch_unix=1.8e9,
                          policy="max_min_fairness_perf", round_seconds=30.0)
    for i in range(jobs):
        job = r.jobs.add(id=f"{i // 10000}_{i % 10000}", state="queued", total_steps=10**9,
                         job_type="ResNet-18 (batch size 16)", scale_factor=1,
                         reason="pending: waiting its turn (allocation: v100 0.03)",
                         arrival_s=10.0, completion_s=-1.0, started_s=-1.0, ended_s=-1.0,
                         user="alice", array_id=str(i // 10000), array_index=i % 10000,
                         eta_start_s=-1.0, eta_finish_s=-1.0)
        for k, t in enumerate(TYPES, start=1):
            job.allocation[t], job.received[t], job.steps_per_s[t] = 0.01 * k, 1.0 * k, 1.0 * k
    return r.SerializeToString()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = reply(args.jobs)
    ways = {"records": lambda x: json.dumps(ClusterStatus.from_pb(x).to_dict()),
            "direct": lambda x: json.dumps(status_dict(x))}
    best, printed = {}, {}
    for _ in range(max(1, args.repeat)):
        for name, write in ways.items():
            start = time.process_time()
            printed[name] = write(pb.StatusResponse.FromString(data))
            took = time.process_time() - start
            best[name] = min(best.get(name, took), took)
    if printed["records"] != printed["direct"]:
        raise SystemExit("status_json: the two ways printed different JSON")
    print(f"# {args.jobs:,} jobs, {len(data) / 2**20:.1f} MiB on the wire, "
          f"{len(printed['direct']) / 2**20:.1f} MiB of JSON; load average "
          f"{os.getloadavg()[0]:.2f}; CPU s, best of {args.repeat}")
    for name, took in best.items():
        print(f"{name:<8} {took:6.2f} s")
    print(f"records / direct: {best['records'] / best['direct']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
