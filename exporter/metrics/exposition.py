"""The /metrics body, rendered from per-Service fragments cached until that Service changes.

A large cluster exports about 200,000 hint samples; formatting each on every scrape, as
`generate_latest` does, costs seconds. The evaluator hands out a new verdict tuple only
for the Services it re-evaluated, so a Service's rendered lines stay valid while its tuple
is the same object. A scrape then only joins cached bytes, family by family. Families,
their order and their samples come from the one table in `families.py` that the
`prometheus_client` collector also iterates, and a test holds the two renderings byte for
byte equal in every format a client can negotiate.
"""

from __future__ import annotations

import functools
import gzip
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.utils import floatToGoString

from exporter.evaluator import ExporterState, ServiceResult
from exporter.metrics.collector import (
    ExportOptions,
    FamilyFilter,
    family_samples,
    is_exported,
)
from exporter.metrics.families import (
    HINT_FAMILIES,
    Family,
    MetricType,
    PerService,
    Sample,
    Scrape,
    ServiceSubject,
)
from exporter.metrics.negotiation import honouring_quality, negotiate
from exporter.store import ServiceKey

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

_format_float = cast("Callable[[float], str]", floatToGoString)
# Level 1 compresses a 20 MB exposition about 30:1 in a tenth of the time of level 9.
GZIP_LEVEL = 1


class Format(Enum):
    TEXT = auto()
    OPENMETRICS = auto()


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _escape_help(text: str, fmt: Format) -> str:
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n")
    # OpenMetrics escapes quotes in HELP as in label values; the text format does not.
    return escaped.replace('"', '\\"') if fmt is Format.OPENMETRICS else escaped


@functools.cache
def _label_order(labels: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    return tuple(sorted(enumerate(labels), key=lambda pair: pair[1]))


def sample_lines(family: Family, samples: Iterable[Sample]) -> bytes:
    """Sample lines exactly as prometheus_client writes them (labels sorted by name)."""
    name = family.name
    order = _label_order(family.labels)
    lines = []
    for values, value in samples:
        if order:
            pairs = ",".join(f'{label}="{_escape_label(values[index])}"' for index, label in order)
            lines.append(f"{name}{{{pairs}}} {_format_float(value)}\n")
        else:
            lines.append(f"{name} {_format_float(value)}\n")
    return "".join(lines).encode()


def family_header(family: Family, fmt: Format) -> bytes:
    name = family.name
    if fmt is Format.OPENMETRICS and family.type is MetricType.COUNTER:
        name = name.removesuffix("_total")
    help_text = _escape_help(family.help, fmt)
    return f"# HELP {name} {help_text}\n# TYPE {name} {family.type}\n".encode()


@dataclass(frozen=True, slots=True)
class _Fragment:
    # The result these lines were rendered from: still valid while it is the same object.
    result: ServiceResult
    exported: bool
    # Sample lines per HINT_FAMILIES entry; empty for the families not rendered per Service
    # and for those the family filter drops.
    chunks: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class _ScrapeChunks:
    """The lines of the families rendered from the whole scrape, for one published state."""

    state: ExporterState
    chunks: tuple[bytes, ...]


class ExpositionRenderer:
    """Renders the hint families of the table in its order; thread-safe (scrapes overlap).

    Per-Service lines are cached until the evaluator replaces that Service's result; the
    other families' lines until it publishes a new state.
    """

    def __init__(
        self,
        state: Callable[[], ExporterState],
        *,
        ready: Callable[[], bool],
        options: ExportOptions | None = None,
        family_filter: FamilyFilter | None = None,
    ) -> None:
        self._state = state
        self._ready = ready
        self._options = options or ExportOptions()
        self._lock = threading.Lock()
        self._fragments: dict[ServiceKey, _Fragment] = {}
        self._scrape_chunks = _ScrapeChunks(ExporterState(), ())
        family_filter = family_filter or FamilyFilter()
        self._allowed = tuple(family_filter.allows(family.name) for family in HINT_FAMILIES)
        self._per_service = tuple(
            isinstance(family.samples, PerService) and allowed
            for family, allowed in zip(HINT_FAMILIES, self._allowed, strict=True)
        )
        # (family, its function) per HINT_FAMILIES entry rendered per Service, else None.
        self._service_renderers = tuple(
            (family, family.samples.function)
            if isinstance(family.samples, PerService) and per_service
            else None
            for family, per_service in zip(HINT_FAMILIES, self._per_service, strict=True)
        )

    def render(self, fmt: Format) -> list[bytes]:
        """The hint families' exposition, as chunks to write in order."""
        if not self._ready():
            return []
        state = self._state()
        with self._lock:
            fragments = self._refresh(state)
            scrape_chunks = self._from_scrape(state, fragments)
        body: list[bytes] = []
        for index, family in enumerate(HINT_FAMILIES):
            if not self._allowed[index]:
                continue
            body.append(family_header(family, fmt))
            if self._per_service[index]:
                body.extend(fragment.chunks[index] for fragment in fragments if fragment.exported)
            else:
                body.append(scrape_chunks[index])
        return body

    def _render_service(self, result: ServiceResult, state: ExporterState) -> _Fragment:
        if not is_exported(result.verdicts, self._options):
            return _Fragment(result, exported=False, chunks=())
        service = ServiceSubject(result, state.nodes)
        chunks = tuple(
            b"" if renderer is None else sample_lines(renderer[0], renderer[1](service))
            for renderer in self._service_renderers
        )
        return _Fragment(result, exported=True, chunks=chunks)

    def _refresh(self, state: ExporterState) -> list[_Fragment]:
        """Fragments of every Service in key order, re-rendering only the changed ones."""
        fresh: dict[ServiceKey, _Fragment] = {}
        for key, result in sorted(state.services.items()):
            fragment = self._fragments.get(key)
            if fragment is None or fragment.result is not result:
                fragment = self._render_service(result, state)
            fresh[key] = fragment
        # Deleted Services drop out here: their lines are never written again.
        self._fragments = fresh
        return list(fresh.values())

    def _from_scrape(self, state: ExporterState, fragments: list[_Fragment]) -> tuple[bytes, ...]:
        if self._scrape_chunks.state is not state:
            scrape = Scrape(
                state, tuple(fragment.result for fragment in fragments if fragment.exported)
            )
            chunks = tuple(
                sample_lines(family, family_samples(family, scrape))
                if allowed and not per_service
                else b""
                for family, allowed, per_service in zip(
                    HINT_FAMILIES, self._allowed, self._per_service, strict=True
                )
            )
            self._scrape_chunks = _ScrapeChunks(state, chunks)
        return self._scrape_chunks.chunks


class MetricsEndpoint:
    """/metrics: cached hint fragments plus the exporter's own (small) registry.

    The format and gzip are prometheus_client's choice (`negotiation.py`). Requests that
    filter by `name[]`, or ask for a name escaping that rewrites legacy names, go to
    prometheus_client's own WSGI app over the full registry (the hint collector included).
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

    def body(self, fmt: Format, encode_own: Callable[[CollectorRegistry], bytes]) -> bytes:
        """The hint families, then the exporter's own as `encode_own` writes them (last,
        since an OpenMetrics encoder ends its output with `# EOF`)."""
        return b"".join((*self._renderer.render(fmt), encode_own(self._own)))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        environ = honouring_quality(environ)
        negotiated = negotiate(environ)
        if "name[]" in parse_qs(environ.get("QUERY_STRING", "")) or not negotiated.keeps_names:
            filtered: Iterable[bytes] = self._full_app(environ, start_response)
            return filtered
        fmt = Format.OPENMETRICS if negotiated.openmetrics else Format.TEXT
        body = self.body(fmt, negotiated.encoder)
        headers = [("Content-Type", negotiated.content_type)]
        if negotiated.gzip:
            body = gzip.compress(body, compresslevel=GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]
