"""How many connections a gRPC server of ours takes (issue #30: a cluster of production
size; docs/design.md, Safety rules).

Every job process holds a connection to the scheduler (``GavelIterator``) and every worker
daemon one each way: at 2,048 GPUs, thousands. Linux starts a process with a soft limit of
1,024 open files (systemd's default) under a far higher hard one, and a server past its
soft limit accepts nothing more: ``raise_open_files`` lifts the soft limit to the hard one
at a daemon's start, as Go's runtime does. A server then takes at most
``connection_cap()`` connections, keeping a quarter of its files for its own work (its
store, its subprocesses, its channels to the workers): past the cap a new connection is
closed at once (gRPC's ``grpc.max_allowed_incoming_connections``). Before, idle
connections from a client that never made a call (24,000 of them, opened in 13 s) took
every file of the scheduler. A connection with no call for ``IDLE_S`` is closed
(``grpc.max_connection_idle_ms``; a client's channel connects again at its next call), so
abandoned ones free their place. Which host holds the connections is not seen here: a
per-host cap belongs to the network (``iptables -m connlimit``, a network policy)."""

from __future__ import annotations

import resource

IDLE_S = 300.0
RESERVE_SHARE = 4       # a quarter of the open files is kept for the process's own work
MIN_RESERVE = 128
CEILING = 1 << 20       # the soft limit asked for under an unlimited hard one


def raise_open_files() -> int:
    """Lift this process's soft limit of open files to its hard limit (at most
    ``CEILING``); returns the soft limit in force (unchanged where it cannot be raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):     # (above the kernel's nr_open)
            pass
    return soft


def connection_cap(open_files: int | None = None) -> int:
    """The connections a server takes with ``open_files`` (default: this process's soft
    limit) open files: all but a reserve of a quarter of them, at least ``MIN_RESERVE``."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(16, open_files - max(MIN_RESERVE, open_files // RESERVE_SHARE))


def server_options(max_connections: int | None = None,
                   idle_s: float = IDLE_S) -> list[tuple[str, int]]:
    """The options of a gRPC server of ours: no port shared with another process, at most
    ``max_connections`` (default ``connection_cap()``), idle ones closed after ``idle_s``."""
    return [("grpc.so_reuseport", 0),
            ("grpc.max_allowed_incoming_connections", max_connections or connection_cap()),
            ("grpc.max_connection_idle_ms", int(idle_s * 1000))]
