"""The /metrics body, rendered from per-Service fragments cached until that Service changes.

A large cluster exports about 200,000 hint samples; formatting each on every scrape, as
`generate_latest` does, costs seconds. The evaluator hands out a new verdict tuple only
for the Services it re-evaluated, so a Service's rendered lines stay valid while its tuple
is the same object. A scrape then only joins cached bytes, family by family. The samples
come from the same family functions the `prometheus_client` collector uses, and a test
holds the two renderings byte for byte equal.
"""

from __future__ import annotations

import functools
import gzip
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.utils import floatToGoString

from exporter.evaluator import ExporterState, ServiceResult
from exporter.metrics.collector import (
    ExportOptions,
    FamilyFilter,
    config_issue_samples,
    is_exported,
    last_event_samples,
    node_proxy_service_samples,
    proxy_node_samples,
    service_info_samples,
)
from exporter.metrics.families import (
    CLUSTER_FAMILIES,
    CONTROLLER_EVENTS,
    LAST_EVENT_TIMESTAMP,
    NODE_PROXY_SERVICES,
    SERVICE_CONFIG_ISSUE,
    SERVICE_ENTRY_FAMILIES,
    SERVICE_INFO,
    SERVICE_PROXY_NODES,
    Family,
    MetricType,
    Sample,
    entries_of,
    entry_family_samples,
)
from exporter.store import ServiceKey

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

_format_float = cast("Callable[[float], str]", floatToGoString)
# Level 1 compresses a 20 MB exposition about 30:1 in a tenth of the time of level 9.
GZIP_LEVEL = 1


class Format(Enum):
    TEXT = "text/plain; version=0.0.4; charset=utf-8"
    OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"

    @property
    def content_type(self) -> str:
        return self.value


def negotiate(accept: str) -> Format:
    """OpenMetrics when the scraper asks for it (Prometheus does by default), else text."""
    return Format.OPENMETRICS if "application/openmetrics-text" in accept else Format.TEXT


# Families rendered per Service, in exposition order.
PER_SERVICE_FAMILIES: tuple[Family, ...] = (
    SERVICE_INFO,
    SERVICE_CONFIG_ISSUE,
    *(family for family, _ in SERVICE_ENTRY_FAMILIES),
    SERVICE_PROXY_NODES,
)


def _escape_label(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


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
    return f"# HELP {name} {_escape_help(family.help)}\n# TYPE {name} {family.type}\n".encode()


@dataclass(frozen=True, slots=True)
class _Fragment:
    # The result these lines were rendered from: still valid while it is the same object.
    result: ServiceResult
    exported: bool
    # One chunk of sample lines per PER_SERVICE_FAMILIES entry.
    chunks: tuple[bytes, ...]


def _render_service(
    result: ServiceResult, state: ExporterState, options: ExportOptions
) -> _Fragment:
    if not is_exported(result.verdicts, options):
        return _Fragment(result, exported=False, chunks=())
    entries = entries_of(result)
    chunks = [
        sample_lines(SERVICE_INFO, service_info_samples([result])),
        sample_lines(SERVICE_CONFIG_ISSUE, config_issue_samples([result])),
        *(
            sample_lines(family, entry_family_samples(entry_samples, entries))
            for family, entry_samples in SERVICE_ENTRY_FAMILIES
        ),
        sample_lines(SERVICE_PROXY_NODES, proxy_node_samples(result.verdicts, state)),
    ]
    return _Fragment(result, exported=True, chunks=tuple(chunks))


class ExpositionRenderer:
    """Renders hint families; thread-safe (scrapes may overlap)."""

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
        self._filter = family_filter or FamilyFilter()
        self._lock = threading.Lock()
        self._fragments: dict[ServiceKey, _Fragment] = {}
        # Node samples depend on every exported entry: rendered once per published state.
        self._nodes_for: int = -1
        self._node_chunk = b""
        self._allowed = tuple(self._filter.allows(family.name) for family in PER_SERVICE_FAMILIES)

    def render(self, fmt: Format) -> list[bytes]:
        """The hint families' exposition, as chunks to write in order."""
        if not self._ready():
            return []
        state = self._state()
        with self._lock:
            fragments = self._refresh(state)
            node_chunk = self._nodes(state, fragments)
        exported_keys = {key for key, fragment in fragments if fragment.exported}
        body: list[bytes] = []
        for family, cluster_samples in CLUSTER_FAMILIES:
            self._emit(body, family, fmt, [sample_lines(family, cluster_samples(state))])
        for index, family in enumerate(PER_SERVICE_FAMILIES):
            if self._allowed[index]:
                body.append(family_header(family, fmt))
                body.extend(
                    fragment.chunks[index] for _, fragment in fragments if fragment.exported
                )
        self._emit(body, NODE_PROXY_SERVICES, fmt, [node_chunk])
        self._emit(
            body,
            LAST_EVENT_TIMESTAMP,
            fmt,
            [sample_lines(LAST_EVENT_TIMESTAMP, last_event_samples(state, exported_keys))],
        )
        self._emit(
            body,
            CONTROLLER_EVENTS,
            fmt,
            [
                sample_lines(
                    CONTROLLER_EVENTS,
                    (
                        ((reason,), float(total))
                        for reason, total in sorted(state.event_totals.items())
                    ),
                )
            ],
        )
        return body

    def _emit(
        self, body: list[bytes], family: Family, fmt: Format, chunks: Sequence[bytes]
    ) -> None:
        if self._filter.allows(family.name):
            body.append(family_header(family, fmt))
            body.extend(chunks)

    def _refresh(self, state: ExporterState) -> list[tuple[ServiceKey, _Fragment]]:
        """Fragments of every Service in key order, re-rendering only the changed ones."""
        fresh: dict[ServiceKey, _Fragment] = {}
        for key, result in sorted(state.services.items()):
            fragment = self._fragments.get(key)
            if fragment is None or fragment.result is not result:
                fragment = _render_service(result, state, self._options)
            fresh[key] = fragment
        # Deleted Services drop out here: their lines are never written again.
        self._fragments = fresh
        return list(fresh.items())

    def _nodes(self, state: ExporterState, fragments: list[tuple[ServiceKey, _Fragment]]) -> bytes:
        if state.generation != self._nodes_for:
            verdicts = [
                verdict
                for _, fragment in fragments
                if fragment.exported
                for verdict in fragment.result.verdicts
            ]
            self._node_chunk = sample_lines(
                NODE_PROXY_SERVICES, node_proxy_service_samples(verdicts, state)
            )
            self._nodes_for = state.generation
        return self._node_chunk


class MetricsEndpoint:
    """/metrics: cached hint fragments plus the exporter's own (small) registry.

    Requests that filter by `name[]` go to prometheus_client's own WSGI app over the full
    registry (the hint collector included), which implements that filtering.
    """

    def __init__(
        self,
        renderer: ExpositionRenderer,
        own: CollectorRegistry,
        full: CollectorRegistry,
    ) -> None:
        self._renderer = renderer
        self._own = own
        self._filtered_app = make_wsgi_app(full)

    def body(self, fmt: Format) -> bytes:
        chunks = self._renderer.render(fmt)
        if fmt is Format.OPENMETRICS:
            own = generate_openmetrics(self._own).removesuffix(b"# EOF\n")  # type: ignore[no-untyped-call]
            return b"".join((*chunks, own, b"# EOF\n"))
        return b"".join((*chunks, generate_latest(self._own)))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if "name[]" in parse_qs(environ.get("QUERY_STRING", "")):
            filtered: Iterable[bytes] = self._filtered_app(environ, start_response)
            return filtered
        fmt = negotiate(environ.get("HTTP_ACCEPT", ""))
        body = self.body(fmt)
        headers = [("Content-Type", fmt.content_type)]
        if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            body = gzip.compress(body, compresslevel=GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]
