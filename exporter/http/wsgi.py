"""The WSGI side of a request (PEP 3333): its environ, and the app's answer collected whole."""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import unquote_to_bytes, urlsplit

import structlog

from exporter.http.failure import log_failure
from exporter.http.request import Request
from exporter.http.response import REASONS, Response, error_response

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

logger = structlog.get_logger("exporter.http")

# Hop-by-hop headers are the server's business, not the app's (PEP 3333).
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)


def build_environ(
    request: Request,
    writer: asyncio.StreamWriter,
    *,
    server_name: str,
    server_port: int,
    remote_addr: str,
    tls: bool,
) -> WSGIEnvironment:
    """The request's environ; ValueError for a target neither origin- nor absolute-form."""
    target = request.head.target.decode("ascii")
    if target.startswith("/"):
        path, _, query = target.partition("?")
    elif target != "*" and "://" in target:
        # Absolute-form (RFC 9112 3.2.2): routed by its path, "/" when it has none.
        parts = urlsplit(target)
        path, query = parts.path or "/", parts.query
    else:
        raise ValueError("not an origin-form or absolute-form target")
    environ: dict[str, object] = {
        "REQUEST_METHOD": request.head.method.decode("ascii"),
        "SCRIPT_NAME": "",
        # PEP 3333: the decoded path, as latin-1 "bytes in a str".
        "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query,
        "SERVER_NAME": server_name,
        "SERVER_PORT": str(server_port),
        "SERVER_PROTOCOL": "HTTP/" + request.head.http_version.decode("ascii"),
        "REMOTE_ADDR": remote_addr,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https" if tls else "http",
        "wsgi.input": io.BytesIO(request.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    peercert = writer.get_extra_info("peercert")
    if peercert:
        environ["exporter.client_certificate"] = peercert
    for raw_name, raw_value in request.head.headers:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name in {"CONTENT_TYPE", "CONTENT_LENGTH"}:
            environ[name] = value
            continue
        key = "HTTP_" + name
        existing = environ.get(key)
        environ[key] = value if existing is None else f"{existing},{value}"
    return environ


def call_app(app: WSGIApplication, environ: WSGIEnvironment) -> Response:
    """Run the WSGI app (in a worker thread) and collect its whole response."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    written: list[bytes] = []

    def start_response(
        status: str,
        headers: list[tuple[str, str]],
        exc_info: tuple[type[BaseException], BaseException, TracebackType]
        | tuple[None, None, None]
        | None = None,
    ) -> Callable[[bytes], object]:
        if exc_info is not None and exc_info[1] is not None and started:
            raise exc_info[1].with_traceback(exc_info[2])
        started[:] = [(status, headers)]
        return written.append

    try:
        result = app(environ, start_response)
        try:
            chunks = [*written, *result]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return _response(started, chunks, head=environ["REQUEST_METHOD"] == "HEAD")
    except Exception as error:  # noqa: BLE001 - logged once, by log_failure
        # One line in the log (`failure.py`); the client learns only that it failed.
        log_failure("request failed", error, path=environ.get("PATH_INFO"))
        return error_response(500, REASONS[500])


def _response(
    started: list[tuple[str, list[tuple[str, str]]]], chunks: list[bytes], *, head: bool
) -> Response:
    """The app's status, headers and body, checked: what h11 would refuse half-way through
    writing (a str chunk, a wrong Content-Length, a header latin-1 cannot carry) raises
    here, before anything is sent, and the request is answered 500. (An answer to HEAD
    declares the length of the body it leaves out.)"""
    if not started:
        raise RuntimeError("the app returned without starting a response")
    status, app_headers = started[0]
    for chunk in chunks:
        if not isinstance(chunk, bytes):
            raise TypeError(f"the app returned a body chunk of type {type(chunk).__name__}")
    size = sum(map(len, chunks))
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in app_headers
        if name.lower().encode("latin-1") not in _HOP_BY_HOP
    ]
    declared = [value for name, value in headers if name.lower() == b"content-length"]
    if not declared:
        headers.append((b"Content-Length", str(size).encode()))
    elif not head and declared != [str(size).encode()]:
        raise ValueError(f"the app declared Content-Length {declared!r} for {size} bytes")
    code, _, reason = status.partition(" ")
    return Response(int(code), headers, chunks, reason=reason.encode("latin-1"))
