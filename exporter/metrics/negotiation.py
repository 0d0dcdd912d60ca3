"""Which format and encoding a scrape gets: prometheus_client's own choice, honouring q=0.

`prometheus_client.exposition.choose_encoder` takes the first media range it supports and
`gzip_accepted` any mention of gzip, whatever their quality values: `Accept:
application/openmetrics-text;q=0` would select OpenMetrics and `Accept-Encoding: gzip;q=0`
would compress. `honoured` rewrites a header so that both functions see only what the
client accepts, most preferred first; both /metrics paths (the cached fragments and
prometheus_client's own app) read the rewritten headers, so one request always gets one
format.

`choose_encoder` also raises TypeError on a `version` that is not dot-separated numbers
(`version=abc`, `version=1.x`: it compares the parts with integers). `honoured` drops an
entry with such a version as it drops a malformed q, and `negotiate` never raises: what
it cannot read gets the default text format, 0.0.4. That is what Prometheus servers do
(client_golang's `expfmt.Negotiate` skips an entry whose version it does not know and
falls back to the text format; it never answers 406): a scraper always gets metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.exposition import (
    CONTENT_TYPE_PLAIN_0_0_4,
    choose_encoder,
    generate_latest,
    gzip_accepted,
)
from prometheus_client.openmetrics.exposition import ALLOWUTF8, UNDERSCORES
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

OPENMETRICS_MEDIA_TYPE = "application/openmetrics-text"
# Name escapings that leave names of the legacy character set (all of ours) unchanged in
# both formats; prometheus_client rewrites even legacy names under `dots` and `values`.
_NAME_PRESERVING_ESCAPINGS = frozenset({ALLOWUTF8, UNDERSCORES})
# A version prometheus_client can compare with (1, 0, 0): ASCII numbers (str.isdigit and
# int() take other scripts' digits), short enough for int() (it refuses 4,300 digits).
_VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,3}")


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


def _version_readable(entry: str) -> bool:
    """False when the entry has a version prometheus_client would fail to compare.

    Its first `version=` parameter is the one it reads (`_get_version`), as it reads it."""
    for parameter in entry.split(";")[1:]:
        if "=" not in parameter:
            continue
        key, value = parameter.strip().split("=", 1)
        if key == "version":
            return value == "" or _VERSION.fullmatch(value) is not None
    return True


def honoured(header: str | None) -> str:
    """The header without refused (q=0) or malformed entries, most preferred first.

    Malformed: a q that is not a number from 0 to 1, or a version that is not numbers
    (`version=abc`). Entries of equal quality keep their order (RFC 9110 leaves the choice
    to the server).
    """
    ranked: list[tuple[float, str]] = []
    for raw in (header or "").split(","):
        entry = raw.strip()
        quality = _quality(entry) if entry else None
        # Neither None (malformed) nor 0 (refused).
        if quality and _version_readable(entry):
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
    """prometheus_client's choice for an environment that `honouring_quality` rewrote.

    Never raises: a header prometheus_client cannot read (only an unrewritten one, or one
    a future prometheus_client reads differently) gets the default text format."""
    gzip = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
    try:
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
    except (TypeError, ValueError):
        return Negotiated(generate_latest, CONTENT_TYPE_PLAIN_0_0_4, gzip)
    return Negotiated(encoder, content_type, gzip)
