"""Per (Service, address type): what each data plane does with the hints, the routing it
gives each zone's clients (SPEC section 10) and the traffic expected to cross zones
(SPEC section 13).
"""

from __future__ import annotations

from collections.abc import Iterator

from exporter.engine import EntryVerdict, ProxyMode, ReadyNodes
from exporter.metrics.family import GAUGE, Declarations, Sample, Scope, ServiceEntry, each_entry

_declare = Declarations()

# -- kube-proxy's topology mode ---------------------------------------------------------------


def proxy_node_counts(verdict: EntryVerdict, nodes: ReadyNodes) -> dict[ProxyMode, int]:
    """How many Ready nodes run kube-proxy in each mode for this verdict."""
    proxy = verdict.proxy
    counts: dict[ProxyMode, int] = {}
    same_node_by_zone: dict[str, int] = {}
    for node in proxy.same_node:
        zone = nodes.zone_of.get(node, "")
        same_node_by_zone[zone] = same_node_by_zone.get(zone, 0) + 1
    if proxy.same_node:
        counts[ProxyMode.PREFER_SAME_NODE] = len(proxy.same_node)
    for zone, mode in proxy.by_zone.items():
        others = len(nodes.by_zone.get(zone, ())) - same_node_by_zone.get(zone, 0)
        if others > 0:
            counts[mode] = counts.get(mode, 0) + others
    return counts


SERVICE_PROXY_MODE = _declare(
    "service_proxy_mode",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 for the topology mode kube-proxy uses for the Service on the zone's nodes "
    "that match no node hint.",
    each_entry(
        lambda entry: (
            ((zone, str(mode)), 1.0) for zone, mode in entry.verdict.proxy.by_zone.items()
        ),
        # Items, not the mapping: its order is the lines' order, which `==` ignores.
        inputs=lambda entry: tuple(entry.verdict.proxy.by_zone.items()),
        parts=("proxy",),
    ),
    labels=("zone", "mode"),
)
SERVICE_PROXY_NODES = _declare(
    "service_proxy_nodes",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready nodes whose kube-proxy uses the mode for the Service.",
    each_entry(
        lambda entry: (
            ((str(mode),), float(count))
            for mode, count in sorted(proxy_node_counts(entry.verdict, entry.nodes).items())
        ),
        reads_nodes=True,
        # Counted and sorted by mode: the mapping's order does not matter here.
        inputs=lambda entry: entry.verdict.proxy,
        parts=("proxy",),
    ),
    labels=("mode",),
)

# -- effective routing per data plane (SPEC section 10) ---------------------------------------


def _routing_nodes(entry: ServiceEntry) -> Iterator[Sample]:
    for dataplane, view in entry.verdict.routing.items():
        for zone, counts in sorted(view.nodes.items()):
            for routing, count in sorted(counts.items()):
                yield (str(dataplane), zone, str(routing)), float(count)


def _local_routing_ratio(entry: ServiceEntry) -> Iterator[Sample]:
    for dataplane, view in entry.verdict.routing.items():
        if view.local_ratio is not None:
            yield (str(dataplane),), view.local_ratio


def _routing_inputs(entry: ServiceEntry) -> object:
    # Items in the data planes' order; a view carries the Ready nodes its counts read.
    return tuple(entry.verdict.routing.items())


SERVICE_ROUTING_NODES = _declare(
    "service_routing_nodes",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready nodes of the zone whose clients the data plane routes this way (same-node, "
    "same-zone, cluster, local, mixed, no-endpoints); one series per routing present.",
    each_entry(_routing_nodes, inputs=_routing_inputs, parts=("routing",)),
    labels=("dataplane", "zone", "routing"),
)
SERVICE_LOCAL_ROUTING_RATIO = _declare(
    "service_local_routing_ratio",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Share of Ready nodes whose traffic to the Service stays local (same-node, same-zone "
    "or local) under the data plane; 0 means it leaves its zone everywhere (absent when "
    "no routing applies).",
    each_entry(_local_routing_ratio, inputs=_routing_inputs, parts=("routing",)),
    labels=("dataplane",),
)

# -- expected cross-zone traffic per data plane (SPEC section 13) -----------------------------

CROSS_ZONE_SCENARIOS = ("effective", "floor")


def _cross_zone_ratio(entry: ServiceEntry) -> Iterator[Sample]:
    for dataplane, figures in entry.verdict.cross_zone.items():
        if figures is not None:
            yield (str(dataplane), "effective"), figures.effective
            yield (str(dataplane), "floor"), figures.floor


def _zone_cross_zone_ratio(entry: ServiceEntry) -> Iterator[Sample]:
    for dataplane, figures in entry.verdict.cross_zone.items():
        if figures is not None:
            for zone, share in figures.zones.items():
                yield (str(dataplane), zone), share.effective


def _cross_zone_inputs(entry: ServiceEntry) -> object:
    # Items in the data planes' order; the figures are values, compared with `==`.
    return tuple(entry.verdict.cross_zone.items())


SERVICE_CROSS_ZONE_RATIO = _declare(
    "service_cross_zone_ratio",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Share of the Service's traffic expected to cross zones under the data plane, a model "
    "(clients weighted by allocatable CPU, spread evenly over the endpoints their routing "
    "gives them): scenario effective is today's routing, floor what no routing can avoid "
    "(clients whose zone has no endpoint). Absent when no client gets an endpoint.",
    each_entry(_cross_zone_ratio, inputs=_cross_zone_inputs, parts=("cross_zone",)),
    labels=("dataplane", "scenario"),
)
SERVICE_ZONE_CROSS_ZONE_RATIO = _declare(
    "service_zone_cross_zone_ratio",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Expected cross-zone share (effective) of the traffic of the zone's clients, per "
    "client zone that has a client given an endpoint.",
    each_entry(_zone_cross_zone_ratio, inputs=_cross_zone_inputs, parts=("cross_zone",)),
    labels=("dataplane", "zone"),
)
# Set by instruments.py at start: the data planes evaluated and how each was chosen.
DATAPLANE_INFO = _declare(
    "dataplane_info",
    GAUGE,
    Scope.EXPORTER,
    "1 per data plane whose routing is evaluated; source is flag (--dataplane) or "
    "detected (--dataplane auto).",
    labels=("dataplane", "source"),
)


FAMILIES = _declare.families
