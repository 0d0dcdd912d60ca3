"""What counts as a problem, defined once: the problem ids, their words, severity and alert.

The evaluator step calls `problems_of` once per entry and stores the problems on the result
(exporter.state.result); every surface reads them there, and this table for their words:
the `"problems"` of `explain -o json`, `evaluate` and `/api/v1`, `explain --problems`, the
summary lines, the exit status a CI gate reads (`--fail-on`), the status page's filters,
counts, row order and partial-hints warnings. The alert rules take each problem alert's
name, severity, summary and precedence from this table (alerts/problems.py); a promtool test
checks that the alerts firing on the exporter's own metrics are exactly the ones the table
predicts. A surface that needs the word for a problem takes `PROBLEMS[id].words`; none
judges again (tests/test_problems_judged_once.py).

A problem is a way hints fail, or fail to help, that an alert covers. Per (Service,
address type) entry the alerts fire in the table's order, one cause one alert: only the
first problem that defers (`deferring`) pages, and a config issue is reported beside it.
Risks and history are not problems: the endpoint margin and zone-loss forecasts (what-if,
TopologyHintsOnEdge), flips (TopologyHintsFlapping) and measured traffic
(TopologyHintsMeasuredCrossZone) are shown and alerted on their own; notices
(behaviour §12) never are.

Each predicate reads the same verdict fields the metrics the alert reads are rendered from,
so the table and the alerts cannot disagree without the promtool test failing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.allocation import OVERLOAD_LIMIT
from exporter.engine.evaluate import EntryVerdict, ExpectedState
from exporter.engine.kubeproxy import ProxyMode
from exporter.engine.mechanism import Mechanism
from exporter.engine.routing import Routing, RoutingView


class ProblemId(StrEnum):
    """A problem's id, as `"problems"` in JSON, `--fail-on` and the status page's filter."""

    FAILS_CLOSED = "fails-closed"
    LOCAL_POLICY_DROPS = "local-policy-drops"
    HINTS_OFF = "hints-off"
    PARTIAL_HINTS = "partial-hints"
    DRIFT = "drift"
    HINTS_IGNORED = "hints-ignored"
    ZONE_FALLBACK = "zone-fallback"
    OVERLOADED_ZONE = "overloaded-zone"
    CONFIG_ISSUE = "config-issue"
    NODES_UNKNOWN = "nodes-unknown"


class Severity(StrEnum):
    """The severity of the alert that covers a problem, and of the problem everywhere."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Problem:
    """One row of the problem table: its id, words, meaning, severity and alert (the single
    definition every surface reads)."""

    id: ProblemId
    # A few words for lists, filters and summary lines.
    words: str
    # One sentence: what is wrong and what it costs.
    meaning: str
    severity: Severity
    # The alert that fires for it; None for a problem only a one-shot input can have.
    alert: str | None
    # One cause, one alert: an entry fires only the first deferring problem's alert.
    deferring: bool = True
    # The alert's summary annotation: the line an on-call reads first (alerts/problems.py).
    summary: str = ""


PROBLEMS: Mapping[ProblemId, Problem] = MappingProxyType(
    {
        problem.id: problem
        for problem in (
            Problem(
                ProblemId.FAILS_CLOSED,
                "fails closed",
                "A configured data plane gives some nodes' clients no endpoint although ready "
                "ones exist: requests from there fail.",
                Severity.CRITICAL,
                "TopologyHintsFailClosed",
                summary=(
                    "A data plane gives some clients of a Service no endpoint although ready "
                    "ones exist."
                ),
            ),
            Problem(
                ProblemId.LOCAL_POLICY_DROPS,
                "local policy drops",
                "internalTrafficPolicy Local drops the traffic of nodes without a local "
                "endpoint; hints do not apply there.",
                Severity.WARNING,
                "TopologyHintsLocalPolicyDropped",
                summary=(
                    "internalTrafficPolicy: Local drops a Service's in-cluster traffic on nodes "
                    "without a local endpoint."
                ),
            ),
            Problem(
                ProblemId.HINTS_OFF,
                "hints off",
                "The EndpointSlice controller removes (or would remove) every hint of a "
                "Service that asks for them.",
                Severity.WARNING,
                "TopologyHintsDisabled",
                summary="Topology-aware hints are disabled for a Service that asks for them.",
            ),
            Problem(
                ProblemId.PARTIAL_HINTS,
                "partial hints",
                "Some ready endpoints lack hints, so kube-proxy ignores every hint of the Service.",
                Severity.WARNING,
                "TopologyHintsIncomplete",
                summary=(
                    "Some ready endpoints of a Service lack a zone hint, so kube-proxy "
                    "ignores all hints."
                ),
            ),
            Problem(
                ProblemId.DRIFT,
                "drift",
                "The hints in place differ from what the controller should write.",
                Severity.WARNING,
                "TopologyHintsDrift",
                summary="The hints in a Service's EndpointSlices differ from the expected result.",
            ),
            Problem(
                ProblemId.HINTS_IGNORED,
                "traffic leaves its zone",
                "Hints are complete and should be kept, yet a configured data plane keeps no "
                "client's traffic in its zone or node.",
                Severity.WARNING,
                "TopologyHintsIgnored",
                summary=(
                    "A data plane ignores a Service's topology hints: its traffic leaves the zone "
                    "on every node."
                ),
            ),
            Problem(
                ProblemId.ZONE_FALLBACK,
                "zone fallback",
                "A zone has no endpoint hinted for it, so kube-proxy sends that zone's "
                "traffic cluster-wide while other zones stay local.",
                Severity.WARNING,
                "TopologyHintsZoneFallback",
                summary=(
                    "In one zone kube-proxy routes a Service across all zones; other zones "
                    "stay local."
                ),
            ),
            Problem(
                ProblemId.OVERLOADED_ZONE,
                "overloaded zone",
                f"trafficDistribution keeps a zone's traffic on endpoints that receive more "
                f"than {OVERLOAD_LIMIT:g} times their fair share (no overload guard).",
                Severity.WARNING,
                "TopologyHintsZoneOverloaded",
                summary=(
                    "Endpoints of one zone receive more than their fair share of a "
                    "Service's traffic."
                ),
            ),
            Problem(
                ProblemId.CONFIG_ISSUE,
                "config issue",
                "A setting is ignored, misspelt or shadowed (e.g. the old annotation overrides "
                "trafficDistribution).",
                Severity.INFO,
                "TopologyHintsConfigIssue",
                deferring=False,
                summary="A Service's topology-aware routing settings conflict or are ignored.",
            ),
            Problem(
                ProblemId.NODES_UNKNOWN,
                "nodes unknown",
                "The input holds no Nodes, so an auto verdict cannot be told (one-shot "
                "commands only; the live exporter always watches Nodes).",
                Severity.WARNING,
                None,
                deferring=False,
            ),
        )
    }
)

# The order alerts defer in, and the order problems are listed in.
PROBLEM_ORDER: tuple[ProblemId, ...] = tuple(PROBLEMS)
ENTRY_ALERT_PRECEDENCE: tuple[str, ...] = tuple(
    problem.alert
    for problem in PROBLEMS.values()
    if problem.deferring and problem.alert is not None
)
_SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
_FOLLOWING_MODES = frozenset({ProxyMode.PREFER_SAME_ZONE, ProxyMode.PREFER_SAME_NODE})


def in_play(verdict: EntryVerdict) -> bool:
    """Hints are in play for the entry: it asks for them, carries some, or has a config issue.

    Only these are exported by default (bounded cardinality), so only these can fire an
    alert, and only these can have a problem.
    """
    return (
        verdict.mechanism is not Mechanism.NONE
        or verdict.carries_hints
        or bool(verdict.config_issues)
    )


def problems_of(verdict: EntryVerdict, *, nodes_known: bool = True) -> tuple[ProblemId, ...]:
    """The entry's problems, in the table's order. `nodes_known` is False only for a
    one-shot input without Nodes: what needs them is then unknown, not wrong."""
    if not in_play(verdict):
        return ()
    if not verdict.proxied:
        # Headless, ExternalName or not an IP address type: no data plane reads its hints, so
        # whether they are written, complete or drifting changes no client's traffic.
        return (ProblemId.CONFIG_ISSUE,) if verdict.config_issues else ()
    found = tuple(problem for problem, holds in PREDICATES.items() if holds(verdict))
    if nodes_known or verdict.mechanism is not Mechanism.AUTO:
        return found
    return (*(problem for problem in found if problem not in _NEEDS_NODES), ProblemId.NODES_UNKNOWN)


# Each problem's condition, over the fields the alert's metrics are rendered from.
def _no_endpoint_views(verdict: EntryVerdict) -> Iterator[RoutingView]:
    """The data planes' views that may give a Ready node no endpoint: the only ones whose
    node counts (counted on demand) the next two predicates need."""
    for view in verdict.routing.values():
        if any(zone.routing is Routing.NO_ENDPOINTS for zone in view.by_zone.values()) or (
            Routing.NO_ENDPOINTS in view.by_node.values()
        ):
            yield view


def _fails_closed(verdict: EntryVerdict) -> bool:
    """A data plane gives Ready nodes no endpoint, which internalTrafficPolicy Local does
    not explain."""
    return any(view.no_endpoint_nodes()[0] > 0 for view in _no_endpoint_views(verdict))


def _local_policy_drops(verdict: EntryVerdict) -> bool:
    """internalTrafficPolicy Local gives Ready nodes without a local endpoint none."""
    return any(view.no_endpoint_nodes()[1] > 0 for view in _no_endpoint_views(verdict))


def _hints_off(verdict: EntryVerdict) -> bool:
    return verdict.expected_state is ExpectedState.DISABLED


def _partial_hints(verdict: EntryVerdict) -> bool:
    completeness = verdict.hint_completeness
    return completeness is not None and 0 < completeness < 1


def _drift(verdict: EntryVerdict) -> bool:
    return bool(verdict.drift)


def _hints_ignored(verdict: EntryVerdict) -> bool:
    return (
        verdict.expected_state is ExpectedState.ENABLED
        and verdict.hint_completeness == 1
        and any(view.local_ratio == 0 for view in verdict.routing.values())
    )


def _zone_fallback(verdict: EntryVerdict) -> bool:
    modes = set(verdict.proxy.by_zone.values())
    return ProxyMode.CLUSTER in modes and bool(modes & _FOLLOWING_MODES)


def _overloaded_zone(verdict: EntryVerdict) -> bool:
    return verdict.mechanism is Mechanism.TRAFFIC_DISTRIBUTION and has_overloaded_zone(verdict)


def _config_issue(verdict: EntryVerdict) -> bool:
    return bool(verdict.config_issues)


# One predicate per problem of the verdict, in the table's order: every problem but
# nodes-unknown, which is the input's (what it lacks), not the verdict's.
PREDICATES: Mapping[ProblemId, Callable[[EntryVerdict], bool]] = MappingProxyType(
    {
        ProblemId.FAILS_CLOSED: _fails_closed,
        ProblemId.LOCAL_POLICY_DROPS: _local_policy_drops,
        ProblemId.HINTS_OFF: _hints_off,
        ProblemId.PARTIAL_HINTS: _partial_hints,
        ProblemId.DRIFT: _drift,
        ProblemId.HINTS_IGNORED: _hints_ignored,
        ProblemId.ZONE_FALLBACK: _zone_fallback,
        ProblemId.OVERLOADED_ZONE: _overloaded_zone,
        ProblemId.CONFIG_ISSUE: _config_issue,
    }
)
# What an auto verdict cannot tell without Nodes: shown as nodes-unknown instead.
_NEEDS_NODES = frozenset({ProblemId.HINTS_OFF, ProblemId.DRIFT})


def has_overloaded_zone(verdict: EntryVerdict) -> bool:
    """A zone whose kube-proxy follows its hints sends them more than the overload limit."""
    by_zone = verdict.proxy.by_zone
    return any(
        zone_verdict.load_factor is not None
        and zone_verdict.load_factor > OVERLOAD_LIMIT
        and by_zone.get(zone) is ProxyMode.PREFER_SAME_ZONE
        for zone, zone_verdict in verdict.zones.items()
    )


def severity_of(problems: Iterable[ProblemId]) -> Severity | None:
    """The worst severity among the problems; None without one."""
    worst = None
    for problem in problems:
        severity = PROBLEMS[problem].severity
        if worst is None or _SEVERITY_RANK[severity] < _SEVERITY_RANK[worst]:
            worst = severity
    return worst
