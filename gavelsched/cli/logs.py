"""``gavelsched logs ID [--follow] [--rank R] [--stream out|err]``: a job's output, fetched
by the scheduler from the workers that ran it, over the same token and TLS as every call
(docs/runtime.md, "Logs").

Files come in order: by round, rank, then stdout before stderr, across servers. As ``tail``
does with several files, a header line (``==> round 3, rank 0, stdout (server 1, host)
<==``) comes before each file's bytes, unless ``--no-headers``. With ``--follow`` it goes
on printing what the job writes until the job has ended (Ctrl-C stops it sooner). A server
that cannot be read gets one warning on stderr; an unknown job exits with code 2. A door
over ``Client.logs`` (docs/api.md).
"""

from __future__ import annotations

import argparse
import sys

from . import EXIT_INTERRUPTED
from .connection import api, connection_flags


def register(subparsers) -> None:
    p = subparsers.add_parser("logs", parents=[connection_flags()], help="print a job's output",
                              description="Print a job's stdout and stderr from the workers "
                                          "that ran it, round by round, rank by rank.")
    p.add_argument("id", help="the job id")
    p.add_argument("-f", "--follow", action="store_true",
                   help="go on printing what the job writes until it has ended")
    p.add_argument("--rank", metavar="R", type=int, action="append", default=[],
                   help="only this rank (again for more); default: every rank")
    p.add_argument("--stream", choices=("out", "err"), help="only stdout or stderr")
    p.add_argument("--no-headers", action="store_true",
                   help="no '==> round, rank, stream <==' line before each file")
    p.set_defaults(func=logs)


def header(chunk) -> str:
    """The line before a file's bytes (a ``LogChunk``)."""
    return (f"==> round {chunk.round}, rank {chunk.rank}, "
            f"{'stdout' if chunk.stream == 'out' else 'stderr'} "
            f"(server {chunk.server_id}, {chunk.host}) <==\n")


def logs(args: argparse.Namespace) -> int:
    out, last, newline = sys.stdout.buffer, None, True
    try:
        for chunk in api(args).logs(args.id, follow=args.follow, ranks=args.rank,
                                    stream=args.stream):
            if chunk.error:
                print(f"gavelsched logs: warning: {chunk.error}", file=sys.stderr)
                continue
            key = (chunk.server_id, chunk.round, chunk.rank, chunk.stream)
            if key != last and not args.no_headers:
                out.write(("" if newline else "\n").encode() + header(chunk).encode())
            last, newline = key, chunk.data.endswith(b"\n")
            out.write(chunk.data)
            out.flush()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0
