"""Generate the topology-hints alerting rules, in the monitoring-mixin style.

Run `python -m alerts.generate` after editing CONFIG or a rule below; it rewrites

- `alerts/topology-hints.rules.yaml`: a plain Prometheus rule file (for `rule_files:`);
- `deploy/overlays/prometheus-operator/prometheusrule.yaml`: the same groups as a
  `monitoring.coreos.com/v1` PrometheusRule.

Both files are committed; tests/test_alerts.py regenerates them and fails on any difference.
`--root DIR` writes the two files under DIR instead of the repository. Metric names come
from the exporter's family table; the selector, the cluster label every aggregation keeps,
the runbook URLs, the thresholds, label sets and mode names from `exporter.metrics.monitoring`
(`MonitoringConfig`, which mixin/ also reads). The last group holds the dashboards'
recording rules (`alerts/recording.py`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from alerts import controller
from alerts.recording import GROUP as RECORDING_GROUP
from alerts.recording import recording_rules
from alerts.traffic import (
    CROSS_ZONE_GROUP,
    EXPECTED_SHARE,
    ISTIO_GROUP,
    LINKERD_GROUP,
    MEASURED_SHARE,
    attributed_bytes,
    traffic_groups,
)
from exporter.engine.problems import ENTRY_ALERT_PRECEDENCE, PROBLEMS
from exporter.engine.routing import PROXIED_ADDRESS_TYPES
from exporter.metrics import families as f
from exporter.metrics.monitoring import (
    ENTRY_IDENTITY,
    LOCAL_POLICY_IGNORED_BY,
    OPTIONAL_RESOURCES,
    SERVICE_IDENTITY,
    Mechanism,
    MonitoringConfig,
    ProxyMode,
    Routing,
)

# --------------------------------------------------------------------------------------------------
# Configuration: every selector, duration and threshold the rules use lives here.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    # The selector, cluster label, runbook URLs and thresholds the dashboards and the mixin
    # share (exporter/metrics/monitoring.py).
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)
    # How long a condition must hold before its alert fires, per alert name.
    for_durations: dict[str, str] = field(
        default_factory=lambda: {
            "TopologyHintsDisabled": "15m",
            "TopologyHintsIncomplete": "15m",
            "TopologyHintsInsufficientNodeInfo": "15m",
            "TopologyHintsDrift": "15m",  # long enough that it is not controller lag
            "TopologyHintsZoneOverloaded": "15m",
            "TopologyHintsZoneFallback": "15m",
            "TopologyHintsFlapping": "0m",  # the flap window already spans time
            "TopologyHintsOnEdge": "1h",  # a standing risk, not a rollout's passing count
            "TopologyHintsConfigIssue": "15m",
            "TopologyHintsIgnored": "15m",
            "TopologyHintsFailClosed": "5m",  # clients are refused: page sooner
            # A node-local endpoint missing for longer than a pod restart takes.
            "TopologyHintsLocalPolicyDropped": "15m",
            "TopologyHintsExporterWatchDown": "5m",
            # RBAC changes are slow; the exporter backs its 403 retries off to 5 minutes.
            "TopologyHintsExporterOptionalWatchDown": "15m",
            "TopologyHintsExporterDown": "5m",
            # Long enough that a burst or a rollout's reconnections do not decide it.
            "TopologyHintsMeasuredCrossZone": "30m",
        }
    )
    # The PrometheusRule object. Its labels must match your Prometheus's `ruleSelector`
    # (kube-prometheus selects `prometheus: k8s` and `role: alert-rules`): adjust them here.
    prometheus_rule_name: str = "topology-hints-exporter"
    prometheus_rule_labels: dict[str, str] = field(
        default_factory=lambda: {
            "app.kubernetes.io/name": "topology-hints-exporter",
            "prometheus": "k8s",
            "role": "alert-rules",
        }
    )


CONFIG = Config()

RULES_PATH = Path("alerts/topology-hints.rules.yaml")
PROMETHEUS_RULE_PATH = Path("deploy/overlays/prometheus-operator/prometheusrule.yaml")
REPO_ROOT = Path(__file__).resolve().parent.parent

SERVICE = ENTRY_IDENTITY
SERVICE_TEXT = "{{ $labels.namespace }}/{{ $labels.service }} ({{ $labels.address_type }})"

# --------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------


def hints_selector(config: Config, *matchers: str) -> str:
    """The label selector of a topology_hints_* series, with extra matchers."""
    return config.monitoring.series("", *matchers)


def labels(config: Config, *names: str) -> str:
    """A `by`/`on` label list: the cluster label, then these."""
    return config.monitoring.labels(*names)


def templated_query(
    config: Config,
    metric: str,
    *,
    scoped: tuple[str, ...] = (),
    matcher: str = "",
    suffix: str = "",
) -> str:
    """A Go-template pipeline yielding a query for `metric` whose `scoped` labels (and the
    cluster label) equal the alert's own."""
    names = (config.monitoring.cluster_label, *scoped)
    placeholders = [f"{name}=%q" for name in names]
    query = f"{metric}{hints_selector(config, *placeholders, matcher)}{suffix}"
    if "`" in query:
        raise ValueError(f"a query inside a template cannot contain a backquote: {query}")
    return f"printf `{query}` " + " ".join(f"$labels.{name}" for name in names)


def aggregate(config: Config, operator: str, *names: str) -> str:
    """`operator by (...)` over the cluster label and these: alerts of two clusters never merge."""
    return f"{operator} by {labels(config, *names)}"


# One cause, one alert: a (Service, address type) fires only the first of these alerts whose
# condition holds, so a consequence never pages beside its cause (docs/runbooks.md). The
# order is the problem table's (exporter.engine.problems), where each problem names its alert.
ENTRY_PRECEDENCE = ENTRY_ALERT_PRECEDENCE


def problem_severity(alert_name: str) -> str:
    """The severity of the problem this alert covers, from the problem table."""
    return next(str(p.severity) for p in PROBLEMS.values() if p.alert == alert_name)


def entry_conditions(config: Config) -> dict[str, str]:
    """Each alert of ENTRY_PRECEDENCE's condition, per (Service, address type), unaggregated."""
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
        "TopologyHintsFailClosed": (
            f"{f.SERVICE_ROUTING_NODES.name}{hints_selector(c, no_endpoints)} > 0\n"
            f"  unless (\n    {dropped.replace(chr(10), chr(10) + '  ')}\n  )"
        ),
        "TopologyHintsLocalPolicyDropped": dropped,
        "TopologyHintsDisabled": (
            f"{f.SERVICE_DISABLED_REASON.name}{hints_selector(c, routed)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_EXPECTED_ENABLED.name}{hints_selector(c)} == 0{unproxied}"
        ),
        "TopologyHintsIncomplete": (
            f"{f.SERVICE_HINT_COMPLETENESS.name}{hints_selector(c, routed)} > 0 < 1{unproxied}"
        ),
        "TopologyHintsDrift": f"{f.SERVICE_DRIFT.name}{hints_selector(c, routed)} == 1{unproxied}",
        "TopologyHintsIgnored": (
            f"{f.SERVICE_LOCAL_ROUTING_RATIO.name}{hints_selector(c)} == 0\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_EXPECTED_ENABLED.name}{hints_selector(c)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_HINT_COMPLETENESS.name}{hints_selector(c)} == 1"
        ),
        "TopologyHintsZoneFallback": (
            f"{f.SERVICE_PROXY_MODE.name}{hints_selector(c, cluster_mode)} == 1\n"
            f"  and on {S}\n"
            f"  {f.SERVICE_PROXY_MODE.name}{hints_selector(c, local_modes)} == 1"
        ),
        # Only where kube-proxy follows the zone's hints (explain's warning says the same):
        # under internalTrafficPolicy Local (mode Local) or in a Cluster zone, the hinted
        # endpoints do not take the zone's traffic.
        "TopologyHintsZoneOverloaded": (
            f"{f.ZONE_LOAD_FACTOR.name}{hints_selector(c)} > {c.monitoring.overload_limit}\n"
            f"  and on {labels(c, *SERVICE_IDENTITY)}\n"
            f"  {f.SERVICE_INFO.name}{hints_selector(c, traffic_distribution)}\n"
            f"  and on {labels(c, *SERVICE, 'zone')}\n"
            f"  {f.SERVICE_PROXY_MODE.name}{hints_selector(c, following_zone)} == 1"
        ),
    }


def deferrals(config: Config, names: tuple[str, ...], identity: tuple[str, ...] = SERVICE) -> str:
    """`unless` clauses that hold an alert back while any of these alerts' conditions hold
    (for any of the entries sharing `identity`)."""
    conditions = entry_conditions(config)
    return "".join(
        f"\n  unless on {labels(config, *identity)} (\n    "
        + conditions[other].replace("\n", "\n  ")
        + "\n  )"
        for other in names
    )


def entry_alert_expr(config: Config, name: str, *by: str) -> str:
    """The alert's condition, aggregated by the entry and `by`, unless an earlier one holds."""
    earlier = ENTRY_PRECEDENCE[: ENTRY_PRECEDENCE.index(name)]
    condition = entry_conditions(config)[name]
    return (
        f"{aggregate(config, 'max', *SERVICE, *by)} (\n  {condition}"
        f"{deferrals(config, earlier)}\n)\n"
    )


def explain_url(config: Config) -> str:
    """The Service's page on the exporter's status page, as dashboard_url links a dashboard.

    The exporter publishes where users reach it (serve --external-url) in status_page_info
    (the one of the alert's own cluster); without it the annotation is empty rather than a
    broken link.
    """
    page = templated_query(config, f.STATUS_PAGE_INFO.name)
    return (
        f'{{{{ with {page} | query }}}}{{{{ . | first | label "url" }}}}'
        "/services/{{ $labels.namespace }}/{{ $labels.service }}{{ end }}"
    )


def alert(
    config: Config,
    name: str,
    expr: str,
    severity: str,
    summary: str,
    description: str,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr.strip() + "\n"}
    duration = config.for_durations[name]
    if duration not in {"0m", "0s"}:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": config.monitoring.runbook_url(name),
    }
    return rule


def linked_to_services(config: Config, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rules whose alerts name a Service, each with a link to the Service's status page."""
    for rule in rules:
        rule["annotations"]["explain_url"] = explain_url(config)
    return rules


# --------------------------------------------------------------------------------------------------
# The rules, one function per group
# --------------------------------------------------------------------------------------------------


def nearest_feasible_text(config: Config) -> str:
    """The Service's nearest ready endpoint counts that enable hints, read at alert time."""
    below, above = (
        templated_query(
            config,
            f.SERVICE_NEAREST_FEASIBLE_ENDPOINTS.name,
            scoped=SERVICE,
            matcher=f'direction="{direction}"',
        )
        for direction in ("below", "above")
    )
    return (
        f"{{{{ with {below} | query }}}}{{{{ . | first | value | humanize }}}}"
        "{{ else }}none{{ end }} below, "
        f"{{{{ with {above} | query }}}}{{{{ . | first | value | humanize }}}}"
        "{{ else }}none{{ end }} above"
    )


def service_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    nearest = nearest_feasible_text(c)
    ready = templated_query(c, f.SERVICE_READY_ENDPOINTS.name, scoped=SERVICE)
    return [
        alert(
            c,
            "TopologyHintsDisabled",
            entry_alert_expr(c, "TopologyHintsDisabled", "reason"),
            problem_severity("TopologyHintsDisabled"),
            "Topology-aware hints are disabled for a Service that asks for them.",
            f"Service {SERVICE_TEXT} sets topology-mode Auto, but the EndpointSlice controller "
            "refuses to write topology hints for it: {{ $labels.reason }}. "
            "kube-proxy routes its traffic across all zones.",
        ),
        alert(
            c,
            "TopologyHintsIncomplete",
            entry_alert_expr(c, "TopologyHintsIncomplete"),
            problem_severity("TopologyHintsIncomplete"),
            "Some ready endpoints of a Service lack a zone hint, so kube-proxy ignores all hints.",
            "{{ $value | humanizePercentage }} of the ready endpoints of Service "
            f"{SERVICE_TEXT} carry a zone hint. kube-proxy uses hints only when every ready "
            "endpoint has one, so it routes this Service across all zones.",
        ),
        alert(
            c,
            "TopologyHintsDrift",
            entry_alert_expr(c, "TopologyHintsDrift", "kind"),
            problem_severity("TopologyHintsDrift"),
            "The hints in a Service's EndpointSlices differ from the expected result.",
            f"Service {SERVICE_TEXT} has drift of kind {{{{ $labels.kind }}}} for more than "
            f"{c.for_durations['TopologyHintsDrift']}: longer than normal controller lag, so "
            "the EndpointSlice controller is not applying the expected hints.",
        ),
        alert(
            c,
            "TopologyHintsFlapping",
            f"""
{aggregate(c, "max", *SERVICE)} (
  increase({f.SERVICE_STATE_CHANGES_TOTAL.name}{hints_selector(c)}[{c.monitoring.flap_window}])
) >= {c.monitoring.flap_threshold}
""",
            "warning",
            "The expected topology-hints state of a Service flips between enabled and disabled.",
            f"The expected hints state of Service {SERVICE_TEXT} flipped at least "
            f"{c.monitoring.flap_threshold} times in {c.monitoring.flap_window}: its ready "
            "endpoint count keeps crossing counts the controller refuses. Nearest ready endpoint "
            f"counts that enable hints: {nearest}.",
        ),
        # A margin exists only for an `auto` Service whose hints are enabled, so this never
        # overlaps TopologyHintsDisabled; a Service that already flips is TopologyHintsFlapping's,
        # and one with any other failing cause is that alert's: this is only a warning ahead.
        alert(
            c,
            "TopologyHintsOnEdge",
            f"""
{aggregate(c, "max", *SERVICE, "direction")} (
  {f.SERVICE_ENDPOINT_MARGIN.name}{hints_selector(c)} == 0
  unless on {labels(c, *SERVICE)}
  increase({f.SERVICE_STATE_CHANGES_TOTAL.name}{hints_selector(c)}[{c.monitoring.flap_window}])
    >= {c.monitoring.flap_threshold}{deferrals(c, ENTRY_PRECEDENCE)}
)
""",
            "info",
            "One pod more or less would turn a Service's topology-aware hints off.",
            f"Service {SERVICE_TEXT} has topology hints enabled with "
            f"{{{{ with {ready} | query }}}}{{{{ . | first | value | humanize }}}}"
            "{{ else }}its current number of{{ end }} ready endpoints, but "
            '{{ if eq $labels.direction "down" }}one endpoint fewer (a pod eviction, restart '
            "or drain){{ else }}one endpoint more (a rollout's surge pod or a scale-up)"
            "{{ end }} makes the EndpointSlice controller remove every hint. Ready endpoint "
            f"counts that keep hints on nearby: {nearest}.",
        ),
    ]


def cluster_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    nodes = templated_query(c, f.NODE_MISSING_TOPOLOGY_INFO.name, suffix=" == 1")
    return [
        alert(
            c,
            "TopologyHintsInsufficientNodeInfo",
            f"""
{aggregate(c, "min")} (
  {f.SUFFICIENT_NODE_INFO.name}{hints_selector(c)}
) == 0
""",
            "warning",
            "Node information is insufficient: topology-mode Auto is disabled for every Service.",
            "The EndpointSlice controller cannot compute zone capacities, so it refuses "
            "topology hints for every Service with topology-mode Auto."
            f'{{{{ range {nodes} | query | sortByLabel "missing" | sortByLabel "node" }}}}'
            " Node {{ .Labels.node }} has no {{ .Labels.missing }}."
            "{{ else }} No Ready worker node lacks a zone or CPU: fewer than 2 zones remain."
            "{{ end }}",
        ),
    ]


def kube_proxy_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    return [
        alert(
            c,
            "TopologyHintsZoneFallback",
            entry_alert_expr(c, "TopologyHintsZoneFallback", "zone"),
            problem_severity("TopologyHintsZoneFallback"),
            "In one zone kube-proxy routes a Service across all zones; other zones stay local.",
            "{{ if $labels.zone }}In zone {{ $labels.zone }}{{ else }}On nodes without a zone "
            "label{{ end }}, kube-proxy runs Service "
            f"{SERVICE_TEXT} in Cluster mode while other zones follow its topology hints: "
            "no ready endpoint is hinted for these nodes' zone, so their clients' traffic leaves "
            "the zone.",
        ),
        alert(
            c,
            "TopologyHintsZoneOverloaded",
            entry_alert_expr(c, "TopologyHintsZoneOverloaded", "zone"),
            problem_severity("TopologyHintsZoneOverloaded"),
            "Endpoints of one zone receive more than their fair share of a Service's traffic.",
            f"Service {SERVICE_TEXT} uses trafficDistribution, which has no overload guard: "
            'each endpoint hinted for zone {{ $labels.zone }} gets {{ $value | printf "%.2f" }} '
            "times its fair share of traffic (when traffic follows CPU).",
        ),
    ]


def routing_rules(config: Config) -> list[dict[str, Any]]:
    """SPEC section 10: what the data planes really do with the hints."""
    c = config
    return [
        alert(
            c,
            "TopologyHintsIgnored",
            entry_alert_expr(c, "TopologyHintsIgnored", "dataplane"),
            problem_severity("TopologyHintsIgnored"),
            "A data plane ignores a Service's topology hints: its traffic leaves the zone "
            "on every node.",
            f"The EndpointSlice controller hints every ready endpoint of Service {SERVICE_TEXT}, "
            "yet {{ $labels.dataplane }} routes no client to a local endpoint. "
            "Run `topology-hints-exporter explain` on the Service for the cause (an endpoint "
            "without a ready condition, a data plane that does not read hints).",
        ),
        alert(
            c,
            "TopologyHintsFailClosed",
            entry_alert_expr(c, "TopologyHintsFailClosed", "dataplane", "zone"),
            problem_severity("TopologyHintsFailClosed"),
            "A data plane gives some clients of a Service no endpoint although ready ones exist.",
            "{{ $value }} Ready node(s) {{ if $labels.zone }}in zone {{ $labels.zone }}"
            "{{ else }}without a zone label{{ end }} get no endpoint of Service "
            f"{SERVICE_TEXT} from {{{{ $labels.dataplane }}}}: no ready endpoint is hinted for "
            "their zone and this data plane fails closed (connections refused or HTTP 503) "
            "instead of falling back to every zone.",
        ),
        alert(
            c,
            "TopologyHintsLocalPolicyDropped",
            entry_alert_expr(c, "TopologyHintsLocalPolicyDropped", "dataplane", "zone"),
            problem_severity("TopologyHintsLocalPolicyDropped"),
            "internalTrafficPolicy: Local drops a Service's in-cluster traffic on nodes "
            "without a local endpoint.",
            "{{ $value }} Ready node(s) {{ if $labels.zone }}in zone {{ $labels.zone }}"
            "{{ else }}without a zone label{{ end }} run no ready (or serving terminating) "
            f"endpoint of Service {SERVICE_TEXT}, which sets internalTrafficPolicy: Local, so "
            "{{ $labels.dataplane }} drops the in-cluster traffic of clients on those nodes. "
            "Hints do not apply to such traffic.",
        ),
    ]


def configuration_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    return [
        alert(
            c,
            "TopologyHintsConfigIssue",
            f"""
{aggregate(c, "max", "namespace", "service", "issue")} (
  {f.SERVICE_CONFIG_ISSUE.name}{hints_selector(c)} == 1
)
""",
            problem_severity("TopologyHintsConfigIssue"),
            "A Service's topology-aware routing settings conflict or are ignored.",
            "Service {{ $labels.namespace }}/{{ $labels.service }} has the topology "
            "configuration issue {{ $labels.issue }}.",
        ),
    ]


def exporter_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    up = c.monitoring.series("up")
    # Events are optional (docs/deploy.md): a watch of them failing, e.g. for want of the
    # permission, costs only the event metrics, never the verdicts.
    optional = "|".join(sorted(OPTIONAL_RESOURCES))
    required_only, optional_only = f'resource!~"{optional}"', f'resource=~"{optional}"'
    return [
        alert(
            c,
            "TopologyHintsExporterWatchDown",
            f"{f.WATCH_UP.name}{hints_selector(c, required_only)} == 0",
            "critical",
            "topology-hints-exporter lost its watch on a Kubernetes resource.",
            "The {{ $labels.resource }} watch of topology-hints-exporter "
            "{{ $labels.instance }} has been down for more than "
            f"{c.for_durations['TopologyHintsExporterWatchDown']}: its verdicts are stale "
            "and topology-hints alerts may be wrong or missing.",
        ),
        alert(
            c,
            "TopologyHintsExporterOptionalWatchDown",
            f"{f.WATCH_UP.name}{hints_selector(c, optional_only)} == 0",
            "warning",
            "topology-hints-exporter cannot watch an optional Kubernetes resource.",
            "The {{ $labels.resource }} watch of topology-hints-exporter "
            "{{ $labels.instance }} has been down for more than "
            f"{c.for_durations['TopologyHintsExporterOptionalWatchDown']} (often a missing "
            "list/watch permission): the metrics built from it are missing, the verdicts and "
            "every other alert are unaffected.",
        ),
        alert(
            c,
            "TopologyHintsExporterDown",
            f"{up} == 0 or absent({up})",
            "critical",
            "topology-hints-exporter is down or not scraped.",
            "Prometheus has not scraped job {{ $labels.job }}"
            "{{ with $labels.instance }} instance {{ . }}{{ end }} for more than "
            f"{c.for_durations['TopologyHintsExporterDown']}: topology-hints-exporter is down "
            "or missing, and no other topology-hints alert can fire.",
        ),
    ]


def measured_rules(config: Config) -> list[dict[str, Any]]:
    """Measured traffic against the expected share (alerts/traffic.py, docs/traffic.md)."""
    c = config
    m = c.monitoring
    service = labels(c, *SERVICE_IDENTITY)
    expected = (
        f"printf `{EXPECTED_SHARE}{{{m.cluster_label}=%q, namespace=%q, service=%q, "
        f'scenario="effective"}}` $labels.{m.cluster_label} $labels.namespace $labels.service'
    )
    return [
        alert(
            c,
            "TopologyHintsMeasuredCrossZone",
            f"""
{aggregate(c, "max", *SERVICE_IDENTITY)} (
  {MEASURED_SHARE}
  > on {service}
  ({EXPECTED_SHARE}{{scenario="effective"}} + {m.measured_cross_zone_margin})
  and on {service}
  {attributed_bytes(m)} >= {m.measured_min_bytes_per_second}{
                deferrals(c, ENTRY_PRECEDENCE, SERVICE_IDENTITY)
            }
)
""",
            "warning",
            "A Service's measured cross-zone traffic is far above what its routing should give.",
            "{{ $value | humanizePercentage }} of the bytes of Service {{ $labels.namespace }}/"
            "{{ $labels.service }} cross zones, measured by the mesh, against "
            f"{{{{ with {expected} | query }}}}{{{{ . | first | value | humanizePercentage }}}}"
            "{{ else }}an unknown share{{ end }} expected from its routing, for more than "
            f"{c.for_durations['TopologyHintsMeasuredCrossZone']}: the data plane is not the one "
            "--dataplane names, socket-level load balancing bypasses kube-proxy, or the "
            "clients are not spread like CPU.",
        ),
    ]


def groups(config: Config) -> list[dict[str, Any]]:
    return [
        {
            "name": "topology-hints-services",
            "rules": linked_to_services(config, service_rules(config)),
        },
        {"name": "topology-hints-cluster", "rules": cluster_rules(config)},
        {
            "name": "topology-hints-kube-proxy",
            "rules": linked_to_services(config, kube_proxy_rules(config)),
        },
        {
            "name": "topology-hints-routing",
            "rules": linked_to_services(config, routing_rules(config)),
        },
        {
            "name": "topology-hints-configuration",
            "rules": linked_to_services(config, configuration_rules(config)),
        },
        {
            "name": "topology-hints-traffic",
            "rules": linked_to_services(config, measured_rules(config)),
        },
        {"name": "topology-hints-exporter", "rules": exporter_rules(config)},
        # The cross-check against kube-controller-manager's own count (alerts/controller.py).
        {"name": controller.GROUP, "rules": controller.alerting_rules(config.monitoring)},
        {"name": RECORDING_GROUP, "rules": recording_rules(config.monitoring)},
        {
            "name": controller.RECORDING_GROUP,
            "rules": controller.recording_rules(config.monitoring),
        },
        *traffic_groups(config.monitoring),
    ]


# The recording groups (the mixin's prometheusRules): the dashboards' and the traffic ones.
RECORDING_GROUPS = (
    RECORDING_GROUP,
    controller.RECORDING_GROUP,
    ISTIO_GROUP,
    LINKERD_GROUP,
    CROSS_ZONE_GROUP,
)


# --------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------

HEADER = "# Generated by alerts/generate.py from its CONFIG block: do not edit by hand.\n"
PROMETHEUS_RULE_HEADER = (
    HEADER + "# metadata.labels must match your Prometheus's ruleSelector: adjust\n"
    "# prometheus_rule_labels in alerts/generate.py (kustomize sets the namespace).\n"
)


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (the expressions), plain keys in insertion order."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=1_000_000, indent=2)


def rule_file(config: Config) -> str:
    return HEADER + dump({"groups": groups(config)})


def prometheus_rule(config: Config) -> str:
    document = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": config.prometheus_rule_name,
            "labels": dict(config.prometheus_rule_labels),
        },
        "spec": {"groups": groups(config)},
    }
    return PROMETHEUS_RULE_HEADER + dump(document)


def write(root: Path, config: Config = CONFIG) -> list[Path]:
    written = []
    for relative, text in (
        (RULES_PATH, rule_file(config)),
        (PROMETHEUS_RULE_PATH, prometheus_rule(config)),
    ):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=REPO_ROOT,
        help="directory to write alerts/ and deploy/ files under (default: the repository)",
    )
    for path in write(parser.parse_args().root):
        print(path)


if __name__ == "__main__":
    main()
