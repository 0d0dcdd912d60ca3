"""Reading a data plane's routing node by node, as the tests check it.

The engine keeps routing per zone plus a few node exceptions and never asks it node by node
(a cluster has thousands of nodes); the tests name nodes.
"""

from __future__ import annotations

from exporter.engine.kubeproxy import ProxyMode, ProxyView
from exporter.engine.routing import Routing, RoutingView


def routing_of(view: RoutingView, node: str, zone: str) -> Routing | None:
    """The routing of a Ready node of `zone`: its node exception, else its zone's."""
    routing = view.by_node.get(node)
    if routing is not None:
        return routing
    zone_routing = view.by_zone.get(zone)
    return zone_routing.routing if zone_routing is not None else None


def mode_of_node(proxy: ProxyView, node: str, zone: str) -> ProxyMode | None:
    """kube-proxy's mode on a node of `zone` (section 5's names)."""
    if node in proxy.same_node:
        return ProxyMode.PREFER_SAME_NODE
    return proxy.by_zone.get(zone)
