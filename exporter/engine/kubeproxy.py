"""behaviour §5: the topology mode kube-proxy picks for a Service on each node.

kube-proxy decides one mode per Service for a whole node. It is the `kube-proxy` data
plane of section 10 (`exporter.engine.dataplanes.kube_proxy`) under section 5's names:
one rule, two vocabularies. Nodes of one zone that have no node hint of their own all
decide alike, so the result is reported per zone plus the nodes that match a node hint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.dataplanes import DATA_PLANES, falls_back, local_nodes, route
from exporter.engine.model import EndpointSlice, Service
from exporter.engine.profile import NEWEST_KUBE_PROXY, KubeProxyBehaviour
from exporter.engine.routing import (
    NO_ROUTING,
    PROXIED_ADDRESS_TYPES,
    DataPlane,
    HintSets,
    ReadyNodes,
    Routing,
    RoutingView,
    ServiceEndpoints,
    ZoneRouting,
    hints_annotation_asks,
    service_endpoints,
)

__all__ = [
    "PROXIED_ADDRESS_TYPES",
    "KubeProxyRoutes",
    "ProxyMode",
    "ProxyView",
    "ReadyNodes",
    "proxy_view",
    "proxy_view_of",
]


class ProxyMode(StrEnum):
    """kube-proxy's routing for a node in behaviour §5's words (the mode names explain shows)."""

    PREFER_SAME_NODE = "PreferSameNode"
    PREFER_SAME_ZONE = "PreferSameZone"
    CLUSTER = "Cluster"
    LOCAL = "Local"


_MODE_OF_ROUTING = MappingProxyType(
    {
        Routing.SAME_NODE: ProxyMode.PREFER_SAME_NODE,
        Routing.SAME_ZONE: ProxyMode.PREFER_SAME_ZONE,
        Routing.CLUSTER: ProxyMode.CLUSTER,
        Routing.LOCAL: ProxyMode.LOCAL,
    }
)


@dataclass(frozen=True, slots=True)
class ProxyView:
    """kube-proxy's routing of one entry: the mode of each zone's nodes, and the nodes a node
    hint keeps on themselves."""

    # Mode of the zone's nodes that match no node hint. Empty for unproxied Services.
    by_zone: Mapping[str, ProxyMode]
    # Nodes in PreferSameNode, sorted.
    same_node: tuple[str, ...]


def proxy_view_of(view: RoutingView, service: Service) -> ProxyView:
    """The `kube-proxy` data plane's routing in section 5's mode names.

    Under internalTrafficPolicy Local the mode is `Local` on every node, whatever the
    endpoints: section 5 names the policy, section 10 says where it drops the traffic.
    """
    if service.internal_traffic_policy == "Local" and view.applies:
        return ProxyView(MappingProxyType(dict.fromkeys(view.by_zone, ProxyMode.LOCAL)), ())
    return ProxyView(
        MappingProxyType(
            {zone: _MODE_OF_ROUTING[routing.routing] for zone, routing in view.by_zone.items()}
        ),
        # kube-proxy's only node exceptions are PreferSameNode ones; by_node is sorted.
        tuple(view.by_node),
    )


def proxy_view(
    service: Service,
    address_type: str,
    slices: Iterable[EndpointSlice],
    nodes: ReadyNodes,
    behaviour: KubeProxyBehaviour = NEWEST_KUBE_PROXY,
) -> ProxyView:
    endpoints = service_endpoints(service, address_type, slices)
    return proxy_view_of(route(DataPlane.KUBE_PROXY, endpoints, nodes, behaviour), service)


_NO_PROXY = ProxyView(MappingProxyType({}), ())
_KUBE_PROXY = DATA_PLANES[DataPlane.KUBE_PROXY]
# What the `kube-proxy` data plane reads of a routed entry (see KubeProxyRoutes).
_RouteKey = (
    tuple[str, bool]
    | tuple[str, frozenset[str]]
    | tuple[ZoneRouting | None, frozenset[str], frozenset[str] | None, bool]
)


class KubeProxyRoutes:
    """The `kube-proxy` data plane's routing over one set of Ready nodes, memoised per
    hint shape.

    For a routed entry (proxied Service, IP address type) the rule and its preamble read
    only: whether a ready endpoint exists, internalTrafficPolicy Local (and then only the
    nodes that have a node-local endpoint), the zone-hint fallback (which names the first
    unhinted endpoint), the zones hinted and, when every ready endpoint has a node hint,
    the nodes hinted. Entries with equal answers get the
    same routing, so thousands of Services of one shape share one view, computed once.
    Like whatif.Feasibility, the memo is a value that lives as long as its Ready nodes.
    `behaviour`: how the profile's kube-proxy reads hints (behaviour §12); an older one
    also reads the hints annotation, never node hints.
    """

    __slots__ = ("_behaviour", "_memo", "_nodes")

    def __init__(
        self, nodes: ReadyNodes, behaviour: KubeProxyBehaviour = NEWEST_KUBE_PROXY
    ) -> None:
        self._nodes = nodes
        self._behaviour = behaviour
        self._memo: dict[_RouteKey, tuple[RoutingView, ProxyView]] = {}

    @property
    def nodes(self) -> ReadyNodes:
        return self._nodes

    @property
    def behaviour(self) -> KubeProxyBehaviour:
        return self._behaviour

    def serves(self, nodes: ReadyNodes, behaviour: KubeProxyBehaviour) -> bool:
        """The memo holds routings over these nodes by this kube-proxy."""
        return self._nodes is nodes and self._behaviour == behaviour

    def route(self, endpoints: ServiceEndpoints) -> tuple[RoutingView, ProxyView]:
        """`route(DataPlane.KUBE_PROXY, endpoints, nodes)` and its section 5 modes."""
        return self._routed(endpoints.service, endpoints.address_type, endpoints.ready, endpoints)

    def route_ready(
        self, service: Service, address_type: str, ready: HintSets
    ) -> tuple[RoutingView, ProxyView]:
        """The same for an entry known only by its ready endpoints' hints (what-if)."""
        return self._routed(service, address_type, ready, None)

    def _routed(
        self,
        service: Service,
        address_type: str,
        ready: HintSets,
        endpoints: ServiceEndpoints | None,
    ) -> tuple[RoutingView, ProxyView]:
        if not (service.proxied and address_type in PROXIED_ADDRESS_TYPES) or not (
            self._nodes.by_zone
        ):
            return NO_ROUTING, _NO_PROXY
        key: _RouteKey
        local_policy = service.internal_traffic_policy == "Local"
        if endpoints is None:
            # kube-proxy reads no slice and no not-ready endpoint: the ready ones suffice
            # (what-if's converged state has no terminating endpoint to fall back to).
            endpoints = ServiceEndpoints(service, address_type, (), ready.endpoints, ready)
        if local_policy and (ready.endpoints or falls_back(_KUBE_PROXY, endpoints)):
            key = ("internal-traffic-policy-local", local_nodes(_KUBE_PROXY, endpoints))
        elif not ready.endpoints:
            # The mode names the policy even then (section 5), so it is part of the key.
            key = ("no-ready-endpoints", local_policy)
        else:
            behaviour = self._behaviour
            key = (
                ready.zone_hint_fallback,
                ready.zones,
                ready.nodes if ready.every_node_hinted and behaviour.reads_node_hints else None,
                behaviour.needs_annotation and hints_annotation_asks(service),
            )
        try:
            return self._memo[key]
        except KeyError:
            pass
        view = route(DataPlane.KUBE_PROXY, endpoints, self._nodes, self._behaviour)
        routed = self._memo[key] = (view, proxy_view_of(view, service))
        return routed
