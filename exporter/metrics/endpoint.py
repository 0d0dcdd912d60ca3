"""The /metrics endpoint: negotiates the format, then writes the cached hint families and
the exporter's own registry as chunks, or hands filtered requests to prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app

from exporter.metrics.exposition import ExpositionRenderer, Format
from exporter.metrics.negotiation import Negotiated, honouring_quality, negotiate

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


class MetricsEndpoint:
    """/metrics: the rendered hint families plus the exporter's own (small) registry.

    The format and gzip are prometheus_client's choice (`negotiation.py`). Requests that
    filter by `name[]`, or ask for a name escaping that rewrites legacy names, go to
    prometheus_client's own WSGI app over the full registry (the hint collector included).
    The response is a list of chunks, its Content-Length their sum: the server writes them
    without joining.
    """

    def __init__(
        self,
        renderer: ExpositionRenderer,
        own: CollectorRegistry,
        full: CollectorRegistry,
    ) -> None:
        self._renderer = renderer
        self._own = own
        self._full_app = make_wsgi_app(full)

    def chunks(
        self, fmt: Format, encode_own: Callable[[CollectorRegistry], bytes], *, zipped: bool
    ) -> list[bytes]:
        """The hint families, then the exporter's own as `encode_own` writes them (last,
        since an OpenMetrics encoder ends its output with `# EOF`); gzipped if zipped.

        The families are brought up to date before the own counters are read, so a scrape
        never shows counters older than the state it shows: an object the informer skipped
        as invalid before a later change is counted in every scrape that shows that change.
        """

        def own() -> bytes:
            return encode_own(self._own)

        if zipped:
            return self._renderer.render_gzip(fmt, own)
        families = self._renderer.render(fmt)
        return [*families, own()]

    def expensive(self, environ: WSGIEnvironment) -> bool:
        """Whether prometheus_client renders this request (the server queues those)."""
        environ = honouring_quality(environ)
        return self._filtered(environ, negotiate(environ))

    def prepared(self, environ: WSGIEnvironment) -> bool:
        """Whether the response is at hand: the cached body of the current state (and its
        deflate segments, for gzip), only the exporter's own small registry to encode."""
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        if self._filtered(environ, negotiated):
            return False
        fmt = Format.OPENMETRICS if negotiated.openmetrics else Format.TEXT
        return self._renderer.prepared(fmt, zipped=negotiated.gzip)

    @staticmethod
    def _filtered(environ: WSGIEnvironment, negotiated: Negotiated) -> bool:
        return "name[]" in parse_qs(environ.get("QUERY_STRING", "")) or not negotiated.keeps_names

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        if self._filtered(environ, negotiated):
            filtered: Iterable[bytes] = self._full_app(environ, start_response)
            return filtered
        fmt = Format.OPENMETRICS if negotiated.openmetrics else Format.TEXT
        chunks = self.chunks(fmt, negotiated.encoder, zipped=negotiated.gzip)
        headers = [("Content-Type", negotiated.content_type)]
        if negotiated.gzip:
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(sum(map(len, chunks)))))
        start_response("200 OK", headers)
        return chunks
