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

The problems' alerts are alerts/problems.py's: their names, severities and summaries are
the problem table's (exporter/engine/problems.py), never typed here. This module holds the
other alerts (risks, cluster, the exporter itself, measured traffic), the groups and output;
alerts/rules.py the building blocks every rule is written with.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from alerts import controller, problems
from alerts.problems import ENTRY_PROBLEMS, deferrals
from alerts.recording import GROUP as RECORDING_GROUP
from alerts.recording import recording_rules
from alerts.rules import (
    SERVICE,
    SERVICE_TEXT,
    aggregate,
    alert,
    hints_selector,
    labels,
    linked_to_services,
    nearest_feasible_text,
    templated_query,
)
from alerts.traffic import (
    CROSS_ZONE_GROUP,
    EXPECTED_SHARE,
    ISTIO_GROUP,
    LINKERD_GROUP,
    MEASURED_SHARE,
    attributed_bytes,
    traffic_groups,
)
from exporter.engine.problems import ENTRY_ALERT_PRECEDENCE, PROBLEMS, ProblemId
from exporter.metrics import families as f
from exporter.metrics.monitoring import OPTIONAL_RESOURCES, SERVICE_IDENTITY, MonitoringConfig

# The alerts that cover no problem of the table (their names are typed here, once).
INSUFFICIENT_NODE_INFO = "TopologyHintsInsufficientNodeInfo"
FLAPPING = "TopologyHintsFlapping"
ON_EDGE = "TopologyHintsOnEdge"
WATCH_DOWN = "TopologyHintsExporterWatchDown"
OPTIONAL_WATCH_DOWN = "TopologyHintsExporterOptionalWatchDown"
EXPORTER_DOWN = "TopologyHintsExporterDown"
MEASURED_CROSS_ZONE = "TopologyHintsMeasuredCrossZone"

# --------------------------------------------------------------------------------------------------
# Configuration: every selector, duration and threshold the rules use lives here.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The rules' settings: edit them here, then run `python -m alerts.generate`."""

    # The selector, cluster label, runbook URLs and thresholds the dashboards and the mixin
    # share (exporter/metrics/monitoring.py).
    monitoring: MonitoringConfig = field(default_factory=MonitoringConfig)
    # How long a problem's condition must hold before its alert fires (the alert is the
    # problem table's, exporter/engine/problems.py; each problem with an alert has one).
    problem_for_durations: dict[ProblemId, str] = field(
        default_factory=lambda: {
            ProblemId.FAILS_CLOSED: "5m",  # clients are refused: page sooner
            # A node-local endpoint missing for longer than a pod restart takes.
            ProblemId.LOCAL_POLICY_DROPS: "15m",
            ProblemId.HINTS_OFF: "15m",
            ProblemId.PARTIAL_HINTS: "15m",
            ProblemId.DRIFT: "15m",  # long enough that it is not controller lag
            ProblemId.HINTS_IGNORED: "15m",
            ProblemId.ZONE_FALLBACK: "15m",
            ProblemId.OVERLOADED_ZONE: "15m",
            ProblemId.CONFIG_ISSUE: "15m",
        }
    )
    # How long the other alerts' conditions must hold, per alert name.
    for_durations: dict[str, str] = field(
        default_factory=lambda: {
            INSUFFICIENT_NODE_INFO: "15m",
            FLAPPING: "0m",  # the flap window already spans time
            ON_EDGE: "1h",  # a standing risk, not a rollout's passing count
            WATCH_DOWN: "5m",
            # RBAC changes are slow; the exporter backs its 403 retries off to 5 minutes.
            OPTIONAL_WATCH_DOWN: "15m",
            EXPORTER_DOWN: "5m",
            # Long enough that a burst or a rollout's reconnections do not decide it.
            MEASURED_CROSS_ZONE: "30m",
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

    def for_duration(self, alert: str) -> str:
        """How long the alert's condition must hold before it fires."""
        for problem in PROBLEMS.values():
            if problem.alert == alert:
                return self.problem_for_durations[problem.id]
        return self.for_durations[alert]


CONFIG = Config()

RULES_PATH = Path("alerts/topology-hints.rules.yaml")
PROMETHEUS_RULE_PATH = Path("deploy/overlays/prometheus-operator/prometheusrule.yaml")
REPO_ROOT = Path(__file__).resolve().parent.parent

# One cause, one alert: the problems' alerts defer in the problem table's order
# (alerts/problems.py); the risk and traffic alerts below defer to all of them.
ENTRY_PRECEDENCE = ENTRY_ALERT_PRECEDENCE

# --------------------------------------------------------------------------------------------------
# The other rules, one function per group
# --------------------------------------------------------------------------------------------------


def service_rules(config: Config) -> list[dict[str, Any]]:
    c = config
    nearest = nearest_feasible_text(c)
    ready = templated_query(c, f.SERVICE_READY_ENDPOINTS.name, scoped=SERVICE)
    return [
        *problems.service_rules(c),
        alert(
            c,
            FLAPPING,
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
            ON_EDGE,
            f"""
{aggregate(c, "max", *SERVICE, "direction")} (
  {f.SERVICE_ENDPOINT_MARGIN.name}{hints_selector(c)} == 0
  unless on {labels(c, *SERVICE)}
  increase({f.SERVICE_STATE_CHANGES_TOTAL.name}{hints_selector(c)}[{c.monitoring.flap_window}])
    >= {c.monitoring.flap_threshold}{deferrals(c)}
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
            INSUFFICIENT_NODE_INFO,
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
            WATCH_DOWN,
            f"{f.WATCH_UP.name}{hints_selector(c, required_only)} == 0",
            "critical",
            "topology-hints-exporter lost its watch on a Kubernetes resource.",
            "The {{ $labels.resource }} watch of topology-hints-exporter "
            "{{ $labels.instance }} has been down for more than "
            f"{c.for_duration(WATCH_DOWN)}: its verdicts are stale "
            "and topology-hints alerts may be wrong or missing.",
        ),
        alert(
            c,
            OPTIONAL_WATCH_DOWN,
            f"{f.WATCH_UP.name}{hints_selector(c, optional_only)} == 0",
            "warning",
            "topology-hints-exporter cannot watch an optional Kubernetes resource.",
            "The {{ $labels.resource }} watch of topology-hints-exporter "
            "{{ $labels.instance }} has been down for more than "
            f"{c.for_duration(OPTIONAL_WATCH_DOWN)} (often a missing "
            "list/watch permission): the metrics built from it are missing, the verdicts and "
            "every other alert are unaffected.",
        ),
        alert(
            c,
            EXPORTER_DOWN,
            f"{up} == 0 or absent({up})",
            "critical",
            "topology-hints-exporter is down or not scraped.",
            "Prometheus has not scraped job {{ $labels.job }}"
            "{{ with $labels.instance }} instance {{ . }}{{ end }} for more than "
            f"{c.for_duration(EXPORTER_DOWN)}: topology-hints-exporter is down "
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
            MEASURED_CROSS_ZONE,
            f"""
{aggregate(c, "max", *SERVICE_IDENTITY)} (
  {MEASURED_SHARE}
  > on {service}
  ({EXPECTED_SHARE}{{scenario="effective"}} + {m.measured_cross_zone_margin})
  and on {service}
  {attributed_bytes(m)} >= {m.measured_min_bytes_per_second}{
                deferrals(c, ENTRY_PROBLEMS, SERVICE_IDENTITY)
            }
)
""",
            "warning",
            "A Service's measured cross-zone traffic is far above what its routing should give.",
            "{{ $value | humanizePercentage }} of the bytes of Service {{ $labels.namespace }}/"
            "{{ $labels.service }} cross zones, measured by the mesh, against "
            f"{{{{ with {expected} | query }}}}{{{{ . | first | value | humanizePercentage }}}}"
            "{{ else }}an unknown share{{ end }} expected from its routing, for more than "
            f"{c.for_duration(MEASURED_CROSS_ZONE)}: the data plane is not the one "
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
            "rules": linked_to_services(config, problems.kube_proxy_rules(config)),
        },
        {
            "name": "topology-hints-routing",
            "rules": linked_to_services(config, problems.routing_rules(config)),
        },
        {
            "name": "topology-hints-configuration",
            "rules": linked_to_services(config, problems.configuration_rules(config)),
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
