"""behaviour §10, rule by rule: one function per data plane, and the registry naming them.

`route` applies the preamble every data plane shares (no routing for headless and
ExternalName Services or non-IP address types; `cluster` without a ready endpoint; under
internalTrafficPolicy Local, for the data planes that read it, `local` on a node with a
node-local endpoint and `no-endpoints` on the others), then the
data plane's own rule. A rule returns a RoutingView built by `routing_view` from a
per-zone rule and the node exceptions, so its cost does not grow with the node count.

Adding a data plane: a `DataPlane` member, one function here, one `DATA_PLANES` entry,
and its table test.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from exporter.engine.model import Endpoint, EndpointSlice, Service
from exporter.engine.profile import (
    KUBE_PROXY_1_29,
    KUBE_PROXY_1_33,
    NEWEST_KUBE_PROXY,
    KubeProxyBehaviour,
)
from exporter.engine.routing import (
    NO_ROUTING,
    Cause,
    DataPlane,
    HintSets,
    ReadyNodes,
    Routing,
    RoutingView,
    ServiceEndpoints,
    ZoneRouting,
    first_per_address,
    hints_annotation_asks,
    local_policy_view,
    located_counts,
    node_local,
    node_names,
    routing_view,
    serving_terminating,
    topology_mode_is_auto,
    uniform,
)

Rule = Callable[[ServiceEndpoints, ReadyNodes], RoutingView]

SAME_ZONE = ZoneRouting(Routing.SAME_ZONE, Cause.HINTED_FOR_ZONE)
NOT_REQUESTED = ZoneRouting(Routing.CLUSTER, Cause.NOT_REQUESTED)
NO_ZONE_LABEL = ZoneRouting(Routing.CLUSTER, Cause.NO_ZONE_LABEL)
NO_READY_ENDPOINTS = ZoneRouting(Routing.CLUSTER, Cause.NO_READY_ENDPOINTS)
HINTS_GATE_OFF = ZoneRouting(Routing.CLUSTER, Cause.TOPOLOGY_AWARE_HINTS_GATE_OFF)


def _no_hint_for(zone: str) -> ZoneRouting:
    return NO_ZONE_LABEL if zone == "" else ZoneRouting(Routing.CLUSTER, Cause.NO_HINT_FOR_ZONE)


def _same_node_on(node_names: frozenset[str]) -> list[tuple[str, Routing]]:
    return [(node, Routing.SAME_NODE) for node in node_names]


def zone_hints_followed(hints: HintSets, zone: str) -> ZoneRouting:
    """`same-zone` only if every endpoint has a zone hint and one names the zone."""
    fallback = hints.zone_hint_fallback
    if fallback is not None:
        return fallback
    if zone in hints.zones:
        return SAME_ZONE
    return _no_hint_for(zone)


# The rules, in behaviour document's order.


@functools.cache
def kube_proxy_rule(behaviour: KubeProxyBehaviour) -> Rule:
    """Section 5 as a kube-proxy of this behaviour reads it (behaviour §12).

    All node-hinted -> same-node where named (only where node hints are read); all
    zone-hinted -> same-zone; kube-proxy 1.29 also needs a hints annotation that is not off,
    and 1.32 and older never use zone hints on a node without a zone label. With the
    TopologyAwareHints gate off no hint is used.
    """

    def rule(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
        if not behaviour.uses_hints:
            return routing_view(nodes, uniform(HINTS_GATE_OFF))
        if behaviour.needs_annotation and not hints_annotation_asks(endpoints.service):
            return routing_view(nodes, uniform(NOT_REQUESTED))
        ready = endpoints.ready
        same_node = (
            _same_node_on(ready.nodes)
            if behaviour.reads_node_hints and ready.every_node_hinted
            else []
        )
        if behaviour.zoneless_nodes_use_hints:
            return routing_view(nodes, lambda zone: zone_hints_followed(ready, zone), same_node)

        def zone_rule(zone: str) -> ZoneRouting:
            if zone == "":
                return ready.zone_hint_fallback or NO_ZONE_LABEL
            return zone_hints_followed(ready, zone)

        return routing_view(nodes, zone_rule, same_node)

    return rule


kube_proxy = kube_proxy_rule(NEWEST_KUBE_PROXY)
kube_proxy_1_33 = kube_proxy_rule(KUBE_PROXY_1_33)
kube_proxy_1_29 = kube_proxy_rule(KUBE_PROXY_1_29)


def cilium(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """enable-service-topology on, 1.18.1+: PreferSameNode by nodeName, else kube-proxy-like."""
    service = endpoints.service
    if not hints_annotation_asks(service) and service.traffic_distribution is None:
        return routing_view(nodes, uniform(NOT_REQUESTED))
    same_node = (
        _same_node_on(node_names(endpoints.ready.endpoints))
        if service.traffic_distribution == "PreferSameNode"
        else []
    )

    def zone_rule(zone: str) -> ZoneRouting:
        routing = zone_hints_followed(endpoints.ready, zone)
        # Unlike kube-proxy, a client without a zone label never follows zone hints.
        return NO_ZONE_LABEL if zone == "" and routing is SAME_ZONE else routing

    return routing_view(nodes, zone_rule, same_node)


def _cilium_1_18_0_asks(service: Service) -> bool:
    return hints_annotation_asks(service) or service.traffic_distribution == "PreferClose"


def cilium_1_18_0(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Unhinted endpoints plus those hinted for the zone; none at all refuses (issue 41022)."""
    if not _cilium_1_18_0_asks(endpoints.service):
        return routing_view(nodes, uniform(NOT_REQUESTED))
    ready = endpoints.ready
    unhinted = ready.first_zone_unhinted

    def zone_rule(zone: str) -> ZoneRouting:
        if zone == "":
            return NO_ZONE_LABEL
        if zone not in ready.zones:
            if unhinted is None:
                return ZoneRouting(Routing.NO_ENDPOINTS, Cause.NO_HINT_FOR_ZONE)
            # Only the unhinted endpoints remain: the zone's traffic goes to them all.
            if not ready.zones:
                return ZoneRouting(Routing.CLUSTER, Cause.NO_HINTS)
            return _no_hint_for(zone)
        if unhinted is None:
            return SAME_ZONE
        return ZoneRouting(Routing.MIXED, Cause.UNHINTED_ENDPOINT, unhinted)

    return routing_view(nodes, zone_rule)


def cilium_1_18_0_s(ready: tuple[Endpoint, ...], zone: str) -> tuple[Endpoint, ...]:
    """Cilium 1.18.0's S for a zone: ready endpoints with no zone hint or hinted for it."""
    return tuple(e for e in ready if not e.zone_hints or zone in e.zone_hints)


ZoneSetOf = Callable[[str], Sequence[Endpoint]]


def cilium_1_18_0_cluster(endpoints: ServiceEndpoints) -> ZoneSetOf | None:
    """Section 13: where its rule applies (a zone label, and a Service that asks), a client
    that Cilium 1.18.0 routes `cluster` still spreads over S: it skips only the backends whose
    zone hints exclude its zone. None where the rule does not apply (all of R)."""
    if not _cilium_1_18_0_asks(endpoints.service):
        return None
    ready = endpoints.ready.endpoints
    return lambda zone: cilium_1_18_0_s(ready, zone) if zone else ready


def cilium_no_topology(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Cilium's default: enable-service-topology off, every hint ignored (issue 25283)."""
    del endpoints
    return routing_view(nodes, uniform(ZoneRouting(Routing.CLUSTER, Cause.HINTS_IGNORED)))


def linkerd(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Zone hints only, read whatever the annotations or trafficDistribution say."""
    return routing_view(nodes, lambda zone: zone_hints_followed(endpoints.ready, zone))


@dataclass(frozen=True, slots=True)
class _SliceHints:
    """One EndpointSlice as ingress-nginx filters it."""

    # The first endpoint (any conditions) without a zone hint: the slice is not filtered.
    unhinted: Endpoint | None
    # Zones named by a hint of any endpoint of the slice.
    zones: frozenset[str]
    has_ready: bool
    # Zones named by a hint of a ready endpoint of the slice.
    ready_zones: frozenset[str]
    # The slice's ready endpoints (what its clients may be given, section 13).
    ready: tuple[Endpoint, ...] = ()

    @classmethod
    def of(cls, endpoint_slice: EndpointSlice) -> _SliceHints:
        all_endpoints = endpoint_slice.endpoints
        ready = [e for e in all_endpoints if e.address is not None and e.ready is not False]
        return cls(
            unhinted=next((e for e in all_endpoints if not e.zone_hints), None),
            zones=frozenset(zone for e in all_endpoints for zone in e.zone_hints),
            has_ready=bool(ready),
            ready_zones=frozenset(zone for e in ready for zone in e.zone_hints),
            ready=tuple(ready),
        )

    def kept_whole(self, zone: str, *, prefer_close: bool) -> ZoneRouting | None:
        """Why the slice is not cut to the zone's endpoints; None when it is."""
        if self.unhinted is not None:
            return ZoneRouting(Routing.CLUSTER, Cause.UNHINTED_ENDPOINT, self.unhinted)
        if prefer_close and zone not in self.zones:
            return ZoneRouting(Routing.CLUSTER, Cause.NO_HINT_FOR_ZONE)
        return None


def _ingress_nginx_zone(
    summaries: list[_SliceHints], zone: str, *, prefer_close: bool
) -> ZoneRouting:
    if zone == "":
        return NO_ZONE_LABEL
    filtered = 0
    remaining = False
    why: ZoneRouting | None = None
    for summary in (s for s in summaries if s.has_ready):
        kept = summary.kept_whole(zone, prefer_close=prefer_close)
        if kept is None:
            filtered += 1
            remaining = remaining or zone in summary.ready_zones
        else:
            remaining = True
            why = why or kept
    if not remaining:
        return ZoneRouting(Routing.NO_ENDPOINTS, Cause.NO_HINT_FOR_ZONE)
    if why is None:
        return SAME_ZONE
    if filtered == 0:
        return why
    return ZoneRouting(Routing.MIXED, why.cause, why.endpoint)


def ingress_nginx_union(endpoints: ServiceEndpoints, zone: str) -> tuple[Endpoint, ...]:
    """The ready endpoints ingress-nginx keeps for clients of `zone`: each slice cut to the
    zone's endpoints unless `kept_whole` says why not, then the union (first per address)."""
    prefer_close = endpoints.service.traffic_distribution == "PreferClose"
    kept: list[Endpoint] = []
    for summary in (_SliceHints.of(s) for s in endpoints.slices):
        whole = summary.kept_whole(zone, prefer_close=prefer_close) is not None
        kept.extend(e for e in summary.ready if whole or zone in e.zone_hints)
    return tuple(first_per_address(kept))


def ingress_nginx(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Slice by slice: a fully hinted slice is cut to the zone's endpoints (issue 11342)."""
    service = endpoints.service
    prefer_close = service.traffic_distribution == "PreferClose"
    if not topology_mode_is_auto(service) and not prefer_close:
        return routing_view(nodes, uniform(NOT_REQUESTED))
    summaries = [_SliceHints.of(endpoint_slice) for endpoint_slice in endpoints.slices]
    return routing_view(
        nodes, lambda zone: _ingress_nginx_zone(summaries, zone, prefer_close=prefer_close)
    )


class _Preference(Enum):
    ZONE = "zone"
    NODE = "node"


_ISTIO_PREFERENCES = MappingProxyType(
    {
        "preferclose": _Preference.ZONE,
        "prefersamezone": _Preference.ZONE,
        "prefersamenode": _Preference.NODE,
    }
)
_FIELD_PREFERENCES = MappingProxyType(
    {"PreferClose": _Preference.ZONE, "PreferSameZone": _Preference.ZONE}
    | {"PreferSameNode": _Preference.NODE}
)


def located_in(located_by_zone: Mapping[str, int], zone: str, minimum: int = 1) -> ZoneRouting:
    """`same-zone` when at least `minimum` ready endpoints run in the zone: hints unread."""
    if zone == "":
        return NO_ZONE_LABEL
    located = located_by_zone.get(zone, 0)
    if located >= minimum:
        return ZoneRouting(Routing.SAME_ZONE, Cause.LOCATED_IN_ZONE)
    if located:
        return ZoneRouting(Routing.CLUSTER, Cause.TOO_FEW_IN_ZONE)
    return ZoneRouting(Routing.CLUSTER, Cause.NO_ENDPOINT_IN_ZONE)


def istio(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """trafficDistribution, else Istio's annotation; endpoint zones and nodes, never hints."""
    service = endpoints.service
    preference = _FIELD_PREFERENCES.get(service.traffic_distribution or "")
    annotation = service.istio_traffic_distribution
    if preference is None and annotation is not None:
        preference = _ISTIO_PREFERENCES.get(annotation.lower())
    if preference is None:
        return routing_view(nodes, uniform(NOT_REQUESTED))
    ready = endpoints.ready.endpoints
    same_node = _same_node_on(node_names(ready)) if preference is _Preference.NODE else []
    located = located_counts(ready)
    return routing_view(nodes, lambda zone: located_in(located, zone), same_node)


# Envoy Gateway needs this many endpoints in the zone when only the annotation asks.
ENVOY_GATEWAY_ANNOTATION_MINIMUM = 3


def envoy_gateway(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Any trafficDistribution, or topology-mode Auto: endpoints located in the zone."""
    service = endpoints.service
    if service.traffic_distribution is not None:
        minimum = 1
    elif service.topology_mode_annotation in {"Auto", "auto"}:
        minimum = ENVOY_GATEWAY_ANNOTATION_MINIMUM
    else:
        return routing_view(nodes, uniform(NOT_REQUESTED))
    located = located_counts(endpoints.ready.endpoints)
    return routing_view(nodes, lambda zone: located_in(located, zone, minimum))


def calico_usable(endpoints: ServiceEndpoints) -> tuple[Endpoint, ...]:
    """Calico eBPF's R: ready endpoints and terminating ones."""
    return tuple(e for e in endpoints.unique if e.ready is not False or e.terminating is True)


def calico_ebpf(endpoints: ServiceEndpoints, nodes: ReadyNodes) -> RoutingView:
    """Terminating endpoints count; without topology-mode auto, partial hints are used."""
    usable = HintSets.of(calico_usable(endpoints))
    if topology_mode_is_auto(endpoints.service):
        return routing_view(nodes, lambda zone: zone_hints_followed(usable, zone))

    def zone_rule(zone: str) -> ZoneRouting:
        if zone in usable.zones:
            return SAME_ZONE
        if not usable.zones:
            return ZoneRouting(Routing.CLUSTER, Cause.NO_HINTS)
        return _no_hint_for(zone)

    return routing_view(nodes, zone_rule, _same_node_on(usable.nodes))


class ZoneSet(Enum):
    """Which endpoints of R a `same-zone` client gets (section 13)."""

    HINTED = "hinted for its zone"
    LOCATED = "located in its zone"


class NodeSet(Enum):
    """Which endpoints of R a `same-node` client gets (section 13)."""

    HINTED = "hinted for its node"
    ON_NODE = "running on its node"


@dataclass(frozen=True, slots=True)
class DataPlaneRule:
    """How one data plane picks endpoints (behaviour §10 and §13): its rule, what a Service needs
    for it to look at topology, and which endpoints it counts."""

    rule: Rule
    # What it is, in a few words (explain, docs).
    title: str
    # What a Service needs for this data plane to look at topology at all ("" if nothing).
    needs: str = ""
    # internalTrafficPolicy: Local makes it `local` or `no-endpoints` before the rule; the
    # ingress and gateway data planes route from their own pods and do not read the policy.
    reads_internal_traffic_policy: bool = True
    # Under that policy, a node without a usable local endpoint falls back to its serving
    # terminating ones (kube-proxy's ProxyTerminatingEndpoints; Cilium and Calico alike).
    local_terminating_fallback: bool = True
    # With no ready endpoint anywhere, the serving terminating ones are used: cluster traffic
    # goes to all of them and, under internalTrafficPolicy Local, a node uses its own
    # (kube-proxy's CategorizeEndpoints, pkg/proxy/topology.go; seen in its rules).
    no_ready_fallback: bool = False
    # The endpoints the rule counts as usable (section 10's R), when not the ready ones.
    usable: Callable[[ServiceEndpoints], tuple[Endpoint, ...]] | None = None
    # Section 13: what `same-zone` and `same-node` give a client, and the set a `mixed`
    # routing builds for a zone (the data planes that produce it).
    same_zone: ZoneSet = ZoneSet.HINTED
    same_node: NodeSet = NodeSet.HINTED
    mixed: Callable[[ServiceEndpoints, str], tuple[Endpoint, ...]] | None = None
    # Section 13: for the Services where `cluster` is not all of R, the set a client of a
    # zone gets (None from the callable: all of R for this Service).
    cluster: Callable[[ServiceEndpoints], ZoneSetOf | None] | None = None


_HINTS_ANNOTATION = (
    "a topology-mode (or deprecated topology-aware-hints) annotation that is not off"
)
DATA_PLANES: Mapping[DataPlane, DataPlaneRule] = MappingProxyType(
    {
        DataPlane.KUBE_PROXY: DataPlaneRule(
            kube_proxy,
            "kube-proxy of the Kubernetes profile (1.34 and later by default)",
            no_ready_fallback=True,
        ),
        DataPlane.KUBE_PROXY_1_29: DataPlaneRule(
            kube_proxy_1_29,
            "kube-proxy up to 1.29",
            needs=_HINTS_ANNOTATION,
            no_ready_fallback=True,
        ),
        DataPlane.KUBE_PROXY_1_33: DataPlaneRule(
            kube_proxy_1_33, "kube-proxy 1.31-1.33 (no node hints)", no_ready_fallback=True
        ),
        DataPlane.CILIUM: DataPlaneRule(
            cilium,
            "Cilium kube-proxy replacement, enable-service-topology on, 1.18.1+",
            needs=f"{_HINTS_ANNOTATION}, or any spec.trafficDistribution",
            same_node=NodeSet.ON_NODE,
        ),
        DataPlane.CILIUM_1_18_0: DataPlaneRule(
            cilium_1_18_0,
            "Cilium 1.18.0 kube-proxy replacement, enable-service-topology on",
            needs=f"{_HINTS_ANNOTATION}, or spec.trafficDistribution: PreferClose",
            mixed=lambda endpoints, zone: cilium_1_18_0_s(endpoints.ready.endpoints, zone),
            cluster=cilium_1_18_0_cluster,
        ),
        DataPlane.CILIUM_NO_TOPOLOGY: DataPlaneRule(
            cilium_no_topology, "Cilium kube-proxy replacement, enable-service-topology off"
        ),
        DataPlane.LINKERD: DataPlaneRule(
            linkerd, "Linkerd destination controller", local_terminating_fallback=False
        ),
        DataPlane.INGRESS_NGINX: DataPlaneRule(
            ingress_nginx,
            "ingress-nginx with --enable-topology-aware-routing",
            needs="the topology-mode annotation set to auto, or spec.trafficDistribution: "
            "PreferClose",
            reads_internal_traffic_policy=False,
            mixed=ingress_nginx_union,
        ),
        DataPlane.ISTIO: DataPlaneRule(
            istio,
            "Istio sidecars, gateways and ztunnel",
            needs="spec.trafficDistribution or the networking.istio.io/traffic-distribution "
            "annotation (Istio never reads hints)",
            local_terminating_fallback=False,
            same_zone=ZoneSet.LOCATED,
            same_node=NodeSet.ON_NODE,
        ),
        DataPlane.ENVOY_GATEWAY: DataPlaneRule(
            envoy_gateway,
            "Envoy Gateway",
            needs="any spec.trafficDistribution, or the topology-mode annotation set to Auto "
            "(Envoy Gateway never reads hints)",
            reads_internal_traffic_policy=False,
            same_zone=ZoneSet.LOCATED,
        ),
        DataPlane.CALICO_EBPF: DataPlaneRule(
            calico_ebpf, "Calico eBPF data plane 3.32+", usable=calico_usable
        ),
    }
)


def route(
    dataplane: DataPlane,
    endpoints: ServiceEndpoints,
    nodes: ReadyNodes,
    kube_proxy: KubeProxyBehaviour = NEWEST_KUBE_PROXY,
) -> RoutingView:
    """The routing each Ready node gets from `dataplane`, after the shared preamble.

    `kube_proxy`: how the profile's kube-proxy reads hints (behaviour §12), for the
    `kube-proxy` data plane; the fixed ids keep their own reading.
    """
    if not endpoints.routed or not nodes.by_zone:
        return NO_ROUTING
    entry = DATA_PLANES[dataplane]
    local_policy = (
        entry.reads_internal_traffic_policy and endpoints.service.internal_traffic_policy == "Local"
    )
    if not endpoints.ready.endpoints and not (local_policy and falls_back(entry, endpoints)):
        return routing_view(nodes, uniform(NO_READY_ENDPOINTS))
    if local_policy:
        return local_policy_view(nodes, local_nodes(entry, endpoints))
    if dataplane is DataPlane.KUBE_PROXY:
        return kube_proxy_rule(kube_proxy)(endpoints, nodes)
    return entry.rule(endpoints, nodes)


def local_nodes(entry: DataPlaneRule, endpoints: ServiceEndpoints) -> frozenset[str]:
    """The nodes where `entry`'s data plane finds a node-local endpoint (section 10)."""
    usable = entry.usable(endpoints) if entry.usable is not None else endpoints.ready.endpoints
    return node_local(
        usable, endpoints.unique, terminating_fallback=entry.local_terminating_fallback
    )


def falls_back(entry: DataPlaneRule, endpoints: ServiceEndpoints) -> bool:
    """No ready endpoint, and the data plane uses the serving terminating ones instead
    (`no_ready_fallback`): there are some."""
    return (
        entry.no_ready_fallback
        and not endpoints.ready.endpoints
        and any(serving_terminating(endpoint) for endpoint in endpoints.unique)
    )


def usable_endpoints(dataplane: DataPlane, endpoints: ServiceEndpoints) -> tuple[Endpoint, ...]:
    """Section 10's R for `dataplane`: the ready endpoints unless the rule says otherwise."""
    entry = DATA_PLANES[dataplane]
    return entry.usable(endpoints) if entry.usable is not None else endpoints.ready.endpoints
