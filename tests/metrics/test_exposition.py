"""The cached fragment renderer writes exactly what prometheus_client writes from the collector."""

from __future__ import annotations

import gzip
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as _generate_openmetrics

from exporter.metrics.collector import (
    ExportOptions,
    FamilyFilter,
    FilteringCollector,
    HintsCollector,
)
from exporter.metrics.exposition import ExpositionRenderer, Format
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.snapshot import load_snapshot
from exporter.state.store import ClusterStore
from exporter.vocabulary import ControllerEvent
from tests.conftest import EXAMPLES_DIR
from tests.k8s_objects import as_list, endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, parse

# prometheus_client leaves its OpenMetrics generator unannotated.
generate_openmetrics = cast("Callable[[CollectorRegistry], bytes]", _generate_openmetrics)

EXAMPLES = sorted(EXAMPLES_DIR.glob("*.json"))


def _loaded(path: Path) -> tuple[ClusterStore, Evaluator]:
    snapshot = load_snapshot(str(path))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    for service_key in [s.key for s in snapshot.services][:3]:
        store.upsert_event(
            ControllerEvent(
                f"uid-{service_key}", *service_key, "TopologyAwareHintsDisabled", 2, 1.7e9
            )
        )
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    return store, evaluator


def _pair(
    evaluator: Evaluator, options: ExportOptions, family_filter: FamilyFilter
) -> tuple[ExpositionRenderer, CollectorRegistry]:
    renderer = ExpositionRenderer(
        lambda: evaluator.state, ready=lambda: True, options=options, family_filter=family_filter
    )
    registry = CollectorRegistry(auto_describe=False)
    collector = HintsCollector(lambda: evaluator.state, ready=lambda: True, options=options)
    registry.register(FilteringCollector(collector, family_filter))
    return renderer, registry


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.stem)
@pytest.mark.parametrize("all_services", [False, True], ids=["default", "all-services"])
def test_text_and_openmetrics_match_prometheus_client(path: Path, *, all_services: bool) -> None:
    """Byte for byte, in both formats, the fragments equal generate_latest over the collector."""
    _, evaluator = _loaded(path)
    renderer, registry = _pair(evaluator, ExportOptions(all_services=all_services), FamilyFilter())
    assert b"".join(renderer.render(Format.TEXT)) == generate_latest(registry)
    assert b"".join(renderer.render(Format.OPENMETRICS)) + b"# EOF\n" == generate_openmetrics(
        registry
    )


def test_family_filter_applies_to_both_renderings() -> None:
    """A denylist removes the same families from the fragments as from the collector."""
    _, evaluator = _loaded(EXAMPLES_DIR / "demo-cluster.json")
    family_filter = FamilyFilter(deny=["topology_hints_zone_.*", "topology_hints_service_info"])
    renderer, registry = _pair(evaluator, ExportOptions(), family_filter)
    text = b"".join(renderer.render(Format.TEXT))
    assert text == generate_latest(registry)
    assert b"topology_hints_zone_" not in text
    assert b"topology_hints_service_info" not in text


def test_only_changed_services_are_rendered_again() -> None:
    """A change re-renders that Service's fragment; others are reused; deleted ones vanish."""
    store, evaluator = _loaded(EXAMPLES_DIR / "demo-cluster.json")
    renderer, registry = _pair(evaluator, ExportOptions(), FamilyFilter())
    renderer.render(Format.TEXT)
    before = dict(renderer._fragments)
    snapshot = load_snapshot(str(EXAMPLES_DIR / "demo-cluster.json"))
    cart = next(s for s in snapshot.endpoint_slices if s.service_name == "cart")
    store.upsert_endpoint_slice(
        type(cart)(
            **{**{f: getattr(cart, f) for f in cart.__slots__}, "endpoints": cart.endpoints[:-1]}
        )
    )
    store.delete_service("shop", "search")
    evaluator.step()
    text = b"".join(renderer.render(Format.TEXT))
    after = renderer._fragments
    assert after[("shop", "cart")] is not before[("shop", "cart")]
    assert after[("shop", "catalog")] is before[("shop", "catalog")]
    assert ("shop", "search") not in after
    assert b'service="search"' not in text
    cart_ready = b'{address_type="IPv4",namespace="shop",service="cart"} 8.0'
    assert b"topology_hints_service_ready_endpoints" + cart_ready in text
    assert text == generate_latest(registry)


def _get(url: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - loopback test server
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return dict(response.headers), response.read()


def test_http_negotiates_format_gzip_and_name_filter(serve_snapshot: ServeSnapshot) -> None:
    """/metrics serves text or OpenMetrics as asked, gzip when accepted, and name[] filtering."""
    cluster = as_list(
        three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
    )
    with serve_snapshot(cluster) as exporter:
        url = base_url(exporter) + "/metrics"
        text_headers, text = _get(url, {})
        om_headers, openmetrics = _get(
            url, {"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"}
        )
        gzip_headers, zipped = _get(url, {"Accept-Encoding": "gzip"})
        _, filtered = _get(url + "?name[]=topology_hints_service_ready_endpoints", {})
    assert text_headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert om_headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert openmetrics.endswith(b"# EOF\n")
    assert b"# TYPE topology_hints_service_state_changes counter" in openmetrics
    assert gzip_headers["Content-Encoding"] == "gzip"
    assert (
        parse(gzip.decompress(zipped).decode()).samples.keys()
        == parse(text.decode()).samples.keys()
    )
    filtered_scrape = parse(filtered.decode())
    assert filtered_scrape.families == {"topology_hints_service_ready_endpoints"}
    assert (
        filtered_scrape.value(
            "topology_hints_service_ready_endpoints",
            namespace="shop",
            service="web",
            address_type="IPv4",
        )
        == 9
    )
