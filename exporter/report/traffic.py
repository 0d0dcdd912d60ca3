"""Where a Service's traffic goes, in the words every surface says it with.

Per data plane, whether clients stay local and, where not, why (effective routing, behaviour
§10); the share of traffic expected to cross zones, and the cluster's ranking of the avoidable
part (§13). Plain strings with a `Tone` where a judgement is made, like
exporter.report.phrases; exporter.report.explain lays them out for a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from exporter.engine import (
    DATA_PLANES,
    Cause,
    DataPlane,
    Endpoint,
    EntryVerdict,
    ReadyNodes,
    Routing,
    RoutingView,
    ZoneRouting,
)
from exporter.engine.crosszone import CrossZone
from exporter.engine.model import ZONE_LABEL
from exporter.report.phrases import Tone, whole_percent, zone_names

# Effective routing (behaviour §10): does this Service's traffic stay local?

_ROUTING_WORDS = {
    Routing.CLUSTER: "cluster-wide",
    Routing.MIXED: "mixed (zone-local plus cross-zone endpoints)",
    Routing.NO_ENDPOINTS: "no endpoints (fails closed)",
}
_FAIL_CLOSED_TEXT = {
    DataPlane.CILIUM_1_18_0: " (connections refused, cilium issue 41022; fixed in 1.18.1)",
    DataPlane.INGRESS_NGINX: " (HTTP 503, ingress-nginx issue 11342)",
}


_RoutingGroup = tuple[Routing, ZoneRouting | None]


def _routing_groups(view: RoutingView) -> dict[_RoutingGroup, tuple[int, list[str]]]:
    """Nodes that share a routing and its cause: (node count, zones)."""
    groups: dict[_RoutingGroup, tuple[int, list[str]]] = {}
    for zone, counts in view.nodes.items():
        zone_routing = view.by_zone[zone]
        for routing, count in counts.items():
            # Node exceptions (same-node) have no cause to tell.
            key = (routing, zone_routing if routing is zone_routing.routing else None)
            total, zones = groups.get(key, (0, []))
            groups[key] = (total + count, [*zones, zone])
    return groups


def routing_text(dataplane: DataPlane, view: RoutingView, nodes: ReadyNodes) -> tuple[str, Tone]:
    if not view.applies:
        if not nodes.zone_of:
            return "no routing: no Ready node", Tone.WARN
        return "no routing (headless or ExternalName Service, or not an IP address type)", Tone.BOLD
    total = len(nodes.zone_of)
    groups = sorted(
        _routing_groups(view).items(), key=lambda item: (not item[0][0].stays_local, item[0][0])
    )
    # Local routings are counted once each, whether zones or node exceptions hold them.
    local_counts: dict[Routing, int] = {}
    for (routing, _), (count, _) in groups:
        if routing.stays_local:
            local_counts[routing] = local_counts.get(routing, 0) + count
    parts = []
    for routing, count in local_counts.items():
        local = " (internalTrafficPolicy: Local)" if routing is Routing.LOCAL else ""
        parts.append(f"{routing} on {count} of {total} nodes{local}")
    # "the other 1497" reads right only beside a single local count.
    others = len(local_counts) == 1
    failed_closed = False
    for (routing, zone_routing), (count, zones) in groups:
        if not routing.stays_local:
            where = _Where(count, total, zones, others=others)
            parts.append(_non_local_text(dataplane, routing, zone_routing, where))
            failed_closed = failed_closed or (
                routing is Routing.NO_ENDPOINTS and not _dropped_by_policy(zone_routing)
            )
    routings = {routing for (routing, _), _ in groups}
    tone = Tone.GOOD if all(routing.stays_local for routing in routings) else Tone.WARN
    if failed_closed:
        tone = Tone.BAD
    return "; ".join(parts), tone


def _dropped_by_policy(zone_routing: ZoneRouting | None) -> bool:
    return zone_routing is not None and zone_routing.cause is Cause.NO_LOCAL_ENDPOINT


@dataclass(frozen=True, slots=True)
class _Where:
    """A group of clients: how many of all, in which zones."""

    count: int
    total: int
    zones: Sequence[str]
    # The local clients are counted in one part before: "the other N" reads right.
    others: bool = False


def _non_local_text(
    dataplane: DataPlane, routing: Routing, zone_routing: ZoneRouting | None, where: _Where
) -> str:
    """Where the traffic of a group of clients does not stay local, and why."""
    count, total, zones = where.count, where.total, where.zones
    cause = _cause_text(dataplane, zone_routing, zones) if zone_routing else ""
    if _dropped_by_policy(zone_routing):
        # The policy at work, not a hint failure: "dropped on the other 1497".
        if count == total:
            return f"dropped on every node: {cause}"
        nodes = f"the other {count}" if where.others else f"{count} of {total} nodes"
        return f"dropped on {nodes}: {cause}"
    nodes = "every node" if count == total else f"{count} of {total} nodes ({zone_names(zones)})"
    return f"{_ROUTING_WORDS.get(routing, str(routing))} on {nodes}: {cause}"


def _cause_text(dataplane: DataPlane, zone_routing: ZoneRouting, zones: Sequence[str]) -> str:
    """The cause, in words naming the endpoint, the zone or the setting behind it."""
    cause, endpoint = zone_routing.cause, zone_routing.endpoint
    if cause is Cause.UNHINTED_ENDPOINT and endpoint is not None:
        return _unhinted_text(dataplane, endpoint, zone_routing.routing)
    if cause is Cause.NO_HINT_FOR_ZONE:
        hinted = f"no ready endpoint is hinted for {zone_names(zones)}"
        if zone_routing.routing is Routing.NO_ENDPOINTS:
            return (
                f"{hinted}, so {dataplane} gives these clients no endpoint at all"
                f"{_FAIL_CLOSED_TEXT.get(dataplane, '')}"
            )
        if dataplane is DataPlane.INGRESS_NGINX:
            return f"{hinted}: a slice without such an endpoint is kept whole (PreferClose)"
        return hinted
    if cause is Cause.NOT_REQUESTED:
        # The profile's kube-proxy asks only when it is older than 1.31 (behaviour §12):
        # then it needs what kube-proxy-1.29 needs.
        needs = DATA_PLANES[dataplane].needs or DATA_PLANES[DataPlane.KUBE_PROXY_1_29].needs
        return f"{dataplane} looks at topology only with {needs}"
    return _CAUSE_TEXT.get(cause, str(cause)).format(dataplane=dataplane, zones=zone_names(zones))


_CAUSE_TEXT = {
    Cause.NO_READY_ENDPOINTS: "the Service has no ready endpoint",
    Cause.NO_LOCAL_ENDPOINT: (
        "internalTrafficPolicy: Local sends in-cluster traffic only to an endpoint on the "
        "client's own node, and these nodes run none"
    ),
    Cause.HINTS_IGNORED: (
        "{dataplane} ignores every hint (Cilium's enable-service-topology is off by default; "
        "turn it on, cilium issue 25283)"
    ),
    Cause.TOPOLOGY_AWARE_HINTS_GATE_OFF: (
        "{dataplane} runs with the TopologyAwareHints gate off and uses no hints"
    ),
    Cause.NO_HINTS: "no ready endpoint carries a zone hint",
    Cause.NO_ZONE_LABEL: f"the nodes have no {ZONE_LABEL} label",
    Cause.NO_ENDPOINT_IN_ZONE: "no ready endpoint runs in {zones}",
    Cause.TOO_FEW_IN_ZONE: (
        "fewer than 3 ready endpoints run in {zones}, the minimum {dataplane} wants under "
        "the topology-mode annotation"
    ),
}


def _unhinted_text(dataplane: DataPlane, endpoint: Endpoint, routing: Routing) -> str:
    address = endpoint.address
    if routing is Routing.MIXED:
        consequence = f"{dataplane} mixes every such endpoint into each zone's set"
    elif dataplane is DataPlane.INGRESS_NGINX:
        consequence = "ingress-nginx keeps its EndpointSlice whole"
    else:
        consequence = f"{dataplane} ignores every hint"
    if endpoint.ready is None:
        return (
            f"endpoint {address} has no `ready` condition, so {dataplane} counts it and the "
            f"controller never hints it; {consequence}"
        )
    if endpoint.ready is False:
        state = "terminating" if endpoint.terminating else "not ready"
        return f"endpoint {address} ({state}) has no zone hint, so {consequence}"
    return f"endpoint {address} has no zone hint, so {consequence}"


# The expected cross-zone share (behaviour §13)


# behaviour §13 asks every surface to say the share is a model (docs/behaviour.md says of what).
CROSS_ZONE_MODEL = "a model: CPU-weighted clients, even spread; measured traffic may differ"


def cross_zone_text(figures: CrossZone | None) -> str:
    """One data plane's expected cross-zone share in words (explain, the status page)."""
    if figures is None:
        return "no client is given an endpoint: no traffic to count"
    return (
        f"{whole_percent(figures.effective)} of traffic expected to cross zones "
        f"(floor {whole_percent(figures.floor)})"
    )


# Avoidable shares under this are rounding, not a finding worth ranking.
AVOIDABLE_WORTH_SAYING = 0.005
# The cluster summary names this many Services.
AVOIDABLE_RANKED = 5


def avoidable_ranking(
    verdicts: Iterable[EntryVerdict],
) -> list[tuple[EntryVerdict, DataPlane, CrossZone]]:
    """Entries by avoidable cross-zone share (effective - floor), largest first, each under
    the data plane where it is largest; only those with something to avoid."""
    ranked = []
    for verdict in verdicts:
        worst = max(
            ((dp, f) for dp, f in verdict.cross_zone.items() if f is not None),
            key=lambda item: item[1].avoidable,
            default=None,
        )
        if worst is not None and worst[1].avoidable >= AVOIDABLE_WORTH_SAYING:
            ranked.append((verdict, *worst))
    ranked.sort(key=lambda item: (-item[2].avoidable, item[0].key))
    return ranked


def avoidable_text(verdict: EntryVerdict, dataplane: DataPlane, figures: CrossZone) -> str:
    service = verdict.service
    return (
        f"{service.namespace}/{service.name} ({verdict.address_type}): "
        f"{whole_percent(figures.avoidable)} avoidable under {dataplane} "
        f"({whole_percent(figures.effective)} expected, floor {whole_percent(figures.floor)})"
    )
