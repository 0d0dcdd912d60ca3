"""The HTTP surface: /metrics, /healthz, /readyz and a small index page."""

from __future__ import annotations

import html
import ssl
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from exporter import __version__

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

Check = Callable[[], tuple[bool, str]]

_INDEX = """<!doctype html>
<html><head><meta charset="utf-8"><title>topology-hints-exporter</title></head>
<body>
<h1>topology-hints-exporter {version}</h1>
<p>Is Kubernetes topology-aware routing working, and if not, why.</p>
<ul>
<li><a href="metrics">/metrics</a>: Prometheus metrics</li>
<li><a href="healthz">/healthz</a>: liveness</li>
<li><a href="readyz">/readyz</a>: readiness ({ready})</li>
</ul>
</body></html>
"""


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Access logs would drown the useful lines; Prometheus scrapes every few seconds."""


def make_app(
    metrics_app: WSGIApplication,
    *,
    ready: Check,
    healthy: Check,
    pages: WSGIApplication | None = None,
) -> WSGIApplication:

    def text(
        start_response: StartResponse, status: str, body: str, content_type: str = "text/plain"
    ) -> Iterable[bytes]:
        data = body.encode()
        start_response(
            status,
            [
                ("Content-Type", f"{content_type}; charset=utf-8"),
                ("Content-Length", str(len(data))),
            ],
        )
        return [data]

    def check(start_response: StartResponse, probe: Check) -> Iterable[bytes]:
        ok, detail = probe()
        return text(start_response, "200 OK" if ok else "503 Service Unavailable", detail + "\n")

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            body: Iterable[bytes] = metrics_app(environ, start_response)
            return body
        if path == "/healthz":
            return check(start_response, healthy)
        if path == "/readyz":
            return check(start_response, ready)
        if pages is not None:
            # The status pages (exporter.web) serve / and everything else, 404s included.
            return pages(environ, start_response)
        if path == "/":
            page = _INDEX.format(version=__version__, ready=html.escape(ready()[1]))
            return text(start_response, "200 OK", page, "text/html")
        return text(start_response, "404 Not Found", "not found\n")

    return app


def parse_listen_address(address: str) -> tuple[str, int]:
    """HOST:PORT, :PORT (every interface) or [IPv6]:PORT."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class MetricsServer:
    def __init__(
        self,
        app: WSGIApplication,
        address: str,
        *,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ) -> None:
        host, port = parse_listen_address(address)
        self._server = make_server(
            host or "0.0.0.0",  # noqa: S104 - ":PORT" means every interface, as Go exporters do
            port,
            app,
            server_class=_ThreadingWSGIServer,
            handler_class=_QuietHandler,
        )
        self.tls = tls_cert_file is not None
        if tls_cert_file is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(tls_cert_file, tls_key_file)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.2}
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        shown = "127.0.0.1" if host in {"0.0.0.0", ""} else host  # noqa: S104
        return f"{'https' if self.tls else 'http'}://{shown}:{self.port}/"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        # shutdown() waits for serve_forever() to acknowledge: never call it on a server whose
        # loop did not start, or it blocks forever.
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()
