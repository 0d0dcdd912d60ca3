"""What the alerts (`alerts/`) and dashboards (`dashboards/`) select and compare with.

Both generators take metric names from the family table (`families.py`), and the scrape
job, the overload limit, the label sets and the kube-proxy mode and mechanism names from
here, which in turn takes them from the engine: renaming a metric or a mode changes every
generated rule and panel, and a name that no longer exists fails the generators at import.
"""

from __future__ import annotations

from exporter.engine import DATA_PLANES, OVERLOAD_LIMIT, Mechanism, ProxyMode, Routing
from exporter.metrics.families import Scope

__all__ = [
    "ENTRY_IDENTITY",
    "JOB",
    "JOB_SELECTOR",
    "LOCAL_POLICY_IGNORED_BY",
    "OVERLOAD_LIMIT",
    "PROXY_MODES",
    "SERVICE_IDENTITY",
    "Mechanism",
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
# Data planes that do not read internalTrafficPolicy (they route from their own pods): a
# `no-endpoints` routing of theirs is never the policy's drop.
LOCAL_POLICY_IGNORED_BY: tuple[str, ...] = tuple(
    str(dataplane)
    for dataplane, rule in DATA_PLANES.items()
    if not rule.reads_internal_traffic_policy
)
