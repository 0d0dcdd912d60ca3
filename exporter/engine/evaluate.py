"""The engine's entry points: an entry's verdict in a node view (`evaluate_entry`,
`evaluate_service`), and the same verdict re-judged when only capacity moved (`rejudge_entry`).

A whole cluster is evaluated by the pipeline (exporter.pipeline.evaluator), never here.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from exporter.engine.allocation import NearestFeasible
from exporter.engine.context import DEFAULT_DATAPLANES, NodeContext, ready_nodes
from exporter.engine.crosszone import CrossZone
from exporter.engine.dataplanes import route
from exporter.engine.health import DriftKind, drift_kinds, hint_completeness
from exporter.engine.judgement import ExpectedState, Judgement, ZoneVerdict
from exporter.engine.kubeproxy import ProxyView
from exporter.engine.mechanism import ConfigIssue, Mechanism, config_issues, mechanism_of
from exporter.engine.model import Endpoint, EndpointSlice, Service
from exporter.engine.profile import ASSUMED, Notice, Profile, notices_of
from exporter.engine.reasons import DisableReason
from exporter.engine.routing import (
    PROXIED_ADDRESS_TYPES,
    DataPlane,
    HintSets,
    RoutingView,
    ServiceEndpoints,
)
from exporter.vocabulary import EntryKey

# ExpectedState and ZoneVerdict (exporter.engine.judgement) are part of a verdict, and the
# context module's ready_nodes and DEFAULT_DATAPLANES part of evaluating: named here too.
__all__ = [
    "CAPACITY_FIELDS",
    "DEFAULT_DATAPLANES",
    "EntryInputs",
    "EntryVerdict",
    "ExpectedState",
    "ZoneVerdict",
    "counted_endpoints",
    "entry_inputs",
    "evaluate_entry",
    "evaluate_service",
    "ready_nodes",
    "rejudge_entry",
    "service_inputs",
]


@dataclass(frozen=True, slots=True)
class EntryVerdict:
    """The verdict on one entry, a Service's address type: whether the controller should hint it
    and why, the hints observed against that, and how each data plane routes it."""

    service: Service
    address_type: str
    mechanism: Mechanism
    expected_state: ExpectedState
    reason: DisableReason | None
    # N: ready endpoints in controller-managed slices.
    ready_endpoints: int
    # Of those, how many carry at least one zone hint.
    hinted_endpoints: int
    # Zones of the cluster's ratios plus zones named by hints of counted endpoints.
    zones: Mapping[str, ZoneVerdict]
    # Ready endpoints located in each zone: counted endpoints per zone they run in
    # (endpoints without a zone are not here). Exported as topology_hints_zone_endpoints.
    zone_endpoints: Mapping[str, int]
    hint_completeness: float | None
    proxy: ProxyView
    nearest_feasible: NearestFeasible | None
    config_issues: frozenset[ConfigIssue]
    drift: frozenset[DriftKind]
    # Any endpoint of these slices carries a zone or node hint, ready or not.
    carries_hints: bool
    # behaviour §10: each configured data plane's routing, in the configured order.
    routing: Mapping[DataPlane, RoutingView] = field(default_factory=lambda: MappingProxyType({}))
    # behaviour §12: shown and reported, never a problem.
    notices: frozenset[Notice] = frozenset()
    # behaviour §13: expected cross-zone shares per data plane of `routing` (None: no client
    # has a share); empty where no routing applies.
    cross_zone: Mapping[DataPlane, CrossZone | None] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @property
    def key(self) -> EntryKey:
        return EntryKey((self.service.namespace, self.service.name, self.address_type))

    @property
    def proxied(self) -> bool:
        """A data plane routes it: not headless or ExternalName, an IP address type."""
        return self.service.proxied and self.address_type in PROXIED_ADDRESS_TYPES


def counted_endpoints(slices: Iterable[EndpointSlice]) -> list[Endpoint]:
    """The controller's N: explicitly ready endpoints of the slices it manages."""
    return [
        endpoint
        for endpoint_slice in slices
        if endpoint_slice.managed
        for endpoint in endpoint_slice.endpoints
        if endpoint.ready is True
    ]


@dataclass(frozen=True, slots=True)
class EntryInputs:
    """What an entry's verdict reads from its Service and slices alone.

    Nothing here depends on Nodes: a caller that keeps it per (Service, slices) object
    evaluates a change of capacity or of the Ready nodes without reading the slices again.
    """

    service: Service
    address_type: str
    mechanism: Mechanism
    # The slices of this address type, in List order.
    slices: tuple[EndpointSlice, ...]
    endpoints: ServiceEndpoints
    # The controller's N: explicitly ready endpoints of managed slices.
    counted: tuple[Endpoint, ...]
    hinted: int
    hinted_by_zone: Mapping[str, int]
    # Sorted by zone.
    zone_endpoints: Mapping[str, int]
    config_issues: frozenset[ConfigIssue]
    carries_hints: bool
    notices: frozenset[Notice] = frozenset()
    # The controller also hints ready endpoints without a zone, for zone "" (§12).
    empty_zone_hints: bool = False

    @property
    def ready(self) -> int:
        return len(self.counted)


def entry_inputs(  # noqa: C901, PLR0912 - one fused pass over the endpoints, on purpose
    service: Service,
    address_type: str,
    slices: Sequence[EndpointSlice],
    zone_sets: dict[frozenset[str], frozenset[str]] | None = None,
    profile: Profile = ASSUMED,
) -> EntryInputs:
    """The slice-derived part of the entry's verdict (slices of one address type).

    One pass over the endpoints gathers both the controller's counts (explicitly ready
    endpoints of managed slices) and what the data planes read (`service_endpoints`:
    first copy per address, ready unless explicitly not): this runs for every endpoint
    of the cluster at the first evaluation.

    `zone_sets`: a dict the caller keeps while it keeps the inputs, through which entries
    hinted for the same zones share one set (most Services name the same few zones).
    """
    slice_tuple = tuple(slices)
    counted: list[Endpoint] = []
    hinted_by_zone: dict[str, int] = {}
    zone_endpoints: dict[str, int] = {}
    hinted = 0
    carries_hints = False
    seen: set[str] = set()
    unique: list[Endpoint] = []
    usable: list[Endpoint] = []
    hinted_zones: set[str] = set()
    hinted_nodes: set[str] = set()
    first_zone_unhinted: Endpoint | None = None
    every_node_hinted = True
    # Bound methods, looked up once rather than per endpoint.
    count, see, keep, use = counted.append, seen.add, unique.append, usable.append
    add_zones, add_nodes = hinted_zones.update, hinted_nodes.update
    for endpoint_slice in slice_tuple:
        managed = endpoint_slice.managed
        for endpoint in endpoint_slice.endpoints:
            zone_hints, node_hints, ready = endpoint.zone_hints, endpoint.node_hints, endpoint.ready
            if not carries_hints and (zone_hints or node_hints):
                carries_hints = True
            if managed and ready is True:
                count(endpoint)
                if zone_hints:
                    hinted += 1
                    for zone in zone_hints if len(zone_hints) == 1 else set(zone_hints):
                        hinted_by_zone[zone] = hinted_by_zone.get(zone, 0) + 1
                located = endpoint.zone
                if located:
                    zone_endpoints[located] = zone_endpoints.get(located, 0) + 1
            address = endpoint.address
            if address is None or address in seen:
                continue
            see(address)
            keep(endpoint)
            if ready is False:
                continue
            use(endpoint)
            if zone_hints:
                add_zones(zone_hints)
            elif first_zone_unhinted is None:
                first_zone_unhinted = endpoint
            if node_hints:
                add_nodes(node_hints)
            else:
                every_node_hinted = False
    # Held for every entry while its slices last: in the common case (no duplicate, every
    # endpoint ready and managed) the three lists are one, so they share one tuple.
    unique_tuple = tuple(unique)
    usable_tuple = unique_tuple if len(usable) == len(unique) else tuple(usable)
    same_counted = len(counted) == len(usable) and all(map(operator.is_, counted, usable))
    ready_hints = HintSets.of_parts(
        usable_tuple,
        _shared(hinted_zones, zone_sets),
        hinted_nodes,
        first_zone_unhinted,
        every_node_hinted=every_node_hinted,
    )
    mechanism = mechanism_of(service, profile)
    return EntryInputs(
        service=service,
        address_type=address_type,
        mechanism=mechanism,
        slices=slice_tuple,
        # What service_endpoints(service, address_type, slices) returns (a test holds it).
        endpoints=ServiceEndpoints(service, address_type, slice_tuple, unique_tuple, ready_hints),
        counted=usable_tuple if same_counted else tuple(counted),
        hinted=hinted,
        hinted_by_zone=MappingProxyType(hinted_by_zone),
        zone_endpoints=MappingProxyType(dict(sorted(zone_endpoints.items()))),
        config_issues=config_issues(service, profile),
        carries_hints=carries_hints,
        notices=notices_of(service, auto=mechanism is Mechanism.AUTO, profile=profile),
        empty_zone_hints=(
            mechanism is Mechanism.TRAFFIC_DISTRIBUTION
            and service.traffic_distribution == "PreferClose"
            and profile.writes_empty_zone_hints
        ),
    )


def _shared(
    zones: set[str], zone_sets: dict[frozenset[str], frozenset[str]] | None
) -> set[str] | frozenset[str]:
    if zone_sets is None or not zones:
        return zones
    frozen = frozenset(zones)
    return zone_sets.setdefault(frozen, frozen)


def service_inputs(
    service: Service,
    slices: Sequence[EndpointSlice],
    zone_sets: dict[frozenset[str], frozenset[str]] | None = None,
    profile: Profile = ASSUMED,
) -> tuple[EntryInputs, ...]:
    """One EntryInputs per address type among the slices, sorted by address type."""
    by_type: dict[str, list[EndpointSlice]] = {}
    for endpoint_slice in slices:
        by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
    return tuple(
        entry_inputs(service, address_type, typed, zone_sets, profile)
        for address_type, typed in sorted(by_type.items())
    )


def evaluate_entry(inputs: EntryInputs, context: NodeContext) -> EntryVerdict:
    """The entry's verdict in this node view (`inputs` made under the context's profile).

    The context's memos share judgements, kube-proxy routings and cross-zone shares
    between the entries of the view.
    """
    mechanism = inputs.mechanism
    ready = inputs.ready
    hinted_by_zone = inputs.hinted_by_zone
    judgement = _judged(
        context, mechanism, ready, inputs.hinted, hinted_by_zone, inputs.zone_endpoints
    )
    drift = judgement.drift
    if drift is None:
        drift = drift_kinds(
            mechanism,
            hints_expected=judgement.expected_state is ExpectedState.ENABLED,
            counted=inputs.counted,
            allocations={},
            hinted_by_zone=hinted_by_zone,
            empty_zone_hints=inputs.empty_zone_hints,
        )
    endpoints = inputs.endpoints
    nodes = context.nodes
    # kube-proxy's routing is section 5's proxy mode: computed once, whether configured or not.
    kube_proxy, proxy = context.routes.route(endpoints)
    routing = {
        dataplane: kube_proxy
        if dataplane is DataPlane.KUBE_PROXY
        else route(dataplane, endpoints, nodes)
        for dataplane in context.dataplanes
    }
    return EntryVerdict(
        service=inputs.service,
        address_type=inputs.address_type,
        mechanism=mechanism,
        expected_state=judgement.expected_state,
        reason=judgement.reason,
        ready_endpoints=ready,
        hinted_endpoints=inputs.hinted,
        zones=judgement.zones,
        zone_endpoints=inputs.zone_endpoints,
        hint_completeness=hint_completeness(ready, inputs.hinted),
        proxy=proxy,
        nearest_feasible=judgement.nearest_feasible,
        config_issues=inputs.config_issues,
        drift=drift,
        carries_hints=inputs.carries_hints,
        routing=MappingProxyType(routing),
        notices=inputs.notices,
        cross_zone=context.cross_zones.of(routing, endpoints),
    )


# The fields of a verdict that the cluster's capacity decides (the judgement's, and the
# cross-zone shares the clients' CPU weighs): re-judging replaces these and keeps every other
# field as it is (tests/engine/test_rejudge_fields.py holds the list to EntryVerdict's).
CAPACITY_FIELDS = frozenset(
    {"expected_state", "reason", "zones", "nearest_feasible", "drift", "cross_zone"}
)


def _judged(
    context: NodeContext,
    mechanism: Mechanism,
    ready: int,
    hinted: int,
    hinted_by_zone: Mapping[str, int],
    zone_endpoints: Mapping[str, int],
) -> Judgement:
    """The judgement of an entry's counts in the context's capacity: what evaluating and
    re-judging both ask."""
    return context.judgements.judge(
        mechanism,
        ready=ready,
        hinted=hinted,
        every_endpoint_has_zone=sum(zone_endpoints.values()) == ready,
        hinted_by_zone=hinted_by_zone,
        zone_endpoints=zone_endpoints,
    )


def rejudge_entry(
    verdict: EntryVerdict,
    context: NodeContext,
    cross_zone: Mapping[DataPlane, CrossZone | None] | None = None,
) -> EntryVerdict:
    """The verdict in `context`, whose Ready nodes are those the verdict was evaluated in:
    only CAPACITY_FIELDS are replaced, every other field is the verdict's own.

    The counts the judgement reads are in the verdict, and everything else (routing, proxy
    modes, endpoint counts, notices) does not depend on capacity, so the slices are not
    read again; equal to evaluating the entry afresh in `context`. `cross_zone`: the shares
    re-weighed for the context's clients, when they moved (the verdict's are kept else).
    """
    hinted_by_zone = {zone: figures.hinted for zone, figures in verdict.zones.items()}
    judgement = _judged(
        context,
        verdict.mechanism,
        verdict.ready_endpoints,
        verdict.hinted_endpoints,
        hinted_by_zone,
        verdict.zone_endpoints,
    )
    return replace(
        verdict,
        expected_state=judgement.expected_state,
        reason=judgement.reason,
        zones=judgement.zones,
        nearest_feasible=judgement.nearest_feasible,
        # None: drift does not depend on capacity (traffic-distribution), the verdict's stands.
        drift=verdict.drift if judgement.drift is None else judgement.drift,
        cross_zone=verdict.cross_zone if cross_zone is None else cross_zone,
    )


def evaluate_service(
    service: Service, slices: Sequence[EndpointSlice], context: NodeContext
) -> tuple[EntryVerdict, ...]:
    """One verdict per address type among the Service's slices, sorted by address type.

    Pass one context to every call of one node view so that Services of one shape share
    their allocation and their routing.
    """
    return tuple(
        evaluate_entry(entry, context)
        for entry in service_inputs(service, slices, profile=context.profile)
    )
