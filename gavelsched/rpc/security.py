"""Token auth and TLS for every gavelsched gRPC endpoint (scheduler and workers alike).

- A server made with ``serve(..., token=T)`` refuses every call whose metadata lacks
  ``authorization: Bearer T`` with UNAUTHENTICATED (the health service included), before
  any handler runs: a worker never runs a command from an unauthenticated source.
- ``channel(address, token=T, ca=...)`` adds that header to every call it makes, and
  speaks TLS when given the CA that signed the server's certificate.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

AUTH_HEADER = "authorization"


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


def _read(path: Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise SecurityError(f"tls {what} {path}: {err.strerror}") from None


class _TokenCheck(grpc.ServerInterceptor):
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

        def refuse(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong auth token")

        self._refuse = refuse

    def intercept_service(self, continuation, handler_call_details):
        got = dict(handler_call_details.invocation_metadata or ()).get(AUTH_HEADER, "")
        if hmac.compare_digest(got.encode() if isinstance(got, str) else got, self._expected):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler.request_streaming or handler.response_streaming:
            def refuse_stream(request, context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong auth token")
            return grpc.unary_stream_rpc_method_handler(
                refuse_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return grpc.unary_unary_rpc_method_handler(
            self._refuse, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def serve(address: str, register: Sequence[Callable[[grpc.Server], None]], *,
          token: str | None = None, tls: TlsFiles | None = None,
          max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start a gRPC server on ``address`` (``host:port``; port 0 picks a free one) with the
    services ``register`` adds; returns the started server and its bound port."""
    interceptors = [_TokenCheck(token)] if token else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         interceptors=interceptors,
                         options=[("grpc.so_reuseport", 0)])
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


def channel(address: str, *, token: str | None = None, ca: str | Path | None = None,
            server_name: str | None = None) -> grpc.Channel:
    """A channel to ``address`` that sends ``token`` on every call; TLS when ``ca`` is
    given (``server_name`` overrides the name checked against the certificate)."""
    options = [("grpc.enable_retries", 0)]
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
