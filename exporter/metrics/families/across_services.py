"""Families that span the exported Services: kube-proxy modes per node, what losing a zone
would cost, and the controller's events. The cached renderer keeps the running sums.
"""

from __future__ import annotations

from collections.abc import Iterator

from exporter.engine import ProxyMode, ProxyView
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.metrics.family import (
    COUNTER,
    GAUGE,
    Declarations,
    Sample,
    Scope,
    from_scrape,
    summed,
)
from exporter.state.result import ClusterResult, ServiceResult
from exporter.vocabulary import ServiceKey

_declare = Declarations()


class NodeProxySum:
    """Per node and mode, over exported entries; counted per zone, then adjusted per node.

    Every node of a zone shares the zone's mode unless a node hint names it, so adding a
    Service costs its zones and PreferSameNode nodes, and the samples zones x modes plus
    one line per node, not nodes x entries.
    """

    def __init__(self, state: ClusterResult) -> None:
        self._nodes = state.nodes
        self._by_zone: dict[str, dict[ProxyMode, int]] = {}
        self._adjustments: dict[str, dict[ProxyMode, int]] = {}

    def contribution(self, result: ServiceResult) -> tuple[ProxyView, ...]:
        return tuple(verdict.proxy for verdict in result.verdicts)

    def add(self, contribution: tuple[ProxyView, ...], sign: int) -> None:
        zone_of = self._nodes.zone_of
        for proxy in contribution:
            for zone, mode in proxy.by_zone.items():
                _count(self._by_zone.setdefault(zone, {}), mode, sign)
            for node in proxy.same_node:
                adjust = self._adjustments.setdefault(node, {})
                _count(adjust, ProxyMode.PREFER_SAME_NODE, sign)
                zone_mode = proxy.by_zone.get(zone_of.get(node, ""))
                if zone_mode is not None:
                    _count(adjust, zone_mode, -sign)

    def samples(self) -> Iterator[Sample]:
        for zone, zone_nodes in self._nodes.by_zone.items():
            zone_counts = self._by_zone.get(zone, {})
            plain = [
                (str(mode), float(count))
                for mode, count in sorted(zone_counts.items())
                if count > 0
            ]
            for node in zone_nodes:
                adjustment = self._adjustments.get(node)
                if adjustment is None:
                    for mode_name, value in plain:
                        yield (node, zone, mode_name), value
                    continue
                counts = dict(zone_counts)
                for mode, delta in adjustment.items():
                    counts[mode] = counts.get(mode, 0) + delta
                for mode, count in sorted(counts.items()):
                    if count > 0:
                        yield (node, zone, str(mode)), float(count)


def _count(counts: dict[ProxyMode, int], mode: ProxyMode, delta: int) -> None:
    """Adjust a count, dropping it at zero so that removed Services leave nothing behind."""
    total = counts.get(mode, 0) + delta
    if total:
        counts[mode] = total
    else:
        del counts[mode]


class LastEventSum:
    """Events of exported Services only: a deleted Service's timestamps vanish with it.

    Read from the state's events because an event does not replace the Service's result;
    the running sum only tracks which Services are exported.
    """

    def __init__(self, state: ClusterResult) -> None:
        self._events = state.last_event
        self._exported: set[ServiceKey] = set()

    def contribution(self, result: ServiceResult) -> ServiceKey:
        return result.service.key

    def add(self, contribution: ServiceKey, sign: int) -> None:
        if sign > 0:
            self._exported.add(contribution)
        else:
            self._exported.discard(contribution)

    def samples(self) -> Iterator[Sample]:
        exported = self._exported
        for key, timestamp in sorted(self._events.items()):
            if key[:2] in exported:
                yield key, timestamp


class ZoneLossSum:
    """Per zone of the cluster, over exported entries: their forecasts were made when each
    Service was evaluated, so this only counts the zones each names
    (`EntryForecast.zones_losing_hints`)."""

    def __init__(self, state: ClusterResult) -> None:
        self._counts = dict.fromkeys((view.zone for view in state.zone_loss_views), 0)

    def contribution(self, result: ServiceResult) -> tuple[frozenset[str], ...]:
        return tuple(forecast.zones_losing_hints for forecast in result.forecasts)

    def add(self, contribution: tuple[frozenset[str], ...], sign: int) -> None:
        counts = self._counts
        for zones in contribution:
            for zone in zones:
                if zone in counts:
                    counts[zone] += sign

    def samples(self) -> Iterator[Sample]:
        for zone, count in self._counts.items():
            yield (zone,), float(count)


NODE_PROXY_SERVICES = _declare(
    "node_proxy_services",
    GAUGE,
    Scope.NODE,
    "Exported Services (per address type) for which kube-proxy on the node uses the mode.",
    summed(NodeProxySum, reads=lambda state: (state.nodes,)),
    labels=("zone", "mode"),
)
SERVICE_LAST_EVENT_TIMESTAMP_SECONDS = _declare(
    "service_last_event_timestamp_seconds",
    GAUGE,
    Scope.SERVICE,
    "Unix time of the latest TopologyAwareHintsDisabled / TopologyAwareHintsEnabled event "
    "the controller recorded on the Service.",
    summed(LastEventSum, reads=lambda state: (state.last_event,)),
    labels=("reason",),
)
ZONE_LOSS_SERVICES_LOSING_HINTS = _declare(
    "zone_loss_services_losing_hints",
    GAUGE,
    Scope.CLUSTER,
    "Exported Services (per address type) that would lose topology-aware routing if every "
    "node and endpoint of the zone were lost (what-if --lose-zone), per zone label of the "
    "cluster's nodes; no series when the nodes have more than "
    f"{MAX_ZONE_LOSS_ZONES} zone labels (no forecast is made then).",
    summed(ZoneLossSum, reads=lambda state: (state.zone_loss_views,)),
    labels=("zone",),
)
CONTROLLER_EVENTS_TOTAL = _declare(
    "controller_events_total",
    COUNTER,
    Scope.CLUSTER,
    "TopologyAwareHints events recorded by the EndpointSlice controller, seen since start.",
    from_scrape(
        lambda scrape: (
            ((reason,), float(total)) for reason, total in sorted(scrape.state.event_totals.items())
        ),
        reads=lambda state: (state.event_totals,),
    ),
    labels=("reason",),
)


FAMILIES = _declare.families
