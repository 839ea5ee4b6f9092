"""The test process's path to a scheduler in another network namespace (the fault harness,
issue #17): a Unix socket (filesystem sockets cross network namespaces) that this small
forwarder serves from inside the scheduler's namespace, relaying each connection to the
scheduler's address there. Faults on the workers' links never touch it.

    python -m tests.faults.proxy SOCKET HOST:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _forward(sock: str, host: str, port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_unix_server(handle, path=sock)
    os.chmod(sock, 0o600)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.proxy")
    parser.add_argument("socket")
    parser.add_argument("target", metavar="HOST:PORT")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    asyncio.run(_forward(args.socket, host, int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
