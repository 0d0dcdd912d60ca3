"""Which format and encoding a scrape gets: prometheus_client's own choice, honouring q=0.

`prometheus_client.exposition.choose_encoder` takes the first media range it supports and
`gzip_accepted` any mention of gzip, whatever their quality values: `Accept:
application/openmetrics-text;q=0` would select OpenMetrics and `Accept-Encoding: gzip;q=0`
would compress. `honoured` rewrites a header so that both functions see only what the
client accepts, most preferred first; both /metrics paths (the cached fragments and
prometheus_client's own app) read the rewritten headers, so one request always gets one
format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.openmetrics.exposition import ALLOWUTF8, UNDERSCORES
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

OPENMETRICS_MEDIA_TYPE = "application/openmetrics-text"
# Name escapings that leave names of the legacy character set (all of ours) unchanged in
# both formats; prometheus_client rewrites even legacy names under `dots` and `values`.
_NAME_PRESERVING_ESCAPINGS = frozenset({ALLOWUTF8, UNDERSCORES})


def _quality(entry: str) -> float | None:
    """The entry's q value; None when it is not a number between 0 and 1."""
    for parameter in entry.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "q":
            try:
                quality = float(value.strip())
            except ValueError:
                return None
            return quality if 0 <= quality <= 1 else None
    return 1.0


def honoured(header: str | None) -> str:
    """The header without refused (q=0) or malformed entries, most preferred first.

    Entries of equal quality keep their order (RFC 9110 leaves the choice to the server).
    """
    ranked: list[tuple[float, str]] = []
    for raw in (header or "").split(","):
        entry = raw.strip()
        quality = _quality(entry) if entry else None
        if quality:  # neither None (malformed) nor 0 (refused)
            ranked.append((quality, entry))
    ranked.sort(key=lambda pair: -pair[0])
    return ",".join(entry for _, entry in ranked)


def honouring_quality(environ: WSGIEnvironment) -> WSGIEnvironment:
    """A copy of the request environment whose Accept headers `honoured` rewrote."""
    rewritten = dict(environ)
    for key in ("HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING"):
        if key in rewritten:
            rewritten[key] = honoured(rewritten[key])
    return rewritten


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What prometheus_client chose for a request."""

    encoder: Callable[[Collector], bytes]
    content_type: str
    gzip: bool

    @property
    def openmetrics(self) -> bool:
        return self.content_type.startswith(OPENMETRICS_MEDIA_TYPE)

    @property
    def escaping(self) -> str:
        for parameter in self.content_type.split(";")[1:]:
            key, _, value = parameter.strip().partition("=")
            if key == "escaping":
                return value
        return UNDERSCORES

    @property
    def keeps_names(self) -> bool:
        """True when the chosen escaping writes our (legacy) names as they are."""
        return self.escaping in _NAME_PRESERVING_ESCAPINGS


def negotiate(environ: WSGIEnvironment) -> Negotiated:
    """prometheus_client's choice for an environment that `honouring_quality` rewrote."""
    encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
    return Negotiated(encoder, content_type, gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", "")))
