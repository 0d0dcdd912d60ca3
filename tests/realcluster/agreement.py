"""Does the exporter's result say what the real EndpointSlice controller did?

Read from a real `kubectl get nodes,services,endpointslices,events -A -o json` dump taken
once the controller has settled, and from `evaluate`'s JSON for that dump. For every
(Service, address type) entry:

- no drift;
- `ready_endpoints` and each zone's `hinted` count equal what the controller's slices hold;
- `expected_state` equals the hints the controller wrote: `enabled` <=> every ready endpoint
  of the managed slices has hints (for `trafficDistribution`, a hint for its own zone, and
  under PreferSameNode for its own node), else no endpoint has any hint. For `auto`, a zone
  whose hinted count the controller left outside [minimum, maximum] is counted, not a
  disagreement: its redistribution does that (behaviour section 3), and then the exporter
  must report no drift;
- `reason` equals the reason of the controller's latest `TopologyAwareHintsDisabled` event
  for that Service and address type; a Service the controller never refused has no such
  event, and one whose hints it enabled has a `TopologyAwareHintsEnabled` event;
- the endpoints themselves are those the Pods make (the harness checks itself).

Entries with no managed slice (hand-written slices only, or an address type the controller
does not serve) are checked for drift and the absence of events only: the controller says
nothing about them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.plans import (
    SERVICE_NAME,
    ClusterPlan,
    EndpointKey,
    Json,
    ServicePlan,
    endpoint_key,
    managed,
)

DISABLED = "TopologyAwareHintsDisabled"
ENABLED = "TopologyAwareHintsEnabled"
# The controller's event messages and the reason constant each stands for: upstream's
# k8s.io/endpointslice topologycache/event.go (SPEC section 7), written out here rather than
# taken from the exporter so that the exporter's own table is under test too.
EVENT_REASONS: Mapping[str, str] = {
    "Insufficient Node information: allocatable CPU or zone not specified on one or more "
    "nodes": "InsufficientNodeInfo",
    "Nodes only ready in one zone": "NodesReadyInOneZoneOnly",
    "Insufficient number of endpoints": "InsufficientNumberOfEndpoints",
    "Unable to allocate minimum required endpoints to each zone without exceeding overload "
    "threshold": "MinAllocationExceedsOverloadThreshold",
    "One or more endpoints do not have a zone specified": "NoZoneSpecified",
    "No hints allocated for zones": "NoAllocatedHintsForZones",
    "Topology Aware Hints has been disabled": "(annotation removed)",
}
TOLERANCE = 1e-3


# client-go's event aggregator rewrites the message of an object's 11th similar event.
AGGREGATED = "(combined from similar events): "


def event_reason(message: str) -> str:
    """The reason constant a controller event message stands for ("?" if none)."""
    message = message.removeprefix(AGGREGATED)
    for prefix, reason in EVENT_REASONS.items():
        if message.startswith(prefix):
            return reason
    return f"? {message!r}"


@dataclass
class Agreement:
    """What one comparison found: counts, and every disagreement in words."""

    plan: str
    entries: int = 0
    services: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    vector_entries: int = 0
    disagreements: list[str] = field(default_factory=list)
    # auto entries the controller settled outside [minimum, maximum], or with hints for a
    # zone without allocation (behaviour section 3): no disagreement, but worth counting.
    settled_outside: list[str] = field(default_factory=list)

    def add(self, where: str, text: str) -> None:
        self.disagreements.append(f"{where}: {text}")


def _hints(endpoint: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    hints = endpoint.get("hints") or {}
    zones = [item["name"] for item in hints.get("forZones") or []]
    nodes = [item["name"] for item in hints.get("forNodes") or []]
    return zones, nodes


@dataclass(frozen=True)
class Observed:
    """What the controller wrote for one Service and address type."""

    slices: tuple[Json, ...]
    events: tuple[Json, ...]

    @property
    def endpoints(self) -> list[Json]:
        return [endpoint for item in self.slices for endpoint in item.get("endpoints") or []]

    @property
    def ready(self) -> list[Json]:
        return [e for e in self.endpoints if e.get("conditions", {}).get("ready") is True]

    def hinted_by_zone(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for endpoint in self.ready:
            counts.update(set(_hints(endpoint)[0]))
        return counts

    def latest(self, reason: str | None = None) -> Json | None:
        chosen = [event for event in self.events if reason is None or event["reason"] == reason]
        return max(
            chosen, key=lambda event: int(event["metadata"]["resourceVersion"]), default=None
        )


def _by_kind(items: Iterable[Json], kind: str) -> list[Json]:
    return [item for item in items if item.get("kind") == kind]


class Comparison:
    """One plan's dump and `evaluate` result, compared entry by entry."""

    def __init__(self, plan: ClusterPlan, namespaces: Mapping[str, str], dump: Json) -> None:
        self.plan = plan
        # logical namespace -> the namespace it was built in
        self.namespaces = dict(namespaces)
        items = dump["items"]
        self.services = {
            (item["metadata"]["namespace"], item["metadata"]["name"]): item
            for item in _by_kind(items, "Service")
        }
        self.slices: dict[tuple[str, str, str], list[Json]] = {}
        for item in _by_kind(items, "EndpointSlice"):
            key = (
                item["metadata"]["namespace"],
                item["metadata"].get("labels", {}).get(SERVICE_NAME, ""),
                item["addressType"],
            )
            self.slices.setdefault(key, []).append(item)
        self.events: dict[str, list[Json]] = {}
        for item in _by_kind(items, "Event"):
            involved = item.get("involvedObject", {})
            if involved.get("kind") == "Service" and item.get("reason") in {DISABLED, ENABLED}:
                self.events.setdefault(involved.get("uid", ""), []).append(item)

    def observed(self, namespace: str, name: str, address_type: str) -> Observed:
        uid = self.services[(namespace, name)]["metadata"]["uid"]
        suffix = f"addressType: {address_type}"
        return Observed(
            tuple(
                item
                for item in self.slices.get((namespace, name, address_type), [])
                if managed(item)
            ),
            tuple(e for e in self.events.get(uid, []) if e.get("message", "").endswith(suffix)),
        )

    def compare(self, result: Json) -> Agreement:
        agreement = Agreement(self.plan.name)
        entries: dict[tuple[str, str], list[Json]] = {}
        for entry in result["services"]:
            entries.setdefault((entry["namespace"], entry["name"]), []).append(entry)
        for service in self.plan.services:
            namespace = self.namespaces[service.namespace]
            where = f"{service.namespace}/{service.name}"
            found = entries.get((namespace, service.name), [])
            agreement.services += 1
            if service.selector and not any(e["address_type"] == "IPv4" for e in found):
                agreement.add(where, "the exporter has no IPv4 entry for a selector Service")
            for entry in found:
                agreement.entries += 1
                self._entry(agreement, service, entry, f"{where} {entry['address_type']}")
            if service.expected is not None:
                ipv4 = [e for e in found if e["address_type"] == "IPv4"]
                if ipv4:
                    agreement.vector_entries += 1
                    _vector_verdict(agreement, where, service.expected, ipv4[0])
        if self.plan.expected_cluster is not None:
            _vector_cluster(agreement, self.plan.expected_cluster, result["cluster"])
        return agreement

    def _entry(self, agreement: Agreement, service: ServicePlan, entry: Json, where: str) -> None:
        namespace = self.namespaces[service.namespace]
        address_type = entry["address_type"]
        observed = self.observed(namespace, service.name, address_type)
        mechanism, state, reason = entry["mechanism"], entry["expected_state"], entry["reason"]
        agreement.verdicts[f"{mechanism} {state} {reason or ''}".strip()] += 1
        if entry["drift"]:
            agreement.add(where, f"drift {entry['drift']} after the controller settled")
        if address_type == "IPv4" and service.selector:
            _endpoints(agreement, where, self.plan.expected_endpoints(service), observed)
        if not observed.slices:
            if observed.events:
                agreement.add(
                    where, f"events for an address type it has no slice of: {observed.events}"
                )
            return
        _counts(agreement, where, entry, observed)
        if state == "enabled":
            _enabled_hints(
                agreement, where, entry, observed, self._distribution(namespace, service)
            )
        elif any(any(_hints(e)) for e in observed.endpoints):
            agreement.add(where, f"{state} but the controller wrote hints: {_hinted(observed)}")
        _events(agreement, where, entry, observed)

    def _distribution(self, namespace: str, service: ServicePlan) -> str | None:
        spec = self.services[(namespace, service.name)].get("spec", {})
        value = spec.get("trafficDistribution")
        return str(value) if value is not None else None


def _hinted(observed: Observed) -> list[tuple[str, list[str], list[str]]]:
    return [
        ((e.get("addresses") or ["?"])[0], *_hints(e)) for e in observed.endpoints if any(_hints(e))
    ]


def _endpoints(
    agreement: Agreement, where: str, expected: set[EndpointKey], observed: Observed
) -> None:
    written = [endpoint_key(endpoint) for endpoint in observed.endpoints]
    if sorted(written, key=str) != sorted(expected, key=str):
        missing = sorted(expected - set(written), key=str)
        extra = sorted(set(written) - expected, key=str)
        agreement.add(where, f"endpoints differ from the Pods: missing {missing}, extra {extra}")


def _counts(agreement: Agreement, where: str, entry: Json, observed: Observed) -> None:
    if entry["ready_endpoints"] != len(observed.ready):
        agreement.add(
            where, f"ready_endpoints {entry['ready_endpoints']}, controller {len(observed.ready)}"
        )
    hinted = observed.hinted_by_zone()
    reported = {zone: row["hinted"] for zone, row in entry["zones"].items() if row["hinted"]}
    if reported != dict(hinted):
        agreement.add(where, f"hinted per zone {reported}, controller {dict(hinted)}")


def _enabled_hints(
    agreement: Agreement,
    where: str,
    entry: Json,
    observed: Observed,
    distribution: str | None,
) -> None:
    for endpoint in observed.endpoints:
        zones, nodes = _hints(endpoint)
        address = (endpoint.get("addresses") or ["?"])[0]
        if endpoint.get("conditions", {}).get("ready") is not True:
            if zones or nodes:
                agreement.add(where, f"not-ready endpoint {address} has hints {zones} {nodes}")
        elif entry["mechanism"] == "auto":
            if not zones or nodes:
                agreement.add(where, f"enabled, but {address} has hints {zones} {nodes}")
        else:
            own_zone = [endpoint["zone"]] if endpoint.get("zone") is not None else []
            own_node = (
                [endpoint["nodeName"]]
                if distribution == "PreferSameNode" and endpoint.get("nodeName") is not None
                else []
            )
            if zones != own_zone or nodes != own_node:
                agreement.add(
                    where,
                    f"{distribution}: {address} has hints {zones} {nodes}, "
                    f"its own are {own_zone} {own_node}",
                )
    if entry["mechanism"] == "auto":
        _settled_outside_the_range(agreement, where, entry, observed)


def _settled_outside_the_range(
    agreement: Agreement, where: str, entry: Json, observed: Observed
) -> None:
    """Counted, not a disagreement: the controller's redistribution can settle a zone
    outside [minimum, maximum] (behaviour section 3); the exporter must then report no
    drift, which _entry checks."""
    hinted = observed.hinted_by_zone()
    outside = [
        f"{zone} {hinted.get(zone, 0)} of [{row['minimum']}, {row['maximum']}]"
        for zone, row in entry["zones"].items()
        if row["minimum"] is not None
        and not row["minimum"] <= hinted.get(zone, 0) <= row["maximum"]
    ]
    stranded = [zone for zone in hinted if entry["zones"].get(zone, {}).get("minimum") is None]
    if outside or stranded:
        agreement.settled_outside.append(f"{where}: {outside} stranded {stranded}")


def _events(agreement: Agreement, where: str, entry: Json, observed: Observed) -> None:
    latest_disabled = observed.latest(DISABLED)
    latest = observed.latest()
    if entry["mechanism"] != "auto":
        if observed.events:
            agreement.add(
                where, f"{entry['mechanism']}: controller events {_messages(observed.events)}"
            )
        return
    if entry["expected_state"] == "enabled":
        if latest_disabled is not None:
            agreement.add(
                where, f"enabled, but the controller refused: {latest_disabled['message']!r}"
            )
        if observed.latest(ENABLED) is None:
            agreement.add(
                where, "enabled, but the controller recorded no TopologyAwareHintsEnabled"
            )
        return
    if latest is None or latest["reason"] != DISABLED:
        agreement.add(
            where,
            f"disabled for {entry['reason']}, but the controller's latest event is "
            f"{_messages([latest] if latest else [])}",
        )
        return
    written = event_reason(latest["message"])
    if written != entry["reason"]:
        agreement.add(where, f"reason {entry['reason']}, the controller's event says {written}")


def _messages(events: Sequence[Json]) -> list[str]:
    return [f"{event['reason']}: {event.get('message', '')}" for event in events]


def _close(left: Any, right: Any) -> bool:
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return math.isclose(float(left), float(right), abs_tol=TOLERANCE)
    return bool(left == right)


VERDICT_FIELDS = ("mechanism", "ready_endpoints", "expected_state", "reason")
ZONE_FIELDS = ("minimum", "maximum", "desired")


def _vector_verdict(
    agreement: Agreement, where: str, expected: Mapping[str, Any], got: Json
) -> None:
    """The vector's expected verdict for the same inputs, as the real cluster gives it."""
    for name in VERDICT_FIELDS:
        if not _close(expected[name], got[name]):
            agreement.add(
                where, f"vector says {name} {expected[name]!r}, real cluster {got[name]!r}"
            )
    for zone, row in expected.get("zones", {}).items():
        for name in ZONE_FIELDS:
            value = got["zones"].get(zone, {}).get(name)
            if not _close(row[name], value):
                agreement.add(where, f"vector says zone {zone} {name} {row[name]}, real {value}")


def _vector_cluster(agreement: Agreement, expected: Mapping[str, Any], got: Json) -> None:
    if expected["sufficient_node_info"] != got["sufficient_node_info"]:
        agreement.add("cluster", f"sufficient_node_info {got['sufficient_node_info']}")
    ratios, real = expected["zone_cpu_ratio"], got["zone_cpu_ratio"]
    if set(ratios) != set(real) or not all(_close(ratios[z], real[z]) for z in ratios):
        agreement.add("cluster", f"zone_cpu_ratio {real}, vector {ratios}")
    if sorted(expected["insufficient_nodes"]) != sorted(got["insufficient_nodes"]):
        agreement.add("cluster", f"insufficient_nodes {got['insufficient_nodes']}")
