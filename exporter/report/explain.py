"""The `explain` command's layout: a verdict and the cluster as text for a terminal.

Shaped like `kubectl describe`: labelled sections, values aligned and wrapped beside their
labels, colour (ANSI) only when asked for. The words come from the phrasebook
(exporter.report.phrases: what a verdict is and why; exporter.report.advice: what to do;
exporter.report.traffic: where traffic goes), which the status pages share; this module only
decides where each sentence goes and how it is painted. Pure: an result in, text out.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from exporter.engine import (
    ClusterCapacity,
    EntryVerdict,
    ExpectedState,
    Mechanism,
    NodeProblem,
    ProxyMode,
    ReadyNodes,
)
from exporter.engine.allocation import OVERLOAD_LIMIT, refusal_reason
from exporter.engine.problems import ProblemId
from exporter.engine.profile import Profile
from exporter.engine.whatif.feasibility import Feasibility, endpoint_margin
from exporter.report.advice import (
    NO_COUNT_WITHOUT_NODE_INFO,
    TOO_FEW_ZONES,
    ZONE_LOSS_HARMLESS,
    advisor_range,
    margin_text,
    node_fix,
    node_lack,
    suggestion,
    zone_loss_skipped_text,
    zone_loss_texts,
)
from exporter.report.overview import missing_warnings
from exporter.report.phrases import (
    AUTO_NEEDS_NODES,
    EVERY_NODE_SAME_NODE,
    MODE_TEXT,
    PARTIAL_HINTS,
    TABLE_COLUMNS,
    Tone,
    completeness_text,
    drift_texts,
    event_text,
    load_warnings,
    mechanism_text,
    percent,
    plural,
    profile_effect,
    profile_texts,
    same_node_text,
    table_rows,
    why_text,
    zone_name,
)
from exporter.report.traffic import (
    AVOIDABLE_RANKED,
    AVOIDABLE_WORTH_SAYING,
    CROSS_ZONE_MODEL,
    avoidable_ranking,
    avoidable_text,
    cross_zone_text,
    routing_text,
)
from exporter.state.result import ClusterResult

LABEL_WIDTH = 19
INDENT = " " * (2 + LABEL_WIDTH)
WRAP_WIDTH = 100
# The SGR code each tone is painted with (exporter.terminal lets exactly these through).
_ANSI = {Tone.GOOD: "32", Tone.BAD: "31", Tone.WARN: "33", Tone.BOLD: "1"}


@dataclass(frozen=True, slots=True)
class ExplainOptions:
    """How `explain` lays its text out: colour, the kinds of object the input lacks, and the
    zone-loss forecast to add."""

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
        return f"\x1b[{_ANSI[tone]}m{text}\x1b[0m"


def explain_text(
    result: ClusterResult,
    verdicts: Sequence[EntryVerdict],
    options: ExplainOptions,
    nothing: str = "No Service with EndpointSlices in this snapshot.",
) -> str:
    """The cluster header, then each verdict; `nothing` says why there is none."""
    lines = cluster_lines(result, options) + avoidable_lines(result, options)
    lines += missing_lines(options)
    if not verdicts:
        lines += ["", nothing]
    for verdict in verdicts:
        lines += ["", *service_lines(result, verdict, options)]
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


def command_lines(lead: str, command: str) -> list[str]:
    """A command after its lead, on a line of its own when too wide: never broken, so it copies."""
    if len(lead + command) <= WRAP_WIDTH:
        return [lead + command]
    return [lead.rstrip(), " " * (len(lead) - len(lead.lstrip()) + 2) + command]


# Cluster header


def profile_lines(profile: Profile, options: ExplainOptions, *, wrap: bool = False) -> list[str]:
    """behaviour §12: the versions and gates the verdicts below assume, then the warnings
    (`wrap`: each wrapped beside explain's labels)."""
    if not wrap:
        return [
            *profile_texts(profile),
            *(options.paint(note, Tone.WARN) for note in profile.notes()),
        ]
    return [
        *(line for text in profile_texts(profile) for line in reflow(text, options, hang="  ")),
        *(line for note in profile.notes() for line in reflow(note, options, Tone.WARN, "  ")),
    ]


def cluster_lines(result: ClusterResult, options: ExplainOptions) -> list[str]:
    capacity = result.capacity
    ready_nodes = len(result.nodes.zone_of)
    lines = ["Cluster", *fields("Kubernetes", profile_lines(result.profile, options, wrap=True))]
    if not result.nodes_known:
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
    texts = zone_loss_texts(options.zone_loss)
    if not texts:
        return [field("Zone loss", ZONE_LOSS_HARMLESS)]
    return fields("Zone loss", [options.paint(text, Tone.WARN) for text in texts])


def zone_share_lines(capacity: ClusterCapacity) -> list[str]:
    width = max(len(zone) for zone in capacity.zone_ratios)
    return [
        f"{zone:<{width}}  {percent(ratio):>6}  "
        f"({capacity.zone_millicores[zone] / 1000:g} CPU allocatable)"
        for zone, ratio in capacity.zone_ratios.items()
    ]


def offending_node_lines(problems: Sequence[NodeProblem], options: ExplainOptions) -> list[str]:
    if not problems:
        return [field("Why", TOO_FEW_ZONES)]
    lines = [field("Offending nodes", "")]
    for problem in problems:
        lack = node_lack(problem)
        if len(f"    {problem.node}: {lack}") <= WRAP_WIDTH:
            lines.append(f"    {problem.node}: {options.paint(lack, Tone.BAD)}")
        else:
            lines += [f"    {problem.node}:", f"      {options.paint(lack, Tone.BAD)}"]
        lines += command_lines("      fix: ", node_fix(problem))
    return lines


# One Service and address type


def service_lines(
    result: ClusterResult, verdict: EntryVerdict, options: ExplainOptions
) -> list[str]:
    if not result.nodes_known:
        return service_lines_without_nodes(result, verdict, options)
    service = verdict.service
    title = options.paint(f"Service {service.namespace}/{service.name}", Tone.BOLD)
    lines = [
        f"{title} ({verdict.address_type})",
        *routing_lines(result.nodes, verdict, options),
        *profile_effect_lines(result, verdict, options),
        *cross_zone_lines(verdict, options),
        *prose("Mechanism", mechanism_text(verdict), options),
        field("Verdict", verdict_text(verdict, options)),
        *prose("Why", why_text(result, verdict), options),
    ]
    if verdict.mechanism is Mechanism.AUTO:
        lines += prose("Expected event", event_text(verdict), options)
    lines += completeness_lines(result, verdict, options)
    lines += fields("kube-proxy", proxy_lines(result, verdict, options))
    lines += table_lines(verdict, options)
    lines += items("Warnings", load_warnings(verdict), options, Tone.WARN)
    lines += items("Drift", drift_texts(verdict), options, Tone.WARN)
    lines += fields("Config issues", config_issue_lines(verdict, options))
    lines += notice_lines(verdict, options)
    if verdict.mechanism is Mechanism.AUTO:
        lines += advisor_lines(result.capacity, verdict, options)
    return lines


def notice_lines(verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
    """behaviour §12's notices: worth knowing, never a problem."""
    if not verdict.notices:
        return []
    return items("Notices", [notice.text for notice in sorted(verdict.notices)], options)


def profile_effect_lines(
    result: ClusterResult, verdict: EntryVerdict, options: ExplainOptions
) -> list[str]:
    effect = profile_effect(result, verdict)
    return [] if effect is None else prose("Version skew", effect, options, Tone.WARN)


def service_lines_without_nodes(
    result: ClusterResult, verdict: EntryVerdict, options: ExplainOptions
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
        lines += prose("Why", AUTO_NEEDS_NODES, options)
    else:
        lines.append(field("Verdict", verdict_text(verdict, options)))
        lines += prose("Why", why_text(result, verdict), options)
    lines += completeness_lines(result, verdict, options)
    lines.append(field("kube-proxy", "unknown without Nodes (a node's zone decides its mode)"))
    lines += table_lines(verdict, options)
    if verdict.mechanism is not Mechanism.AUTO:
        lines += items("Drift", drift_texts(verdict), options, Tone.WARN)
    lines += fields("Config issues", config_issue_lines(verdict, options))
    return lines


def verdict_text(verdict: EntryVerdict, options: ExplainOptions) -> str:
    if verdict.expected_state is ExpectedState.ENABLED:
        return options.paint("enabled", Tone.GOOD)
    if verdict.expected_state is ExpectedState.DISABLED:
        return f"{options.paint('disabled', Tone.BAD)} ({verdict.reason})"
    return "not applicable"


def completeness_lines(
    result: ClusterResult, verdict: EntryVerdict, options: ExplainOptions
) -> list[str]:
    lines = [field("Hint completeness", completeness_text(verdict))]
    # The problem the result holds, not the condition written again (exporter.engine.problems).
    if ProblemId.PARTIAL_HINTS in result.problems(verdict):
        lines.append(INDENT + options.paint(PARTIAL_HINTS, Tone.WARN))
    return lines


def proxy_lines(result: ClusterResult, verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
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
        nodes = [n for n in result.nodes.by_zone.get(zone, ()) if n not in proxy.same_node]
        what = MODE_TEXT[mode] if nodes else EVERY_NODE_SAME_NODE
        lines += proxy_mode_lines(
            f"{zone_name(zone):<{width}}", mode, f"{plural(len(nodes), 'node')}: {what}", options
        )
    if proxy.same_node:
        lines += reflow(same_node_text(proxy.same_node), options, Tone.GOOD, hang="  ")
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


def table_lines(verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
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


def config_issue_lines(verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
    lines = []
    for issue in sorted(verdict.config_issues):
        lines.append(options.paint(str(issue), Tone.WARN))
        lines += reflow(f"  fix: {issue.fix}", options, hang="       ")
    return lines


def routing_lines(nodes: ReadyNodes, verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
    """One paragraph per configured data plane: where its clients' traffic goes, and why."""
    lines = []
    for dataplane, view in verdict.routing.items():
        text, tone = routing_text(dataplane, view, nodes)
        lines += reflow(f"{dataplane}: {text}", options, tone, hang="  ")
    return fields("Effective routing", lines)


def cross_zone_lines(verdict: EntryVerdict, options: ExplainOptions) -> list[str]:
    """Per data plane: the share expected to cross zones and what no routing avoids."""
    if not verdict.cross_zone:
        return []
    lines = []
    for dataplane, figures in verdict.cross_zone.items():
        tone = None if figures is None or figures.avoidable < AVOIDABLE_WORTH_SAYING else Tone.WARN
        lines += reflow(f"{dataplane}: {cross_zone_text(figures)}", options, tone, hang="  ")
    return fields("Cross-zone", [*lines, f"({CROSS_ZONE_MODEL})"])


def avoidable_lines(result: ClusterResult, options: ExplainOptions) -> list[str]:
    """The cluster summary's ranking of Services by avoidable cross-zone share."""
    if not result.nodes_known:
        return []
    ranked = avoidable_ranking(result.verdicts())
    if not ranked:
        return []
    texts = [avoidable_text(*item) for item in ranked[:AVOIDABLE_RANKED]]
    if len(ranked) > AVOIDABLE_RANKED:
        texts.append(f"and {plural(len(ranked) - AVOIDABLE_RANKED, 'more entry')}")
    texts.append(f"({CROSS_ZONE_MODEL})")
    return items("Avoidable share", texts, options)


# The replica advisor (auto only)


def advisor_lines(
    capacity: ClusterCapacity, verdict: EntryVerdict, options: ExplainOptions
) -> list[str]:
    if not capacity.sufficient:
        return [field("Replica advisor", NO_COUNT_WITHOUT_NODE_INFO)]
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


def advisor_token(
    capacity: ClusterCapacity, n: int, current: int, options: ExplainOptions
) -> tuple[str, str]:
    enabled = refusal_reason(capacity, n) is None
    word = "enabled" if enabled else "refused"
    now = " (now)" if n == current else ""
    painted = options.paint(word, Tone.GOOD if enabled else Tone.BAD)
    return f"{n} {word}{now}", f"{n} {painted}{now}"
