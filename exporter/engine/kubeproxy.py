"""SPEC section 5: the topology mode kube-proxy picks for a Service on each node.

kube-proxy decides one mode per Service for a whole node. Nodes of one zone that
have no node hint of their own all decide alike, so the result is reported per zone
plus the nodes that match a node hint; computing it that way keeps the cost
independent of the number of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.model import Endpoint, EndpointSlice, Service

PROXIED_ADDRESS_TYPES = frozenset({"IPv4", "IPv6"})


class ProxyMode(StrEnum):
    PREFER_SAME_NODE = "PreferSameNode"
    PREFER_SAME_ZONE = "PreferSameZone"
    CLUSTER = "Cluster"
    LOCAL = "Local"


@dataclass(frozen=True, slots=True)
class ReadyNodes:
    """Ready nodes, as kube-proxy runs on every one of them, control plane included."""

    # zone ("" for no label) -> sorted node names
    by_zone: Mapping[str, tuple[str, ...]]
    # node name -> zone
    zone_of: Mapping[str, str]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> ReadyNodes:
        zone_of = dict(pairs)
        by_zone: dict[str, list[str]] = {}
        for node, zone in zone_of.items():
            by_zone.setdefault(zone, []).append(node)
        return cls(
            by_zone=MappingProxyType(
                {zone: tuple(sorted(nodes)) for zone, nodes in sorted(by_zone.items())}
            ),
            zone_of=MappingProxyType(zone_of),
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


NOT_PROXIED = ProxyView(MappingProxyType({}), ())


def proxied_endpoints(slices: Iterable[EndpointSlice]) -> list[Endpoint]:
    """Ready endpoints as kube-proxy sees them: first copy of each address wins."""
    seen: set[str] = set()
    ready: list[Endpoint] = []
    for endpoint_slice in slices:
        for endpoint in endpoint_slice.endpoints:
            if endpoint.address is None or endpoint.address in seen:
                continue
            seen.add(endpoint.address)
            # kube-proxy treats an absent ready condition as ready, unlike the controller.
            if endpoint.ready is not False:
                ready.append(endpoint)
    return ready


def proxy_view(
    service: Service, address_type: str, slices: Iterable[EndpointSlice], nodes: ReadyNodes
) -> ProxyView:
    if not service.proxied or address_type not in PROXIED_ADDRESS_TYPES:
        return NOT_PROXIED
    if service.internal_traffic_policy == "Local":
        return ProxyView(MappingProxyType(dict.fromkeys(nodes.by_zone, ProxyMode.LOCAL)), ())
    ready = proxied_endpoints(slices)
    all_zone_hinted = all(endpoint.zone_hints for endpoint in ready)
    all_node_hinted = all(endpoint.node_hints for endpoint in ready)
    hinted_zones = {zone for endpoint in ready for zone in endpoint.zone_hints}
    hinted_nodes = {node for endpoint in ready for node in endpoint.node_hints}

    def zone_mode(zone: str) -> ProxyMode:
        if ready and all_zone_hinted and zone in hinted_zones:
            return ProxyMode.PREFER_SAME_ZONE
        return ProxyMode.CLUSTER

    same_node: tuple[str, ...] = ()
    if ready and all_node_hinted:
        same_node = tuple(sorted(node for node in hinted_nodes if node in nodes.zone_of))
    return ProxyView(MappingProxyType({zone: zone_mode(zone) for zone in nodes.by_zone}), same_node)
