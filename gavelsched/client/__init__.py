"""gavelsched's Python API (docs/api.md): a scheduler reached over gRPC with its token and
TLS, as calls that take and return typed, frozen records.

    from gavelsched.client import JobRequest, connect

    with connect("127.0.0.1:50051", token_file="token") as client:
        job_id = client.submit(JobRequest(job_type="A3C", total_steps=1000))
        print(client.status().job(job_id).state)

``submit``, ``status``, ``cancel``, ``hold``, ``release``, ``update``, ``history``,
``usage``, ``reload``, ``logs``, ``drain`` and ``predict`` are the ``gavelsched`` commands
of the same names, whose CLI doors call them. Every refusal is one line:
``InputError`` (bad input here) or ``ClientError`` (the scheduler said no, or was not
reached). Importing this package loads neither gRPC nor the simulator.
"""

from __future__ import annotations

import importlib

from .errors import ClientError, InputError

# The rest is loaded when first named (PEP 562): every CLI command imports ``errors``, and
# ``gavelsched simulate`` need not pay for the records and the client behind them.
_HOMES = {"Client": "api", "connect": "api", "Drained": "records", "HistoryEvent": "records",
          "LogChunk": "records", "Submitted": "records", "JobRequest": "request",
          "ClusterStatus": "status", "JobStatus": "status", "SolveStatus": "status",
          "WorkerStatus": "status"}

__all__ = ["Client", "ClientError", "ClusterStatus", "Drained", "HistoryEvent", "InputError",
           "JobRequest", "JobStatus", "LogChunk", "SolveStatus", "Submitted", "WorkerStatus",
           "connect"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
