"""Every metric family the exporter exposes, declared once, in exposition order.

A declaration is a name, a type, a scope (what one series describes), a help text, the
labels after the scope's identity labels, and how its samples are produced:

- `each_entry` / `each_service`: from one Service's result (and the Ready nodes, whose
  change re-evaluates every Service). The cached fragment renderer keeps these lines until
  the Service is re-evaluated; the identity labels (`namespace, service[, address_type]`)
  are prepended, as kube-state-metrics does, so the function only yields its own labels.
- `from_scrape`: from the whole published state and the set of exported Services, for
  figures that span Services or change without re-evaluating one (controller events); the
  function yields every label, identity labels included.
- none, for the exporter's own families: `instruments.py` updates prometheus_client
  instruments as things happen.

Declaring a family appends it to `FAMILIES` in declaration order: the prometheus_client
collector (`collector.py`), the cached fragment renderer (`exposition.py`) and
`docs/metrics.md` (`reference.py`) all iterate that one tuple. Each family is also a module
constant named after its metric name without the prefix (`ZONE_LOAD_FACTOR`), so alerts,
dashboards and tests refer to names in one place.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from exporter.engine import (
    OVERLOAD_LIMIT,
    OVERLOAD_THRESHOLD,
    ExpectedState,
    ProxyMode,
    ProxyView,
    ReadyNodes,
    ServiceVerdict,
)
from exporter.engine.whatif.forecast import NO_FORECAST, EntryForecast
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.live.result import ExporterState, ServiceResult
from exporter.vocabulary import ServiceKey

PREFIX = "topology_hints_"

# (label values, value); label values in the family's label order.
Sample = tuple[tuple[str, ...], float]
_Contribution = TypeVar("_Contribution")


class MetricType(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


class Scope(StrEnum):
    """What one series of a family describes; the identity labels it starts with."""

    CLUSTER = "cluster"
    NODE = "node"
    SERVICE = "service"
    SERVICE_ENTRY = "service entry"  # one (Service, address type)
    EXPORTER = "exporter"

    @property
    def identity_labels(self) -> tuple[str, ...]:
        return _IDENTITY_LABELS[self]


_IDENTITY_LABELS = {
    Scope.CLUSTER: (),
    Scope.NODE: ("node",),
    Scope.SERVICE: ("namespace", "service"),
    Scope.SERVICE_ENTRY: ("namespace", "service", "address_type"),
    Scope.EXPORTER: (),
}


@dataclass(frozen=True, slots=True)
class ServiceEntry:
    """One exported (Service, address type) verdict, its flip counter, what-if forecast and
    the Ready nodes."""

    verdict: ServiceVerdict
    state_changes: int
    nodes: ReadyNodes
    forecast: EntryForecast = NO_FORECAST


@dataclass(frozen=True)
class ServiceSubject:
    """One exported Service as the per-Service families see it; its entries built once."""

    result: ServiceResult
    nodes: ReadyNodes

    @functools.cached_property
    def entries(self) -> tuple[tuple[tuple[str, str, str], ServiceEntry], ...]:
        """(identity label values, entry) per address type."""
        return service_entries(self.result, self.nodes)


def service_entries(
    result: ServiceResult, nodes: ReadyNodes
) -> tuple[tuple[tuple[str, str, str], ServiceEntry], ...]:
    """(identity label values, entry) per address type of one Service."""
    forecasts = result.forecasts or (NO_FORECAST,) * len(result.verdicts)
    return tuple(
        [
            (verdict.key, ServiceEntry(verdict, flips, nodes, forecast))
            for verdict, flips, forecast in zip(
                result.verdicts, result.state_changes, forecasts, strict=True
            )
        ]
    )


@dataclass(frozen=True)
class Scrape:
    """What one scrape renders: the published state and its exported Services in key order."""

    state: ExporterState
    exported: tuple[ServiceResult, ...]

    @functools.cached_property
    def verdicts(self) -> tuple[ServiceVerdict, ...]:
        return tuple(verdict for result in self.exported for verdict in result.verdicts)

    @functools.cached_property
    def subjects(self) -> tuple[ServiceSubject, ...]:
        return tuple(ServiceSubject(result, self.state.nodes) for result in self.exported)


@dataclass(frozen=True, slots=True)
class PerService:
    """Samples of one Service from its result and the Ready nodes (identity labels included):
    cacheable until the evaluator replaces the result."""

    function: Callable[[ServiceSubject], Iterable[Sample]]
    # The same samples without the identity labels, per (Service, address type) entry or
    # per Service (one of the two): the renderer formats a Service's identity once.
    entry: Callable[[ServiceEntry], Iterable[Sample]] | None = None
    service: Callable[[ServiceResult], Iterable[Sample]] | None = None
    # The samples also read the Ready nodes: they change with the node view even when the
    # Service's result does not.
    reads_nodes: bool = False
    # What the samples read of one entry (or of the Service, for `service`) besides its
    # identity labels and, when `reads_nodes`, the Ready nodes: while it compares equal
    # (`is`, then `==`) for every entry of a replaced result, the cached renderer keeps the
    # family's lines. None: rendered again whenever the result is replaced. It must decide
    # the samples wholly (order included), and cost less than rendering them.
    inputs: Callable[[Any], object] | None = None


class Tally(Protocol[_Contribution]):
    """A family summed over the exported Services, kept running by the cached renderer.

    Built for one view of the state (what the family's `reads` returns); each exported
    Service adds its contribution, and a Service whose contribution changes is subtracted
    and added again, so a change costs that Service, not every Service.
    """

    def contribution(self, result: ServiceResult) -> _Contribution:
        """What the Service adds; equal contributions add the same."""
        ...

    def add(self, contribution: _Contribution, sign: int) -> None:
        """Add (sign 1) or take away (sign -1) a contribution added before."""
        ...

    def samples(self) -> Iterable[Sample]:
        """The family's samples over the contributions added so far (every label)."""
        ...


@dataclass(frozen=True, slots=True)
class PerScrape:
    """Samples computed from the whole scrape (every label included)."""

    function: Callable[[Scrape], Iterable[Sample]]
    # The parts of the state the samples read besides the exported Services: while each is
    # the same object, the samples are the same. None: anything (rendered for every state).
    reads: Callable[[ExporterState], tuple[object, ...]] | None = None
    # For families summed over the exported Services: the running sum for a state's view.
    tally: Callable[[ExporterState], Tally[Any]] | None = None


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    type: MetricType
    scope: Scope
    help: str
    # Labels in exposition order, the scope's identity labels first.
    labels: tuple[str, ...]
    # None for the exporter's own families (prometheus_client instruments).
    samples: PerService | PerScrape | None
    # Computed from Nodes alone, so every shard of a sharded install would export the same
    # series: only shard 0 exports it.
    same_on_every_shard: bool = False


def each_entry(
    function: Callable[[ServiceEntry], Iterable[Sample]],
    *,
    reads_nodes: bool = False,
    inputs: Callable[[ServiceEntry], object] | None = None,
) -> PerService:
    """A per-(Service, address type) function, its samples prefixed with the entry's key."""

    def samples(service: ServiceSubject) -> Iterator[Sample]:
        for key, entry in service.entries:
            for labels, value in function(entry):
                yield (*key, *labels), value

    return PerService(samples, entry=function, reads_nodes=reads_nodes, inputs=inputs)


def each_service(
    function: Callable[[ServiceResult], Iterable[Sample]],
    *,
    inputs: Callable[[ServiceResult], object] | None = None,
) -> PerService:
    """A per-Service function, its samples prefixed with the Service's namespace and name."""

    def samples(service: ServiceSubject) -> Iterator[Sample]:
        key = service.result.service.key
        for labels, value in function(service.result):
            yield (*key, *labels), value

    return PerService(samples, service=function, inputs=inputs)


def from_scrape(
    function: Callable[[Scrape], Iterable[Sample]],
    *,
    reads: Callable[[ExporterState], tuple[object, ...]] | None = None,
) -> PerScrape:
    return PerScrape(function, reads=reads)


def tallied(
    tally: Callable[[ExporterState], Tally[Any]],
    *,
    reads: Callable[[ExporterState], tuple[object, ...]],
) -> PerScrape:
    """A family summed over the exported Services: the collector sums them on each scrape,
    the cached renderer keeps the sum running (one implementation for both)."""

    def samples(scrape: Scrape) -> Iterable[Sample]:
        running = tally(scrape.state)
        for result in scrape.exported:
            running.add(running.contribution(result), 1)
        return running.samples()

    return PerScrape(samples, reads=reads, tally=tally)


_declared: list[Family] = []


def _declare(
    name: str,
    metric_type: MetricType,
    scope: Scope,
    help_text: str,
    samples: PerService | PerScrape | None = None,
    *,
    labels: tuple[str, ...] = (),
    same_on_every_shard: bool = False,
) -> Family:
    family = Family(
        PREFIX + name,
        metric_type,
        scope,
        help_text,
        (*scope.identity_labels, *labels),
        samples,
        same_on_every_shard,
    )
    _declared.append(family)
    return family


GAUGE, COUNTER, HISTOGRAM = MetricType.GAUGE, MetricType.COUNTER, MetricType.HISTOGRAM


def _one(value: float) -> list[Sample]:
    return [((), float(value))]


# How the overload guard reads in help texts: "20%" and "1.2".
_OVERLOAD_SHARE = f"{OVERLOAD_THRESHOLD:.0%}"
_OVERLOAD_LIMIT = f"{OVERLOAD_LIMIT:g}"

# -- cluster -------------------------------------------------------------------------------


def _capacity(state: ExporterState) -> tuple[object, ...]:
    return (state.capacity,)


SUFFICIENT_NODE_INFO = _declare(
    "sufficient_node_info",
    GAUGE,
    Scope.CLUSTER,
    "1 when every Ready worker node has a zone label and allocatable CPU and at least "
    "two zones have CPU; 0 disables auto hints for every Service.",
    from_scrape(lambda scrape: _one(scrape.state.capacity.sufficient), reads=_capacity),
    same_on_every_shard=True,
)
ZONE_CPU_RATIO = _declare(
    "zone_cpu_ratio",
    GAUGE,
    Scope.CLUSTER,
    "The EndpointSlice controller's share of allocatable CPU for the zone "
    "(absent while node info is insufficient).",
    from_scrape(
        lambda scrape: (
            ((zone,), ratio) for zone, ratio in scrape.state.capacity.zone_ratios.items()
        ),
        reads=_capacity,
    ),
    labels=("zone",),
    same_on_every_shard=True,
)
ZONE_ALLOCATABLE_CPU_CORES = _declare(
    "zone_allocatable_cpu_cores",
    GAUGE,
    Scope.CLUSTER,
    "Allocatable CPU counted for the zone, in cores, rounded up to millicores "
    "(absent while node info is insufficient).",
    from_scrape(
        lambda scrape: (
            ((zone,), millicores / 1000)
            for zone, millicores in scrape.state.capacity.zone_millicores.items()
        ),
        reads=_capacity,
    ),
    labels=("zone",),
    same_on_every_shard=True,
)
NODE_MISSING_TOPOLOGY_INFO = _declare(
    "node_missing_topology_info",
    GAUGE,
    Scope.NODE,
    "1 for each Ready worker node that lacks a zone label or allocatable CPU "
    "(missing is zone or cpu); one such node disables auto hints cluster-wide.",
    from_scrape(
        lambda scrape: (
            ((problem.node, str(problem.missing)), 1.0)
            for problem in scrape.state.capacity.problems
        ),
        reads=_capacity,
    ),
    labels=("missing",),
    same_on_every_shard=True,
)


def _profile(state: ExporterState) -> tuple[object, ...]:
    return (state.profile,)


CLUSTER_INFO = _declare(
    "cluster_info",
    GAUGE,
    Scope.CLUSTER,
    "1, labelled with the control plane's Kubernetes version the rules are evaluated under "
    "(empty when assumed) and where it came from: flag, api (the API server's /version) or "
    "assumed (the newest semantics).",
    from_scrape(
        lambda scrape: [
            (
                (
                    scrape.state.profile.control_plane.version or "",
                    str(scrape.state.profile.control_plane.source),
                ),
                1.0,
            )
        ],
        reads=_profile,
    ),
    labels=("kubernetes_version", "source"),
    same_on_every_shard=True,
)


def _feature_gates(scrape: Scrape) -> Iterator[Sample]:
    profile = scrape.state.profile
    for component, part in (
        ("controller", profile.control_plane),
        ("kube-proxy", profile.kube_proxy),
    ):
        for gate, enabled in part.gates.items():
            yield (component, str(gate)), float(enabled)


FEATURE_GATE_ENABLED = _declare(
    "feature_gate_enabled",
    GAUGE,
    Scope.CLUSTER,
    "1 when the feature gate is on for the component (controller: the control plane's "
    "EndpointSlice controller; kube-proxy), 0 when off, as the rules assume it.",
    from_scrape(_feature_gates, reads=_profile),
    labels=("component", "name"),
    same_on_every_shard=True,
)

# -- per Service -----------------------------------------------------------------------------


def _service_info(result: ServiceResult) -> Iterator[Sample]:
    service = result.service
    mechanism = str(result.verdicts[0].mechanism)
    yield (
        (mechanism, service.traffic_distribution or "", service.internal_traffic_policy or ""),
        1.0,
    )


SERVICE_INFO = _declare(
    "service_info",
    GAUGE,
    Scope.SERVICE,
    "1 per exported Service, with its hint mechanism and the raw trafficDistribution and "
    "internalTrafficPolicy fields (empty when unset).",
    each_service(
        _service_info,
        inputs=lambda result: (
            result.verdicts[0].mechanism,
            result.service.traffic_distribution,
            result.service.internal_traffic_policy,
        ),
    ),
    labels=("mechanism", "traffic_distribution", "internal_traffic_policy"),
)
SERVICE_CONFIG_ISSUE = _declare(
    "service_config_issue",
    GAUGE,
    Scope.SERVICE,
    "1 per configuration mistake found on the Service (issue id, see the runbook).",
    each_service(
        lambda result: (((str(issue),), 1.0) for issue in sorted(result.verdicts[0].config_issues)),
        inputs=lambda result: result.verdicts[0].config_issues,
    ),
    labels=("issue",),
)

SERVICE_NOTICE = _declare(
    "service_notice",
    GAUGE,
    Scope.SERVICE,
    "1 per notice about the Service (e.g. prefer-close-deprecated): worth knowing, never a "
    "problem, and no alert fires on it.",
    each_service(
        lambda result: (((str(notice),), 1.0) for notice in sorted(result.verdicts[0].notices)),
        inputs=lambda result: result.verdicts[0].notices,
    ),
    labels=("notice",),
)

# -- per (Service, address type) --------------------------------------------------------------


def _expected_enabled(entry: ServiceEntry) -> Iterator[Sample]:
    state = entry.verdict.expected_state
    if state is not ExpectedState.NOT_APPLICABLE:
        yield (), float(state is ExpectedState.ENABLED)


def _nearest_feasible(entry: ServiceEntry) -> Iterator[Sample]:
    nearest = entry.verdict.nearest_feasible
    if nearest is None:
        return
    if nearest.below is not None:
        yield ("below",), float(nearest.below)
    if nearest.above is not None:
        yield ("above",), float(nearest.above)


def _endpoint_margin(entry: ServiceEntry) -> Iterator[Sample]:
    margin = entry.forecast.margin
    if margin is not None:
        yield ("down",), float(margin.down)
        yield ("up",), float(margin.up)


def _zone_allocation(field: str) -> Callable[[ServiceEntry], Iterator[Sample]]:
    def samples(entry: ServiceEntry) -> Iterator[Sample]:
        for zone, verdict in entry.verdict.zones.items():
            value = getattr(verdict, field)
            if value is not None:
                yield (zone,), float(value)

    return samples


def _zone_endpoints(entry: ServiceEntry) -> Iterator[Sample]:
    zone_endpoints = entry.verdict.zone_endpoints
    for zone in sorted(entry.verdict.zones.keys() | zone_endpoints.keys()):
        yield (zone,), float(zone_endpoints.get(zone, 0))


def _zone_load_factor(entry: ServiceEntry) -> Iterator[Sample]:
    for zone, verdict in entry.verdict.zones.items():
        if verdict.load_factor is not None:
            yield (zone,), verdict.load_factor


def proxy_node_counts(verdict: ServiceVerdict, nodes: ReadyNodes) -> dict[ProxyMode, int]:
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


SERVICE_EXPECTED_ENABLED = _declare(
    "service_expected_enabled",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 when the EndpointSlice controller should keep hints for the Service, 0 when it "
    "removes them (absent without a hint mechanism).",
    each_entry(_expected_enabled, inputs=lambda entry: entry.verdict.expected_state),
)
SERVICE_DISABLED_REASON = _declare(
    "service_disabled_reason",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 for the reason the controller refuses hints (its event reason constant).",
    each_entry(
        lambda entry: (
            [((str(entry.verdict.reason),), 1.0)] if entry.verdict.reason is not None else []
        ),
        inputs=lambda entry: entry.verdict.reason,
    ),
    labels=("reason",),
)
SERVICE_READY_ENDPOINTS = _declare(
    "service_ready_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints in controller-managed EndpointSlices (N of the allocation).",
    each_entry(
        lambda entry: _one(entry.verdict.ready_endpoints),
        inputs=lambda entry: entry.verdict.ready_endpoints,
    ),
)
SERVICE_HINTED_ENDPOINTS = _declare(
    "service_hinted_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints that carry at least one zone hint.",
    each_entry(
        lambda entry: _one(entry.verdict.hinted_endpoints),
        inputs=lambda entry: entry.verdict.hinted_endpoints,
    ),
)
SERVICE_HINT_COMPLETENESS = _declare(
    "service_hint_completeness",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Hinted / ready endpoints; strictly between 0 and 1 means kube-proxy ignores "
    "every hint of the Service.",
    each_entry(
        lambda entry: (
            _one(entry.verdict.hint_completeness)
            if entry.verdict.hint_completeness is not None
            else []
        ),
        inputs=lambda entry: entry.verdict.hint_completeness,
    ),
)
SERVICE_DRIFT = _declare(
    "service_drift",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "1 while observed hints disagree with the expected result "
    "(kind: hints-missing, unexpected-hints, zone-out-of-range).",
    each_entry(
        lambda entry: (((str(kind),), 1.0) for kind in sorted(entry.verdict.drift)),
        inputs=lambda entry: entry.verdict.drift,
    ),
    labels=("kind",),
)
SERVICE_NEAREST_FEASIBLE_ENDPOINTS = _declare(
    "service_nearest_feasible_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "The nearest ready endpoint count below or above today's that would let the "
    "controller enable auto hints with today's zone ratios.",
    each_entry(_nearest_feasible, inputs=lambda entry: entry.verdict.nearest_feasible),
    labels=("direction",),
)
SERVICE_ENDPOINT_MARGIN = _declare(
    "service_endpoint_margin",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints that may go (down) or come (up), one at a time, before the controller "
    "removes the auto hints; 0 means one pod more or less disables them, up is +Inf when no "
    "higher count is refused (absent unless auto and enabled).",
    each_entry(_endpoint_margin, inputs=lambda entry: entry.forecast.margin),
    labels=("direction",),
)
SERVICE_STATE_CHANGES_TOTAL = _declare(
    "service_state_changes_total",
    COUNTER,
    Scope.SERVICE_ENTRY,
    "Flips of the expected state between enabled and disabled seen since the exporter started.",
    each_entry(lambda entry: _one(entry.state_changes), inputs=lambda entry: entry.state_changes),
)
ZONE_ALLOCATION_MINIMUM = _declare(
    "zone_allocation_minimum",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Fewest endpoints the controller must hint for the zone to keep it within "
    f"{_OVERLOAD_SHARE} of its share (auto, enabled).",
    each_entry(_zone_allocation("minimum")),
    labels=("zone",),
)
ZONE_ALLOCATION_DESIRED = _declare(
    "zone_allocation_desired",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Endpoints the zone deserves by its CPU share (auto, enabled).",
    each_entry(_zone_allocation("desired")),
    labels=("zone",),
)
ZONE_ALLOCATION_MAXIMUM = _declare(
    "zone_allocation_maximum",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Most endpoints the controller may hint for the zone (auto, enabled).",
    each_entry(_zone_allocation("maximum")),
    labels=("zone",),
)
ZONE_HINTED_ENDPOINTS = _declare(
    "zone_hinted_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints hinted for the zone.",
    each_entry(
        lambda entry: (
            ((zone,), float(verdict.hinted)) for zone, verdict in entry.verdict.zones.items()
        ),
        # Zones in their order with their hinted count; not the ratios a CPU change moves.
        inputs=lambda entry: [
            (zone, verdict.hinted) for zone, verdict in entry.verdict.zones.items()
        ],
    ),
    labels=("zone",),
)
ZONE_ENDPOINTS = _declare(
    "zone_endpoints",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Ready endpoints running in the zone (counted like N).",
    each_entry(
        _zone_endpoints,
        inputs=lambda entry: (tuple(entry.verdict.zones), entry.verdict.zone_endpoints),
    ),
    labels=("zone",),
)
ZONE_LOAD_FACTOR = _declare(
    "zone_load_factor",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Traffic one endpoint hinted for the zone receives relative to its fair share, "
    f"when traffic follows CPU (1 is fair; auto keeps it at or under {_OVERLOAD_LIMIT}).",
    each_entry(_zone_load_factor),
    labels=("zone",),
)
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
    each_entry(_routing_nodes, inputs=_routing_inputs),
    labels=("dataplane", "zone", "routing"),
)
SERVICE_LOCAL_ROUTING_RATIO = _declare(
    "service_local_routing_ratio",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Share of Ready nodes whose traffic to the Service stays local (same-node, same-zone "
    "or local) under the data plane; 0 means it leaves its zone everywhere (absent when "
    "no routing applies).",
    each_entry(_local_routing_ratio, inputs=_routing_inputs),
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
    each_entry(_cross_zone_ratio, inputs=_cross_zone_inputs),
    labels=("dataplane", "scenario"),
)
SERVICE_ZONE_CROSS_ZONE_RATIO = _declare(
    "service_zone_cross_zone_ratio",
    GAUGE,
    Scope.SERVICE_ENTRY,
    "Expected cross-zone share (effective) of the traffic of the zone's clients, per "
    "client zone that has a client given an endpoint.",
    each_entry(_zone_cross_zone_ratio, inputs=_cross_zone_inputs),
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

# -- over the exported Services --------------------------------------------------------------


class NodeProxyTally:
    """Per node and mode, over exported entries; counted per zone, then adjusted per node.

    Every node of a zone shares the zone's mode unless a node hint names it, so adding a
    Service costs its zones and PreferSameNode nodes, and the samples zones x modes plus
    one line per node, not nodes x entries.
    """

    def __init__(self, state: ExporterState) -> None:
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


class LastEventTally:
    """Events of exported Services only: a deleted Service's timestamps vanish with it.

    Read from the state's events because an event does not replace the Service's result;
    the tally only tracks which Services are exported.
    """

    def __init__(self, state: ExporterState) -> None:
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


class ZoneLossTally:
    """Per zone of the cluster, over exported entries: their forecasts were made when each
    Service was evaluated, so this only counts the zones each names
    (`EntryForecast.zones_losing_hints`)."""

    def __init__(self, state: ExporterState) -> None:
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
    tallied(NodeProxyTally, reads=lambda state: (state.nodes,)),
    labels=("zone", "mode"),
)
SERVICE_LAST_EVENT_TIMESTAMP_SECONDS = _declare(
    "service_last_event_timestamp_seconds",
    GAUGE,
    Scope.SERVICE,
    "Unix time of the latest TopologyAwareHintsDisabled / TopologyAwareHintsEnabled event "
    "the controller recorded on the Service.",
    tallied(LastEventTally, reads=lambda state: (state.last_event,)),
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
    tallied(ZoneLossTally, reads=lambda state: (state.zone_loss_views,)),
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

# -- the exporter itself (instruments.py) ----------------------------------------------------

BUILD_INFO = _declare(
    "build_info",
    GAUGE,
    Scope.EXPORTER,
    "1, labelled with the exporter's version.",
    labels=("version",),
)
# Set by instruments.py at start from --cross-zone-price-per-gib; every shard exports it.
CROSS_ZONE_PRICE_PER_GIB = _declare(
    "cross_zone_price_per_gib",
    GAUGE,
    Scope.EXPORTER,
    "Price of one GiB of cross-zone traffic (serve --cross-zone-price-per-gib), in the "
    "operator's currency; absent when not given. Every shard exports it: aggregate with max.",
)
STATUS_PAGE_INFO = _declare(
    "status_page_info",
    GAUGE,
    Scope.EXPORTER,
    "1, labelled with the URL users reach the status page at (serve --external-url); alerts "
    "link each Service's page from it. Absent without --external-url.",
    labels=("url",),
)
WATCH_UP = _declare(
    "watch_up",
    GAUGE,
    Scope.EXPORTER,
    "1 while the list/watch of the resource is healthy, 0 while it is failing.",
    labels=("resource",),
)
WATCH_RESTARTS_TOTAL = _declare(
    "watch_restarts_total",
    COUNTER,
    Scope.EXPORTER,
    "Watch restarts by cause: closed (normal end), expired (410 Gone, full relist), "
    "error, forbidden, throttled (429 or 503 with Retry-After), stalled (no event and no "
    "bookmark for 150 s).",
    labels=("resource", "cause"),
)
WATCH_EVENTS_TOTAL = _declare(
    "watch_events_total",
    COUNTER,
    Scope.EXPORTER,
    "Watch events received, by event type.",
    labels=("resource", "type"),
)
INVALID_OBJECTS_TOTAL = _declare(
    "invalid_objects_total",
    COUNTER,
    Scope.EXPORTER,
    "Objects skipped because they lacked a field the rules need or had the wrong type.",
    labels=("resource",),
)
OBJECTS = _declare(
    "objects",
    GAUGE,
    Scope.EXPORTER,
    "Objects held in the exporter's cluster snapshot.",
    labels=("resource",),
)
LAST_EVALUATION_TIMESTAMP_SECONDS = _declare(
    "last_evaluation_timestamp_seconds",
    GAUGE,
    Scope.EXPORTER,
    "Unix time of the latest evaluation.",
)
EVALUATION_DURATION_SECONDS = _declare(
    "evaluation_duration_seconds",
    HISTOGRAM,
    Scope.EXPORTER,
    "Time to apply one batch of changes and re-evaluate the affected Services.",
)
SHARD_ORDINAL = _declare(
    "shard_ordinal", GAUGE, Scope.EXPORTER, "This exporter's shard ordinal (0 when not sharded)."
)
TOTAL_SHARDS = _declare(
    "total_shards", GAUGE, Scope.EXPORTER, "The number of shards Services are split into."
)
READY = _declare(
    "ready",
    GAUGE,
    Scope.EXPORTER,
    "1 once every required informer has listed its resource; hint metrics wait for it.",
)

# Every family, in exposition and documentation order.
FAMILIES: tuple[Family, ...] = tuple(_declared)
# Those rendered from the evaluation by collector.py and exposition.py.
HINT_FAMILIES: tuple[Family, ...] = tuple(f for f in FAMILIES if f.samples is not None)
# Exported by shard 0 only: the same on every shard.
SAME_ON_EVERY_SHARD: frozenset[str] = frozenset(
    family.name for family in FAMILIES if family.same_on_every_shard
)


def constant_name(family: Family) -> str:
    """The module constant that holds a family: its name without the prefix, upper-cased."""
    return family.name.removeprefix(PREFIX).upper()
