"""behaviour §9 conventions, checked on real scrapes of an exporter serving a snapshot."""

from __future__ import annotations

from tests.k8s_objects import (
    as_list,
    endpoint,
    endpoint_slice,
    node,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, scrape

S = {"namespace": "shop", "address_type": "IPv4"}


def _cluster() -> dict[str, object]:
    return as_list(
        three_zone_nodes(),
        service("shop", "refused", topology_mode="Auto"),
        endpoint_slice("shop", "refused-1", "refused", zone_endpoints(8, hinted=False)),
        service("shop", "healthy", topology_mode="Auto"),
        endpoint_slice("shop", "healthy-1", "healthy", zone_endpoints(9, prefix="10.0.1")),
        service("shop", "plain"),
        endpoint_slice(
            "shop", "plain-1", "plain", zone_endpoints(3, hinted=False, prefix="10.0.2")
        ),
        service("shop", "typo", traffic_distribution="PreferNearby"),
        endpoint_slice("shop", "typo-1", "typo", zone_endpoints(3, hinted=False, prefix="10.0.3")),
        service("ops", "close", traffic_distribution="PreferClose"),
        endpoint_slice("ops", "close-1", "close", zone_endpoints(3, prefix="10.0.4")),
    )


def test_disabled_service_has_reason_and_no_allocation(serve_snapshot: ServeSnapshot) -> None:
    """A refused auto Service: expected_enabled 0, one reason series, no null-valued series."""
    with serve_snapshot(_cluster()) as exporter:
        result = scrape(base_url(exporter))
    labels = {**S, "service": "refused"}
    assert result.value("topology_hints_service_expected_enabled", **labels) == 0
    assert result.labelled("topology_hints_service_disabled_reason", service="refused") == [
        {**labels, "reason": "MinAllocationExceedsOverloadThreshold"}
    ]
    assert result.labelled("topology_hints_zone_allocation_minimum", service="refused") == []
    assert result.labelled("topology_hints_zone_load_factor", service="refused") == []
    assert result.value("topology_hints_service_hint_completeness", **labels) == 0
    assert (
        result.value(
            "topology_hints_service_nearest_feasible_endpoints", **labels, direction="below"
        )
        == 7
    )
    assert (
        result.value(
            "topology_hints_service_nearest_feasible_endpoints", **labels, direction="above"
        )
        == 9
    )
    for zone in ("zone-a", "zone-b", "zone-c"):
        assert (
            result.value("topology_hints_service_proxy_mode", **labels, zone=zone, mode="Cluster")
            == 1
        )


def test_enabled_service_exports_allocation_per_zone(serve_snapshot: ServeSnapshot) -> None:
    """An enabled auto Service: minimum/desired/maximum, hinted and located per zone, no reason."""
    with serve_snapshot(_cluster()) as exporter:
        result = scrape(base_url(exporter))
    labels = {**S, "service": "healthy"}
    assert result.value("topology_hints_service_expected_enabled", **labels) == 1
    assert result.labelled("topology_hints_service_disabled_reason", service="healthy") == []
    for zone in ("zone-a", "zone-b", "zone-c"):
        zone_labels = {**labels, "zone": zone}
        assert result.value("topology_hints_zone_allocation_minimum", **zone_labels) == 3
        assert result.value("topology_hints_zone_allocation_maximum", **zone_labels) == 3
        assert result.value("topology_hints_zone_allocation_desired", **zone_labels) == 3
        assert result.value("topology_hints_zone_hinted_endpoints", **zone_labels) == 3
        assert result.value("topology_hints_zone_endpoints", **zone_labels) == 3
        assert result.value("topology_hints_zone_load_factor", **zone_labels) == 1
        assert (
            result.value("topology_hints_service_proxy_mode", **zone_labels, mode="PreferSameZone")
            == 1
        )
    assert result.value("topology_hints_service_proxy_nodes", **labels, mode="PreferSameZone") == 3
    assert result.value("topology_hints_service_state_changes_total", **labels) == 0


def test_default_export_selection(serve_snapshot: ServeSnapshot) -> None:
    """Only Services with a mechanism, hints or a config issue are exported by default."""
    with serve_snapshot(_cluster()) as exporter:
        result = scrape(base_url(exporter))
    exported = {labels["service"] for labels in result.labelled("topology_hints_service_info")}
    assert exported == {"refused", "healthy", "typo", "close"}
    assert result.labelled("topology_hints_service_config_issue", service="typo") == [
        {"namespace": "shop", "service": "typo", "issue": "unknown-traffic-distribution"}
    ]
    info = result.labelled("topology_hints_service_info", service="typo")
    assert info == [
        {
            "namespace": "shop",
            "service": "typo",
            "mechanism": "none",
            "traffic_distribution": "PreferNearby",
            "internal_traffic_policy": "Cluster",
            "proxied": "true",
            "controller_synced": "true",
        }
    ]
    # mechanism none: no expected_enabled series at all.
    assert result.labelled("topology_hints_service_expected_enabled", service="typo") == []
    # Nearest feasible counts exist for auto only: not for none, not for traffic-distribution.
    for name in ("typo", "close"):
        assert (
            result.labelled("topology_hints_service_nearest_feasible_endpoints", service=name) == []
        )
    close = {"namespace": "ops", "service": "close", "address_type": "IPv4"}
    assert result.value("topology_hints_service_expected_enabled", **close) == 1
    assert result.labelled("topology_hints_service_disabled_reason", service="close") == []


def test_all_services_flag_exports_plain_services(serve_snapshot: ServeSnapshot) -> None:
    """--all-services adds Services without any hint mechanism."""
    with serve_snapshot(_cluster(), all_services=True) as exporter:
        result = scrape(base_url(exporter))
    info = result.labelled("topology_hints_service_info", service="plain")
    assert info == [
        {
            "namespace": "shop",
            "service": "plain",
            "mechanism": "none",
            "traffic_distribution": "",
            "internal_traffic_policy": "Cluster",
            "proxied": "true",
            "controller_synced": "true",
        }
    ]


def test_namespace_filters(serve_snapshot: ServeSnapshot) -> None:
    """--namespaces keeps only those namespaces; --namespaces-exclude drops them."""
    with serve_snapshot(_cluster(), namespaces=("ops",)) as exporter:
        only_ops = scrape(base_url(exporter))
    with serve_snapshot(_cluster(), namespaces_exclude=("ops",)) as exporter:
        without_ops = scrape(base_url(exporter))
    assert {item["namespace"] for item in only_ops.labelled("topology_hints_service_info")} == {
        "ops"
    }
    assert {item["namespace"] for item in without_ops.labelled("topology_hints_service_info")} == {
        "shop"
    }


def test_metric_allowlist_and_denylist(serve_snapshot: ServeSnapshot) -> None:
    """Allow/deny lists drop whole families by full-match regular expression."""
    with serve_snapshot(_cluster(), metric_allowlist=("topology_hints_service_.*",)) as exporter:
        allowed = scrape(base_url(exporter))
    with serve_snapshot(_cluster(), metric_denylist=("topology_hints_zone_.*",)) as exporter:
        denied = scrape(base_url(exporter))
    assert allowed.families
    assert all(name.startswith("topology_hints_service_") for name in allowed.families)
    assert not any(name.startswith("topology_hints_zone_") for name in denied.families)
    assert "topology_hints_service_info" in denied.families


def test_node_without_zone_label_reports_empty_zone(serve_snapshot: ServeSnapshot) -> None:
    """A node lacking the zone label is named, and its kube-proxy is reported under zone=""."""
    cluster = as_list(
        [*three_zone_nodes(), node("stray", None, "4")],
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
    )
    with serve_snapshot(cluster) as exporter:
        result = scrape(base_url(exporter))
    assert result.value("topology_hints_sufficient_node_info") == 0
    assert result.labelled("topology_hints_node_missing_topology_info") == [
        {"node": "stray", "missing": "zone"}
    ]
    assert result.series("topology_hints_zone_cpu_ratio") == {}
    assert result.series("topology_hints_zone_allocatable_cpu_cores") == {}
    assert result.labelled("topology_hints_service_disabled_reason", service="web") == [
        {**S, "service": "web", "reason": "InsufficientNodeInfo"}
    ]
    # The hints still in the slices are followed by kube-proxy; the stray node has no zone.
    assert (
        result.value("topology_hints_node_proxy_services", node="stray", zone="", mode="Cluster")
        == 1
    )
    assert result.labelled("topology_hints_service_drift", service="web") == [
        {**S, "service": "web", "kind": "unexpected-hints"}
    ]


def test_prefer_same_node_counts_per_node(serve_snapshot: ServeSnapshot) -> None:
    """PreferSameNode nodes are counted apart from their zone's mode, per Service and per node."""
    endpoints = [
        endpoint(
            f"10.0.9.{i}",
            f"zone-{z}",
            f"node-{z}-0",
            hint_zones=(f"zone-{z}",),
            hint_nodes=(f"node-{z}-0",),
        )
        for i, z in enumerate("abc", start=1)
    ]
    cluster = as_list(
        three_zone_nodes(per_zone=2),
        service("shop", "local", traffic_distribution="PreferSameNode"),
        endpoint_slice("shop", "local-1", "local", endpoints),
    )
    with serve_snapshot(cluster) as exporter:
        result = scrape(base_url(exporter))
    labels = {**S, "service": "local"}
    assert result.value("topology_hints_service_proxy_nodes", **labels, mode="PreferSameNode") == 3
    assert result.value("topology_hints_service_proxy_nodes", **labels, mode="PreferSameZone") == 3
    assert (
        result.value(
            "topology_hints_node_proxy_services",
            node="node-a-0",
            zone="zone-a",
            mode="PreferSameNode",
        )
        == 1
    )
    assert (
        result.value(
            "topology_hints_node_proxy_services",
            node="node-a-1",
            zone="zone-a",
            mode="PreferSameZone",
        )
        == 1
    )
    assert (
        result.value(
            "topology_hints_node_proxy_services",
            node="node-a-0",
            zone="zone-a",
            mode="PreferSameZone",
        )
        is None
    )
