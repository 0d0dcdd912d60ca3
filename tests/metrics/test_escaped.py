"""Issue 30 finding 11: `escaping=dots|values` scrapes render the hint families once a state.

Each such scrape ran prometheus_client's `generate_latest` over the whole registry: on a
3,000-Service cluster 1.2 s of CPU a request and 35 MiB more peak memory (bench/escaping.py).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from exporter.metrics.collector import FamilyFilter, FilteringCollector, HintsCollector
from exporter.metrics.endpoint import MetricsEndpoint
from exporter.metrics.escaped import EscapedRenderer
from exporter.metrics.exposition import ExpositionRenderer
from exporter.metrics.instruments import ExporterMetrics
from exporter.metrics.negotiation import honouring_quality
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.snapshot import load_snapshot
from exporter.state.store import ClusterStore
from tests.conftest import EXAMPLES_DIR

DOTS_TEXT = "text/plain;version=1.0.0;escaping=dots"
VALUES_OPENMETRICS = "application/openmetrics-text;version=1.0.0;escaping=values"


class Counting(Collector):
    """A collector that counts how often it is collected (a render of the hint families)."""

    def __init__(self, inner: Collector) -> None:
        self.inner = inner
        self.collected = 0

    def collect(self) -> Iterator[Metric]:
        self.collected += 1
        return iter(list(self.inner.collect()))

    def describe(self) -> Iterator[Metric]:
        describe = getattr(self.inner, "describe", None)
        return iter(describe() if describe is not None else ())


@dataclass
class MetricsUnderTest:
    endpoint: MetricsEndpoint
    reference: object
    hints: Counting
    evaluator: Evaluator
    store: ClusterStore
    ready: list[bool]


@pytest.fixture
def metrics() -> MetricsUnderTest:
    snapshot = load_snapshot(str(EXAMPLES_DIR / "demo-cluster.json"))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    ready = [True]
    own = CollectorRegistry(auto_describe=True)
    ExporterMetrics(own, version="test").evaluation(0.5)
    hints = Counting(
        FilteringCollector(
            HintsCollector(lambda: evaluator.state, ready=lambda: ready[0]), FamilyFilter()
        )
    )
    full = CollectorRegistry(auto_describe=True)
    full.register(hints)
    full.register(own)
    renderer = ExpositionRenderer(lambda: evaluator.state, ready=lambda: ready[0])
    escaped = EscapedRenderer(hints, lambda: evaluator.state, ready=lambda: ready[0])
    endpoint = MetricsEndpoint(renderer, own, full, escaped)
    return MetricsUnderTest(endpoint, make_wsgi_app(full), hints, evaluator, store, ready)


def _get(
    app: object, accept: str, encoding: str | None = None
) -> tuple[str, dict[str, str], bytes]:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""}
    environ["HTTP_ACCEPT"] = accept
    if encoding is not None:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    started: list[tuple[str, dict[str, str]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], _: object = None) -> None:
        started.append((status, dict(headers)))

    body: Iterable[bytes] = app(honouring_quality(environ), start_response)  # type: ignore[operator]
    raw = b"".join(body)
    status, headers = started[0]
    if headers.get("Content-Encoding") == "gzip":
        raw = gzip.decompress(raw)
    return status, headers, raw


@pytest.mark.parametrize("accept", [DOTS_TEXT, VALUES_OPENMETRICS])
@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_scrapes_of_one_state_render_the_hint_families_once(
    metrics: MetricsUnderTest, accept: str, encoding: str | None
) -> None:
    """Five scrapes, one render; each body is prometheus_client's, byte for byte."""
    _, expected_headers, expected = _get(metrics.reference, accept)
    metrics.hints.collected = 0
    for _ in range(5):
        status, headers, body = _get(metrics.endpoint, accept, encoding)
        assert (status, headers["Content-Type"], body) == (
            "200 OK",
            expected_headers["Content-Type"],
            expected,
        )
    assert metrics.hints.collected == 1
    assert int(headers["Content-Length"]) > 0


def test_a_new_state_a_new_format_or_readiness_renders_again(metrics: MetricsUnderTest) -> None:
    """Nothing stale is metrics: a new published state, another escaping, or the exporter
    going unready (the hint families are withheld) each render afresh."""
    _get(metrics.endpoint, DOTS_TEXT)
    metrics.hints.collected = 0
    metrics.store.replace_services([])
    metrics.evaluator.step()
    status, _, body = _get(metrics.endpoint, DOTS_TEXT)
    assert body == _get(metrics.reference, DOTS_TEXT)[2]
    assert metrics.hints.collected == 2  # ours, then the reference's
    _get(metrics.endpoint, VALUES_OPENMETRICS)
    assert metrics.hints.collected == 3
    metrics.ready[0] = False
    _, _, unready = _get(metrics.endpoint, VALUES_OPENMETRICS)
    assert b"topology__hints__service" not in unready.replace(b"U__", b"")
    assert unready == _get(metrics.reference, VALUES_OPENMETRICS)[2]
    assert status == "200 OK"
