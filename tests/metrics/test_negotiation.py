"""One Accept header gets one format on both /metrics paths, and q=0 refuses a format."""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app

from exporter.metrics.collector import FamilyFilter, FilteringCollector, HintsCollector
from exporter.metrics.endpoint import MetricsEndpoint
from exporter.metrics.escaped import EscapedRenderer
from exporter.metrics.exposition import ExpositionRenderer
from exporter.metrics.instruments import ExporterMetrics
from exporter.metrics.negotiation import honoured, honouring_quality, negotiate
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.snapshot import load_snapshot
from exporter.state.store import ClusterStore
from tests.conftest import EXAMPLES_DIR

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_1_0_0 = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# What Prometheus 3 sends by default.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,"
    "text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
)
ACCEPT_HEADERS = [
    "",
    "*/*",
    "text/plain",
    "text/plain;version=0.0.4",
    "text/plain;version=1.0.0",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=dots",
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0",
    "application/openmetrics-text; version=1.0.0; escaping=underscores",
    "application/openmetrics-text;version=0.0.1",
    "application/openmetrics-text;version=2.0.0",
    "application/openmetrics-text;version=1.0.0;escaping=values",
    PROMETHEUS_ACCEPT,
    "application/openmetrics-text;q=0",
    "application/openmetrics-text;q=0,text/plain;version=1.0.0",
    "application/openmetrics-text;version=1.0.0;q=0.0, text/plain",
    "text/plain;version=0.0.4;q=0.3,application/openmetrics-text;version=1.0.0;q=0.6",
    "application/openmetrics-text;q=abc",
]


class Response:
    def __init__(self, app: WSGIApplication, environ: WSGIEnvironment) -> None:
        self.status = ""
        self.headers: dict[str, str] = {}

        def start_response(status: str, headers: list[tuple[str, str]], _: object = None) -> None:
            self.status = status
            self.headers = dict(headers)

        chunks: Iterable[bytes] = app(environ, start_response)  # type: ignore[arg-type]
        raw = b"".join(chunks)
        zipped = self.headers.get("Content-Encoding") == "gzip"
        self.body = gzip.decompress(raw) if zipped else raw


def _environ(
    accept: str | None, accept_encoding: str | None = None, query: str = ""
) -> dict[str, str]:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query}
    if accept is not None:
        environ["HTTP_ACCEPT"] = accept
    if accept_encoding is not None:
        environ["HTTP_ACCEPT_ENCODING"] = accept_encoding
    return environ


@pytest.fixture(scope="module")
def endpoint_and_reference() -> tuple[MetricsEndpoint, WSGIApplication]:
    """The cached /metrics endpoint, and prometheus_client's app over the same registries."""
    snapshot = load_snapshot(str(EXAMPLES_DIR / "demo-cluster.json"))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    own = CollectorRegistry(auto_describe=True)
    ExporterMetrics(own, version="test").evaluation(0.5)
    full = CollectorRegistry(auto_describe=True)
    hints = FilteringCollector(
        HintsCollector(lambda: evaluator.state, ready=lambda: True), FamilyFilter()
    )
    full.register(hints)
    full.register(own)
    renderer = ExpositionRenderer(lambda: evaluator.state, ready=lambda: True)
    escaped = EscapedRenderer(hints, lambda: evaluator.state, ready=lambda: True)
    return MetricsEndpoint(renderer, own, full, escaped), make_wsgi_app(full)


@pytest.mark.parametrize("accept", ACCEPT_HEADERS)
@pytest.mark.parametrize("accept_encoding", [None, "gzip", "gzip;q=0", "identity, gzip;q=0.5"])
def test_both_paths_answer_one_accept_header_alike(
    endpoint_and_reference: tuple[MetricsEndpoint, WSGIApplication],
    accept: str,
    accept_encoding: str | None,
) -> None:
    """The cached path, the name[] path and prometheus_client agree on type, encoding, bytes."""
    endpoint, reference = endpoint_and_reference
    environ = _environ(accept, accept_encoding)
    cached = Response(endpoint, environ)
    expected = Response(reference, honouring_quality(environ))
    assert cached.status == expected.status == "200 OK"
    assert cached.headers["Content-Type"] == expected.headers["Content-Type"]
    assert cached.headers.get("Content-Encoding") == expected.headers.get("Content-Encoding")
    assert cached.body == expected.body
    name = "topology_hints_service_ready_endpoints"
    filtered = Response(endpoint, _environ(accept, accept_encoding, f"name[]={name}"))
    assert filtered.headers["Content-Type"] == cached.headers["Content-Type"]
    assert filtered.headers.get("Content-Encoding") == cached.headers.get("Content-Encoding")
    # escaping=dots writes every underscore twice.
    names = filtered.body.replace(b"__", b"_")
    assert name.encode() in names
    assert b"topology_hints_service_info" not in names


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        ("", TEXT_0_0_4),
        ("application/openmetrics-text", OPENMETRICS_1_0_0),
        ("application/openmetrics-text;q=0", TEXT_0_0_4),
        ("application/openmetrics-text; q=0.000", TEXT_0_0_4),
        ("application/openmetrics-text;version=1.0.0;q=0,text/plain;version=0.0.4", TEXT_0_0_4),
        ("text/plain;q=0.2,application/openmetrics-text;q=0.9", OPENMETRICS_1_0_0),
        ("application/openmetrics-text;q=2", TEXT_0_0_4),
    ],
)
def test_q_zero_refuses_openmetrics(
    endpoint_and_reference: tuple[MetricsEndpoint, WSGIApplication], accept: str, content_type: str
) -> None:
    """A refused (or malformed) OpenMetrics entry never selects it; a higher q wins."""
    endpoint, _ = endpoint_and_reference
    for query in ("", "name[]=topology_hints_zone_cpu_ratio"):
        response = Response(endpoint, _environ(accept, query=query))
        assert response.headers["Content-Type"] == content_type, query
        assert response.body.endswith(b"# EOF\n") == content_type.startswith("application/"), query


@pytest.mark.parametrize(
    ("accept_encoding", "zipped"),
    [
        ("gzip", True),
        ("GZIP;q=0.1", True),
        ("gzip;q=0", False),
        ("br, gzip;q=0", False),
        ("", False),
    ],
)
def test_q_zero_refuses_gzip(
    endpoint_and_reference: tuple[MetricsEndpoint, WSGIApplication],
    accept_encoding: str,
    *,
    zipped: bool,
) -> None:
    """`Accept-Encoding: gzip;q=0` gets an uncompressed body on both paths."""
    endpoint, _ = endpoint_and_reference
    for query in ("", "name[]=topology_hints_zone_cpu_ratio"):
        environ = _environ(None, accept_encoding, query)
        response = Response(endpoint, environ)
        assert (response.headers.get("Content-Encoding") == "gzip") is zipped, query
        assert negotiate(honouring_quality(environ)).gzip is zipped


def test_honoured_drops_refused_entries_and_orders_by_quality() -> None:
    """q=0 and malformed entries go; the rest keep their text, highest quality first."""
    assert honoured(None) == ""
    assert honoured("a;q=0, b;q=0.5 ,c") == "c,b;q=0.5"
    assert honoured("a;q=0.5,b;q=0.5,c;q=1.0") == "c;q=1.0,a;q=0.5,b;q=0.5"
    assert honoured("a;q=x,b;q=-1,c;q=1.5,d;Q=0") == ""
    assert honoured(",,") == ""


@pytest.mark.parametrize(
    ("accept", "query", "expensive"),
    [
        ("", "", False),
        (PROMETHEUS_ACCEPT, "", False),
        ("application/openmetrics-text; version=1.0.0; escaping=underscores", "", False),
        ("text/plain;version=1.0.0;escaping=dots", "", True),
        ("application/openmetrics-text;version=1.0.0;escaping=values", "", True),
        ("", "name[]=topology_hints_service_info", True),
    ],
)
def test_expensive_names_the_requests_prometheus_client_renders(
    endpoint_and_reference: tuple[MetricsEndpoint, WSGIApplication],
    accept: str,
    query: str,
    expensive: bool,  # noqa: FBT001 - a parameter
) -> None:
    """What the server queues for its one expensive slot: what the endpoint sends to
    prometheus_client (issue 22 item 4: `escaping=dots` was open to all, uncapped)."""
    endpoint, _ = endpoint_and_reference
    assert endpoint.expensive(_environ(accept, query=query)) is expensive


@pytest.mark.parametrize(
    ("accept", "query", "prepared"),
    [
        ("", "", True),
        (PROMETHEUS_ACCEPT, "", True),
        ("text/plain;version=1.0.0;escaping=dots", "", False),
        ("", "name[]=topology_hints_service_info", False),
    ],
)
def test_prepared_names_the_scrapes_answered_from_the_cache(
    endpoint_and_reference: tuple[MetricsEndpoint, WSGIApplication],
    accept: str,
    query: str,
    prepared: bool,  # noqa: FBT001 - a parameter
) -> None:
    """What the server answers on its loop thread once the body is rendered: the cached
    families in the names as kept, never what another renderer or prometheus_client makes."""
    endpoint, _ = endpoint_and_reference
    for accept_encoding in (None, "gzip"):
        endpoint(_environ(accept, accept_encoding, query=query), lambda *_: lambda _: None)
        assert endpoint.prepared(_environ(accept, accept_encoding, query=query)) is prepared
