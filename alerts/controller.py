"""The production cross-check: the exporter's judgement against the EndpointSlice controller's.

kube-controller-manager exports `endpoint_slice_controller_services_count_by_traffic_distribution`
(`traffic_distribution` label; ALPHA from 1.30, BETA from 1.36: k8s.io/endpointslice
metrics/metrics.go): the Services whose trafficDistribution its reconciler honours, those
with a selector, not ExternalName, a value the controller's version and gates accept, and no
topology-mode annotation switched on (reconciler.go, canUseTrafficDistribution). The
exporter's `topology_hints_service_info{mechanism="traffic-distribution"}` is its judgement of
the same question. A recording rule counts the exporter's by value; the alert fires when the
two counts differ for 30 minutes (the exporter misjudges the Kubernetes version, gates or
Services, or the controller does not sync): docs/runbooks.md.

The controller's series are read by name only, whatever job scrapes kube-controller-manager.
The alert needs both sides: a value neither side counts is no series; a value only one
side counts is compared with 0 once that side is known to be scraped (the exporter's
Services watch up; any `endpoint_slice_controller_syncs` series).
"""

from __future__ import annotations

from typing import Any

from exporter.metrics import families as f
from exporter.metrics.monitoring import Mechanism, MonitoringConfig

RECORDING_GROUP = "topology-hints-controller-recording"
GROUP = "topology-hints-controller"
ALERT = "TopologyHintsTrafficDistributionMismatch"
# Long enough for a rollout's Services to be synced by the controller and seen by the
# exporter, and for an exporter restart.
FOR = "30m"

# kube-controller-manager's series (k8s.io/endpointslice, metrics/metrics.go).
CONTROLLER_COUNT = "endpoint_slice_controller_services_count_by_traffic_distribution"
CONTROLLER_SYNCS = "endpoint_slice_controller_syncs"
CONTROLLER_METRICS = frozenset({CONTROLLER_COUNT, CONTROLLER_SYNCS})
VALUE_LABEL = "traffic_distribution"

# The exporter's count of the Services whose trafficDistribution it judges honoured.
SERVICES_BY_TRAFFIC_DISTRIBUTION = "topology_hints:services_by_traffic_distribution:count"


def recording_rules(config: MonitoringConfig) -> list[dict[str, Any]]:
    c = config
    # Only the Services the controller syncs: it counts none without a selector, nor
    # ExternalName ones, whatever their trafficDistribution says.
    honoured = c.series(
        f.SERVICE_INFO.name,
        f'mechanism="{Mechanism.TRAFFIC_DISTRIBUTION}"',
        'controller_synced="true"',
    )
    return [
        {
            "record": SERVICES_BY_TRAFFIC_DISTRIBUTION,
            # max by Service first: two replicas of one exporter count a Service once.
            "expr": (
                f"count by {c.labels(VALUE_LABEL)} (\n"
                f"  max by {c.labels('namespace', 'service', VALUE_LABEL)} ({honoured})\n"
                ")\n"
            ),
        }
    ]


def alert_expr(config: MonitoringConfig) -> str:
    """The exporter's count minus the controller's, by value, where they differ."""
    c = config
    by_value = c.labels(VALUE_LABEL)
    exporter = SERVICES_BY_TRAFFIC_DISTRIBUTION
    # The leader's series (other replicas run no controller); max: scraped twice is once.
    controller = f"max by {by_value} ({CONTROLLER_COUNT})"
    services_watch = c.series(f.WATCH_UP.name, 'resource="services"')
    watching = f"max by {c.labels()} ({services_watch}) == 1"
    syncing = f"max by {c.labels()} ({CONTROLLER_SYNCS})"
    return (
        f"(\n  {exporter}\n  - on {by_value}\n  {controller}\n) != 0\n"
        # Values the controller honours and the exporter counts none of.
        f"or\n-(\n  (\n    {controller} > 0\n    unless on {by_value}\n    {exporter}\n  )\n"
        f"  and on {c.labels()}\n  {watching}\n)\n"
        # Values the exporter counts and the controller has no series for.
        f"or\n(\n  (\n    {exporter}\n    unless on {by_value}\n    {controller}\n  )\n"
        f"  and on {c.labels()}\n  {syncing}\n)\n"
    )


def alerting_rules(config: MonitoringConfig) -> list[dict[str, Any]]:
    return [
        {
            "alert": ALERT,
            "expr": alert_expr(config),
            "for": FOR,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "The exporter and the EndpointSlice controller count different "
                "Services using a trafficDistribution value.",
                "description": "Services with trafficDistribution "
                "{{ $labels.traffic_distribution }}: topology-hints-exporter's count of those "
                "honoured minus kube-controller-manager's (its EndpointSlice controller's "
                f"{CONTROLLER_COUNT}) is "
                f"{{{{ $value }}}} for {FOR}. The exporter misjudges the control plane's "
                "version, gates or Services, or the controller does not sync them.",
                "runbook_url": config.runbook_url(ALERT),
            },
        }
    ]
