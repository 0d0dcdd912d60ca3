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

from exporter.engine.dataplanes import route
from exporter.engine.model import EndpointSlice, Service
from exporter.engine.routing import (
    PROXIED_ADDRESS_TYPES,
    DataPlane,
    ReadyNodes,
    Routing,
    RoutingView,
    service_endpoints,
)

__all__ = [
    "PROXIED_ADDRESS_TYPES",
    "ProxyMode",
    "ProxyView",
    "ReadyNodes",
    "proxy_view",
    "proxy_view_of",
]


class ProxyMode(StrEnum):
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
    # Mode of the zone's nodes that match no node hint. Empty for unproxied Services.
    by_zone: Mapping[str, ProxyMode]
    # Nodes in PreferSameNode, sorted.
    same_node: tuple[str, ...]

    def mode_of_node(self, node: str, zone: str) -> ProxyMode | None:
        if node in self.same_node:
            return ProxyMode.PREFER_SAME_NODE
        return self.by_zone.get(zone)


def proxy_view_of(view: RoutingView) -> ProxyView:
    """The `kube-proxy` data plane's routing in section 5's mode names."""
    return ProxyView(
        MappingProxyType(
            {zone: _MODE_OF_ROUTING[routing.routing] for zone, routing in view.by_zone.items()}
        ),
        # kube-proxy's only node exceptions are PreferSameNode ones; by_node is sorted.
        tuple(view.by_node),
    )


def proxy_view(
    service: Service, address_type: str, slices: Iterable[EndpointSlice], nodes: ReadyNodes
) -> ProxyView:
    endpoints = service_endpoints(service, address_type, slices)
    return proxy_view_of(route(DataPlane.KUBE_PROXY, endpoints, nodes))
