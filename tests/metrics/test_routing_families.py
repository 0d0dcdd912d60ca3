"""The effective routing families of SPEC section 10, scraped from a served snapshot."""

from __future__ import annotations

import json
from typing import Any

from exporter.engine import DataPlane
from exporter.metrics.families import (
    DATAPLANE_INFO,
    SERVICE_LOCAL_ROUTING_RATIO,
    SERVICE_ROUTING_NODES,
)
from tests.conformance_tables import local_tables, routing_expectations
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, scrape

# One endpoint's conditions are `{}`: kube-proxy counts it, the controller never hints it.
READY_ABSENT = CONFORMANCE_DIR / "upstream-addhints-2-ready-1-unready-1-unknown-after"
ENTRY = {"namespace": "ns", "service": "svc", "address_type": "IPv4"}


def expected_document(vector: str) -> dict[str, Any]:
    """The vector's routing expectations: its public file's data planes and those the
    repository's tables add for it (tests/conformance_tables.py)."""
    return routing_expectations(CONFORMANCE_DIR / f"{vector}.routing.json", local_tables())


def expected_routing(vector: str) -> dict[str, dict[str, dict[str, int]]]:
    """The vector's routing document for ns/svc IPv4: data plane -> zone -> routing -> nodes."""
    document = expected_document(vector)
    (entry,) = (
        service
        for service in document["services"]
        if (service["namespace"], service["name"], service["address_type"]) == ("ns", "svc", "IPv4")
    )
    routing: dict[str, dict[str, dict[str, int]]] = entry["routing"]
    return routing


def test_routing_nodes_and_ratio_follow_the_vector_for_every_data_plane(
    serve_snapshot: ServeSnapshot,
) -> None:
    """One routing_nodes series per (data plane, zone, routing present); ratio per data plane."""
    snapshot = json.loads(READY_ABSENT.with_suffix(".snapshot.json").read_text())
    # Every data plane the expectations hold: the public list and the tables' additions.
    dataplanes = tuple(
        DataPlane(plane) for plane in expected_document(READY_ABSENT.name)["dataplanes"]
    )
    with serve_snapshot(snapshot, dataplanes=dataplanes) as exporter:
        metrics = scrape(base_url(exporter))
    expected = expected_routing(READY_ABSENT.name)
    routing_nodes = {
        (labels["dataplane"], labels["zone"], labels["routing"]): metrics.value(
            SERVICE_ROUTING_NODES.name, **labels
        )
        for labels in metrics.labelled(SERVICE_ROUTING_NODES.name, **ENTRY)
    }
    assert routing_nodes == {
        (dataplane, zone, routing): float(count)
        for dataplane, zones in expected.items()
        for zone, counts in zones.items()
        for routing, count in counts.items()
    }
    # The silent failure of section 10: kube-proxy keeps no traffic local at all.
    assert metrics.value(SERVICE_LOCAL_ROUTING_RATIO.name, **ENTRY, dataplane="kube-proxy") == 0
    # mixed is not local either.
    assert metrics.value(SERVICE_LOCAL_ROUTING_RATIO.name, **ENTRY, dataplane="cilium-1.18.0") == 0
    assert {
        labels["dataplane"] for labels in metrics.labelled(SERVICE_LOCAL_ROUTING_RATIO.name)
    } == {str(dataplane) for dataplane in dataplanes}


def test_ratio_is_a_share_of_ready_nodes(serve_snapshot: ServeSnapshot) -> None:
    """Every ratio is the local routings' node count over all Ready nodes of its entry."""
    snapshot = json.loads((EXAMPLES_DIR / "healthy-three-zones.json").read_text())
    with serve_snapshot(snapshot, dataplanes=(DataPlane.KUBE_PROXY, DataPlane.CILIUM_1_18_0)) as (
        exporter
    ):
        metrics = scrape(base_url(exporter))
    ratios = metrics.labelled(SERVICE_LOCAL_ROUTING_RATIO.name)
    assert ratios
    for labels in ratios:
        identity = {name: labels[name] for name in (*ENTRY, "dataplane")}
        counts = {
            row["routing"]: metrics.value(SERVICE_ROUTING_NODES.name, **row)
            for row in metrics.labelled(SERVICE_ROUTING_NODES.name, **identity)
        }
        local = sum(
            count or 0
            for routing, count in counts.items()
            if routing in {"same-node", "same-zone", "local"}
        )
        total = sum(count or 0 for count in counts.values())
        assert metrics.value(SERVICE_LOCAL_ROUTING_RATIO.name, **labels) == local / total


def test_no_routing_no_series(serve_snapshot: ServeSnapshot) -> None:
    """A snapshot without Ready nodes gives no routing: neither family has a series."""
    snapshot = json.loads(READY_ABSENT.with_suffix(".snapshot.json").read_text())
    snapshot["items"] = [item for item in snapshot["items"] if item["kind"] != "Node"]
    with serve_snapshot(snapshot) as exporter:
        metrics = scrape(base_url(exporter))
    assert not metrics.labelled(SERVICE_ROUTING_NODES.name)
    assert not metrics.labelled(SERVICE_LOCAL_ROUTING_RATIO.name)


def test_dataplane_info_names_each_configured_data_plane_from_the_flag(
    serve_snapshot: ServeSnapshot,
) -> None:
    snapshot = json.loads(READY_ABSENT.with_suffix(".snapshot.json").read_text())
    with serve_snapshot(snapshot, dataplanes=(DataPlane.CILIUM, DataPlane.ISTIO)) as exporter:
        metrics = scrape(base_url(exporter))
    assert sorted(
        (labels["dataplane"], labels["source"]) for labels in metrics.labelled(DATAPLANE_INFO.name)
    ) == [("cilium", "flag"), ("istio", "flag")]
