"""The phrasebook: what a verdict is and why, in the words every surface says it with.

`explain` lays these sentences out for a terminal (exporter.report.explain), the status pages
show them as HTML (exporter.web) and `what-if` words its answers with them
(exporter.report.whatif), so no two surfaces disagree. Plain strings: no layout, no colour;
where a sentence carries a judgement a `Tone` names it and each surface paints it its own way.
What to do about a verdict is in exporter.report.advice; where traffic goes, in
exporter.report.traffic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum

from exporter.engine import (
    ClusterCapacity,
    ConfigIssue,
    DisableReason,
    DriftKind,
    EntryVerdict,
    Mechanism,
    ProxyMode,
)
from exporter.engine.allocation import OVERLOAD_LIMIT, zone_minimum
from exporter.engine.mechanism import deciding_annotation
from exporter.engine.profile import Component, Gate, Profile, Source, kube_proxy_effect
from exporter.engine.reasons import HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT
from exporter.state.result import ClusterResult

# The zone table's headings, one per cell of a `table_rows` row.
TABLE_COLUMNS = (
    "ZONE",
    "CPU SHARE",
    "ENDPOINTS",
    "HINTED",
    "MIN",
    "DESIRED",
    "MAX",
    "LOAD FACTOR",
)
NO_ZONE = "(no zone)"

_CONTROLLER_LAG = (
    "normal for a few seconds after a change; if it lasts, check kube-controller-manager"
)

# What kube-proxy does for the clients of a zone in each mode.
MODE_TEXT = {
    ProxyMode.PREFER_SAME_ZONE: "prefers endpoints hinted for this zone",
    ProxyMode.CLUSTER: "uses every ready endpoint of the cluster",
    ProxyMode.LOCAL: (
        "in-cluster traffic goes only to an endpoint on the client's own node "
        "(internalTrafficPolicy: Local); a node without one drops it"
    ),
    ProxyMode.PREFER_SAME_NODE: "prefers endpoints hinted for the node itself",
}
# A zone's mode applies to none of its nodes: each has an exception of its own.
EVERY_NODE_SAME_NODE = "every node of the zone is in PreferSameNode"
# Said under a hint completeness strictly between 0 and 1.
PARTIAL_HINTS = "partial, so kube-proxy ignores every hint: Cluster on every node"
# Why an auto Service's verdict cannot be told from a snapshot without Nodes.
AUTO_NEEDS_NODES = (
    "auto allocates by each zone's share of allocatable CPU, read from Nodes; without "
    "them the controller's decision cannot be told"
)


class Tone(StrEnum):
    """The judgement a sentence carries; each surface paints it its own way."""

    GOOD = "good"
    BAD = "bad"
    WARN = "warn"
    # Emphasis without a judgement: a title, a policy at work.
    BOLD = "bold"


# Numbers and names


def percent(ratio: float) -> str:
    return f"{ratio * 100:.1f}%"


def whole_percent(ratio: float) -> str:
    return f"{round(ratio * 100)}%"


def decimal(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def integer(value: int | None) -> str:
    return "-" if value is None else str(value)


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def zone_name(zone: str) -> str:
    return zone or NO_ZONE


def zone_names(zones: Sequence[str]) -> str:
    return ", ".join(zone_name(zone) for zone in zones)


def _zone_list(zones: Iterable[str]) -> str:
    """' in zone-a, zone-b', or nothing when no zone is known."""
    named = sorted(zone_name(zone) for zone in zones)
    return f" in {', '.join(named)}" if named else ""


def _each_endpoint(count: int) -> str:
    """'each of the 3 ready endpoints', in the singular and for none too."""
    if count == 0:
        return "every ready endpoint (there is none yet)"
    if count == 1:
        return "its one ready endpoint"
    return f"each of the {count} ready endpoints"


def _some_of(part: int, whole: int) -> str:
    """'1 of the 16 ready endpoints has', 'all 3 ready endpoints have', 'the one ... has'."""
    if part == whole == 1:
        return "the one ready endpoint has"
    if part == whole:
        return f"all {whole} ready endpoints have"
    return f"{part} of the {whole} ready endpoints {'has' if part == 1 else 'have'}"


# The cluster


_SOURCE_WORDS = {
    Source.FLAG: "given by flag",
    Source.API: "the API server's /version",
    Source.DETECTED: "the kube-proxy DaemonSet's image",
    Source.CONTROL_PLANE: "the control plane's",
}


def _gate_words(component: Component) -> str:
    """The topology features that are off (the newest semantics have every one on), read
    by gate name whether or not this version still has the gate."""
    off = [str(gate) for gate in Gate if not component.enabled(gate)]
    if not off:
        return "every topology feature on"
    return " and ".join(off) + " off"


def profile_texts(profile: Profile) -> list[str]:
    """behaviour §12: the versions and gates the verdicts assume, and where they come from.

    The profile's notes (`Profile.notes`) follow these as warnings.
    """
    texts: list[str] = []
    for name, part in (("Kubernetes", profile.control_plane), ("kube-proxy", profile.kube_proxy)):
        if part.minor is not None:
            source = _SOURCE_WORDS.get(part.source, str(part.source))
            # "Kubernetes" is the field's label: the line starts with the version.
            lead = part.describe(name).removeprefix("Kubernetes ")
            texts.append(f"{lead} ({source}): {_gate_words(part)}")
        elif name == "Kubernetes":
            texts.append(f"assuming {part.describe(name)}; pass --kubernetes-version")
    return texts


# One Service and address type


def mechanism_text(verdict: EntryVerdict) -> str:
    service = verdict.service
    annotation = _deciding_annotation_text(verdict)
    field_text = (
        f"spec.trafficDistribution={service.traffic_distribution}"
        if service.traffic_distribution is not None
        else None
    )
    if verdict.mechanism is Mechanism.AUTO:
        ignored = f"; {field_text} is ignored" if field_text else ""
        return f"auto, from annotation {annotation}{ignored}"
    if verdict.mechanism is Mechanism.TRAFFIC_DISTRIBUTION:
        off = f"; annotation {annotation} is off" if annotation else ""
        return f"traffic-distribution, from {field_text}{off}"
    reasons = [f"annotation {annotation} is not Auto"] if annotation else []
    if field_text and ConfigIssue.TRAFFIC_DISTRIBUTION_UNSUPPORTED in verdict.config_issues:
        reasons.append(f"{field_text} is not accepted by this control plane's version or gates")
    elif field_text:
        reasons.append(f"{field_text} is not a known value")
    return "none: " + ("; ".join(reasons) or "no topology annotation, no spec.trafficDistribution")


def _deciding_annotation_text(verdict: EntryVerdict) -> str | None:
    """key=value of the annotation that decides."""
    decider = deciding_annotation(verdict.service)
    return f"{decider[0]}={decider[1]}" if decider is not None else None


def why_text(result: ClusterResult, verdict: EntryVerdict) -> str:
    capacity = result.capacity
    n = verdict.ready_endpoints
    if verdict.mechanism is Mechanism.NONE:
        return "no hint mechanism applies, so the controller removes any hints from the slices"
    if verdict.mechanism is Mechanism.TRAFFIC_DISTRIBUTION:
        node = (
            " and for its node" if verdict.service.traffic_distribution == "PreferSameNode" else ""
        )
        return (
            f"trafficDistribution never refuses: the controller hints {_each_endpoint(n)} for "
            f"its own zone{node}, however few endpoints a zone has"
        )
    if verdict.reason is None:
        return (
            f"{plural(n, 'ready endpoint')} in {plural(len(capacity.zone_ratios), 'zone')}: the "
            "controller hints them all, giving each zone between MIN and MAX so that no zone "
            "gets more than 20% above its share"
        )
    return "refused: " + refusal_text(capacity, verdict, verdict.reason)


def refusal_text(capacity: ClusterCapacity, verdict: EntryVerdict, reason: DisableReason) -> str:
    n = verdict.ready_endpoints
    zones = len(capacity.zone_ratios)
    if reason is DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS:
        if n == 0:
            return f"no ready endpoint for {zones} zones: every zone would get none"
        return f"{plural(n, 'ready endpoint')} for {zones} zones: some zone would get none"
    if reason is DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD:
        minimums = [zone_minimum(ratio, n) for ratio in capacity.zone_ratios.values()]
        return (
            f"{plural(n, 'ready endpoint')} in {zones} zones of {share_words(capacity)} need at "
            "least "
            f"{'+'.join(map(str, minimums))} = {sum(minimums)} to keep every zone within 20% "
            "of its share; the controller removes every hint"
        )
    if reason is DisableReason.INSUFFICIENT_NODE_INFO:
        nodes = ", ".join(capacity.insufficient_nodes) or "fewer than two zones with CPU"
        return (
            f"node info is insufficient (see Cluster: {nodes}), so the controller has no zone "
            "shares to allocate by and removes every hint, whatever the endpoint count"
        )
    if reason is DisableReason.NO_ZONE_SPECIFIED:
        missing = n - sum(verdict.zone_endpoints.values())
        return (
            f"{_some_of(missing, n)} no zone, so {'it' if missing == 1 else 'they'} cannot be "
            "placed; the controller removes every hint"
        )
    return f"{reason.explanation}; the controller removes every hint"


def share_words(capacity: ClusterCapacity) -> str:
    """'33% each' for equal zones, else '50%, 30%, 20%'."""
    shares = [whole_percent(ratio) for ratio in capacity.zone_ratios.values()]
    if len(set(shares)) == 1:
        return f"{shares[0]} each"
    return ", ".join(shares)


def event_text(verdict: EntryVerdict) -> str:
    if verdict.reason is None:
        return f'Normal {HINTS_ENABLED_EVENT} "Topology Aware Hints has been enabled"'
    return f'Warning {HINTS_DISABLED_EVENT} "{verdict.reason.event_message}"'


def completeness_text(verdict: EntryVerdict) -> str:
    """'75.0% (3 of 4 ready endpoints have a zone hint)'; PARTIAL_HINTS says what it does."""
    completeness = verdict.hint_completeness
    if completeness is None:
        return "- (no ready endpoints)"
    ready, hinted = verdict.ready_endpoints, verdict.hinted_endpoints
    return (
        f"{percent(completeness)} ({hinted} of {plural(ready, 'ready endpoint')} "
        f"{'has' if hinted == 1 else 'have'} a zone hint)"
    )


def same_node_text(nodes: Iterable[str]) -> str:
    """The nodes kube-proxy routes in PreferSameNode, and what that mode does."""
    return (
        f"{ProxyMode.PREFER_SAME_NODE} on {', '.join(nodes)}: "
        f"{MODE_TEXT[ProxyMode.PREFER_SAME_NODE]}"
    )


def profile_effect(result: ClusterResult, verdict: EntryVerdict) -> str | None:
    """Why the Kubernetes profile makes kube-proxy route this Service otherwise (§12)."""
    if not verdict.service.proxied:
        return None
    return kube_proxy_effect(verdict.service, result.profile)


def table_rows(verdict: EntryVerdict) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for zone in sorted(set(verdict.zones) | set(verdict.zone_endpoints)):
        zone_verdict = verdict.zones.get(zone)
        rows.append(
            (
                zone_name(zone),
                percent(zone_verdict.ratio) if zone_verdict and zone_verdict.ratio else "-",
                str(verdict.zone_endpoints.get(zone, 0)),
                str(zone_verdict.hinted if zone_verdict else 0),
                integer(zone_verdict.minimum if zone_verdict else None),
                decimal(zone_verdict.desired if zone_verdict else None),
                integer(zone_verdict.maximum if zone_verdict else None),
                decimal(zone_verdict.load_factor if zone_verdict else None),
            )
        )
    return rows


def load_warnings(verdict: EntryVerdict) -> list[str]:
    """Zones whose nodes follow hints while each hinted endpoint takes over 1.2x its share."""
    warnings = []
    for zone, zone_verdict in verdict.zones.items():
        factor = zone_verdict.load_factor
        following = verdict.proxy.by_zone.get(zone) is ProxyMode.PREFER_SAME_ZONE
        if factor is None or factor <= OVERLOAD_LIMIT or not following:
            continue
        takes = "takes" if zone_verdict.hinted == 1 else "take"
        warnings.append(
            f"{zone}: {plural(zone_verdict.hinted, 'endpoint')} {takes} all of the zone's "
            f"traffic: load factor {factor:.2f}, i.e. {factor:.2f}x a fair share (auto would "
            f"keep it at or under {OVERLOAD_LIMIT:g}); add endpoints in {zone}"
        )
    return warnings


def drift_texts(verdict: EntryVerdict) -> list[str]:
    """Each kind of drift with the figures and zones it concerns."""
    texts = []
    unhinted = verdict.ready_endpoints - verdict.hinted_endpoints
    for kind in sorted(verdict.drift):
        if kind is DriftKind.HINTS_MISSING:
            where = _zone_list(
                zone
                for zone, count in verdict.zone_endpoints.items()
                if verdict.mechanism is Mechanism.TRAFFIC_DISTRIBUTION
                and count > (verdict.zones[zone].hinted if zone in verdict.zones else 0)
            )
            lack = "lacks" if unhinted == 1 else "lack"
            texts.append(
                f"{unhinted} of {plural(verdict.ready_endpoints, 'ready endpoint')}{where} "
                f"{lack} the zone hint the controller should have written ({_CONTROLLER_LAG})"
            )
        elif kind is DriftKind.UNEXPECTED_HINTS:
            where = _zone_list(zone for zone, zv in verdict.zones.items() if zv.hinted)
            carry = "carries" if verdict.hinted_endpoints == 1 else "carry"
            texts.append(
                f"{plural(verdict.hinted_endpoints, 'ready endpoint')} {carry} zone hints"
                f"{where.replace(' in ', ' for ', 1)} that the controller should have removed "
                "(kube-proxy still follows them)"
            )
        else:
            texts.extend(
                f"{zone}: {zone_verdict.hinted} hinted, outside its MIN..MAX range "
                f"{zone_verdict.minimum}..{zone_verdict.maximum} ({_CONTROLLER_LAG})"
                for zone, zone_verdict in verdict.zones.items()
                if zone_verdict.minimum is not None
                and zone_verdict.maximum is not None
                and not zone_verdict.minimum <= zone_verdict.hinted <= zone_verdict.maximum
            )
    return texts
