"""The live exporter against the test API server: the cluster changes, the metrics follow."""

from __future__ import annotations

from tests.k8s_objects import (
    endpoint,
    endpoint_slice,
    event,
    node,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.scrape import Scrape

WEB = {"namespace": "shop", "service": "web", "address_type": "IPv4"}


def _web_slice(count: int, *, hinted: bool = True) -> dict[str, object]:
    return endpoint_slice("shop", "web-1", "web", zone_endpoints(count, hinted=hinted))


def _enabled(result: Scrape) -> float | None:
    return result.value("topology_hints_service_expected_enabled", **WEB)


def test_scaling_across_the_feasibility_boundary(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """7 -> 8 -> 9 ready endpoints in 3 equal zones: enabled, refused, enabled; 2 flips counted."""
    kube_api.load(
        [*three_zone_nodes(), service("shop", "web", topology_mode="Auto"), _web_slice(7)]
    )
    with start_exporter() as exporter:
        eventually(exporter, lambda r: _enabled(r) == 1)
        kube_api.apply(_web_slice(8))
        refused = eventually(exporter, lambda r: _enabled(r) == 0)
        assert refused.labelled("topology_hints_service_disabled_reason", service="web") == [
            {**WEB, "reason": "MinAllocationExceedsOverloadThreshold"}
        ]
        assert (
            refused.value(
                "topology_hints_service_nearest_feasible_endpoints", **WEB, direction="above"
            )
            == 9
        )
        kube_api.apply(_web_slice(9))
        final = eventually(exporter, lambda r: _enabled(r) == 1)
        assert final.value("topology_hints_service_state_changes_total", **WEB) == 2
        assert final.labelled("topology_hints_service_disabled_reason", service="web") == []


def test_node_zone_label_removed_and_restored(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Removing one node's zone label makes node info insufficient and names it; restoring heals."""
    kube_api.load(
        [*three_zone_nodes(), service("shop", "web", topology_mode="Auto"), _web_slice(9)]
    )
    with start_exporter() as exporter:
        eventually(exporter, lambda r: r.value("topology_hints_sufficient_node_info") == 1)
        kube_api.apply(node("node-b-0", None))
        broken = eventually(exporter, lambda r: r.value("topology_hints_sufficient_node_info") == 0)
        assert broken.labelled("topology_hints_node_missing_topology_info") == [
            {"node": "node-b-0", "missing": "zone"}
        ]
        assert broken.labelled("topology_hints_service_disabled_reason", service="web") == [
            {**WEB, "reason": "InsufficientNodeInfo"}
        ]
        kube_api.apply(node("node-b-0", "zone-b"))
        healed = eventually(exporter, lambda r: r.value("topology_hints_sufficient_node_info") == 1)
        assert healed.labelled("topology_hints_node_missing_topology_info") == []
        assert _enabled(healed) == 1


def test_partial_hints_make_kube_proxy_ignore_them_all(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """One endpoint losing its hint: completeness below 1 and every zone falls back to Cluster."""
    kube_api.load(
        [*three_zone_nodes(), service("shop", "web", topology_mode="Auto"), _web_slice(9)]
    )
    with start_exporter() as exporter:
        eventually(
            exporter,
            lambda r: (
                r.value(
                    "topology_hints_service_proxy_mode", **WEB, zone="zone-a", mode="PreferSameZone"
                )
                == 1
            ),
        )
        endpoints = zone_endpoints(9)
        endpoints[0] = endpoint("10.0.0.1", "zone-a", "node-a-0")
        kube_api.apply(endpoint_slice("shop", "web-1", "web", endpoints))
        partial = eventually(
            exporter,
            lambda r: (r.value("topology_hints_service_hint_completeness", **WEB) or 1) < 1,
        )
        assert partial.value("topology_hints_service_hint_completeness", **WEB) == 8 / 9
        modes = partial.labelled("topology_hints_service_proxy_mode", service="web")
        assert sorted((m["zone"], m["mode"]) for m in modes) == [
            ("zone-a", "Cluster"),
            ("zone-b", "Cluster"),
            ("zone-c", "Cluster"),
        ]
        # zone-a now has 2 hinted endpoints against a minimum of 3.
        drift = partial.labelled("topology_hints_service_drift", service="web")
        assert sorted(item["kind"] for item in drift) == ["hints-missing", "zone-out-of-range"]
        assert (
            partial.value(
                "topology_hints_node_proxy_services", node="node-a-0", zone="zone-a", mode="Cluster"
            )
            == 1
        )


def test_deleted_service_series_disappear(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Deleting a Service and its slices removes every series that names it, events included."""
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            _web_slice(8),
            event("shop", "web.1", "web", "TopologyAwareHintsDisabled"),
        ]
    )
    with start_exporter() as exporter:
        before = eventually(
            exporter,
            lambda r: (
                r.labelled("topology_hints_service_last_event_timestamp_seconds", service="web")
                != []
            ),
        )
        assert (
            before.value(
                "topology_hints_service_last_event_timestamp_seconds",
                namespace="shop",
                service="web",
                reason="TopologyAwareHintsDisabled",
            )
            == 1795946400.0
        )  # 2026-11-29T10:00:00Z
        assert (
            before.value(
                "topology_hints_controller_events_total", reason="TopologyAwareHintsDisabled"
            )
            == 1
        )
        kube_api.delete("Service", "shop", "web")
        kube_api.delete("EndpointSlice", "shop", "web-1")
        after = eventually(exporter, lambda r: r.labelled("topology_hints_service_info") == [])
        assert not any(("service", "web") in labels for (_, labels) in after.samples)


def test_controller_events_are_counted(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """New occurrences of a hint event (count going up) add to controller_events_total."""
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            _web_slice(9),
            event("shop", "web.1", "web", "TopologyAwareHintsEnabled"),
            event("shop", "other.1", "web", "FailedToUpdateEndpoint"),
        ]
    )
    with start_exporter() as exporter:
        eventually(
            exporter,
            lambda r: (
                r.value(
                    "topology_hints_controller_events_total", reason="TopologyAwareHintsEnabled"
                )
                == 1
            ),
        )
        kube_api.apply(
            event("shop", "web.1", "web", "TopologyAwareHintsEnabled", count=3,
                  last_timestamp="2026-11-29T11:00:00Z")
        )  # fmt: skip
        result = eventually(
            exporter,
            lambda r: (
                r.value(
                    "topology_hints_controller_events_total", reason="TopologyAwareHintsEnabled"
                )
                == 3
            ),
        )
        assert (
            result.value(
                "topology_hints_service_last_event_timestamp_seconds",
                namespace="shop",
                service="web",
                reason="TopologyAwareHintsEnabled",
            )
            == 1795950000.0
        )
        assert (
            result.labelled(
                "topology_hints_controller_events_total", reason="FailedToUpdateEndpoint"
            )
            == []
        )


def test_malformed_object_is_counted_and_skipped(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """An EndpointSlice of the wrong shape is skipped and counted; everything else still works."""
    bad = endpoint_slice("shop", "broken", "web", [])
    bad["endpoints"] = "not a list"
    kube_api.load(
        [*three_zone_nodes(), service("shop", "web", topology_mode="Auto"), _web_slice(9), bad]
    )
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: _enabled(r) == 1)
        assert result.value("topology_hints_invalid_objects_total", resource="endpointslices") == 1
        also_bad = endpoint_slice("shop", "broken-2", "web", [])
        also_bad["addressType"] = 4
        kube_api.apply(also_bad)
        after = eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_invalid_objects_total", resource="endpointslices") == 2
            ),
        )
        assert _enabled(after) == 1
