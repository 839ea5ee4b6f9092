"""Token auth and TLS for every gavelsched gRPC endpoint (scheduler and workers alike).

- A server made with ``serve(..., token=T)`` refuses every call whose metadata lacks
  ``authorization: Bearer T`` with UNAUTHENTICATED (the health service included), before
  any handler runs: a worker never runs a command from an unauthenticated source. With
  ``serve(..., identities=current)`` a call must instead identify a caller: a user, the
  daemon, a job (``gavelsched.rpc.identity``).
- ``channel(address, token=T, ca=...)`` adds that header to every call it makes, and
  speaks TLS when given the CA that signed the server's certificate.
- ``exposure(address, token, insecure=...)`` is the rule every daemon applies before it
  listens (docs/design.md, Safety rules): beyond loopback without a token it refuses (unless
  ``insecure``); it returns the one-line warning or notice the daemon logs otherwise.
- ``new_token()`` / ``write_token(path)`` make a fresh random token (file mode 0600).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from .identity import AUTH_HEADER, AuthCheck, Identities, TokenGate
from .limits import IDLE_S, server_options

# How to make a token (any non-empty text; ``read_token`` drops surrounding whitespace).
MAKE_TOKEN = "(umask 077; head -c 32 /dev/urandom | base64 > token)"


class SecurityError(ValueError):
    """A token or TLS file that cannot be used."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's ``cert`` and ``key``; ``ca`` signs the server certificate
    (clients verify with it)."""

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None


def read_token(path: str | Path | None) -> str | None:
    """The token in ``path`` (surrounding whitespace dropped), or None for no path."""
    if path is None:
        return None
    try:
        token = Path(path).read_text().strip()
    except OSError as err:
        raise SecurityError(f"token file {path}: {err.strerror}") from None
    if not token:
        raise SecurityError(f"token file {path} is empty")
    return token


def new_token() -> str:
    """A fresh random token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def write_token(path: str | Path, token: str | None = None) -> str:
    """Write ``token`` (default: a fresh ``new_token()``) to ``path``, readable by its owner
    only (mode 0600, from creation on); returns the token."""
    token = token or new_token()
    path = Path(path)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return token


def host_of(address: str) -> str:
    """The host of ``host:port`` (IPv6 brackets dropped)."""
    return address.rpartition(":")[0].strip("[]")


def is_loopback(host: str) -> bool:
    """``host`` names loopback only: ``localhost``, 127.0.0.0/8 or ::1 (not 0.0.0.0, which
    is every interface)."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.split("%")[0]).is_loopback
    except ValueError:
        return False


def is_this_machine(host: str) -> bool | None:
    """Whether ``host`` is this machine (loopback, or an address a socket here can bind);
    None when the name does not resolve. Sends nothing on the network."""
    if is_loopback(host):
        return True
    try:
        infos = socket.getaddrinfo(host.strip("[]"), None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    for family, kind, _, _, sockaddr in infos:
        if is_loopback(str(sockaddr[0])):
            return True
        try:
            with socket.socket(family, kind) as probe:
                probe.bind((sockaddr[0], 0, *sockaddr[2:]))
            return True
        except OSError:
            continue
    return False


def exposure(address: str, token: str | None, *, insecure: bool, what: str, harm: str,
             fix: str) -> str | None:
    """The rule a daemon applies before it listens on ``address`` (docs/design.md, Safety rules).

    With a token: None (nothing to say). Without one, beyond loopback: ``SecurityError``
    (one line) saying how to make a token, unless ``insecure``. Otherwise the one-line
    warning (``insecure``) or notice (loopback, no token) the daemon logs at start.
    ``what`` names the daemon ("the worker"), ``harm`` what a caller could do ("run
    commands on this host"), ``fix`` where the token goes ("pass --token-file token")."""
    if token:
        return None
    if insecure:
        return (f"--insecure: {what} on {address} has no auth token: anyone who can reach "
                f"it can {harm}")
    if not is_loopback(host_of(address)):
        raise SecurityError(
            f"{what} would listen on {address}, beyond loopback, without an auth token "
            f"(anyone who can reach it could {harm}): make one with `{MAKE_TOKEN}` and "
            f"{fix}, or pass --insecure")
    return (f"{what} on {address} has no auth token: any local user can {harm} "
            f"(loopback only; see docs/runtime.md, Auth and TLS)")


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise SecurityError(f"tls {what} {path}: {err.strerror}") from None


class _TokenCheck(TokenGate):
    """Admits the one ``token`` (a worker's gate: no users, no job tokens)."""

    def __init__(self, token: str) -> None:
        super().__init__(lambda got: got is not None and hmac.compare_digest(
            got.encode("utf-8", "surrogatepass"), token.encode()))


# How a bind failure says that another process holds the port (``daemon.server.ListenError``;
# ``LocalCluster`` picks another port then).
IN_USE = "address in use"


def serve(address: str, register: Sequence[Callable[[grpc.Server], None]], *,
          token: str | None = None, tls: TlsFiles | None = None,
          max_workers: int = 16,
          identities: Callable[[], Identities] | None = None,
          interceptors: Sequence[grpc.ServerInterceptor] = (),
          max_connections: int | None = None, idle_s: float = IDLE_S
          ) -> tuple[grpc.Server, int]:
    """Start a gRPC server on ``address`` (``host:port``; port 0 picks a free one) with the
    services ``register`` adds; returns the started server and its bound port. It takes at
    most ``max_connections`` (default: ``limits.connection_cap``) and closes those idle for
    ``idle_s`` (``limits``).

    ``token``: every call must carry it. ``identities`` (a callable returning the
    ``Identities`` in force, read on every call) instead: every call must identify a
    caller (``identity.AuthCheck``; ``token`` is then not used). ``interceptors`` run
    after the authentication's."""
    if identities is not None:
        gates: list[grpc.ServerInterceptor] = [AuthCheck(identities)]
    else:
        gates = [_TokenCheck(token)] if token else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         interceptors=[*gates, *interceptors],
                         options=server_options(max_connections, idle_s))
    for add in register:
        add(server)
    if tls is not None and tls.cert is not None:
        creds = grpc.ssl_server_credentials(
            [(_read(tls.key, "key"), _read(tls.cert, "cert"))])
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise SecurityError(f"cannot listen on {address}")
    server.start()
    return server, port


class _AddToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._header = (AUTH_HEADER, f"Bearer {token}")

    def _with_token(self, details):
        # grpc hands interceptors its ClientCallDetails namedtuple.
        return details._replace(metadata=[*(details.metadata or ()), self._header])

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_token(client_call_details), request)


# The largest answer a channel takes: a Status of 20,000 jobs is 7.6 MB, past gRPC's default
# of 4 MB (BENCHMARKS.md, "The daemon at scale"); 256 MiB holds some 600,000 jobs.
MAX_REPLY_BYTES = 256 << 20


def channel(address: str, *, token: str | None = None, ca: str | Path | None = None,
            server_name: str | None = None) -> grpc.Channel:
    """A channel to ``address`` that sends ``token`` on every call; TLS when ``ca`` is
    given (``server_name`` overrides the name checked against the certificate)."""
    options = [("grpc.enable_retries", 0),
               ("grpc.max_receive_message_length", MAX_REPLY_BYTES)]
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    if ca is not None:
        creds = grpc.ssl_channel_credentials(root_certificates=_read(Path(ca), "ca"))
        chan = grpc.secure_channel(address, creds, options=options)
    else:
        chan = grpc.insecure_channel(address, options=options)
    if token:
        chan = grpc.intercept_channel(chan, _AddToken(token))
    return chan
