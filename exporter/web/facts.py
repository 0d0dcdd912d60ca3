"""What the status pages say about the cluster and one Service: `explain`'s facts, as data.

The sentences come from `exporter.report.explain` (the terminal text is laid out there; here only
its facts and sentences are taken), so the page and `explain` never disagree. Every import
from `exporter.report.explain` is in this module, so a change there is adapted in one place.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from exporter.engine import (
    ClusterCapacity,
    EntryVerdict,
    Mechanism,
    ProxyMode,
)
from exporter.engine.allocation import OVERLOAD_LIMIT, refusal_reason
from exporter.engine.problems import ProblemId
from exporter.engine.whatif.feasibility import Margin
from exporter.report.advice import advisor_range, margin_text, node_fix, node_lack, suggestion
from exporter.report.explain import ExplainOptions, profile_lines
from exporter.report.phrases import (
    EVERY_NODE_SAME_NODE,
    MODE_TEXT,
    PARTIAL_HINTS,
    TABLE_COLUMNS,
    Tone,
    drift_texts,
    event_text,
    load_warnings,
    mechanism_text,
    percent,
    profile_effect,
    table_rows,
    whole_percent,
    why_text,
    zone_name,
)
from exporter.report.traffic import AVOIDABLE_WORTH_SAYING, cross_zone_text, routing_text
from exporter.state.result import ClusterResult


def share(ratio: float) -> str:
    return percent(ratio)


def plural(count: int, singular: str, several: str | None = None) -> str:
    return f"{count:,} {singular if count == 1 else several or singular + 's'}"


@dataclass(frozen=True, slots=True)
class ZoneShare:
    """One zone's row of the cluster page: its share of CPU, allocatable CPU and Ready nodes."""

    zone: str
    share: str
    allocatable_cpu: str
    ready_nodes: int


@dataclass(frozen=True, slots=True)
class NodeFix:
    """A node the controller cannot count, what it lacks and the command that fixes it."""

    node: str
    lack: str
    fix: str


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What the cluster page shows, as text: whether node info suffices, the zones, the nodes to
    fix and the Kubernetes assumed."""

    sufficient: bool
    ready_nodes: int
    zones: tuple[ZoneShare, ...]
    offending: tuple[NodeFix, ...]
    # behaviour §12: the Kubernetes versions and gates the verdicts assume, as explain says.
    kubernetes: tuple[str, ...] = ()


def cluster_facts(result: ClusterResult) -> ClusterFacts:
    capacity = result.capacity
    by_zone = result.nodes.by_zone
    return ClusterFacts(
        sufficient=capacity.sufficient,
        ready_nodes=len(result.nodes.zone_of),
        zones=tuple(
            ZoneShare(
                zone=zone,
                share=percent(ratio),
                allocatable_cpu=f"{capacity.zone_millicores[zone] / 1000:g}",
                ready_nodes=len(by_zone.get(zone, ())),
            )
            for zone, ratio in capacity.zone_ratios.items()
        ),
        offending=tuple(
            NodeFix(problem.node, node_lack(problem), node_fix(problem))
            for problem in capacity.problems
        ),
        kubernetes=tuple(profile_lines(result.profile, ExplainOptions(color=False))),
    )


@dataclass(frozen=True, slots=True)
class ProxyRow:
    """One zone's row of kube-proxy's routing on a Service's page."""

    zone: str
    mode: str
    nodes: int
    meaning: str
    follows_hints: bool


@dataclass(frozen=True, slots=True)
class AdvisorStep:
    """One endpoint count of the advisor's strip, and whether `auto` would hint at it."""

    endpoints: int
    enabled: bool
    current: bool


@dataclass(frozen=True, slots=True)
class IssueFix:
    """A config issue on a Service's page, with its fix."""

    issue: str
    fix: str


@dataclass(frozen=True, slots=True)
class ZoneTable:
    """The per-zone table of a Service's page, as text, with the overloaded rows marked."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    # Rows whose load factor is above what `auto` allows (the last column).
    overloaded: frozenset[int]


@dataclass(frozen=True, slots=True)
class CrossZoneRow:
    """One data plane's expected cross-zone share (behaviour §13), in explain's words."""

    dataplane: str
    text: str
    # "" when no client is given an endpoint.
    effective: str
    floor: str
    avoidable: str
    worth_saying: bool
    # "zone 50%" per client zone.
    zones: str


def cross_zone_rows(verdict: EntryVerdict) -> tuple[CrossZoneRow, ...]:
    rows = []
    for dataplane, figures in verdict.cross_zone.items():
        if figures is None:
            text = cross_zone_text(None)
            rows.append(
                CrossZoneRow(str(dataplane), text, "", "", "", worth_saying=False, zones="")
            )
            continue
        rows.append(
            CrossZoneRow(
                str(dataplane),
                cross_zone_text(figures),
                whole_percent(figures.effective),
                whole_percent(figures.floor),
                whole_percent(figures.avoidable),
                figures.avoidable >= AVOIDABLE_WORTH_SAYING,
                ", ".join(
                    f"{zone} {whole_percent(zone_share.effective)}"
                    for zone, zone_share in figures.zones.items()
                ),
            )
        )
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class RoutingLine:
    """Where one configured data plane sends this Service's traffic, in explain's words."""

    dataplane: str
    text: str
    # "good" when every client's traffic stays local, "bad" when it fails closed.
    tone: str


# explain's terminal colours as the pages' tones; bold (no routing at all) has none.
_TONES = {Tone.GOOD: "good", Tone.WARN: "warn", Tone.BAD: "bad"}


def routing_lines(result: ClusterResult, verdict: EntryVerdict) -> tuple[RoutingLine, ...]:
    """Per configured data plane, in the configured order, as explain's "Effective routing"."""
    lines = []
    for dataplane, view in verdict.routing.items():
        text, tone = routing_text(dataplane, view, result.nodes)
        lines.append(RoutingLine(str(dataplane), text, _TONES.get(tone, "")))
    return tuple(lines)


def margin_words(margin: Margin) -> str:
    """explain's "Margin" sentence; the list's Margin column says the same."""
    return margin_text(margin)


@dataclass(frozen=True, slots=True)
class ServiceFacts:
    """Everything a Service's page shows, as text, computed from its verdict once."""

    verdict: EntryVerdict
    mechanism: str
    why: str
    expected_event: str | None
    completeness: str
    # Set when kube-proxy ignores the hints because only some endpoints carry one.
    completeness_warning: str | None
    proxy: tuple[ProxyRow, ...]
    same_node: str | None
    zones: ZoneTable
    warnings: tuple[str, ...]
    drift: tuple[str, ...]
    config_issues: tuple[IssueFix, ...]
    # None unless the mechanism is `auto`; empty while node info is insufficient.
    advisor: tuple[AdvisorStep, ...] | None
    suggestion: str | None
    # behaviour §12: notices (never a problem), and why a skewed kube-proxy routes otherwise.
    notices: tuple[IssueFix, ...] = ()
    version_skew: str | None = None
    # Per data plane; empty where no routing applies.
    cross_zone: tuple[CrossZoneRow, ...] = ()
    # Per configured data plane, in the configured order (behaviour §10).
    routing: tuple[RoutingLine, ...] = ()
    # The command that does what the suggestion says, whole, as explain prints it.
    suggestion_command: str | None = None
    # How far the endpoint count may move before hints turn off (enabled `auto` only).
    margin: str | None = None


def completeness_words(
    verdict: EntryVerdict, problems: Collection[ProblemId]
) -> tuple[str, str | None]:
    """The completeness in words, and the partial-hints warning where the entry has that
    problem (`problems`: the entry's, as the result holds them)."""
    completeness, ready = verdict.hint_completeness, verdict.ready_endpoints
    if completeness is None:
        return "- (no ready endpoints)", None
    hinted = verdict.hinted_endpoints
    verb = "has" if hinted == 1 else "have"
    words = (
        f"{percent(completeness)}: {hinted:,} of {plural(ready, 'ready endpoint')} {verb} "
        "a zone hint"
    )
    if ProblemId.PARTIAL_HINTS in problems:
        return words, PARTIAL_HINTS
    return words, None


def proxy_rows(result: ClusterResult, verdict: EntryVerdict) -> tuple[ProxyRow, ...]:
    proxy = verdict.proxy
    rows = []
    for zone, mode in proxy.by_zone.items():
        nodes = [n for n in result.nodes.by_zone.get(zone, ()) if n not in proxy.same_node]
        meaning = MODE_TEXT[mode] if nodes else EVERY_NODE_SAME_NODE
        rows.append(
            ProxyRow(
                zone=zone_name(zone),
                mode=str(mode),
                nodes=len(nodes),
                meaning=meaning,
                follows_hints=mode in {ProxyMode.PREFER_SAME_ZONE, ProxyMode.PREFER_SAME_NODE},
            )
        )
    return tuple(rows)


def zone_table(verdict: EntryVerdict) -> ZoneTable:
    rows = tuple(table_rows(verdict))
    overloaded = frozenset(
        index
        for index, row in enumerate(rows)
        if row[-1] != "-" and float(row[-1]) > OVERLOAD_LIMIT
    )
    return ZoneTable(columns=tuple(TABLE_COLUMNS), rows=rows, overloaded=overloaded)


def advisor_steps(capacity: ClusterCapacity, verdict: EntryVerdict) -> tuple[AdvisorStep, ...]:
    if not capacity.sufficient:
        return ()
    current = verdict.ready_endpoints
    return tuple(
        AdvisorStep(n, refusal_reason(capacity, n) is None, n == current)
        for n in advisor_range(capacity, current)
    )


def service_facts(
    result: ClusterResult, verdict: EntryVerdict, margin: Margin | None = None
) -> ServiceFacts:
    """`margin`: the live forecast's endpoint margin of this entry (the list shows it too)."""
    auto = verdict.mechanism is Mechanism.AUTO
    capacity = result.capacity
    advice = suggestion(capacity, verdict) if auto and capacity.sufficient else None
    completeness, warning = completeness_words(verdict, result.problems(verdict))
    same_node = (
        f"{ProxyMode.PREFER_SAME_NODE} on {', '.join(verdict.proxy.same_node)}: "
        f"{MODE_TEXT[ProxyMode.PREFER_SAME_NODE]}"
        if verdict.proxy.same_node
        else None
    )
    return ServiceFacts(
        verdict=verdict,
        mechanism=mechanism_text(verdict),
        why=why_text(result, verdict),
        expected_event=event_text(verdict) if auto else None,
        completeness=completeness,
        completeness_warning=warning,
        proxy=proxy_rows(result, verdict),
        same_node=same_node,
        zones=zone_table(verdict),
        warnings=tuple(load_warnings(verdict)),
        drift=tuple(drift_texts(verdict)),
        config_issues=tuple(
            IssueFix(str(issue), issue.fix) for issue in sorted(verdict.config_issues)
        ),
        advisor=advisor_steps(capacity, verdict) if auto else None,
        suggestion=advice.text if advice is not None else None,
        notices=tuple(IssueFix(str(notice), notice.text) for notice in sorted(verdict.notices)),
        version_skew=profile_effect(result, verdict),
        cross_zone=cross_zone_rows(verdict),
        routing=routing_lines(result, verdict),
        suggestion_command=advice.command if advice is not None else None,
        margin=margin_words(margin) if margin is not None and advice is not None else None,
    )
