"""The /metrics endpoint: negotiates the format, then writes the cached hint families and
the exporter's own registry as chunks; a name escaping that rewrites names gets the hint
families from `escaped.py`, and filtered requests go to prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app

from exporter.metrics.escaped import EscapedRenderer
from exporter.metrics.exposition import ExpositionRenderer, Format
from exporter.metrics.negotiation import Negotiated, honouring_quality, negotiate

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


class MetricsEndpoint:
    """/metrics: the rendered hint families plus the exporter's own (small) registry.

    The format and gzip are prometheus_client's choice (`negotiation.py`). Requests that
    filter by `name[]` go to prometheus_client's own WSGI app over the full registry (the
    hint collector included); those that ask for a name escaping that rewrites legacy names
    (`dots`, `values`) get the hint families as prometheus_client writes them, kept per state
    (`escaped.py`), then the own registry. The response is a list of chunks, its
    Content-Length their sum: the server writes them without joining.
    """

    def __init__(
        self,
        renderer: ExpositionRenderer,
        own: CollectorRegistry,
        full: CollectorRegistry,
        escaped: EscapedRenderer,
    ) -> None:
        """`full` holds the hint collector and `own`'s collectors, in that order; `escaped`
        renders the same hint collector."""
        self._renderer = renderer
        self._own = own
        self._full_app = make_wsgi_app(full)
        self._escaped = escaped

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

    def escaped_chunks(self, negotiated: Negotiated) -> list[bytes]:
        """The hint families in the negotiated name escaping, then the own registry."""

        def own() -> bytes:
            return negotiated.encoder(self._own)

        encoder, content_type = negotiated.encoder, negotiated.content_type
        if negotiated.gzip:
            return self._escaped.render_gzip(encoder, content_type, own)
        return [*self._escaped.render(encoder, content_type), own()]

    def expensive(self, environ: WSGIEnvironment) -> bool:
        """Whether prometheus_client renders this request (the server queues those)."""
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        return self._filtered(environ) or not negotiated.keeps_names

    def prepared(self, environ: WSGIEnvironment) -> bool:
        """Whether the response is at hand: the cached body of the current state (and its
        deflate segments, for gzip), only the exporter's own small registry to encode."""
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        if self._filtered(environ) or not negotiated.keeps_names:
            return False
        fmt = Format.OPENMETRICS if negotiated.openmetrics else Format.TEXT
        return self._renderer.prepared(fmt, zipped=negotiated.gzip)

    @staticmethod
    def _filtered(environ: WSGIEnvironment) -> bool:
        return "name[]" in parse_qs(environ.get("QUERY_STRING", ""))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        if self._filtered(environ):
            # prometheus_client's app answers GET only; HEAD gets GET's headers (the server
            # leaves the body out).
            filtered: Iterable[bytes] = self._full_app(
                {**environ, "REQUEST_METHOD": "GET"}, start_response
            )
            return filtered
        if negotiated.keeps_names:
            fmt = Format.OPENMETRICS if negotiated.openmetrics else Format.TEXT
            chunks = self.chunks(fmt, negotiated.encoder, zipped=negotiated.gzip)
        else:
            chunks = self.escaped_chunks(negotiated)
        headers = [("Content-Type", negotiated.content_type)]
        if negotiated.gzip:
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(sum(map(len, chunks)))))
        start_response("200 OK", headers)
        return chunks
