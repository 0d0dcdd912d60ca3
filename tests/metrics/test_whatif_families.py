"""The what-if families: endpoint margins and zone loss, as scraped, against `what-if`."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from exporter.engine.whatif.feasibility import Margin
from exporter.engine.whatif.forecast import EntryForecast
from exporter.metrics import families as f
from exporter.pipeline.evaluator import Evaluator
from exporter.sources.snapshot import load_snapshot
from exporter.state.store import ClusterStore
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR, exporter_command
from tests.k8s_objects import (
    Obj,
    as_list,
    endpoint,
    endpoint_slice,
    node,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import Scrape, base_url, scrape

ZONE_LABEL = "topology.kubernetes.io/zone"
MARGIN = f.SERVICE_ENDPOINT_MARGIN.name
ZONE_LOSS = f.ZONE_LOSS_SERVICES_LOSING_HINTS.name


def _edge_cluster() -> Obj:
    """Three equal zones (feasible counts 3, 6, 7, 9, 10, 12 and up) and four Services.

    - web, auto, 7 endpoints (3/2/2): enabled; 6 works, 5 and 8 are refused. Losing zone b
      or c leaves 5 endpoints in two equal zones, which are refused; losing a leaves 4.
    - big, auto, 20 endpoints: above 6 x 3 zones, so up is +Inf; 19 down to 12 work.
    - cart, auto, 8 endpoints: refused, so no margin.
    - api, trafficDistribution, every endpoint in zone c: losing c leaves it nothing local.
    """
    api_endpoints = [
        endpoint(f"10.0.3.{index}", "zone-c", "node-c-0", hint_zones=("zone-c",))
        for index in range(1, 4)
    ]
    return as_list(
        three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(7)),
        service("shop", "big", topology_mode="Auto"),
        endpoint_slice("shop", "big-1", "big", zone_endpoints(20, prefix="10.0.1")),
        service("shop", "cart", topology_mode="Auto"),
        endpoint_slice("shop", "cart-1", "cart", zone_endpoints(8, prefix="10.0.2")),
        service("shop", "api", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "api-1", "api", api_endpoints),
    )


def _margins(result: Scrape, name: str) -> dict[str, float]:
    return {
        labels["direction"]: value
        for labels, value in ((dict(k), v) for k, v in result.series(MARGIN).items())
        if labels["service"] == name
    }


def _zone_loss(result: Scrape) -> dict[str, float]:
    return {dict(labels)["zone"]: value for labels, value in result.series(ZONE_LOSS).items()}


def test_margins_and_zone_loss_are_exposed(serve_snapshot: ServeSnapshot) -> None:
    with serve_snapshot(_edge_cluster()) as exporter:
        result = scrape(base_url(exporter))
    assert _margins(result, "web") == {"down": 1.0, "up": 0.0}
    assert _margins(result, "big") == {"down": 8.0, "up": math.inf}
    # No margin for a refused Service nor for trafficDistribution.
    assert _margins(result, "cart") == {}
    assert _margins(result, "api") == {}
    assert 'direction="up",namespace="shop",service="big"} +Inf' in result.text
    assert result.labelled(MARGIN, service="web", direction="down") == [
        {"namespace": "shop", "service": "web", "address_type": "IPv4", "direction": "down"}
    ]
    assert _zone_loss(result) == {"zone-a": 0.0, "zone-b": 1.0, "zone-c": 2.0}


def test_zone_loss_is_zero_per_zone_when_nothing_would_lose_hints(
    serve_snapshot: ServeSnapshot,
) -> None:
    """Every zone of the cluster has a series, 0 included, so a dashboard shows each zone."""
    cluster = as_list(
        three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(12)),
    )
    with serve_snapshot(cluster) as exporter:
        result = scrape(base_url(exporter))
    assert _zone_loss(result) == {"zone-a": 0.0, "zone-b": 0.0, "zone-c": 0.0}
    assert _margins(result, "web") == {"down": 0.0, "up": math.inf}


# -- zone loss agrees with `what-if --lose-zone` ----------------------------------------------


def _zones(snapshot: dict[str, Any]) -> list[str]:
    return sorted(
        {
            zone
            for item in snapshot["items"]
            if item.get("kind") == "Node"
            and (zone := (item["metadata"].get("labels") or {}).get(ZONE_LABEL))
        }
    )


def _what_if_losing(path: Path, zone: str) -> int:
    """How many entries `what-if --lose-zone` says would lose hints."""
    arguments = ["what-if", "--snapshot", str(path), "--lose-zone", zone, "-o", "json"]
    completed = subprocess.run(
        [*exporter_command(), *arguments], capture_output=True, text=True, check=False, timeout=60
    )
    assert completed.returncode in {0, 1}, completed.stderr
    document = json.loads(completed.stdout)
    return sum(1 for entry in document["services"] if entry["change"] == "loses-hints")


CLUSTERS = [
    *sorted(EXAMPLES_DIR.glob("*.json")),
    CONFORMANCE_DIR / "random-000.snapshot.json",
    CONFORMANCE_DIR / "random-005.snapshot.json",
    CONFORMANCE_DIR / "upstream-trafficdist-prefer-close-zone-hints.snapshot.json",
]


@pytest.mark.parametrize("path", CLUSTERS, ids=lambda path: path.name.split(".")[0])
def test_zone_loss_counts_what_what_if_lose_zone_says(
    path: Path, serve_snapshot: ServeSnapshot
) -> None:
    snapshot = json.loads(path.read_text())
    with serve_snapshot(snapshot) as exporter:
        exported = _zone_loss(scrape(base_url(exporter)))
    assert exported == {zone: float(_what_if_losing(path, zone)) for zone in _zones(snapshot)}


def test_zone_loss_of_the_edge_cluster_is_what_what_if_says(
    tmp_path: Path, serve_snapshot: ServeSnapshot
) -> None:
    """The example clusters lose nothing to a zone: this one does, so the count is tested."""
    cluster = _edge_cluster()
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(cluster))
    with serve_snapshot(cluster) as exporter:
        exported = _zone_loss(scrape(base_url(exporter)))
    predicted = {zone: float(_what_if_losing(path, zone)) for zone in _zones(cluster)}
    assert exported == predicted
    assert sum(predicted.values()) > 0


# -- incrementally, in the evaluator ----------------------------------------------------------


def _store_of(cluster: Obj, tmp_path: Path) -> ClusterStore:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(cluster))
    snapshot = load_snapshot(str(path))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    return store


def test_node_view_memo_is_kept_until_the_node_view_moves(tmp_path: Path) -> None:
    """A heartbeat keeps the memo and views; a node that changes the shares replaces them."""
    cluster = _edge_cluster()
    store = _store_of(cluster, tmp_path)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    first = evaluator.step()
    web = first.services["shop", "web"]
    assert web.forecasts[0].zones_losing_hints == {"zone-b", "zone-c"}
    assert [view.zone for view in first.zone_loss_views] == ["zone-a", "zone-b", "zone-c"]

    nodes = list(load_snapshot(str(tmp_path / "cluster.json")).nodes)
    store.replace_nodes(nodes)
    same = evaluator.step()
    assert same.feasibility is first.feasibility
    assert same.zone_loss_views is first.zone_loss_views
    assert same.services["shop", "web"] is web

    # A bigger zone-a (8 cores of 16): 6 endpoints for web are now refused, 8 and 9 work,
    # and no zone's loss would take its hints away.
    bigger = [*cluster["items"][:3], node("node-a-1", "zone-a")]
    (tmp_path / "cluster.json").write_text(json.dumps(as_list(bigger)))
    store.replace_nodes(load_snapshot(str(tmp_path / "cluster.json")).nodes)
    moved = evaluator.step()
    assert moved.feasibility is not first.feasibility
    assert moved.services["shop", "web"].forecasts[0] == EntryForecast(Margin(0, 2), frozenset())
