"""behaviour §5: the mode kube-proxy picks per Service on each node."""

from __future__ import annotations

import pytest

from exporter.engine import Endpoint, EndpointSlice, ProxyMode, ProxyView, ReadyNodes, Service
from exporter.engine.kubeproxy import proxy_view
from tests.engine.builders import (
    auto_service,
    endpoint,
    endpoint_slice,
    node,
    service,
    verdict,
    zone_nodes,
)
from tests.engine.views import mode_of_node

SAME_NODE = ProxyMode.PREFER_SAME_NODE
SAME_ZONE = ProxyMode.PREFER_SAME_ZONE
CLUSTER = ProxyMode.CLUSTER
LOCAL = ProxyMode.LOCAL

# Ready nodes: a-1, a-2 in zone a, b-1 in zone b, c-1 in zone c.
NODES = ReadyNodes.from_pairs([("a-1", "a"), ("a-2", "a"), ("b-1", "b"), ("c-1", "c")])


def view(
    *slices: EndpointSlice, svc: Service | None = None, address_type: str = "IPv4"
) -> ProxyView:
    return proxy_view(svc or auto_service(), address_type, slices, NODES)


def zone_ep(
    zone: str, *hints: str, ready: bool | None = True, address: str | None = None
) -> Endpoint:
    return endpoint(zone, ready=ready, address=address, hints=hints)


def test_no_ready_endpoints_is_cluster() -> None:
    """With no ready endpoint every zone is Cluster."""
    result = view(endpoint_slice(zone_ep("a", "a", ready=False)))
    assert dict(result.by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}
    assert result.same_node == ()


def test_no_slices_is_cluster() -> None:
    """An empty endpoint set is Cluster everywhere."""
    assert dict(view().by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}


def test_all_zone_hinted_prefer_same_zone_and_unhinted_zone_falls_back() -> None:
    """Every ready endpoint hinted: zones named by a hint are PreferSameZone, others Cluster."""
    result = view(endpoint_slice(zone_ep("a", "a"), zone_ep("b", "b"), zone_ep("b", "a")))
    assert dict(result.by_zone) == {"a": SAME_ZONE, "b": SAME_ZONE, "c": CLUSTER}


def test_partial_zone_hints_mean_cluster_everywhere() -> None:
    """One ready endpoint without a zone hint makes kube-proxy ignore every hint."""
    result = view(endpoint_slice(zone_ep("a", "a"), zone_ep("b", "b"), zone_ep("c")))
    assert dict(result.by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}


def test_ready_absent_counts_as_ready() -> None:
    """An endpoint with no ready condition is ready for kube-proxy (its missing hint counts)."""
    result = view(endpoint_slice(zone_ep("a", "a"), zone_ep("b", ready=None)))
    assert dict(result.by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}


def test_ready_absent_hinted_endpoint_is_used_though_controller_ignores_it() -> None:
    """A ready-nil hinted endpoint gives PreferSameZone, yet is not in the controller's N."""
    result = verdict(
        zone_nodes({"a": ["4"], "b": ["4"]}),
        auto_service(),
        [endpoint_slice(zone_ep("a", "a", ready=None))],
    )
    assert result.ready_endpoints == 0
    assert result.proxy.by_zone["a"] is SAME_ZONE


def test_not_ready_endpoints_need_no_hint() -> None:
    """An endpoint with ready false is ignored, so its missing hint does not matter."""
    result = view(endpoint_slice(zone_ep("a", "a"), zone_ep("b", ready=False)))
    assert dict(result.by_zone) == {"a": SAME_ZONE, "b": CLUSTER, "c": CLUSTER}


@pytest.mark.parametrize(
    ("first", "second", "mode_a"),
    [
        pytest.param(
            zone_ep("a", "a", address="1.1.1.1"),
            zone_ep("a", address="1.1.1.1"),
            SAME_ZONE,
            id="hinted-first",
        ),
        pytest.param(
            zone_ep("a", address="1.1.1.1"),
            zone_ep("a", "a", address="1.1.1.1"),
            CLUSTER,
            id="unhinted-first",
        ),
        pytest.param(
            zone_ep("a", address="1.1.1.1", ready=False),
            zone_ep("a", address="1.1.1.1"),
            SAME_ZONE,
            id="not-ready-first-hides-later-unhinted-copy",
        ),
    ],
)
def test_dedupe_keeps_first_address_in_order(
    first: Endpoint, second: Endpoint, mode_a: ProxyMode
) -> None:
    """Endpoints are deduplicated by first address across slices, the first copy winning."""
    other = zone_ep("a", "a", address="2.2.2.2")
    result = view(endpoint_slice(first, other), endpoint_slice(second, managed=False))
    assert result.by_zone["a"] is mode_a


def test_unmanaged_slices_are_used() -> None:
    """kube-proxy reads every slice of the Service, managed by the controller or not."""
    result = view(endpoint_slice(zone_ep("a", "a")), endpoint_slice(zone_ep("b"), managed=False))
    assert dict(result.by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}


def node_ep(
    node_name: str, zone: str, *node_hints: str, zone_hints: tuple[str, ...] | None = None
) -> Endpoint:
    return endpoint(
        zone,
        node_name=node_name,
        hints=(zone,) if zone_hints is None else zone_hints,
        node_hints=node_hints,
    )


def test_prefer_same_node_when_every_ready_endpoint_has_node_hint() -> None:
    """Nodes named by a node hint are PreferSameNode; the others use the zone rules."""
    result = view(endpoint_slice(node_ep("a-1", "a", "a-1"), node_ep("b-1", "b", "b-1")))
    assert result.same_node == ("a-1", "b-1")
    assert mode_of_node(result, "a-1", "a") is SAME_NODE
    assert mode_of_node(result, "a-2", "a") is SAME_ZONE
    assert mode_of_node(result, "c-1", "c") is CLUSTER
    # Zone b is still reported, though its only node is in PreferSameNode.
    assert dict(result.by_zone) == {"a": SAME_ZONE, "b": SAME_ZONE, "c": CLUSTER}


def test_one_endpoint_without_node_hint_disables_same_node() -> None:
    """A single ready endpoint without a node hint makes every node use zone rules."""
    result = view(endpoint_slice(node_ep("a-1", "a", "a-1"), node_ep("b-1", "b")))
    assert result.same_node == ()
    assert dict(result.by_zone) == {"a": SAME_ZONE, "b": SAME_ZONE, "c": CLUSTER}


def test_node_hints_without_zone_hints_fall_back_to_cluster() -> None:
    """With node hints but no zone hints, nodes not named fall back to Cluster."""
    result = view(endpoint_slice(node_ep("a-1", "a", "a-1", zone_hints=())))
    assert result.same_node == ("a-1",)
    assert dict(result.by_zone) == {"a": CLUSTER, "b": CLUSTER, "c": CLUSTER}


def test_node_hint_for_unknown_node_lists_no_node() -> None:
    """A node hint naming no Ready node puts no node in PreferSameNode."""
    result = view(endpoint_slice(node_ep("gone", "a", "gone")))
    assert result.same_node == ()


def test_nodes_without_zone_label_are_zone_empty() -> None:
    """Ready nodes without a zone label (or an empty one) are reported under zone ''."""
    nodes = [
        node("a-1", "a"),
        node("b-1", "b"),
        node("bare", None),
        node("empty", ""),
        node("down", "d", ready=False),
        node("cp", "cp-zone", control_plane=True),
    ]
    result = verdict(nodes, auto_service(), [endpoint_slice(zone_ep("a", "a"))])
    assert dict(result.proxy.by_zone) == {
        "": CLUSTER,
        "a": SAME_ZONE,
        "b": CLUSTER,
        "cp-zone": CLUSTER,
    }


def test_internal_traffic_policy_local_is_local_everywhere() -> None:
    """internalTrafficPolicy Local gives Local in every zone and no PreferSameNode node."""
    result = view(
        endpoint_slice(node_ep("a-1", "a", "a-1")),
        svc=service(mode="Auto", internal_traffic_policy="Local"),
    )
    assert dict(result.by_zone) == {"a": LOCAL, "b": LOCAL, "c": LOCAL}
    assert result.same_node == ()


@pytest.mark.parametrize(
    ("svc", "address_type"),
    [
        pytest.param(service(mode="Auto", cluster_ip="None"), "IPv4", id="headless"),
        pytest.param(
            service(mode="Auto", type_="ExternalName", cluster_ip=None), "IPv4", id="external-name"
        ),
        pytest.param(service(mode="Auto"), "FQDN", id="fqdn-address-type"),
    ],
)
def test_unproxied_services_have_no_mode(svc: Service, address_type: str) -> None:
    """Headless, ExternalName and FQDN entries get no mode and no PreferSameNode node."""
    slices = [endpoint_slice(node_ep("a-1", "a", "a-1"), address_type=address_type)]
    result = view(*slices, svc=svc, address_type=address_type)
    assert dict(result.by_zone) == {}
    assert result.same_node == ()


def test_ipv6_is_proxied() -> None:
    """IPv6 slices get modes like IPv4 ones."""
    result = view(endpoint_slice(zone_ep("a", "a"), address_type="IPv6"), address_type="IPv6")
    assert result.by_zone["a"] is SAME_ZONE


def test_hints_followed_whatever_the_mechanism() -> None:
    """Stale hints under mechanism none are still followed by kube-proxy."""
    result = view(endpoint_slice(zone_ep("a", "a")), svc=service())
    assert result.by_zone["a"] is SAME_ZONE
