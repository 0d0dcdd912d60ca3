"""What counts as a problem, defined once: the problem ids, their words, severity and alert.

Every surface reads this table and `problems_of`: the `"problems"` of `explain -o json`,
`evaluate` and `/api/v1`, `explain --problems`, the summary lines, the exit status a CI gate
reads (`--fail-on`), the status page's filters, counts and row order, and the alert rules
(alerts/generate.py takes each alert's precedence from the table's order; a promtool test
checks that the alerts firing on the exporter's own metrics are exactly the ones the table
predicts). A surface that needs the word for a problem takes `PROBLEMS[id].words`.

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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from exporter.engine.allocation import OVERLOAD_LIMIT
from exporter.engine.evaluate import EntryVerdict, ExpectedState
from exporter.engine.kubeproxy import ProxyMode
from exporter.engine.mechanism import Mechanism


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
            ),
            Problem(
                ProblemId.LOCAL_POLICY_DROPS,
                "local policy drops",
                "internalTrafficPolicy Local drops the traffic of nodes without a local "
                "endpoint; hints do not apply there.",
                Severity.WARNING,
                "TopologyHintsLocalPolicyDropped",
            ),
            Problem(
                ProblemId.HINTS_OFF,
                "hints off",
                "The EndpointSlice controller removes (or would remove) every hint of a "
                "Service that asks for them.",
                Severity.WARNING,
                "TopologyHintsDisabled",
            ),
            Problem(
                ProblemId.PARTIAL_HINTS,
                "partial hints",
                "Some ready endpoints lack hints, so kube-proxy ignores every hint of the Service.",
                Severity.WARNING,
                "TopologyHintsIncomplete",
            ),
            Problem(
                ProblemId.DRIFT,
                "drift",
                "The hints in place differ from what the controller should write.",
                Severity.WARNING,
                "TopologyHintsDrift",
            ),
            Problem(
                ProblemId.HINTS_IGNORED,
                "traffic leaves its zone",
                "Hints are complete and should be kept, yet a configured data plane keeps no "
                "client's traffic in its zone or node.",
                Severity.WARNING,
                "TopologyHintsIgnored",
            ),
            Problem(
                ProblemId.ZONE_FALLBACK,
                "zone fallback",
                "A zone has no endpoint hinted for it, so kube-proxy sends that zone's "
                "traffic cluster-wide while other zones stay local.",
                Severity.WARNING,
                "TopologyHintsZoneFallback",
            ),
            Problem(
                ProblemId.OVERLOADED_ZONE,
                "overloaded zone",
                f"trafficDistribution keeps a zone's traffic on endpoints that receive more "
                f"than {OVERLOAD_LIMIT:g} times their fair share (no overload guard).",
                Severity.WARNING,
                "TopologyHintsZoneOverloaded",
            ),
            Problem(
                ProblemId.CONFIG_ISSUE,
                "config issue",
                "A setting is ignored, misspelt or shadowed (e.g. the old annotation overrides "
                "trafficDistribution).",
                Severity.INFO,
                "TopologyHintsConfigIssue",
                deferring=False,
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
    found = (
        *_no_endpoint_problems(verdict),
        *(problem for problem, holds in _CHECKS.items() if holds(verdict)),
    )
    if nodes_known or verdict.mechanism is not Mechanism.AUTO:
        return found
    return (*(problem for problem in found if problem not in _NEEDS_NODES), ProblemId.NODES_UNKNOWN)


# Each problem's condition, over the fields the alert's metrics are rendered from.
def _no_endpoint_problems(verdict: EntryVerdict) -> tuple[ProblemId, ...]:
    """The first two problems of the table, from one count per data plane of the nodes
    given no endpoint: failed closed (a node internalTrafficPolicy Local does not
    explain) and dropped by that policy."""
    failed = dropped = False
    for view in verdict.routing.values():
        failed_here, dropped_here = view.no_endpoint_nodes()
        failed = failed or failed_here > 0
        dropped = dropped or dropped_here > 0
    return (
        *((ProblemId.FAILS_CLOSED,) if failed else ()),
        *((ProblemId.LOCAL_POLICY_DROPS,) if dropped else ()),
    )


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


# The rest, in the table's order after those two.
_CHECKS: Mapping[ProblemId, Callable[[EntryVerdict], bool]] = MappingProxyType(
    {
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
