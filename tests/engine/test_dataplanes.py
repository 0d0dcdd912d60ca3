"""behaviour §10: each data plane's rule, branch by branch, over hand-built slices.

Clients: a-1 and a-2 in zone a, b-1 in zone b, n-1 without a zone label. An expected
routing is one letter per client in that order: N same-node, Z same-zone, C cluster,
L local, M mixed, X no-endpoints, - no routing; a dual-stack Service gives one word per
address type (IPv4 first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from exporter.engine import (
    DATA_PLANES,
    Cause,
    DataPlane,
    EndpointSlice,
    Routing,
    Service,
    route,
    service_endpoints,
)
from exporter.engine.routing import ReadyNodes
from tests.engine.builders import endpoint, endpoint_slice, node, service
from tests.engine.views import routing_of
from tests.results import result_of

CLIENTS = ("a-1", "a-2", "b-1", "n-1")
NODES = [node("a-1", "a"), node("a-2", "a"), node("b-1", "b"), node("n-1", None)]
LETTERS = {
    Routing.SAME_NODE: "N",
    Routing.SAME_ZONE: "Z",
    Routing.CLUSTER: "C",
    Routing.LOCAL: "L",
    Routing.MIXED: "M",
    Routing.NO_ENDPOINTS: "X",
}

Scenario = tuple[Service, list[EndpointSlice]]


def all_hinted(svc: Service) -> Scenario:
    """One endpoint per zone, each hinted for its own zone: what the controller writes."""
    return svc, [endpoint_slice(endpoint("a", hints=("a",)), endpoint("b", hints=("b",)))]


AUTO = service(mode="Auto")


def unhinted_endpoint() -> Scenario:
    """A ready endpoint without a zone hint, in a slice of its own."""
    return AUTO, [
        endpoint_slice(endpoint("a", hints=("a",)), endpoint("b", hints=("b",))),
        endpoint_slice(endpoint("b")),
    ]


def prefer_close_unhinted_endpoint() -> Scenario:
    """The same partial hints under PreferClose: Calico uses the hints it finds."""
    _, slices = unhinted_endpoint()
    return service(traffic_distribution="PreferClose"), slices


def ready_condition_absent() -> Scenario:
    """`conditions: {}`: kube-proxy counts the endpoint, the controller never hints it."""
    return AUTO, [
        endpoint_slice(
            endpoint("a", hints=("a",)), endpoint("b", hints=("b",)), endpoint("b", ready=None)
        )
    ]


def no_hint_for_zone_b() -> Scenario:
    """Every endpoint hinted, none for zone b (topology-mode Auto)."""
    return AUTO, [endpoint_slice(endpoint("a", hints=("a",)), endpoint("a", hints=("a",)))]


def prefer_close_no_hint_for_zone_b() -> Scenario:
    """The same under trafficDistribution: PreferClose."""
    svc = service(traffic_distribution="PreferClose")
    return svc, [endpoint_slice(endpoint("a", hints=("a",)), endpoint("a", hints=("a",)))]


def internal_traffic_policy_local() -> Scenario:
    """Endpoints on a-1 and b-1 only: the policy drops the traffic of a-2 and n-1."""
    return service(mode="Auto", internal_traffic_policy="Local"), [
        endpoint_slice(
            endpoint("a", node_name="a-1", hints=("a",)),
            endpoint("b", node_name="b-1", hints=("b",)),
        )
    ]


def local_policy_terminating_fallback() -> Scenario:
    """Ready on a-1; serving terminating on a-2 (kube-proxy's fallback); terminating but
    not serving on b-1 (no fallback; Calico's R holds it all the same)."""
    return service(internal_traffic_policy="Local"), [
        endpoint_slice(
            endpoint("a", node_name="a-1"),
            replace(endpoint("a", node_name="a-2", ready=False), serving=True, terminating=True),
            replace(endpoint("b", node_name="b-1", ready=False), serving=False, terminating=True),
        )
    ]


def local_policy_no_ready_endpoint() -> Scenario:
    """Only a serving terminating endpoint, on a-1: no ready endpoint, so `cluster` comes
    first, except for kube-proxy, which then uses the serving terminating endpoints: a-1
    routes to its own, the policy drops the others' traffic (its real rules say so)."""
    return service(internal_traffic_policy="Local"), [
        endpoint_slice(
            replace(endpoint("a", node_name="a-1", ready=False), serving=True, terminating=True)
        )
    ]


def terminating_endpoint() -> Scenario:
    """The only endpoint hinted for b is terminating (ready false): only Calico uses it."""
    return AUTO, [
        endpoint_slice(
            endpoint("a", hints=("a",)),
            replace(endpoint("b", ready=False, hints=("b",)), terminating=True),
        )
    ]


def node_hints() -> Scenario:
    """PreferSameNode: endpoints on a-1 and b-1, hinted for their zone and node."""
    return service(traffic_distribution="PreferSameNode"), [
        endpoint_slice(
            endpoint("a", node_name="a-1", hints=("a",), node_hints=("a-1",)),
            endpoint("b", node_name="b-1", hints=("b",), node_hints=("b-1",)),
        )
    ]


def stale_hints_no_mechanism() -> Scenario:
    """Hints left in place with neither annotation nor trafficDistribution."""
    return all_hinted(service())


def prefer_close() -> Scenario:
    return all_hinted(service(traffic_distribution="PreferClose"))


def istio_annotation_same_node() -> Scenario:
    """Istio's own annotation, compared without regard to case; no hints."""
    svc = replace(service(), istio_traffic_distribution="prefersamenode")
    return svc, [endpoint_slice(endpoint("a", node_name="a-1"))]


def few_endpoints_in_zone_a() -> Scenario:
    """topology-mode Auto with 2 endpoints in a and 3 in b, all hinted for their zone."""
    endpoints = [endpoint("a", hints=("a",)) for _ in range(2)]
    endpoints += [endpoint("b", hints=("b",)) for _ in range(3)]
    return AUTO, [endpoint_slice(*endpoints)]


def no_ready_endpoint() -> Scenario:
    return AUTO, [endpoint_slice(endpoint("a", ready=False, hints=("a",)))]


def headless() -> Scenario:
    return all_hinted(service(mode="Auto", cluster_ip="None"))


def dual_stack() -> Scenario:
    """IPv4 fully hinted, IPv6 with an unhinted endpoint: each address type on its own."""
    svc, (v4,) = all_hinted(AUTO)
    v6 = endpoint_slice(
        endpoint("a", hints=("a",), address="fd00::1"),
        endpoint("b", address="fd00::2"),
        address_type="IPv6",
    )
    return svc, [v4, v6]


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    function.__name__.replace("_", "-"): function
    for function in (
        unhinted_endpoint,
        prefer_close_unhinted_endpoint,
        ready_condition_absent,
        no_hint_for_zone_b,
        prefer_close_no_hint_for_zone_b,
        internal_traffic_policy_local,
        local_policy_terminating_fallback,
        local_policy_no_ready_endpoint,
        terminating_endpoint,
        node_hints,
        stale_hints_no_mechanism,
        prefer_close,
        istio_annotation_same_node,
        few_endpoints_in_zone_a,
        no_ready_endpoint,
        headless,
        dual_stack,
    )
}


def routing_letters(scenario: str, dataplane: DataPlane) -> str:
    svc, slices = SCENARIOS[scenario]()
    evaluation = result_of(NODES, [svc], slices, [dataplane])
    words = []
    for verdict in evaluation.verdicts():
        view = verdict.routing[dataplane]
        zone_of = evaluation.nodes.zone_of
        words.append(
            "".join(
                LETTERS[routing] if (routing := routing_of(view, n, zone_of[n])) else "-"
                for n in CLIENTS
            )
        )
    return " ".join(words)


# Scenario -> expected letters, per data plane; each row checked by hand against section 10.
EXPECTED: dict[DataPlane, dict[str, str]] = {
    DataPlane.KUBE_PROXY: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "LXXX",
        "terminating-endpoint": "ZZCC",
        "node-hints": "NZNC",
        "stale-hints-no-mechanism": "ZZZC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.KUBE_PROXY_1_29: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        # trafficDistribution is not read: no annotation, no hints.
        "prefer-close-no-hint-for-zone-b": "CCCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "LXXX",
        "terminating-endpoint": "ZZCC",
        "node-hints": "CCCC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "CCCC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.KUBE_PROXY_1_33: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "LXXX",
        "terminating-endpoint": "ZZCC",
        # behaviour §12: node hints unread, PreferSameNode routes same-zone.
        "node-hints": "ZZZC",
        "stale-hints-no-mechanism": "ZZZC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.CILIUM: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "ZZCC",
        # PreferSameNode by nodeName, node hints unread.
        "node-hints": "NZNC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.CILIUM_1_18_0: {
        "unhinted-endpoint": "MMMC",
        "prefer-close-unhinted-endpoint": "MMMC",
        "ready-condition-absent": "MMMC",
        # No endpoint for zone b: connections refused (cilium issue 41022).
        "no-hint-for-zone-b": "ZZXC",
        "prefer-close-no-hint-for-zone-b": "ZZXC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "ZZXC",
        # PreferSameNode does not apply in 1.18.0.
        "node-hints": "CCCC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        # IPv6: zone a gets its hinted endpoint plus the unhinted one; b only the unhinted.
        "dual-stack": "ZZZC MMCC",
    },
    DataPlane.CILIUM_NO_TOPOLOGY: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "CCCC",
        "prefer-close-no-hint-for-zone-b": "CCCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLXX",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "CCCC",
        "node-hints": "CCCC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "CCCC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "CCCC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "CCCC CCCC",
    },
    DataPlane.LINKERD: {
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "CCCC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LXXX",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "ZZCC",
        "node-hints": "ZZZC",
        "stale-hints-no-mechanism": "ZZZC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.INGRESS_NGINX: {
        # The unhinted endpoint's slice is kept whole, the other is cut to the zone.
        "unhinted-endpoint": "MMMC",
        "prefer-close-unhinted-endpoint": "MMMC",
        "ready-condition-absent": "CCCC",
        # HTTP 503 (ingress-nginx issue 11342).
        "no-hint-for-zone-b": "ZZXC",
        # PreferClose keeps a slice with nothing hinted for the zone whole.
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        # internalTrafficPolicy is not read.
        "internal-traffic-policy-local": "ZZZC",
        "local-policy-terminating-fallback": "CCCC",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "ZZXC",
        "node-hints": "CCCC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
    DataPlane.ISTIO: {
        # The topology-mode annotation and hints are never read.
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "ZZZC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "CCCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LXXX",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "CCCC",
        "node-hints": "NZNC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "NZCC",
        "few-endpoints-in-zone-a": "CCCC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "CCCC CCCC",
    },
    DataPlane.ENVOY_GATEWAY: {
        # topology-mode alone wants 3 endpoints in the zone.
        "unhinted-endpoint": "CCCC",
        "prefer-close-unhinted-endpoint": "ZZZC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "CCCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "CCCC",
        "local-policy-terminating-fallback": "CCCC",
        "local-policy-no-ready-endpoint": "CCCC",
        "terminating-endpoint": "CCCC",
        "node-hints": "ZZZC",
        "stale-hints-no-mechanism": "CCCC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "CCZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "CCCC CCCC",
    },
    DataPlane.CALICO_EBPF: {
        "unhinted-endpoint": "CCCC",
        # Without topology-mode auto, partial hints are partly used.
        "prefer-close-unhinted-endpoint": "ZZZC",
        "ready-condition-absent": "CCCC",
        "no-hint-for-zone-b": "ZZCC",
        "prefer-close-no-hint-for-zone-b": "ZZCC",
        "internal-traffic-policy-local": "LXLX",
        "local-policy-terminating-fallback": "LLLX",
        "local-policy-no-ready-endpoint": "CCCC",
        # The terminating endpoint still counts.
        "terminating-endpoint": "ZZZC",
        "node-hints": "NZNC",
        "stale-hints-no-mechanism": "ZZZC",
        "prefer-close": "ZZZC",
        "istio-annotation-same-node": "CCCC",
        "few-endpoints-in-zone-a": "ZZZC",
        "no-ready-endpoint": "CCCC",
        "headless": "----",
        "dual-stack": "ZZZC CCCC",
    },
}
CASES = [
    pytest.param(dataplane, scenario, letters, id=f"{dataplane}-{scenario}")
    for dataplane, table in EXPECTED.items()
    for scenario, letters in table.items()
]


def test_every_data_plane_has_a_rule_and_a_full_table() -> None:
    """Adding a data plane means a registry entry and a row for every scenario here."""
    assert set(DATA_PLANES) == set(DataPlane) == set(EXPECTED)
    for table in EXPECTED.values():
        assert set(table) == set(SCENARIOS)


@pytest.mark.parametrize(("dataplane", "scenario", "expected"), CASES)
def test_routing_per_client(dataplane: DataPlane, scenario: str, expected: str) -> None:
    """Each client's routing under the data plane's rule, for each branch of it."""
    assert routing_letters(scenario, dataplane) == expected


def test_counts_and_local_ratio_follow_the_nodes() -> None:
    """Node exceptions are counted in their zone; the ratio counts same-node, same-zone, local."""
    svc, slices = node_hints()
    (verdict,) = result_of(NODES, [svc], slices, [DataPlane.KUBE_PROXY]).verdicts()
    view = verdict.routing[DataPlane.KUBE_PROXY]
    assert {zone: dict(counts) for zone, counts in view.nodes.items()} == {
        "": {Routing.CLUSTER: 1},
        "a": {Routing.SAME_NODE: 1, Routing.SAME_ZONE: 1},
        "b": {Routing.SAME_NODE: 1},
    }
    assert view.local_ratio == 0.75
    assert dict(view.by_node) == {"a-1": Routing.SAME_NODE, "b-1": Routing.SAME_NODE}


def test_ready_condition_absent_names_the_endpoint() -> None:
    """kube-proxy routes cluster because of the endpoint without a ready condition, named."""
    svc, slices = ready_condition_absent()
    (verdict,) = result_of(NODES, [svc], slices).verdicts()
    zone_routing = verdict.routing[DataPlane.KUBE_PROXY].by_zone["a"]
    assert zone_routing.cause is Cause.UNHINTED_ENDPOINT
    assert zone_routing.endpoint is not None
    assert zone_routing.endpoint.ready is None
    assert verdict.hint_completeness == 1.0


def test_no_ready_node_means_no_routing() -> None:
    svc, slices = all_hinted(AUTO)
    (verdict,) = result_of([], [svc], slices, list(DataPlane)).verdicts()
    assert all(not view.applies and view.local_ratio is None for view in verdict.routing.values())


def test_a_zone_shares_one_routing_however_many_nodes() -> None:
    """5,000 nodes in 3 zones: 3 zone routings, and exceptions only for named nodes."""
    nodes = ReadyNodes.from_pairs((f"n-{index}", f"z-{index % 3}") for index in range(5000))
    svc, slices = node_hints()
    endpoints = service_endpoints(svc, "IPv4", slices)
    for dataplane in DataPlane:
        view = route(dataplane, endpoints, nodes)
        assert len(view.by_zone) == 3
        assert not view.by_node
        assert sum(sum(counts.values()) for counts in view.nodes.values()) == 5000
