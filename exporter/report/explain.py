"""The `explain` command's text: every verdict in words an operator at a terminal can act on.

Pure rendering, shaped like `kubectl describe`: it takes an evaluation and returns
text. No I/O; colour (ANSI) only when asked for.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import StrEnum
from typing import NamedTuple

from exporter.engine import (
    DATA_PLANES,
    Cause,
    ClusterCapacity,
    ConfigIssue,
    DataPlane,
    DisableReason,
    DriftKind,
    Endpoint,
    Evaluation,
    ExpectedState,
    Mechanism,
    MissingInfo,
    NodeProblem,
    ProxyMode,
    ReadyNodes,
    Routing,
    RoutingView,
    ServiceVerdict,
    ZoneRouting,
)
from exporter.engine.allocation import OVERLOAD_LIMIT, refusal_reason, zone_minimum
from exporter.engine.crosszone import CrossZone
from exporter.engine.mechanism import deciding_annotation
from exporter.engine.model import ZONE_LABEL
from exporter.engine.profile import NEWEST_MINOR, Component, Profile, Source, kube_proxy_effect
from exporter.engine.reasons import HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT
from exporter.engine.whatif.feasibility import Feasibility, Margin, endpoint_margin
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.report.overview import NODES, missing_warnings

LABEL_WIDTH = 19
INDENT = " " * (2 + LABEL_WIDTH)
WRAP_WIDTH = 100
# The replica advisor lists at most about this many endpoint counts.
ADVISOR_SPAN = 20
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

_MODE_TEXT = {
    ProxyMode.PREFER_SAME_ZONE: "prefers endpoints hinted for this zone",
    ProxyMode.CLUSTER: "uses every ready endpoint of the cluster",
    ProxyMode.LOCAL: (
        "in-cluster traffic goes only to an endpoint on the client's own node "
        "(internalTrafficPolicy: Local); a node without one drops it"
    ),
    ProxyMode.PREFER_SAME_NODE: "prefers endpoints hinted for the node itself",
}


class Tone(StrEnum):
    GOOD = "32"
    BAD = "31"
    WARN = "33"
    BOLD = "1"


@dataclass(frozen=True, slots=True)
class ExplainOptions:
    color: bool = False
    # Kinds of object the input lacks ("Nodes", ...) -> why: then nothing is said that needs them.
    missing: Mapping[str, str] = dataclass_field(default_factory=dict)
    # Zone -> Services whose hints losing that zone would take away (None: not computed).
    zone_loss: Mapping[str, int] | None = None
    # The cluster's zone labels when too many for a zone-loss forecast (0: not skipped).
    zone_loss_skipped: int = 0

    def paint(self, text: str, tone: Tone) -> str:
        """Wrap text in an ANSI colour when colour is on; never emit a code otherwise."""
        if not self.color or not text:
            return text
        return f"\x1b[{tone}m{text}\x1b[0m"


def explain_text(
    evaluation: Evaluation,
    verdicts: Sequence[ServiceVerdict],
    options: ExplainOptions,
    nothing: str = "No Service with EndpointSlices in this snapshot.",
) -> str:
    """The cluster header, then each verdict; `nothing` says why there is none."""
    lines = cluster_lines(evaluation, options) + avoidable_lines(evaluation, options)
    lines += missing_lines(options)
    if not verdicts:
        lines += ["", nothing]
    for verdict in verdicts:
        lines += ["", *service_lines(evaluation, verdict, options)]
    return "\n".join(lines) + "\n"


# Formatting helpers


def missing_lines(options: ExplainOptions) -> list[str]:
    """What the input lacks and what the verdicts below cannot say without it."""
    return (
        items("Missing", missing_warnings(options.missing), options, Tone.WARN)
        if (options.missing)
        else []
    )


def field(label: str, value: str) -> str:
    return f"  {label + ':':<{LABEL_WIDTH}}{value}".rstrip()


def fields(label: str, values: Sequence[str]) -> list[str]:
    """A labelled field whose value spans several lines, aligned under the first."""
    if not values:
        return [field(label, "none")]
    return [field(label, values[0]), *(f"{INDENT}{value}" for value in values[1:])]


def reflow(
    text: str, options: ExplainOptions, tone: Tone | None = None, hang: str = ""
) -> list[str]:
    """Text wrapped to the terminal width beside the labels, each line painted on its own."""
    lines = textwrap.wrap(
        text,
        width=WRAP_WIDTH - len(INDENT),
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    if tone is None or not lines:
        return lines
    # Continuation lines start with `hang`: paint only what follows it.
    return [
        options.paint(lines[0], tone),
        *(hang + options.paint(line[len(hang) :], tone) for line in lines[1:]),
    ]


def prose(label: str, text: str, options: ExplainOptions, tone: Tone | None = None) -> list[str]:
    return fields(label, reflow(text, options, tone))


def items(
    label: str, texts: Iterable[str], options: ExplainOptions, tone: Tone | None = None
) -> list[str]:
    """A labelled list of paragraphs, each wrapped with its continuation lines indented."""
    return fields(label, [line for text in texts for line in reflow(text, options, tone, "  ")])


def percent(ratio: float) -> str:
    return f"{ratio * 100:.1f}%"


def decimal(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def integer(value: int | None) -> str:
    return "-" if value is None else str(value)


def zone_name(zone: str) -> str:
    return zone or NO_ZONE


def wrap(tokens: Iterable[tuple[str, str]], width: int) -> list[str]:
    """Join (plain, painted) tokens with ", " into lines no wider than width in plain text."""
    lines: list[str] = []
    plain_length, current = 0, ""
    for plain, painted in tokens:
        if current and plain_length + 2 + len(plain) > width:
            lines.append(current + ",")
            plain_length, current = 0, ""
        if current:
            plain_length, current = plain_length + 2, current + ", "
        plain_length, current = plain_length + len(plain), current + painted
    if current:
        lines.append(current)
    return lines


# Cluster header


_SOURCE_WORDS = {
    Source.FLAG: "given by flag",
    Source.API: "the API server's /version",
    Source.DETECTED: "the kube-proxy DaemonSet's image",
    Source.CONTROL_PLANE: "the control plane's",
}


def _gate_words(component: Component) -> str:
    """The gates that are off (the newest semantics have both on)."""
    off = [str(gate) for gate, enabled in component.gates.items() if not enabled]
    if not off:
        return "both topology gates on"
    if len(off) == len(component.gates):
        return "both topology gates off"
    return " and ".join(off) + " off"


def profile_lines(profile: Profile, options: ExplainOptions) -> list[str]:
    """behaviour §12: the versions and gates the verdicts below assume, and where from."""
    lines: list[str] = []
    for name, part in (("Kubernetes", profile.control_plane), ("kube-proxy", profile.kube_proxy)):
        if part.minor is not None:
            source = _SOURCE_WORDS.get(part.source, str(part.source))
            lead = part.version if name == "Kubernetes" else f"{name} {part.version}"
            lines.append(f"{lead} ({source}): {_gate_words(part)}")
        elif name == "Kubernetes":
            lines.append(
                f"assuming Kubernetes 1.{NEWEST_MINOR} or newer; pass --kubernetes-version"
            )
    lines += [options.paint(note, Tone.WARN) for note in profile.notes()]
    return lines


def cluster_lines(evaluation: Evaluation, options: ExplainOptions) -> list[str]:
    capacity = evaluation.capacity
    ready_nodes = len(evaluation.nodes.zone_of)
    lines = ["Cluster", *fields("Kubernetes", profile_lines(evaluation.profile, options))]
    if NODES in options.missing:
        return [*lines, field("Node info", options.paint("unknown", Tone.WARN) + ": no Nodes")]
    if capacity.sufficient:
        lines.append(
            field(
                "Node info",
                f"{options.paint('sufficient', Tone.GOOD)} ({plural(ready_nodes, 'Ready node')}, "
                f"{plural(len(capacity.zone_ratios), 'zone')})",
            )
        )
        lines += fields("Zone CPU shares", zone_share_lines(capacity))
        lines += zone_loss_lines(options)
        return lines
    lines.append(
        field(
            "Node info",
            f"{options.paint('insufficient', Tone.BAD)}: the controller disables hints for "
            "every auto Service",
        )
    )
    lines.append(field("Zone CPU shares", "none (no zone ratios while node info is insufficient)"))
    lines += offending_node_lines(capacity.problems, options)
    return lines


def zone_loss_lines(options: ExplainOptions) -> list[str]:
    """What losing each zone would do (section 11), so a zone failure holds no surprise."""
    if options.zone_loss_skipped:
        return [field("Zone loss", zone_loss_skipped_text(options.zone_loss_skipped))]
    if not options.zone_loss:
        return []
    losing = {zone: count for zone, count in options.zone_loss.items() if count}
    if not losing:
        return [field("Zone loss", "losing any one zone keeps every Service's hints")]
    texts = [
        f"losing {zone_name(zone)} would turn hints off for {plural(count, 'Service')}"
        for zone, count in losing.items()
    ]
    return fields("Zone loss", [options.paint(text, Tone.WARN) for text in texts])


def zone_loss_skipped_text(zones: int) -> str:
    """Why no zone-loss forecast is shown; the status page says the same."""
    return (
        f"not forecast: {zones:,} zone labels, more than the {MAX_ZONE_LOSS_ZONES} "
        "a forecast covers (its cost grows as zones x nodes)"
    )


def zone_share_lines(capacity: ClusterCapacity) -> list[str]:
    width = max(len(zone) for zone in capacity.zone_ratios)
    return [
        f"{zone:<{width}}  {percent(ratio):>6}  "
        f"({capacity.zone_millicores[zone] / 1000:g} CPU allocatable)"
        for zone, ratio in capacity.zone_ratios.items()
    ]


def offending_node_lines(problems: Sequence[NodeProblem], options: ExplainOptions) -> list[str]:
    if not problems:
        return [
            field(
                "Why",
                "fewer than two zones have Ready worker nodes with allocatable CPU: "
                f"label worker nodes of at least two zones with {ZONE_LABEL}",
            )
        ]
    lines = [field("Offending nodes", "")]
    for problem in problems:
        lack = node_lack(problem)
        if len(f"    {problem.node}: {lack}") <= WRAP_WIDTH:
            lines.append(f"    {problem.node}: {options.paint(lack, Tone.BAD)}")
        else:
            lines += [f"    {problem.node}:", f"      {options.paint(lack, Tone.BAD)}"]
        lines += command_lines("      fix: ", node_fix(problem))
    return lines


def command_lines(lead: str, command: str) -> list[str]:
    """A command after its lead, on a line of its own when too wide: never broken, so it copies."""
    if len(lead + command) <= WRAP_WIDTH:
        return [lead + command]
    return [lead.rstrip(), " " * (len(lead) - len(lead.lstrip()) + 2) + command]


def node_lack(problem: NodeProblem) -> str:
    if problem.missing is MissingInfo.ZONE:
        return f"no {ZONE_LABEL} label (absent or empty)"
    return "no allocatable CPU (status.allocatable.cpu absent or zero)"


def node_fix(problem: NodeProblem) -> str:
    if problem.missing is MissingInfo.ZONE:
        return f"kubectl label node {problem.node} {ZONE_LABEL}=<zone> --overwrite"
    return (
        f"make the kubelet on {problem.node} report its CPU "
        f"(kubectl describe node {problem.node}: Allocatable)"
    )


# One Service and address type


def service_lines(
    evaluation: Evaluation, verdict: ServiceVerdict, options: ExplainOptions
) -> list[str]:
    if NODES in options.missing:
        return service_lines_without_nodes(evaluation, verdict, options)
    service = verdict.service
    title = options.paint(f"Service {service.namespace}/{service.name}", Tone.BOLD)
    lines = [
        f"{title} ({verdict.address_type})",
        *routing_lines(evaluation.nodes, verdict, options),
        *profile_effect_lines(evaluation, verdict, options),
        *cross_zone_lines(verdict, options),
        *prose("Mechanism", mechanism_text(verdict), options),
        field("Verdict", verdict_text(verdict, options)),
        *prose("Why", why_text(evaluation, verdict), options),
    ]
    if verdict.mechanism is Mechanism.AUTO:
        lines += prose("Expected event", event_text(verdict), options)
    lines += completeness_lines(verdict, options)
    lines += fields("kube-proxy", proxy_lines(evaluation, verdict, options))
    lines += table_lines(verdict, options)
    lines += items("Warnings", load_warnings(verdict), options, Tone.WARN)
    lines += items("Drift", drift_texts(verdict), options, Tone.WARN)
    lines += fields("Config issues", config_issue_lines(verdict, options))
    lines += notice_lines(verdict, options)
    if verdict.mechanism is Mechanism.AUTO:
        lines += advisor_lines(evaluation.capacity, verdict, options)
    return lines


def notice_lines(verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    """behaviour §12's notices: worth knowing, never a problem."""
    if not verdict.notices:
        return []
    return items("Notices", [notice.text for notice in sorted(verdict.notices)], options)


def profile_effect(evaluation: Evaluation, verdict: ServiceVerdict) -> str | None:
    """Why the Kubernetes profile makes kube-proxy route this Service otherwise (§12)."""
    if not verdict.service.proxied:
        return None
    return kube_proxy_effect(verdict.service, evaluation.profile)


def profile_effect_lines(
    evaluation: Evaluation, verdict: ServiceVerdict, options: ExplainOptions
) -> list[str]:
    effect = profile_effect(evaluation, verdict)
    return [] if effect is None else prose("Version skew", effect, options, Tone.WARN)


def service_lines_without_nodes(
    evaluation: Evaluation, verdict: ServiceVerdict, options: ExplainOptions
) -> list[str]:
    """Only what the Service and its slices tell: nothing that needs the zones' CPU or nodes."""
    service = verdict.service
    title = options.paint(f"Service {service.namespace}/{service.name}", Tone.BOLD)
    lines = [
        f"{title} ({verdict.address_type})",
        *prose("Mechanism", mechanism_text(verdict), options),
    ]
    if verdict.mechanism is Mechanism.AUTO:
        lines.append(field("Verdict", options.paint("unknown", Tone.WARN) + " (no Nodes)"))
        lines += prose(
            "Why",
            "auto allocates by each zone's share of allocatable CPU, read from Nodes; without "
            "them the controller's decision cannot be told",
            options,
        )
    else:
        lines.append(field("Verdict", verdict_text(verdict, options)))
        lines += prose("Why", why_text(evaluation, verdict), options)
    lines += completeness_lines(verdict, options)
    lines.append(field("kube-proxy", "unknown without Nodes (a node's zone decides its mode)"))
    lines += table_lines(verdict, options)
    if verdict.mechanism is not Mechanism.AUTO:
        lines += items("Drift", drift_texts(verdict), options, Tone.WARN)
    lines += fields("Config issues", config_issue_lines(verdict, options))
    return lines


def mechanism_text(verdict: ServiceVerdict) -> str:
    service = verdict.service
    annotation = deciding_annotation_text(verdict)
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


def deciding_annotation_text(verdict: ServiceVerdict) -> str | None:
    """key=value of the annotation that decides."""
    decider = deciding_annotation(verdict.service)
    return f"{decider[0]}={decider[1]}" if decider is not None else None


def verdict_text(verdict: ServiceVerdict, options: ExplainOptions) -> str:
    if verdict.expected_state is ExpectedState.ENABLED:
        return options.paint("enabled", Tone.GOOD)
    if verdict.expected_state is ExpectedState.DISABLED:
        return f"{options.paint('disabled', Tone.BAD)} ({verdict.reason})"
    return "not applicable"


def why_text(evaluation: Evaluation, verdict: ServiceVerdict) -> str:
    capacity = evaluation.capacity
    n = verdict.ready_endpoints
    if verdict.mechanism is Mechanism.NONE:
        return "no hint mechanism applies, so the controller removes any hints from the slices"
    if verdict.mechanism is Mechanism.TRAFFIC_DISTRIBUTION:
        node = (
            " and for its node" if verdict.service.traffic_distribution == "PreferSameNode" else ""
        )
        return (
            f"trafficDistribution never refuses: the controller hints {each_endpoint(n)} for "
            f"its own zone{node}, however few endpoints a zone has"
        )
    if verdict.reason is None:
        return (
            f"{plural(n, 'ready endpoint')} in {plural(len(capacity.zone_ratios), 'zone')}: the "
            "controller hints them all, giving each zone between MIN and MAX so that no zone "
            "gets more than 20% above its share"
        )
    return "refused: " + refusal_text(capacity, verdict, verdict.reason)


def refusal_text(capacity: ClusterCapacity, verdict: ServiceVerdict, reason: DisableReason) -> str:
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
            f"{some_of(missing, n)} no zone, so {'it' if missing == 1 else 'they'} cannot be "
            "placed; the controller removes every hint"
        )
    return f"{reason.explanation}; the controller removes every hint"


def share_words(capacity: ClusterCapacity) -> str:
    """'33% each' for equal zones, else '50%, 30%, 20%'."""
    shares = [f"{round(ratio * 100)}%" for ratio in capacity.zone_ratios.values()]
    if len(set(shares)) == 1:
        return f"{shares[0]} each"
    return ", ".join(shares)


def event_text(verdict: ServiceVerdict) -> str:
    if verdict.reason is None:
        return f'Normal {HINTS_ENABLED_EVENT} "Topology Aware Hints has been enabled"'
    return f'Warning {HINTS_DISABLED_EVENT} "{verdict.reason.event_message}"'


def completeness_lines(verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    completeness = verdict.hint_completeness
    ready, hinted = verdict.ready_endpoints, verdict.hinted_endpoints
    if completeness is None:
        return [field("Hint completeness", "- (no ready endpoints)")]
    counts = (
        f"{percent(completeness)} ({hinted} of {plural(ready, 'ready endpoint')} "
        f"{'has' if hinted == 1 else 'have'} a zone hint)"
    )
    lines = [field("Hint completeness", counts)]
    if 0 < completeness < 1:
        consequence = "partial, so kube-proxy ignores every hint: Cluster on every node"
        lines.append(INDENT + options.paint(consequence, Tone.WARN))
    return lines


def proxy_lines(
    evaluation: Evaluation, verdict: ServiceVerdict, options: ExplainOptions
) -> list[str]:
    proxy = verdict.proxy
    if not proxy.by_zone:
        return reflow(
            "not proxied (headless or ExternalName Service, or not an IP address type): no "
            "data plane reads its hints, so they count as no problem and never fail the exit "
            "status",
            options,
            hang="",
        )
    width = max(len(zone_name(zone)) for zone in proxy.by_zone)
    lines = []
    for zone, mode in proxy.by_zone.items():
        nodes = [n for n in evaluation.nodes.by_zone.get(zone, ()) if n not in proxy.same_node]
        what = _MODE_TEXT[mode] if nodes else "every node of the zone is in PreferSameNode"
        lines += proxy_mode_lines(
            f"{zone_name(zone):<{width}}", mode, f"{plural(len(nodes), 'node')}: {what}", options
        )
    if proxy.same_node:
        same_node = (
            f"{ProxyMode.PREFER_SAME_NODE} on {', '.join(proxy.same_node)}: "
            f"{_MODE_TEXT[ProxyMode.PREFER_SAME_NODE]}"
        )
        lines += reflow(same_node, options, Tone.GOOD, hang="  ")
    return lines


def proxy_mode_lines(zone: str, mode: ProxyMode, text: str, options: ExplainOptions) -> list[str]:
    """One zone's mode, its text wrapped under itself (or under the zone when zones are long)."""
    tone = {ProxyMode.PREFER_SAME_ZONE: Tone.GOOD, ProxyMode.LOCAL: Tone.BOLD}
    lead = f"{zone}  {mode:<14}  "
    available = WRAP_WIDTH - len(INDENT)
    hang = " " * len(lead) if len(lead) <= available // 2 else "    "
    wrapped = textwrap.wrap(
        lead + text,
        width=available,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    painted = options.paint(f"{mode:<14}", tone.get(mode, Tone.WARN))
    return [wrapped[0].replace(f"  {mode:<14}", f"  {painted}", 1), *wrapped[1:]]


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def each_endpoint(count: int) -> str:
    """'each of the 3 ready endpoints', in the singular and for none too."""
    if count == 0:
        return "every ready endpoint (there is none yet)"
    if count == 1:
        return "its one ready endpoint"
    return f"each of the {count} ready endpoints"


def some_of(part: int, whole: int) -> str:
    """'1 of the 16 ready endpoints has', 'all 3 ready endpoints have', 'the one ... has'."""
    if part == whole == 1:
        return "the one ready endpoint has"
    if part == whole:
        return f"all {whole} ready endpoints have"
    return f"{part} of the {whole} ready endpoints {'has' if part == 1 else 'have'}"


def table_rows(verdict: ServiceVerdict) -> list[tuple[str, ...]]:
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


def table_lines(verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    rows = table_rows(verdict)
    if not rows:
        return [field("Zones", "none")]
    widths = [max(len(row[i]) for row in (TABLE_COLUMNS, *rows)) for i in range(len(TABLE_COLUMNS))]
    lines = [field("Zones", "")]
    for index, row in enumerate((TABLE_COLUMNS, *rows)):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        if index and row[-1] != "-" and float(row[-1]) > OVERLOAD_LIMIT:
            cells[-1] = options.paint(cells[-1], Tone.WARN)
        lines.append(("    " + "  ".join(cells)).rstrip())
    return lines


def load_warnings(verdict: ServiceVerdict) -> list[str]:
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


def drift_texts(verdict: ServiceVerdict) -> list[str]:
    """Each kind of drift with the figures and zones it concerns."""
    texts = []
    unhinted = verdict.ready_endpoints - verdict.hinted_endpoints
    for kind in sorted(verdict.drift):
        if kind is DriftKind.HINTS_MISSING:
            where = zone_list(
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
            where = zone_list(zone for zone, zv in verdict.zones.items() if zv.hinted)
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


def zone_list(zones: Iterable[str]) -> str:
    """' in zone-a, zone-b', or nothing when no zone is known."""
    named = sorted(zone_name(zone) for zone in zones)
    return f" in {', '.join(named)}" if named else ""


def config_issue_lines(verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    lines = []
    for issue in sorted(verdict.config_issues):
        lines.append(options.paint(str(issue), Tone.WARN))
        lines += reflow(f"  fix: {issue.fix}", options, hang="       ")
    return lines


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


def routing_lines(nodes: ReadyNodes, verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    """One paragraph per configured data plane: where its clients' traffic goes, and why."""
    lines = []
    for dataplane, view in verdict.routing.items():
        text, tone = routing_text(dataplane, view, nodes)
        lines += reflow(f"{dataplane}: {text}", options, tone, hang="  ")
    return fields("Effective routing", lines)


# behaviour §13 asks every surface to say the share is a model (docs/behaviour.md says of what).
CROSS_ZONE_MODEL = "a model: CPU-weighted clients, even spread; measured traffic may differ"


def whole_percent(ratio: float) -> str:
    return f"{round(ratio * 100)}%"


def cross_zone_text(figures: CrossZone | None) -> str:
    """One data plane's expected cross-zone share in words (explain, the status page)."""
    if figures is None:
        return "no client is given an endpoint: no traffic to count"
    return (
        f"{whole_percent(figures.effective)} of traffic expected to cross zones "
        f"(floor {whole_percent(figures.floor)})"
    )


def cross_zone_lines(verdict: ServiceVerdict, options: ExplainOptions) -> list[str]:
    """Per data plane: the share expected to cross zones and what no routing avoids."""
    if not verdict.cross_zone:
        return []
    lines = []
    for dataplane, figures in verdict.cross_zone.items():
        tone = None if figures is None or figures.avoidable < AVOIDABLE_WORTH_SAYING else Tone.WARN
        lines += reflow(f"{dataplane}: {cross_zone_text(figures)}", options, tone, hang="  ")
    return fields("Cross-zone", [*lines, f"({CROSS_ZONE_MODEL})"])


# Avoidable shares under this are rounding, not a finding worth ranking.
AVOIDABLE_WORTH_SAYING = 0.005
# The cluster summary names this many Services.
AVOIDABLE_RANKED = 5


def avoidable_ranking(
    verdicts: Iterable[ServiceVerdict],
) -> list[tuple[ServiceVerdict, DataPlane, CrossZone]]:
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


def avoidable_text(verdict: ServiceVerdict, dataplane: DataPlane, figures: CrossZone) -> str:
    service = verdict.service
    return (
        f"{service.namespace}/{service.name} ({verdict.address_type}): "
        f"{whole_percent(figures.avoidable)} avoidable under {dataplane} "
        f"({whole_percent(figures.effective)} expected, floor {whole_percent(figures.floor)})"
    )


def avoidable_lines(evaluation: Evaluation, options: ExplainOptions) -> list[str]:
    """The cluster summary's ranking of Services by avoidable cross-zone share."""
    if NODES in options.missing:
        return []
    ranked = avoidable_ranking(evaluation.services)
    if not ranked:
        return []
    texts = [avoidable_text(*item) for item in ranked[:AVOIDABLE_RANKED]]
    if len(ranked) > AVOIDABLE_RANKED:
        texts.append(f"and {plural(len(ranked) - AVOIDABLE_RANKED, 'more entry')}")
    texts.append(f"({CROSS_ZONE_MODEL})")
    return items("Avoidable share", texts, options)


RoutingGroup = tuple[Routing, ZoneRouting | None]


def routing_groups(view: RoutingView) -> dict[RoutingGroup, tuple[int, list[str]]]:
    """Nodes that share a routing and its cause: (node count, zones)."""
    groups: dict[RoutingGroup, tuple[int, list[str]]] = {}
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
        routing_groups(view).items(), key=lambda item: (not item[0][0].stays_local, item[0][0])
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
            where = Where(count, total, zones, others=others)
            parts.append(non_local_text(dataplane, routing, zone_routing, where))
            failed_closed = failed_closed or (
                routing is Routing.NO_ENDPOINTS and not dropped_by_policy(zone_routing)
            )
    routings = {routing for (routing, _), _ in groups}
    tone = Tone.GOOD if all(routing.stays_local for routing in routings) else Tone.WARN
    if failed_closed:
        tone = Tone.BAD
    return "; ".join(parts), tone


def dropped_by_policy(zone_routing: ZoneRouting | None) -> bool:
    return zone_routing is not None and zone_routing.cause is Cause.NO_LOCAL_ENDPOINT


@dataclass(frozen=True, slots=True)
class Where:
    """A group of clients: how many of all, in which zones."""

    count: int
    total: int
    zones: Sequence[str]
    # The local clients are counted in one part before: "the other N" reads right.
    others: bool = False


def non_local_text(
    dataplane: DataPlane, routing: Routing, zone_routing: ZoneRouting | None, where: Where
) -> str:
    """Where the traffic of a group of clients does not stay local, and why."""
    count, total, zones = where.count, where.total, where.zones
    cause = cause_text(dataplane, zone_routing, zones) if zone_routing else ""
    if dropped_by_policy(zone_routing):
        # The policy at work, not a hint failure: "dropped on the other 1497".
        if count == total:
            return f"dropped on every node: {cause}"
        nodes = f"the other {count}" if where.others else f"{count} of {total} nodes"
        return f"dropped on {nodes}: {cause}"
    nodes = "every node" if count == total else f"{count} of {total} nodes ({zone_names(zones)})"
    return f"{_ROUTING_WORDS.get(routing, str(routing))} on {nodes}: {cause}"


def zone_names(zones: Sequence[str]) -> str:
    return ", ".join(zone_name(zone) for zone in zones)


def cause_text(dataplane: DataPlane, zone_routing: ZoneRouting, zones: Sequence[str]) -> str:
    """The cause, in words naming the endpoint, the zone or the setting behind it."""
    cause, endpoint = zone_routing.cause, zone_routing.endpoint
    if cause is Cause.UNHINTED_ENDPOINT and endpoint is not None:
        return unhinted_text(dataplane, endpoint, zone_routing.routing)
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
    Cause.NO_HINTS: "no ready endpoint carries a zone hint",
    Cause.NO_ZONE_LABEL: f"the nodes have no {ZONE_LABEL} label",
    Cause.NO_ENDPOINT_IN_ZONE: "no ready endpoint runs in {zones}",
    Cause.TOO_FEW_IN_ZONE: (
        "fewer than 3 ready endpoints run in {zones}, the minimum {dataplane} wants under "
        "the topology-mode annotation"
    ),
}


def unhinted_text(dataplane: DataPlane, endpoint: Endpoint, routing: Routing) -> str:
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


# The replica advisor (auto only)


def advisor_range(capacity: ClusterCapacity, current: int) -> range:
    """From 1 to a bit above today's count; a window around it when that is too long."""
    upper = max(current + 3, 2 * len(capacity.zone_ratios) + 3)
    if upper <= ADVISOR_SPAN:
        return range(1, upper + 1)
    half = ADVISOR_SPAN // 2
    return range(max(1, current - half), current + half + 1)


def advisor_lines(
    capacity: ClusterCapacity, verdict: ServiceVerdict, options: ExplainOptions
) -> list[str]:
    if not capacity.sufficient:
        return [
            field("Replica advisor", "no endpoint count enables hints until node info is fixed")
        ]
    counts = advisor_range(capacity, verdict.ready_endpoints)
    tokens = [advisor_token(capacity, n, verdict.ready_endpoints, options) for n in counts]
    if counts.start > 1:
        tokens.insert(0, ("...", "..."))
    lines = fields("Replica advisor", wrap(tokens, WRAP_WIDTH - len(INDENT)))
    margin = endpoint_margin(verdict, Feasibility(capacity))
    if margin is not None:
        lines += prose("Margin", margin_text(margin), options)
    advice = suggestion(capacity, verdict)
    lines += prose("Suggestion", advice.text, options, advice.tone)
    if advice.command is not None:
        lines += command_lines(INDENT, advice.command)
    return lines


def margin_text(margin: Margin) -> str:
    """How far the endpoint count may move, one at a time, before the controller refuses."""
    if margin.down == 0:
        down = "one endpoint fewer turns hints off"
    else:
        down = f"hints survive losing {plural(margin.down, 'endpoint')}"
    if math.isinf(margin.up):
        up = "any number of surge pods keeps them on"
    elif margin.up == 0:
        up = "one surge pod turns them off"
    else:
        surge = int(margin.up)
        up = f"{plural(surge, 'surge pod')} more {'keeps' if surge == 1 else 'keep'} them on"
    return f"{down}; {up}"


def advisor_token(
    capacity: ClusterCapacity, n: int, current: int, options: ExplainOptions
) -> tuple[str, str]:
    enabled = refusal_reason(capacity, n) is None
    word = "enabled" if enabled else "refused"
    now = " (now)" if n == current else ""
    painted = options.paint(word, Tone.GOOD if enabled else Tone.BAD)
    return f"{n} {word}{now}", f"{n} {painted}{now}"


class Advice(NamedTuple):
    text: str
    tone: Tone | None = None
    # A command that does it, printed on a line of its own so that it copies whole.
    command: str | None = None


def suggestion(capacity: ClusterCapacity, verdict: ServiceVerdict) -> Advice:
    """What to do next, and how to paint it."""
    n = verdict.ready_endpoints
    if verdict.reason is None:
        return fragility(capacity, n)
    shadowed = shadowed_field_suggestion(verdict)
    if shadowed is not None:
        return shadowed
    if verdict.reason is DisableReason.NO_ZONE_SPECIFIED:
        return Advice(
            "the endpoint count is fine: give every ready endpoint a zone (label its node)"
        )
    nearest = verdict.nearest_feasible
    targets = [t for t in (nearest.below, nearest.above) if t is not None] if nearest else []
    if not targets:
        return Advice("no endpoint count enables hints with today's zone shares")
    *others, last = targets
    wanted = " or ".join([*map(str, others), plural(last, "ready endpoint")])
    if n == 0:
        return Advice(
            "no endpoint is ready, so there is nothing to route: make the Service's pods ready "
            f"(or scale it up); the controller would enable hints at {wanted}"
        )
    return Advice(f"scale to {wanted} to enable hints")


def shadowed_field_suggestion(verdict: ServiceVerdict) -> Advice | None:
    """When an annotation hides spec.trafficDistribution, removing it is the fix, not scaling."""
    service = verdict.service
    decider = deciding_annotation(service)
    if (
        ConfigIssue.ANNOTATION_SHADOWS_TRAFFIC_DISTRIBUTION not in verdict.config_issues
        or decider is None
    ):
        return None
    return Advice(
        f"remove the annotation so that spec.trafficDistribution={service.traffic_distribution} "
        "applies (it never refuses):",
        command=f"kubectl annotate service -n {service.namespace} {service.name} {decider[0]}-",
    )


def fragility(capacity: ClusterCapacity, n: int) -> Advice:
    """Hints are on; say whether one endpoint more or less (a rollout) would turn them off."""
    neighbours = {n - 1: "one pod down", n + 1: "one surge pod in a rollout"}
    risky = [
        f"{plural(m, 'ready endpoint')} ({why})"
        for m, why in neighbours.items()
        if m >= 1 and refusal_reason(capacity, m) is not None
    ]
    if not risky:
        return Advice(f"hints stay on at {n - 1} and {n + 1} ready endpoints too")
    return Advice(f"hints are on, but would be disabled at {' or '.join(risky)}", Tone.WARN)
