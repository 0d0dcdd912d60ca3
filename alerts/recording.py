"""Recording rules for the dashboards' heaviest queries, shipped in the alerts' rule file.

Each rule aggregates away the scrape target (instance, pod, shard) and keeps the cluster
label and what the panels filter or group by (namespace, node, ...), so a panel reads a few
pre-computed series instead of joining every Service's raw series on each refresh. The names
follow the `level:metric:operations` convention under the `topology_hints:` prefix;
the dashboards import them from here, and `mixin/` ships them as `prometheusRules`.
"""

from __future__ import annotations

from typing import Any

from exporter.metrics import families as f
from exporter.metrics.monitoring import MonitoringConfig

GROUP = "topology-hints-recording"

# (Service, namespace) counts per mechanism: the overview's "Services by mechanism".
SERVICES_BY_MECHANISM = "topology_hints:services_by_mechanism:count"
# (Service, address type) entries per mechanism and expected state (label expected_state).
ENTRIES_BY_EXPECTED_STATE = "topology_hints:entries_by_expected_state:count"
EXPECTED_STATES = {"enabled": 1, "disabled": 0}
# (Service, address type) entries per disabled reason.
ENTRIES_BY_DISABLED_REASON = "topology_hints:entries_by_disabled_reason:count"
# Exported Services per node, zone and kube-proxy mode, summed over the shards.
NODE_SERVICES_BY_MODE = "topology_hints:node_services_by_mode:sum"

# Labels the rules add themselves (the dashboards select on them).
RULE_LABELS = frozenset({"expected_state"})


def _mechanism_by_service(c: MonitoringConfig) -> str:
    return (
        f"max by {c.labels('namespace', 'service', 'mechanism')} ({c.series(f.SERVICE_INFO.name)})"
    )


def recording_rules(config: MonitoringConfig) -> list[dict[str, Any]]:
    c = config
    rules: list[dict[str, Any]] = [
        {
            "record": SERVICES_BY_MECHANISM,
            "expr": (
                f"count by {c.labels('namespace', 'mechanism')} ({_mechanism_by_service(c)})\n"
            ),
        }
    ]
    rules.extend(
        {
            "record": ENTRIES_BY_EXPECTED_STATE,
            "expr": (
                f"count by {c.labels('namespace', 'mechanism')} (\n"
                f"  (\n    max by {c.labels('namespace', 'service', 'address_type')} "
                f"({c.series(f.SERVICE_EXPECTED_ENABLED.name)})\n    == {value}\n  )\n"
                f"  * on {c.labels('namespace', 'service')} group_left (mechanism)\n"
                f"  {_mechanism_by_service(c)}\n)\n"
            ),
            "labels": {"expected_state": state},
        }
        for state, value in EXPECTED_STATES.items()
    )
    rules.append(
        {
            "record": ENTRIES_BY_DISABLED_REASON,
            "expr": (
                f"count by {c.labels('namespace', 'reason')} (\n"
                f"  max by {c.labels('namespace', 'service', 'address_type', 'reason')} "
                f"({c.series(f.SERVICE_DISABLED_REASON.name)})\n)\n"
            ),
        }
    )
    rules.append(
        {
            "record": NODE_SERVICES_BY_MODE,
            "expr": (
                f"sum by {c.labels('node', 'zone', 'mode')} "
                f"({c.series(f.NODE_PROXY_SERVICES.name)})\n"
            ),
        }
    )
    return rules
