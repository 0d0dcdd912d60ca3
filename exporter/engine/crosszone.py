"""behaviour §13: the share of a Service's traffic expected to cross zones, per data plane.

Clients are the Ready nodes with a zone label and positive allocatable CPU, weighted by that
CPU (the controller's own assumption: traffic follows CPU). Each spreads its traffic evenly
over the endpoints its routing gives it (`clientsets.Given`); its share is the fraction of
those endpoints outside its zone. `floor` is what no routing avoids: 0 for a client whose
zone has an endpoint of R or of the client's own set (a terminating fallback endpoint under
internalTrafficPolicy Local is not in R), else 1; so `floor <= effective` client by client.

Nodes of a zone share their zone's routing and so one endpoint set, so a view is computed
per zone plus its node exceptions (node hints, nodeName, internalTrafficPolicy Local):
never node by node for a zone-wide routing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from exporter.engine.clientsets import Given
from exporter.engine.model import Endpoint, Node
from exporter.engine.routing import DataPlane, Routing, RoutingView, ServiceEndpoints

# Routings whose endpoint set is the node's own, not its zone's.
_PER_NODE = frozenset({Routing.SAME_NODE, Routing.LOCAL})


@dataclass(frozen=True, slots=True)
class Clients:
    """The clients of section 13 and their weights (allocatable CPU in cores)."""

    weight: Mapping[str, float]
    zone_of: Mapping[str, str]
    # zone -> its clients' node names, sorted; zone -> their total weight.
    by_zone: Mapping[str, tuple[str, ...]]
    zone_weight: Mapping[str, float]

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Clients:
        exact: dict[str, Fraction] = {}
        zone_of: dict[str, str] = {}
        for node in nodes:
            if node.ready and node.zone and node.allocatable_cpu and node.allocatable_cpu > 0:
                exact[node.name] = node.allocatable_cpu
                zone_of[node.name] = node.zone
        by_zone: dict[str, list[str]] = {}
        for name, zone in zone_of.items():
            by_zone.setdefault(zone, []).append(name)
        return cls(
            weight=MappingProxyType({name: float(cpu) for name, cpu in exact.items()}),
            zone_of=MappingProxyType(zone_of),
            by_zone=MappingProxyType({z: tuple(sorted(n)) for z, n in sorted(by_zone.items())}),
            zone_weight=MappingProxyType(
                {
                    zone: float(sum((exact[name] for name in names), Fraction(0)))
                    for zone, names in by_zone.items()
                }
            ),
        )


NO_CLIENTS = Clients.of(())


@dataclass(frozen=True, slots=True)
class Share:
    """Expected cross-zone shares of some clients' traffic, 0 to 1."""

    effective: float
    floor: float

    @property
    def avoidable(self) -> float:
        """What hints that worked would save: effective - floor, never below 0."""
        return max(0.0, self.effective - self.floor)


@dataclass(frozen=True, slots=True)
class CrossZone:
    """One data plane's expected cross-zone traffic for one (Service, address type)."""

    overall: Share
    # Per client zone that has a client with a share, sorted by zone.
    zones: Mapping[str, Share]

    @property
    def effective(self) -> float:
        return self.overall.effective

    @property
    def floor(self) -> float:
        return self.overall.floor

    @property
    def avoidable(self) -> float:
        return self.overall.avoidable


class _Crossings:
    """The fraction of an endpoint set outside a zone (no zone: another zone), per set.

    Each set's endpoints are counted per zone once: a `cluster` routing gives every zone's
    clients the same set (all of R), and counting it again for each zone made one Service's
    shares cost zones x endpoints (3,000 zones and 30,000 endpoints: 7 s). Sets are told
    apart by identity, and held so that an id is not reused while this lives (one call).
    """

    __slots__ = ("_counted",)

    def __init__(self) -> None:
        self._counted: dict[int, tuple[Sequence[Endpoint], dict[str | None, int]]] = {}

    def __call__(self, endpoints: Sequence[Endpoint], zone: str) -> float | None:
        """None for an empty set."""
        if not endpoints:
            return None
        counted = self._counted.get(id(endpoints))
        if counted is None or counted[0] is not endpoints:
            per_zone: dict[str | None, int] = {}
            for endpoint in endpoints:
                per_zone[endpoint.zone] = per_zone.get(endpoint.zone, 0) + 1
            counted = self._counted[id(endpoints)] = (endpoints, per_zone)
        return (len(endpoints) - counted[1].get(zone, 0)) / len(endpoints)


def cross_zone(view: RoutingView, given: Given, clients: Clients) -> CrossZone | None:
    """The expected shares under `view`; None when no client has a share."""
    if not view.by_zone:
        return None
    located = {endpoint.zone for endpoint in given.usable if endpoint.zone}
    exceptions: dict[str, list[tuple[str, Routing]]] = {}
    for node, routing in view.by_node.items():
        zone = clients.zone_of.get(node)
        if zone is not None:
            exceptions.setdefault(zone, []).append((node, routing))
    zones: dict[str, Share] = {}
    weights: dict[str, float] = {}
    crossing = _Crossings()
    for zone in clients.by_zone:
        effective, floor, weight = _zone_share(
            view, given, clients, zone, exceptions.get(zone, []), crossing, located=zone in located
        )
        if weight > 0:
            zones[zone] = Share(effective, floor)
            weights[zone] = weight
    if not zones:
        return None
    return _combined(MappingProxyType(zones), weights)


def _combined(zones: Mapping[str, Share], weights: Mapping[str, float]) -> CrossZone:
    """The zones' shares as one, each weighted by its clients' CPU."""
    total = sum(weights.values())
    overall = Share(
        sum(weights[z] * share.effective for z, share in zones.items()) / total,
        sum(weights[z] * share.floor for z, share in zones.items()) / total,
    )
    return CrossZone(overall, zones)


def _floor(share: float, *, located: bool) -> float:
    """A client's floor: 0 where its zone has an endpoint of R (`located`) or of its own set
    (then its share is below 1), else 1. Never above its share."""
    return 0.0 if located or share < 1.0 else 1.0


_NO_SHARE = (0.0, 0.0, 0.0)


class _Sums:
    """Weighted sums of some clients' shares and floors, term by term (so floor <= share)."""

    __slots__ = ("floored", "located", "weight", "weighted")

    def __init__(self, *, located: bool) -> None:
        self.located = located
        self.weighted = self.floored = self.weight = 0.0

    def add(self, node_weight: float, share: float | None) -> None:
        if share is not None:
            self.weighted += node_weight * share
            self.floored += node_weight * _floor(share, located=self.located)
            self.weight += node_weight

    def figures(self) -> tuple[float, float, float]:
        if self.weight <= 0:
            return _NO_SHARE
        return min(1.0, self.weighted / self.weight), self.floored / self.weight, self.weight


def _zone_share(
    view: RoutingView,
    given: Given,
    clients: Clients,
    zone: str,
    excepted: list[tuple[str, Routing]],
    crossing: _Crossings,
    *,
    located: bool,
) -> tuple[float, float, float]:
    """(effective share, floor, weight) of the zone's clients that have a share; weight 0:
    none. `located`: an endpoint of R runs in the zone.

    Where every client of the zone follows the zone's routing, the share is that set's,
    exactly (not re-derived through the weights): re-weighing keeps it bit for bit.
    """
    zone_routing = view.by_zone.get(zone)
    if zone_routing is None:
        return _NO_SHARE
    shared = zone_routing.routing
    if not excepted and shared not in _PER_NODE:
        share = crossing(given.endpoints(shared, zone, None), zone)
        if share is None:
            return _NO_SHARE
        return share, _floor(share, located=located), clients.zone_weight[zone]
    sums = _Sums(located=located)
    rest = clients.zone_weight[zone]
    for node, routing in excepted:
        rest -= clients.weight[node]
        sums.add(clients.weight[node], crossing(given.endpoints(routing, zone, node), zone))
    if shared in _PER_NODE:
        # Bounded by the endpoints: a zone-wide node routing means each node has its own.
        skip = {node for node, _ in excepted}
        for node in clients.by_zone[zone]:
            if node not in skip:
                sums.add(clients.weight[node], crossing(given.endpoints(shared, zone, node), zone))
    elif len(excepted) < len(clients.by_zone[zone]):
        # Some client follows the zone's routing (weights are positive: rest > 0).
        sums.add(rest, crossing(given.endpoints(shared, zone, None), zone))
    return sums.figures()


# A memo holds at most this many shapes; past it, it starts again (churn, not real shapes).
MEMO_LIMIT = 100_000
_ZoneProfile = tuple[tuple[tuple[str, tuple[str, ...]], int], ...]


def _profile(usable: Sequence[Endpoint]) -> _ZoneProfile:
    """R as zone-wide routings read it: how many endpoints per (zone, zone hints).

    No zone and an empty zone are alike here: neither is any client's zone.
    """
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for endpoint in usable:
        key = (endpoint.zone or "", endpoint.zone_hints)
        counts[key] = counts.get(key, 0) + 1
    return tuple(sorted(counts.items()))


class CrossZones:
    """The cross-zone shares of one set of clients, memoised per shape.

    Where every client of a zone gets its zone's routing (no node exception, no per-node
    or `mixed` routing), the shares depend only on the data plane's same-zone reading, the
    routing of each zone, and how many endpoints of R run in each zone with which zone
    hints: Services of one shape share one computed (and one held) result. Like
    judgement.Judgements, the memo is a value that lives as long as its clients.
    """

    __slots__ = ("_clients", "_memo", "_reweighed")

    def __init__(self, clients: Clients) -> None:
        self._clients = clients
        self._memo: dict[object, CrossZone | None] = {}
        # id(earlier figures) -> (them, re-weighed): shared like the figures themselves.
        self._reweighed: dict[int, tuple[CrossZone, CrossZone]] = {}

    @property
    def clients(self) -> Clients:
        return self._clients

    def of(
        self, routing: Mapping[DataPlane, RoutingView], endpoints: ServiceEndpoints
    ) -> Mapping[DataPlane, CrossZone | None]:
        """Per data plane of `routing`; empty when no routing applies (section 10)."""
        if not routing or not all(view.applies for view in routing.values()):
            return _NOTHING
        return MappingProxyType(
            {
                dataplane: self._one(dataplane, view, endpoints)
                for dataplane, view in routing.items()
            }
        )

    def reweighed(
        self,
        earlier: Mapping[DataPlane, CrossZone | None],
        routing: Mapping[DataPlane, RoutingView],
        endpoints: ServiceEndpoints,
        before: Clients,
    ) -> Mapping[DataPlane, CrossZone | None]:
        """`of(routing, endpoints)`, from the figures computed under `before`'s clients.

        When only CPU moved (the same zones have clients), a zone-wide routing's zone
        shares stand and only their weights change: recombined, not recomputed.
        """
        if not earlier or self._clients.by_zone.keys() != before.by_zone.keys():
            return self.of(routing, endpoints)
        figures: dict[DataPlane, CrossZone | None] = {}
        for dataplane, view in routing.items():
            old = earlier.get(dataplane)
            if view.by_node or not _ZONE_WIDE.issuperset(
                zone_routing.routing for zone_routing in view.by_zone.values()
            ):
                figures[dataplane] = self._one(dataplane, view, endpoints)
            else:
                figures[dataplane] = None if old is None else self._recombined(old)
        return MappingProxyType(figures)

    def _recombined(self, old: CrossZone) -> CrossZone:
        kept = self._reweighed.get(id(old))
        if kept is not None and kept[0] is old:
            return kept[1]
        if len(self._reweighed) >= MEMO_LIMIT:
            self._reweighed.clear()
        weight = self._clients.zone_weight
        figures = _combined(old.zones, {zone: weight[zone] for zone in old.zones})
        self._reweighed[id(old)] = (old, figures)
        return figures

    def _one(
        self, dataplane: DataPlane, view: RoutingView, endpoints: ServiceEndpoints
    ) -> CrossZone | None:
        given = Given(dataplane, endpoints)
        routings = tuple(zone_routing.routing for zone_routing in view.by_zone.values())
        if view.by_node or not _ZONE_WIDE.issuperset(routings):
            return cross_zone(view, given, self._clients)
        key = (
            given.same_zone,
            given.cluster_narrowed,
            tuple(view.by_zone),
            routings,
            _profile(given.usable),
            _profile(given.fallback),
        )
        try:
            return self._memo[key]
        except KeyError:
            pass
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        figures = self._memo[key] = cross_zone(view, given, self._clients)
        return figures


# Routings whose endpoint set is the same for every client of a zone, from R alone.
_ZONE_WIDE = frozenset({Routing.CLUSTER, Routing.SAME_ZONE, Routing.NO_ENDPOINTS})
_NOTHING: Mapping[DataPlane, CrossZone | None] = MappingProxyType({})
NO_CROSS_ZONES = CrossZones(NO_CLIENTS)


def cross_zones(
    routing: Mapping[DataPlane, RoutingView], endpoints: ServiceEndpoints, clients: Clients
) -> Mapping[DataPlane, CrossZone | None]:
    """Per data plane of `routing`, without a memo kept between calls."""
    return CrossZones(clients).of(routing, endpoints)
