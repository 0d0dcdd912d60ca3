"""What the alerts (`alerts/`), dashboards (`dashboards/`) and the mixin (`mixin/`) select and
compare with.

The generators take metric names from the family table (`families/`), and the scrape
job, the overload limit, the label sets and the kube-proxy mode and mechanism names from
here, which in turn takes them from the engine: renaming a metric or a mode changes every
generated rule and panel, and a name that no longer exists fails the generators at import.
`MonitoringConfig` is the one configuration they share; its defaults are the mixin's
`_config` (`MIXIN_CONFIG_NAMES` gives each field's name there).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.engine import DATA_PLANES, OVERLOAD_LIMIT, Mechanism, ProxyMode, Routing
from exporter.metrics.family import Scope
from exporter.vocabulary import OPTIONAL_RESOURCES

__all__ = [
    "ENTRY_IDENTITY",
    "JOB",
    "JOB_SELECTOR",
    "LOCAL_POLICY_IGNORED_BY",
    "MIXIN_CONFIG_NAMES",
    "OPTIONAL_RESOURCES",
    "OVERLOAD_LIMIT",
    "PROXY_MODES",
    "SERVICE_IDENTITY",
    "Mechanism",
    "MonitoringConfig",
    "ProxyMode",
    "Routing",
]

# The Prometheus job the exporter is scraped under (deploy/ and README.md use this name).
JOB = "topology-hints-exporter"
JOB_SELECTOR = f'job="{JOB}"'
# kube-proxy's topology modes, most local first.
PROXY_MODES: tuple[ProxyMode, ...] = (
    ProxyMode.PREFER_SAME_NODE,
    ProxyMode.PREFER_SAME_ZONE,
    ProxyMode.CLUSTER,
    ProxyMode.LOCAL,
)
# The identity labels of per-Service and per-(Service, address type) series.
SERVICE_IDENTITY = Scope.SERVICE.identity_labels
ENTRY_IDENTITY = Scope.SERVICE_ENTRY.identity_labels


RUNBOOKS_URL = (
    "https://github.com/topology-hints-exporter/topology-hints-exporter/blob/main/docs/runbooks.md"
)


@dataclass(frozen=True)
class MonitoringConfig:
    """The settings every alert, recording rule and dashboard panel is built from."""

    # Selects the exporter's scrape target (every topology_hints_* series and `up`).
    selector: str = JOB_SELECTOR
    # The label telling clusters apart in one Prometheus, Thanos or Mimir (an external label
    # or a relabelling; the exporter does not set it). Every alert aggregation and recording
    # rule keeps it and every panel selects it: on a single cluster it is absent, and
    # `by (cluster)` / `cluster=""` are then harmless.
    cluster_label: str = "cluster"
    # Show the dashboards' `cluster` variable (empty, and harmless, on a single cluster).
    show_multi_cluster: bool = True
    # Each alert's runbook_url: `%s` is the alert name in lower case (a docs/runbooks.md anchor).
    runbook_url_pattern: str = RUNBOOKS_URL + "#%s"
    # TopologyHintsZoneOverloaded and the load-factor panels: the `auto` guard's limit.
    overload_limit: float = OVERLOAD_LIMIT
    # TopologyHintsFlapping: this many expected-state flips within this window.
    flap_window: str = "1h"
    flap_threshold: int = 3
    # Measured traffic (alerts/traffic.py, docs/traffic.md): record the bytes of each source.
    # A source that is not installed costs one rule evaluation that finds no series.
    istio_ztunnel_traffic: bool = True
    linkerd_traffic: bool = True
    # TopologyHintsMeasuredCrossZone: the measured cross-zone share exceeds the expected
    # effective share by more than this margin, on a Service moving at least this many bytes
    # per second (below it a few health checks decide the share).
    measured_cross_zone_margin: float = 0.25
    measured_min_bytes_per_second: int = 10240

    def runbook_url(self, alert: str) -> str:
        return self.runbook_url_pattern % alert.lower()

    def series(self, metric: str, *matchers: str) -> str:
        """The exporter's series of `metric`: the selector, then these matchers."""
        return metric + "{" + ", ".join(part for part in (self.selector, *matchers) if part) + "}"

    def labels(self, *names: str) -> str:
        """A `by (...)` / `on (...)` label list that keeps the cluster label, then these."""
        return "(" + ", ".join((self.cluster_label, *names)) + ")"


# Each MonitoringConfig field's name in the mixin's `_config` (the monitoring-mixins spelling).
MIXIN_CONFIG_NAMES = {
    "selector": "topologyHintsExporterSelector",
    "cluster_label": "clusterLabel",
    "show_multi_cluster": "showMultiCluster",
    "runbook_url_pattern": "runbookURLPattern",
    "overload_limit": "overloadLimit",
    "flap_window": "flapWindow",
    "flap_threshold": "flapThreshold",
    "istio_ztunnel_traffic": "istioZtunnelTraffic",
    "linkerd_traffic": "linkerdTraffic",
    "measured_cross_zone_margin": "measuredCrossZoneMargin",
    "measured_min_bytes_per_second": "measuredMinBytesPerSecond",
}

# Data planes that do not read internalTrafficPolicy (they route from their own pods): a
# `no-endpoints` routing of theirs is never the policy's drop.
LOCAL_POLICY_IGNORED_BY: tuple[str, ...] = tuple(
    str(dataplane)
    for dataplane, rule in DATA_PLANES.items()
    if not rule.reads_internal_traffic_policy
)
