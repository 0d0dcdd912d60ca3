"""behaviour §10, the shared part: what a data plane's routing is and what every rule reads.

A data plane gives each Ready node a routing for a Service. Nodes of one zone decide
alike unless a node's name matters (a node hint, or an endpoint's nodeName), so a
routing is computed per zone plus a few node exceptions, never node by node: the cost
stays independent of the number of nodes.

The rules themselves, one function per data plane, are in `exporter.engine.dataplanes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.model import Endpoint, EndpointSlice, Service

# Address types a proxy programs; FQDN slices get no routing.
PROXIED_ADDRESS_TYPES = frozenset({"IPv4", "IPv6"})
NO_NAMES: frozenset[str] = frozenset()
# Hint annotation values that mean "no hints" to kube-proxy 1.29 and to Cilium.
ANNOTATION_OFF_VALUES = frozenset({"", "disabled", "Disabled"})


@dataclass(frozen=True, slots=True)
class ReadyNodes:
    """Ready nodes, the clients: a proxy runs on every one of them, control plane included."""

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


class Routing(StrEnum):
    """Where one client's traffic to an entry can go (behaviour §10), from its own node out to the
    whole cluster, or nowhere."""

    SAME_NODE = "same-node"
    SAME_ZONE = "same-zone"
    CLUSTER = "cluster"
    LOCAL = "local"
    # Some cross-zone endpoints mixed into a zone-local set: not local.
    MIXED = "mixed"
    # Endpoints exist, this client is given none: the data plane fails closed.
    NO_ENDPOINTS = "no-endpoints"

    @property
    def stays_local(self) -> bool:
        return self in _LOCAL_ROUTINGS


_LOCAL_ROUTINGS = frozenset({Routing.SAME_NODE, Routing.SAME_ZONE, Routing.LOCAL})


class Cause(StrEnum):
    """Why a zone's nodes get their routing; what `explain` puts into words."""

    # internalTrafficPolicy Local: a node with a node-local endpoint routes to it...
    INTERNAL_TRAFFIC_POLICY_LOCAL = "internal-traffic-policy-local"
    # ...and a node without one drops the traffic (no-endpoints).
    NO_LOCAL_ENDPOINT = "no-local-endpoint"
    NO_READY_ENDPOINTS = "no-ready-endpoints"
    # The data plane never reads hints at all (cilium-no-topology).
    HINTS_IGNORED = "hints-ignored"
    # kube-proxy's TopologyAwareHints gate is off (1.29-1.32 only): it uses no hints.
    TOPOLOGY_AWARE_HINTS_GATE_OFF = "topology-aware-hints-gate-off"
    # The Service lacks the annotation or field this data plane looks for.
    NOT_REQUESTED = "not-requested"
    # No usable endpoint carries a zone hint.
    NO_HINTS = "no-hints"
    # Some usable endpoint has no zone hint (named by ZoneRouting.endpoint).
    UNHINTED_ENDPOINT = "unhinted-endpoint"
    # The client node has no zone label.
    NO_ZONE_LABEL = "no-zone-label"
    NO_HINT_FOR_ZONE = "no-hint-for-zone"
    # Data planes that read the endpoint's zone instead of hints.
    NO_ENDPOINT_IN_ZONE = "no-endpoint-in-zone"
    TOO_FEW_IN_ZONE = "too-few-in-zone"
    HINTED_FOR_ZONE = "hinted-for-zone"
    LOCATED_IN_ZONE = "located-in-zone"


class DataPlane(StrEnum):
    """A data plane whose routing the exporter models, a version apart where its rules differ."""

    KUBE_PROXY = "kube-proxy"
    KUBE_PROXY_1_29 = "kube-proxy-1.29"
    # behaviour §12: zone hints without an annotation, never node hints (1.31-1.33).
    KUBE_PROXY_1_33 = "kube-proxy-1.33"
    CILIUM = "cilium"
    CILIUM_1_18_0 = "cilium-1.18.0"
    CILIUM_NO_TOPOLOGY = "cilium-no-topology"
    LINKERD = "linkerd"
    INGRESS_NGINX = "ingress-nginx"
    ISTIO = "istio"
    ENVOY_GATEWAY = "envoy-gateway"
    CALICO_EBPF = "calico-ebpf"


@dataclass(frozen=True, slots=True)
class ZoneRouting:
    """One zone's routing under a data plane, with the cause of it."""

    routing: Routing
    cause: Cause
    # The endpoint the cause is about (an unhinted one), when the cause names one.
    endpoint: Endpoint | None = None


_NO_EXCEPTIONS: Mapping[str, Routing] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RoutingView:
    """One data plane's routing of one (Service, address type) over the Ready nodes.

    Held for every Service in the live state, so it stores only what differs per
    Service: the node lists are the evaluation's shared ReadyNodes, counted on demand.
    """

    # Routing of the zone's nodes that are not in `by_node`; given for every zone of a
    # Ready node. Empty when no routing applies (headless, ExternalName, not an IP
    # address type, or no Ready node).
    by_zone: Mapping[str, ZoneRouting]
    # Ready nodes whose routing differs from their zone's (a node hint or nodeName matched).
    by_node: Mapping[str, Routing]
    # Share of Ready nodes whose routing stays local; None when no routing applies.
    local_ratio: float | None
    # The evaluation's Ready nodes (shared, not copied).
    ready_nodes: ReadyNodes | None = None

    @property
    def applies(self) -> bool:
        return bool(self.by_zone)

    @property
    def nodes(self) -> dict[str, dict[Routing, int]]:
        """zone -> routing -> Ready nodes of the zone with it (only routings that occur)."""
        if self.ready_nodes is None:
            return {}
        return _node_counts(self.ready_nodes, self.by_zone, self.by_node)

    def no_endpoint_nodes(self) -> tuple[int, int]:
        """Ready nodes given no endpoint: (failed closed by the data plane, dropped by
        internalTrafficPolicy Local on a node without a local endpoint).

        The first is an outage the hints cause; the second is the policy doing what it says.
        """
        failed = dropped = 0
        for zone, counts in self.nodes.items():
            count = counts.get(Routing.NO_ENDPOINTS, 0)
            if self.by_zone[zone].cause is Cause.NO_LOCAL_ENDPOINT:
                dropped += count
            else:
                failed += count
        return failed, dropped


NO_ROUTING = RoutingView(MappingProxyType({}), _NO_EXCEPTIONS, None)


def _node_counts(
    nodes: ReadyNodes, by_zone: Mapping[str, ZoneRouting], by_node: Mapping[str, Routing]
) -> dict[str, dict[Routing, int]]:
    counts = {
        zone: {by_zone[zone].routing: len(zone_nodes)} for zone, zone_nodes in nodes.by_zone.items()
    }
    for node, routing in by_node.items():
        zone = nodes.zone_of[node]
        zone_counts = counts[zone]
        shared = by_zone[zone].routing
        zone_counts[shared] -= 1
        if not zone_counts[shared]:
            del zone_counts[shared]
        zone_counts[routing] = zone_counts.get(routing, 0) + 1
    return counts


def deduplicated(slices: Iterable[EndpointSlice]) -> list[Endpoint]:
    """Every endpoint once per address, the first copy in List order winning (section 5)."""
    return first_per_address(
        endpoint for endpoint_slice in slices for endpoint in endpoint_slice.endpoints
    )


def first_per_address(endpoints: Iterable[Endpoint]) -> list[Endpoint]:
    seen: set[str] = set()
    unique: list[Endpoint] = []
    # Bound methods: this runs for every endpoint of every Service at each full evaluation.
    see, keep = seen.add, unique.append
    for endpoint in endpoints:
        address = endpoint.address
        if address is None or address in seen:
            continue
        see(address)
        keep(endpoint)
    return unique


@dataclass(frozen=True, slots=True)
class HintSets:
    """What the rules ask of a set of usable endpoints, computed in one pass."""

    endpoints: tuple[Endpoint, ...]
    zones: frozenset[str]
    nodes: frozenset[str]
    # The first endpoint without a zone hint; None when every one has one.
    first_zone_unhinted: Endpoint | None
    every_node_hinted: bool
    # `cluster` and why, when some endpoint lacks a zone hint; None when all have one.
    zone_hint_fallback: ZoneRouting | None

    @classmethod
    def of(cls, endpoints: Sequence[Endpoint]) -> HintSets:
        # One pass, not five: this runs for every Service at each full evaluation.
        zones: set[str] = set()
        nodes: set[str] = set()
        unhinted = None
        every_node_hinted = True
        for endpoint in endpoints:
            zone_hints = endpoint.zone_hints
            if zone_hints:
                zones.update(zone_hints)
            elif unhinted is None:
                unhinted = endpoint
            node_hints = endpoint.node_hints
            if node_hints:
                nodes.update(node_hints)
            else:
                every_node_hinted = False
        return cls.of_parts(endpoints, zones, nodes, unhinted, every_node_hinted=every_node_hinted)

    @classmethod
    def of_parts(
        cls,
        endpoints: Sequence[Endpoint],
        zones: set[str] | frozenset[str],
        nodes: set[str],
        first_zone_unhinted: Endpoint | None,
        *,
        every_node_hinted: bool,
    ) -> HintSets:
        """From the figures `of` computes, gathered by a caller's own pass."""
        fallback = None
        if first_zone_unhinted is not None:
            fallback = (
                ZoneRouting(Routing.CLUSTER, Cause.UNHINTED_ENDPOINT, first_zone_unhinted)
                if zones
                else ZoneRouting(Routing.CLUSTER, Cause.NO_HINTS)
            )
        return cls(
            endpoints=tuple(endpoints),
            # Held per entry: the empty sets (most entries' node hints) are one object.
            zones=frozenset(zones) if zones else NO_NAMES,  # a frozenset is kept as it is
            nodes=frozenset(nodes) if nodes else NO_NAMES,
            first_zone_unhinted=first_zone_unhinted,
            every_node_hinted=every_node_hinted,
            zone_hint_fallback=fallback,
        )


def ready_hint_sets(endpoints: Iterable[Endpoint]) -> HintSets:
    """The ready endpoints' hints, first copy per address winning, as `service_endpoints`
    computes them for endpoints in List order: in one pass (what-if asks it per zone)."""
    seen: set[str] = set()
    usable: list[Endpoint] = []
    zones: set[str] = set()
    nodes: set[str] = set()
    first_zone_unhinted = None
    every_node_hinted = True
    for endpoint in endpoints:
        address = endpoint.address
        if address is None or address in seen:
            continue
        seen.add(address)
        if endpoint.ready is False:
            continue
        usable.append(endpoint)
        zone_hints, node_hints = endpoint.zone_hints, endpoint.node_hints
        if zone_hints:
            zones.update(zone_hints)
        elif first_zone_unhinted is None:
            first_zone_unhinted = endpoint
        if node_hints:
            nodes.update(node_hints)
        else:
            every_node_hinted = False
    return HintSets.of_parts(
        usable, zones, nodes, first_zone_unhinted, every_node_hinted=every_node_hinted
    )


@dataclass(frozen=True, slots=True)
class ServiceEndpoints:
    """A (Service, address type) as the data planes see it; shared by every rule."""

    service: Service
    address_type: str
    # This address type's slices in List order: ingress-nginx works slice by slice.
    slices: tuple[EndpointSlice, ...]
    # Deduplicated by address, first copy wins.
    unique: tuple[Endpoint, ...]
    # Of those, the ready ones (`ready` not explicitly false), with their hints.
    ready: HintSets

    @property
    def routed(self) -> bool:
        """Headless and ExternalName Services and non-IP address types get no routing."""
        return self.service.proxied and self.address_type in PROXIED_ADDRESS_TYPES


def service_endpoints(
    service: Service, address_type: str, slices: Iterable[EndpointSlice]
) -> ServiceEndpoints:
    slice_tuple = tuple(slices)
    unique = deduplicated(slice_tuple)
    # Ready unless explicitly not: kube-proxy's reading, which section 10 takes for all.
    ready = [endpoint for endpoint in unique if endpoint.ready is not False]
    return ServiceEndpoints(
        service=service,
        address_type=address_type,
        slices=slice_tuple,
        unique=tuple(unique),
        ready=HintSets.of(ready),
    )


def located_counts(endpoints: Iterable[Endpoint]) -> dict[str, int]:
    """Endpoints per zone they run in; endpoints without a zone are not counted."""
    located: dict[str, int] = {}
    for endpoint in endpoints:
        if endpoint.zone:
            located[endpoint.zone] = located.get(endpoint.zone, 0) + 1
    return located


def node_names(endpoints: Iterable[Endpoint]) -> frozenset[str]:
    """The nodeName of each endpoint that has one."""
    return frozenset(endpoint.node_name for endpoint in endpoints if endpoint.node_name)


def hints_annotation_asks(service: Service) -> bool:
    """The hints annotation (deprecated key if present) is set to something but off values."""
    value = service.deprecated_hints_annotation
    if value is None:
        value = service.topology_mode_annotation
    return value is not None and value not in ANNOTATION_OFF_VALUES


def topology_mode_is_auto(service: Service) -> bool:
    """topology-mode equals `auto` in any case; the deprecated key is not read."""
    mode = service.topology_mode_annotation
    return mode is not None and mode.lower() == "auto"


def node_local(
    usable: Iterable[Endpoint], unique: Iterable[Endpoint], *, terminating_fallback: bool
) -> frozenset[str]:
    """The nodes that have a node-local endpoint under internalTrafficPolicy Local.

    A node's own usable endpoints; where it has none, with `terminating_fallback`, its
    serving terminating ones (kube-proxy's ProxyTerminatingEndpoints: `serving` absent
    counts as true, `terminating` must be true). Either way the node has one, so the
    result is the union of the two sets of nodes.
    """
    local = {endpoint.node_name for endpoint in usable if endpoint.node_name}
    if terminating_fallback:
        local.update(
            endpoint.node_name
            for endpoint in unique
            if endpoint.node_name and serving_terminating(endpoint)
        )
    return frozenset(local) if local else NO_NAMES


def serving_terminating(endpoint: Endpoint) -> bool:
    """kube-proxy's fallback endpoint: `terminating` true, `serving` true or absent."""
    return endpoint.terminating is True and endpoint.serving is not False


def uniform(zone_routing: ZoneRouting) -> Callable[[str], ZoneRouting]:
    """A zone rule giving every zone the same routing."""
    return lambda _zone: zone_routing


LOCAL_POLICY = ZoneRouting(Routing.LOCAL, Cause.INTERNAL_TRAFFIC_POLICY_LOCAL)
LOCAL_POLICY_DROPPED = ZoneRouting(Routing.NO_ENDPOINTS, Cause.NO_LOCAL_ENDPOINT)


def local_policy_view(nodes: ReadyNodes, local_nodes: frozenset[str]) -> RoutingView:
    """internalTrafficPolicy Local: `local` on the nodes in `local_nodes`, dropped elsewhere.

    A zone whose Ready nodes all have a local endpoint (a DaemonSet) is `local` as a whole;
    any other zone is `no-endpoints` with its local nodes as exceptions, so the cost is
    bounded by the endpoints, not by the nodes.
    """
    local_in_zone: dict[str, int] = {}
    for node in local_nodes:
        zone = nodes.zone_of.get(node)
        if zone is not None:
            local_in_zone[zone] = local_in_zone.get(zone, 0) + 1

    def zone_rule(zone: str) -> ZoneRouting:
        every = local_in_zone.get(zone, 0) == len(nodes.by_zone[zone])
        return LOCAL_POLICY if every else LOCAL_POLICY_DROPPED

    return routing_view(nodes, zone_rule, [(node, Routing.LOCAL) for node in local_nodes])


def routing_view(
    nodes: ReadyNodes,
    zone_rule: Callable[[str], ZoneRouting],
    node_exceptions: Iterable[tuple[str, Routing]] = (),
) -> RoutingView:
    """The view of a rule: `zone_rule` for each zone, then the Ready nodes of the exceptions."""
    if not nodes.by_zone:
        return NO_ROUTING
    by_zone = {zone: zone_rule(zone) for zone in nodes.by_zone}
    by_node: dict[str, Routing] = {}
    for node, routing in node_exceptions:
        zone = nodes.zone_of.get(node)
        if zone is not None and routing is not by_zone[zone].routing:
            by_node[node] = routing
    local = sum(
        len(zone_nodes)
        for zone, zone_nodes in nodes.by_zone.items()
        if by_zone[zone].routing in _LOCAL_ROUTINGS
    )
    for node, routing in by_node.items():
        # An exception may move its node between local and not.
        shared = by_zone[nodes.zone_of[node]].routing
        local += (routing in _LOCAL_ROUTINGS) - (shared in _LOCAL_ROUTINGS)
    return RoutingView(
        by_zone=MappingProxyType(by_zone),
        by_node=MappingProxyType(dict(sorted(by_node.items()))) if by_node else _NO_EXCEPTIONS,
        local_ratio=local / len(nodes.zone_of),
        ready_nodes=nodes,
    )
