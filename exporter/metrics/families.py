"""Every metric family the exporter exposes (SPEC section 9), declared once.

Each family is a name, a type, a help text, its labels and a pure function from the
object it describes to samples. Identity labels (`namespace, service, address_type` for
per-Service families) are added by the collector, as kube-state-metrics does, so a
family function only yields its own labels. `docs/metrics.md` is generated from this list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from exporter.engine import ExpectedState, ProxyMode, ServiceVerdict
from exporter.evaluator import ExporterState, ServiceResult

PREFIX = "topology_hints_"
SERVICE_ENTRY_LABELS = ("namespace", "service", "address_type")
SERVICE_LABELS = ("namespace", "service")

Sample = tuple[tuple[str, ...], float]


class MetricType(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    type: MetricType
    help: str
    # Labels in exposition order, identity labels included.
    labels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServiceEntry:
    """One exported (Service, address type) verdict and its flip counter."""

    verdict: ServiceVerdict
    state_changes: int


ClusterFunction = Callable[[ExporterState], Iterable[Sample]]
EntryFunction = Callable[[ServiceEntry], Iterable[Sample]]


def entries_of(result: ServiceResult) -> list[ServiceEntry]:
    return [
        ServiceEntry(verdict, flips)
        for verdict, flips in zip(result.verdicts, result.state_changes, strict=True)
    ]


def entry_family_samples(
    function: EntryFunction, entries: Iterable[ServiceEntry]
) -> Iterator[Sample]:
    """A per-entry family's samples, each prefixed with the entry's identity labels."""
    for entry in entries:
        for labels, value in function(entry):
            yield (*entry.verdict.key, *labels), value


def _gauge(name: str, help_text: str, *labels: str) -> Family:
    return Family(PREFIX + name, MetricType.GAUGE, help_text, labels)


def _counter(name: str, help_text: str, *labels: str) -> Family:
    return Family(PREFIX + name, MetricType.COUNTER, help_text, labels)


# -- cluster -------------------------------------------------------------------------------


def _sufficient(state: ExporterState) -> Iterator[Sample]:
    yield (), float(state.capacity.sufficient)


def _zone_ratio(state: ExporterState) -> Iterator[Sample]:
    for zone, ratio in state.capacity.zone_ratios.items():
        yield (zone,), ratio


def _zone_cores(state: ExporterState) -> Iterator[Sample]:
    for zone, millicores in state.capacity.zone_millicores.items():
        yield (zone,), millicores / 1000


def _missing_info(state: ExporterState) -> Iterator[Sample]:
    for problem in state.capacity.problems:
        yield (problem.node, str(problem.missing)), 1.0


CLUSTER_FAMILIES: tuple[tuple[Family, ClusterFunction], ...] = (
    (
        _gauge(
            "sufficient_node_info",
            "1 when every Ready worker node has a zone label and allocatable CPU and at least "
            "two zones have CPU; 0 disables auto hints for every Service.",
        ),
        _sufficient,
    ),
    (
        _gauge(
            "zone_cpu_ratio",
            "The EndpointSlice controller's share of allocatable CPU for the zone "
            "(absent while node info is insufficient).",
            "zone",
        ),
        _zone_ratio,
    ),
    (
        _gauge(
            "zone_allocatable_cpu_cores",
            "Allocatable CPU counted for the zone, in cores, rounded up to millicores "
            "(absent while node info is insufficient).",
            "zone",
        ),
        _zone_cores,
    ),
    (
        _gauge(
            "node_missing_topology_info",
            "1 for each Ready worker node that lacks a zone label or allocatable CPU "
            "(missing is zone or cpu); one such node disables auto hints cluster-wide.",
            "node",
            "missing",
        ),
        _missing_info,
    ),
)

# -- per (Service, address type) --------------------------------------------------------------


def _expected_enabled(entry: ServiceEntry) -> Iterator[Sample]:
    state = entry.verdict.expected_state
    if state is not ExpectedState.NOT_APPLICABLE:
        yield (), float(state is ExpectedState.ENABLED)


def _disabled_reason(entry: ServiceEntry) -> Iterator[Sample]:
    if entry.verdict.reason is not None:
        yield (str(entry.verdict.reason),), 1.0


def _ready(entry: ServiceEntry) -> Iterator[Sample]:
    yield (), float(entry.verdict.ready_endpoints)


def _hinted(entry: ServiceEntry) -> Iterator[Sample]:
    yield (), float(entry.verdict.hinted_endpoints)


def _completeness(entry: ServiceEntry) -> Iterator[Sample]:
    if entry.verdict.hint_completeness is not None:
        yield (), entry.verdict.hint_completeness


def _drift(entry: ServiceEntry) -> Iterator[Sample]:
    for kind in sorted(entry.verdict.drift):
        yield (str(kind),), 1.0


def _nearest(entry: ServiceEntry) -> Iterator[Sample]:
    nearest = entry.verdict.nearest_feasible
    if nearest is None:
        return
    if nearest.below is not None:
        yield ("below",), float(nearest.below)
    if nearest.above is not None:
        yield ("above",), float(nearest.above)


def _state_changes(entry: ServiceEntry) -> Iterator[Sample]:
    yield (), float(entry.state_changes)


def _zone_allocation(field: str) -> EntryFunction:
    def samples(entry: ServiceEntry) -> Iterator[Sample]:
        for zone, verdict in entry.verdict.zones.items():
            value = getattr(verdict, field)
            if value is not None:
                yield (zone,), float(value)

    return samples


def _zone_hinted(entry: ServiceEntry) -> Iterator[Sample]:
    for zone, verdict in entry.verdict.zones.items():
        yield (zone,), float(verdict.hinted)


def _zone_located(entry: ServiceEntry) -> Iterator[Sample]:
    located = entry.verdict.located
    for zone in sorted(entry.verdict.zones.keys() | located.keys()):
        yield (zone,), float(located.get(zone, 0))


def _zone_load_factor(entry: ServiceEntry) -> Iterator[Sample]:
    for zone, verdict in entry.verdict.zones.items():
        if verdict.load_factor is not None:
            yield (zone,), verdict.load_factor


def _proxy_mode(entry: ServiceEntry) -> Iterator[Sample]:
    for zone, mode in entry.verdict.proxy.by_zone.items():
        yield (zone, str(mode)), 1.0


def proxy_node_counts(verdict: ServiceVerdict, state: ExporterState) -> dict[ProxyMode, int]:
    """How many Ready nodes run kube-proxy in each mode for this verdict."""
    proxy = verdict.proxy
    counts: dict[ProxyMode, int] = {}
    same_node_by_zone: dict[str, int] = {}
    for node in proxy.same_node:
        zone = state.nodes.zone_of.get(node, "")
        same_node_by_zone[zone] = same_node_by_zone.get(zone, 0) + 1
    if proxy.same_node:
        counts[ProxyMode.PREFER_SAME_NODE] = len(proxy.same_node)
    for zone, mode in proxy.by_zone.items():
        others = len(state.nodes.by_zone.get(zone, ())) - same_node_by_zone.get(zone, 0)
        if others > 0:
            counts[mode] = counts.get(mode, 0) + others
    return counts


SERVICE_ENTRY_FAMILIES: tuple[tuple[Family, EntryFunction], ...] = (
    (
        _gauge(
            "service_expected_enabled",
            "1 when the EndpointSlice controller should keep hints for the Service, 0 when it "
            "removes them (absent without a hint mechanism).",
            *SERVICE_ENTRY_LABELS,
        ),
        _expected_enabled,
    ),
    (
        _gauge(
            "service_disabled_reason",
            "1 for the reason the controller refuses hints (its event reason constant).",
            *SERVICE_ENTRY_LABELS,
            "reason",
        ),
        _disabled_reason,
    ),
    (
        _gauge(
            "service_ready_endpoints",
            "Ready endpoints in controller-managed EndpointSlices (N of the allocation).",
            *SERVICE_ENTRY_LABELS,
        ),
        _ready,
    ),
    (
        _gauge(
            "service_hinted_endpoints",
            "Ready endpoints that carry at least one zone hint.",
            *SERVICE_ENTRY_LABELS,
        ),
        _hinted,
    ),
    (
        _gauge(
            "service_hint_completeness",
            "Hinted / ready endpoints; strictly between 0 and 1 means kube-proxy ignores "
            "every hint of the Service.",
            *SERVICE_ENTRY_LABELS,
        ),
        _completeness,
    ),
    (
        _gauge(
            "service_drift",
            "1 while observed hints disagree with the expected result "
            "(kind: hints-missing, unexpected-hints, zone-out-of-range).",
            *SERVICE_ENTRY_LABELS,
            "kind",
        ),
        _drift,
    ),
    (
        _gauge(
            "service_nearest_feasible_endpoints",
            "The nearest ready endpoint count below or above today's that would let the "
            "controller enable auto hints with today's zone ratios.",
            *SERVICE_ENTRY_LABELS,
            "direction",
        ),
        _nearest,
    ),
    (
        _counter(
            "service_state_changes_total",
            "Flips of the expected state between enabled and disabled seen since the "
            "exporter started.",
            *SERVICE_ENTRY_LABELS,
        ),
        _state_changes,
    ),
    (
        _gauge(
            "zone_allocation_minimum",
            "Fewest endpoints the controller must hint for the zone to keep it within 20% "
            "of its share (auto, enabled).",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_allocation("minimum"),
    ),
    (
        _gauge(
            "zone_allocation_desired",
            "Endpoints the zone deserves by its CPU share (auto, enabled).",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_allocation("desired"),
    ),
    (
        _gauge(
            "zone_allocation_maximum",
            "Most endpoints the controller may hint for the zone (auto, enabled).",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_allocation("maximum"),
    ),
    (
        _gauge(
            "zone_hinted_endpoints",
            "Ready endpoints hinted for the zone.",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_hinted,
    ),
    (
        _gauge(
            "zone_endpoints",
            "Ready endpoints running in the zone (counted like N).",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_located,
    ),
    (
        _gauge(
            "zone_load_factor",
            "Traffic one endpoint hinted for the zone receives relative to its fair share, "
            "when traffic follows CPU (1 is fair; auto keeps it at or under 1.2).",
            *SERVICE_ENTRY_LABELS,
            "zone",
        ),
        _zone_load_factor,
    ),
    (
        _gauge(
            "service_proxy_mode",
            "1 for the topology mode kube-proxy uses for the Service on the zone's nodes "
            "that match no node hint.",
            *SERVICE_ENTRY_LABELS,
            "zone",
            "mode",
        ),
        _proxy_mode,
    ),
)

SERVICE_PROXY_NODES = _gauge(
    "service_proxy_nodes",
    "Ready nodes whose kube-proxy uses the mode for the Service.",
    *SERVICE_ENTRY_LABELS,
    "mode",
)
SERVICE_INFO = _gauge(
    "service_info",
    "1 per exported Service, with its hint mechanism and the raw trafficDistribution and "
    "internalTrafficPolicy fields (empty when unset).",
    "namespace",
    "service",
    "mechanism",
    "traffic_distribution",
    "internal_traffic_policy",
)
SERVICE_CONFIG_ISSUE = _gauge(
    "service_config_issue",
    "1 per configuration mistake found on the Service (issue id, see the runbook).",
    "namespace",
    "service",
    "issue",
)
NODE_PROXY_SERVICES = _gauge(
    "node_proxy_services",
    "Exported Services (per address type) for which kube-proxy on the node uses the mode.",
    "node",
    "zone",
    "mode",
)
LAST_EVENT_TIMESTAMP = _gauge(
    "service_last_event_timestamp_seconds",
    "Unix time of the latest TopologyAwareHintsDisabled / TopologyAwareHintsEnabled event "
    "the controller recorded on the Service.",
    "namespace",
    "service",
    "reason",
)
CONTROLLER_EVENTS = _counter(
    "controller_events_total",
    "TopologyAwareHints events recorded by the EndpointSlice controller, seen since start.",
    "reason",
)

# -- the exporter itself ---------------------------------------------------------------------

BUILD_INFO = _gauge("build_info", "1, labelled with the exporter's version.", "version")
WATCH_UP = _gauge(
    "watch_up",
    "1 while the list/watch of the resource is healthy, 0 while it is failing.",
    "resource",
)
WATCH_RESTARTS = _counter(
    "watch_restarts_total",
    "Watch restarts by cause: closed (normal end), expired (410 Gone, full relist), "
    "error, forbidden, throttled (429 or 503 with Retry-After).",
    "resource",
    "cause",
)
WATCH_EVENTS = _counter(
    "watch_events_total", "Watch events received, by event type.", "resource", "type"
)
INVALID_OBJECTS = _counter(
    "invalid_objects_total",
    "Objects skipped because they lacked a field the rules need or had the wrong type.",
    "resource",
)
OBJECTS = _gauge("objects", "Objects held in the exporter's cluster snapshot.", "resource")
LAST_EVALUATION = _gauge("last_evaluation_timestamp_seconds", "Unix time of the latest evaluation.")
EVALUATION_DURATION = Family(
    PREFIX + "evaluation_duration_seconds",
    MetricType.HISTOGRAM,
    "Time to apply one batch of changes and re-evaluate the affected Services.",
)
SHARD_ORDINAL = _gauge("shard_ordinal", "This exporter's shard ordinal (0 when not sharded).")
TOTAL_SHARDS = _gauge("total_shards", "The number of shards Services are split into.")
READY = _gauge(
    "ready", "1 once every required informer has listed its resource; hint metrics wait for it."
)

SELF_FAMILIES: tuple[Family, ...] = (
    BUILD_INFO,
    WATCH_UP,
    WATCH_RESTARTS,
    WATCH_EVENTS,
    INVALID_OBJECTS,
    OBJECTS,
    LAST_EVALUATION,
    EVALUATION_DURATION,
    SHARD_ORDINAL,
    TOTAL_SHARDS,
    READY,
)


# Families rendered from the evaluation, in exposition order.
HINT_FAMILIES: tuple[Family, ...] = (
    *(family for family, _ in CLUSTER_FAMILIES),
    SERVICE_INFO,
    SERVICE_CONFIG_ISSUE,
    *(family for family, _ in SERVICE_ENTRY_FAMILIES),
    SERVICE_PROXY_NODES,
    NODE_PROXY_SERVICES,
    LAST_EVENT_TIMESTAMP,
    CONTROLLER_EVENTS,
)


def all_families() -> tuple[Family, ...]:
    """Every family, in documentation order."""
    return (*HINT_FAMILIES, *SELF_FAMILIES)
