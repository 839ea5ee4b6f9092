"""The flags every client command takes (``--scheduler HOST:PORT``, default
``$GAVEL_SCHEDULER`` or 127.0.0.1:50051; ``--token-file F``; ``--tls-ca F``) and the
``gavelsched.client`` API they open (docs/api.md)."""

from __future__ import annotations

import argparse

from ..client.api import DEFAULT_SCHEDULER, Client, connect, default_address


def connection_flags() -> argparse.ArgumentParser:
    """The flags every client takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--scheduler", metavar="HOST:PORT", default=default_address(),
                        help="the scheduler's address (default: $GAVEL_SCHEDULER or "
                             f"{DEFAULT_SCHEDULER})")
    common.add_argument("--token-file", metavar="F", help="file holding the cluster's token")
    common.add_argument("--tls-ca", metavar="F", help="CA certificate to verify the "
                                                      "scheduler's TLS certificate")
    return common


def api(args: argparse.Namespace) -> Client:
    """The API over the flags' channel (a bad token or CA file: ``InputError``)."""
    return connect(args.scheduler, token_file=args.token_file, tls=args.tls_ca)
