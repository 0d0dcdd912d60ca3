"""The problems' alerts: one per problem of the table (exporter/engine/problems.py).

Each alert's name, severity and summary are the problem table's; here are only its
condition over the exporter's metrics and its description. One cause, one alert: a (Service,
address type) fires only the first of the deferring problems' alerts whose condition holds,
in the table's order, so a consequence never pages beside its cause (docs/runbooks.md); the
risk and traffic alerts (alerts/generate.py) defer to all of them.
"""

from __future__ import annotations

from typing import Any

from alerts.rules import (
    SERVICE,
    SERVICE_TEXT,
    RuleConfig,
    aggregate,
    alert,
    hints_selector,
    labels,
)
from exporter.engine.problems import PROBLEMS, ProblemId
from exporter.engine.routing import PROXIED_ADDRESS_TYPES
from exporter.metrics import families as f
from exporter.metrics.monitoring import (
    LOCAL_POLICY_IGNORED_BY,
    SERVICE_IDENTITY,
    Mechanism,
    ProxyMode,
    Routing,
)

# The problems whose alerts defer to one another, in the table's order (their alert names
# are exporter.engine.problems.ENTRY_ALERT_PRECEDENCE).
ENTRY_PROBLEMS: tuple[ProblemId, ...] = tuple(
    problem.id for problem in PROBLEMS.values() if problem.deferring and problem.alert is not None
)


def alert_name(problem: ProblemId) -> str:
    """The problem's alert, as the table names it."""
    name = PROBLEMS[problem].alert
    if name is None:
        raise ValueError(f"the problem {problem} has no alert")
    return name


def problem_alert(
    config: RuleConfig,
    problem: ProblemId,
    description: str,
    *,
    by: tuple[str, ...] = (),
    expr: str | None = None,
) -> dict[str, Any]:
    """The problem's alert: the table's name, severity and summary; by default the entry
    condition aggregated by the entry and `by`, held back while an earlier problem's holds."""
    entry = PROBLEMS[problem]
    return alert(
        config,
        alert_name(problem),
        entry_alert_expr(config, problem, *by) if expr is None else expr,
        str(entry.severity),
        entry.summary,
        description,
    )


def entry_conditions(config: RuleConfig) -> dict[ProblemId, str]:
    """Each problem of ENTRY_PROBLEMS's alert condition, per (Service, address type),
    unaggregated."""
    c = config
    S = labels(c, *SERVICE)  # noqa: N806 - the label list every condition joins on
    no_endpoints = f'routing="{Routing.NO_ENDPOINTS}"'
    reads_policy = f'dataplane!~"{"|".join(LOCAL_POLICY_IGNORED_BY)}"'
    local_policy = 'internal_traffic_policy="Local"'
    # No endpoint on a node because internalTrafficPolicy Local finds none there.
    dropped = (
        f"{f.SERVICE_ROUTING_NODES.name}{hints_selector(c, no_endpoints, reads_policy)} > 0\n"
        f"  and on {labels(c, *SERVICE_IDENTITY)}\n"
        f"  {f.SERVICE_INFO.name}{hints_selector(c, local_policy)}"
    )
    following_zone = f'mode="{ProxyMode.PREFER_SAME_ZONE}"'
    cluster_mode = f'mode="{ProxyMode.CLUSTER}"'
    local_modes = f'mode=~"{ProxyMode.PREFER_SAME_ZONE}|{ProxyMode.PREFER_SAME_NODE}"'
    traffic_distribution = f'mechanism="{Mechanism.TRAFFIC_DISTRIBUTION}"'
    # No data plane reads the hints of a headless or ExternalName Service, or of an address
    # type other than IPv4/IPv6: their state is no problem (docs/problems.md).
    routed = 'address_type=~"' + "|".join(sorted(PROXIED_ADDRESS_TYPES)) + '"'
    not_proxied = 'proxied="false"'
    unproxied = (
        f"\n  unless on {labels(c, *SERVICE_IDENTITY)}\n"
        f"  {f.SERVICE_INFO.name}{hints_selector(c, not_proxied)}"
    )
    return {
        ProblemId.FAILS_CLOSED: (
            f"{f.SERVICE_ROUTING_NODES.name}{hints_selector(c, no_endpoints)} > 0\n"
            f"  unless (\n    {dropped.replace(chr(10), chr(10) + '  ')}\n  )"
        ),
        ProblemId.LOCAL_POLICY_DROPS: dropped,
        ProblemId.HINTS_OFF: (
            f"{f.SERVICE_DISABLED_REASON.name}{hints_selector(c, routed)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_EXPECTED_ENABLED.name}{hints_selector(c)} == 0{unproxied}"
        ),
        ProblemId.PARTIAL_HINTS: (
            f"{f.SERVICE_HINT_COMPLETENESS.name}{hints_selector(c, routed)} > 0 < 1{unproxied}"
        ),
        ProblemId.DRIFT: f"{f.SERVICE_DRIFT.name}{hints_selector(c, routed)} == 1{unproxied}",
        ProblemId.HINTS_IGNORED: (
            f"{f.SERVICE_LOCAL_ROUTING_RATIO.name}{hints_selector(c)} == 0\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_EXPECTED_ENABLED.name}{hints_selector(c)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_HINT_COMPLETENESS.name}{hints_selector(c)} == 1"
        ),
        ProblemId.ZONE_FALLBACK: (
            f"{f.SERVICE_PROXY_MODE.name}{hints_selector(c, cluster_mode)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_PROXY_MODE.name}{hints_selector(c, local_modes)} == 1"
        ),
        # Only where kube-proxy follows the zone's hints (explain's warning says the same):
        # under internalTrafficPolicy Local (mode Local) or in a Cluster zone, the hinted
        # endpoints do not take the zone's traffic.
        ProblemId.OVERLOADED_ZONE: (
            f"{f.ZONE_LOAD_FACTOR.name}{hints_selector(c)} > {c.monitoring.overload_limit}\n"
            f"  and on {labels(c, *SERVICE_IDENTITY)}\n"
            f"  {f.SERVICE_INFO.name}{hints_selector(c, traffic_distribution)}\n"
            f"  and on {labels(c, *SERVICE, 'zone')}\n"
            f"  {f.SERVICE_PROXY_MODE.name}{hints_selector(c, following_zone)} == 1"
        ),
    }


def deferrals(
    config: RuleConfig,
    problems: tuple[ProblemId, ...] = ENTRY_PROBLEMS,
    identity: tuple[str, ...] = SERVICE,
) -> str:
    """`unless` clauses that hold an alert back while any of these problems' alert
    conditions hold (for any of the entries sharing `identity`)."""
    conditions = entry_conditions(config)
    return "".join(
        f"\n  unless on {labels(config, *identity)} (\n    "
        + conditions[other].replace("\n", "\n  ")
        + "\n  )"
        for other in problems
    )


def entry_alert_expr(config: RuleConfig, problem: ProblemId, *by: str) -> str:
    """The problem's alert condition, aggregated by the entry and `by`, unless an earlier
    problem's holds."""
    earlier = ENTRY_PROBLEMS[: ENTRY_PROBLEMS.index(problem)]
    condition = entry_conditions(config)[problem]
    return (
        f"{aggregate(config, 'max', *SERVICE, *by)} (\n  {condition}"
        f"{deferrals(config, earlier)}\n)\n"
    )


# --------------------------------------------------------------------------------------------------
# The problems' alerts, by the group they are shipped in (alerts/generate.py's `groups`)
# --------------------------------------------------------------------------------------------------


def service_rules(config: RuleConfig) -> list[dict[str, Any]]:
    """What the EndpointSlice controller does with a Service's hints."""
    c = config
    return [
        problem_alert(
            c,
            ProblemId.HINTS_OFF,
            f"Service {SERVICE_TEXT} sets topology-mode Auto, but the EndpointSlice controller "
            "refuses to write topology hints for it: {{ $labels.reason }}. "
            "kube-proxy routes its traffic across all zones.",
            by=("reason",),
        ),
        problem_alert(
            c,
            ProblemId.PARTIAL_HINTS,
            "{{ $value | humanizePercentage }} of the ready endpoints of Service "
            f"{SERVICE_TEXT} carry a zone hint. kube-proxy uses hints only when every ready "
            "endpoint has one, so it routes this Service across all zones.",
        ),
        problem_alert(
            c,
            ProblemId.DRIFT,
            f"Service {SERVICE_TEXT} has drift of kind {{{{ $labels.kind }}}} for more than "
            f"{c.for_duration(alert_name(ProblemId.DRIFT))}: longer than normal controller "
            "lag, so the EndpointSlice controller is not applying the expected hints.",
            by=("kind",),
        ),
    ]


def kube_proxy_rules(config: RuleConfig) -> list[dict[str, Any]]:
    c = config
    return [
        problem_alert(
            c,
            ProblemId.ZONE_FALLBACK,
            "{{ if $labels.zone }}In zone {{ $labels.zone }}{{ else }}On nodes without a zone "
            "label{{ end }}, kube-proxy runs Service "
            f"{SERVICE_TEXT} in Cluster mode while other zones follow its topology hints: "
            "no ready endpoint is hinted for these nodes' zone, so their clients' traffic leaves "
            "the zone.",
            by=("zone",),
        ),
        problem_alert(
            c,
            ProblemId.OVERLOADED_ZONE,
            f"Service {SERVICE_TEXT} uses trafficDistribution, which has no overload guard: "
            'each endpoint hinted for zone {{ $labels.zone }} gets {{ $value | printf "%.2f" }} '
            "times its fair share of traffic (when traffic follows CPU).",
            by=("zone",),
        ),
    ]


def routing_rules(config: RuleConfig) -> list[dict[str, Any]]:
    """SPEC section 10: what the data planes really do with the hints."""
    c = config
    return [
        problem_alert(
            c,
            ProblemId.HINTS_IGNORED,
            f"The EndpointSlice controller hints every ready endpoint of Service {SERVICE_TEXT}, "
            "yet {{ $labels.dataplane }} routes no client to a local endpoint. "
            "Run `topology-hints-exporter explain` on the Service for the cause (an endpoint "
            "without a ready condition, a data plane that does not read hints).",
            by=("dataplane",),
        ),
        problem_alert(
            c,
            ProblemId.FAILS_CLOSED,
            "{{ $value }} Ready node(s) {{ if $labels.zone }}in zone {{ $labels.zone }}"
            "{{ else }}without a zone label{{ end }} get no endpoint of Service "
            f"{SERVICE_TEXT} from {{{{ $labels.dataplane }}}}: no ready endpoint is hinted for "
            "their zone and this data plane fails closed (connections refused or HTTP 503) "
            "instead of falling back to every zone.",
            by=("dataplane", "zone"),
        ),
        problem_alert(
            c,
            ProblemId.LOCAL_POLICY_DROPS,
            "{{ $value }} Ready node(s) {{ if $labels.zone }}in zone {{ $labels.zone }}"
            "{{ else }}without a zone label{{ end }} run no ready (or serving terminating) "
            f"endpoint of Service {SERVICE_TEXT}, which sets internalTrafficPolicy: Local, so "
            "{{ $labels.dataplane }} drops the in-cluster traffic of clients on those nodes. "
            "Hints do not apply to such traffic.",
            by=("dataplane", "zone"),
        ),
    ]


def configuration_rules(config: RuleConfig) -> list[dict[str, Any]]:
    """A config issue is reported beside any other problem: per Service, deferring to none."""
    c = config
    return [
        problem_alert(
            c,
            ProblemId.CONFIG_ISSUE,
            "Service {{ $labels.namespace }}/{{ $labels.service }} has the topology "
            "configuration issue {{ $labels.issue }}.",
            expr=f"""
{aggregate(c, "max", "namespace", "service", "issue")} (
  {f.SERVICE_CONFIG_ISSUE.name}{hints_selector(c)} == 1
)
""",
        ),
    ]
