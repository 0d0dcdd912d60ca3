"""Every metric family the exporter exposes, declared once, in exposition order.

The declarations live in one module per subject, in exposition order: `cluster` (node
capacity, version, feature gates), `service` (per Service and per address type), `zone`
(allocation and load per zone), `routing` (what each data plane does, cross-zone
traffic), `across_services` (figures that span the exported Services, controller events)
and `own` (the exporter's own, set by `instruments.py`). What a family is and how its
samples are produced is in `family.py`.

`FAMILIES` concatenates them in that order: the prometheus_client collector
(`collector.py`), the cached fragment renderer (`exposition.py`) and `docs/metrics.md`
(`reference.py`) all iterate that one tuple. Each family is also a constant of this module
named after its metric name without the prefix (`ZONE_LOAD_FACTOR`), so alerts, dashboards
and tests refer to names in one place.
"""

from __future__ import annotations

from exporter.metrics.families import across_services, cluster, own, routing, service, zone
from exporter.metrics.families.across_services import (
    CONTROLLER_EVENTS_TOTAL,
    NODE_PROXY_SERVICES,
    SERVICE_LAST_EVENT_TIMESTAMP_SECONDS,
    ZONE_LOSS_SERVICES_LOSING_HINTS,
)
from exporter.metrics.families.cluster import (
    CLUSTER_INFO,
    FEATURE_GATE_ENABLED,
    NODE_MISSING_TOPOLOGY_INFO,
    SUFFICIENT_NODE_INFO,
    ZONE_ALLOCATABLE_CPU_CORES,
    ZONE_CPU_RATIO,
)
from exporter.metrics.families.own import (
    BUILD_INFO,
    CROSS_ZONE_PRICE_PER_GIB,
    EVALUATION_DURATION_SECONDS,
    INVALID_OBJECTS_TOTAL,
    LAST_EVALUATION_TIMESTAMP_SECONDS,
    OBJECTS,
    READY,
    SHARD_ORDINAL,
    STATUS_PAGE_INFO,
    TOTAL_SHARDS,
    WATCH_EVENTS_TOTAL,
    WATCH_RESTARTS_TOTAL,
    WATCH_UP,
)
from exporter.metrics.families.routing import (
    CROSS_ZONE_SCENARIOS,
    DATAPLANE_INFO,
    SERVICE_CROSS_ZONE_RATIO,
    SERVICE_LOCAL_ROUTING_RATIO,
    SERVICE_PROXY_MODE,
    SERVICE_PROXY_NODES,
    SERVICE_ROUTING_NODES,
    SERVICE_ZONE_CROSS_ZONE_RATIO,
)
from exporter.metrics.families.service import (
    SERVICE_CONFIG_ISSUE,
    SERVICE_DISABLED_REASON,
    SERVICE_DRIFT,
    SERVICE_ENDPOINT_MARGIN,
    SERVICE_EXPECTED_ENABLED,
    SERVICE_HINT_COMPLETENESS,
    SERVICE_HINTED_ENDPOINTS,
    SERVICE_INFO,
    SERVICE_NEAREST_FEASIBLE_ENDPOINTS,
    SERVICE_NOTICE,
    SERVICE_READY_ENDPOINTS,
    SERVICE_STATE_CHANGES_TOTAL,
)
from exporter.metrics.families.zone import (
    ZONE_ALLOCATION_DESIRED,
    ZONE_ALLOCATION_MAXIMUM,
    ZONE_ALLOCATION_MINIMUM,
    ZONE_ENDPOINTS,
    ZONE_HINTED_ENDPOINTS,
    ZONE_LOAD_FACTOR,
)
from exporter.metrics.family import Family

# Every family, in exposition and documentation order.
FAMILIES: tuple[Family, ...] = (
    *cluster.FAMILIES,
    *service.FAMILIES,
    *zone.FAMILIES,
    *routing.FAMILIES,
    *across_services.FAMILIES,
    *own.FAMILIES,
)
# Those rendered from the evaluation by collector.py and exposition.py.
HINT_FAMILIES: tuple[Family, ...] = tuple(f for f in FAMILIES if f.samples is not None)
# Exported by shard 0 only: the same on every shard.
SAME_ON_EVERY_SHARD: frozenset[str] = frozenset(
    family.name for family in FAMILIES if family.same_on_every_shard
)

# The table and every family by name (`families.ZONE_LOAD_FACTOR`): a constant left out of
# the imports above fails tests/metrics/test_families.py, one left out of here ruff (F401).
__all__ = [
    "BUILD_INFO",
    "CLUSTER_INFO",
    "CONTROLLER_EVENTS_TOTAL",
    "CROSS_ZONE_PRICE_PER_GIB",
    "CROSS_ZONE_SCENARIOS",
    "DATAPLANE_INFO",
    "EVALUATION_DURATION_SECONDS",
    "FAMILIES",
    "FEATURE_GATE_ENABLED",
    "HINT_FAMILIES",
    "INVALID_OBJECTS_TOTAL",
    "LAST_EVALUATION_TIMESTAMP_SECONDS",
    "NODE_MISSING_TOPOLOGY_INFO",
    "NODE_PROXY_SERVICES",
    "OBJECTS",
    "READY",
    "SAME_ON_EVERY_SHARD",
    "SERVICE_CONFIG_ISSUE",
    "SERVICE_CROSS_ZONE_RATIO",
    "SERVICE_DISABLED_REASON",
    "SERVICE_DRIFT",
    "SERVICE_ENDPOINT_MARGIN",
    "SERVICE_EXPECTED_ENABLED",
    "SERVICE_HINTED_ENDPOINTS",
    "SERVICE_HINT_COMPLETENESS",
    "SERVICE_INFO",
    "SERVICE_LAST_EVENT_TIMESTAMP_SECONDS",
    "SERVICE_LOCAL_ROUTING_RATIO",
    "SERVICE_NEAREST_FEASIBLE_ENDPOINTS",
    "SERVICE_NOTICE",
    "SERVICE_PROXY_MODE",
    "SERVICE_PROXY_NODES",
    "SERVICE_READY_ENDPOINTS",
    "SERVICE_ROUTING_NODES",
    "SERVICE_STATE_CHANGES_TOTAL",
    "SERVICE_ZONE_CROSS_ZONE_RATIO",
    "SHARD_ORDINAL",
    "STATUS_PAGE_INFO",
    "SUFFICIENT_NODE_INFO",
    "TOTAL_SHARDS",
    "WATCH_EVENTS_TOTAL",
    "WATCH_RESTARTS_TOTAL",
    "WATCH_UP",
    "ZONE_ALLOCATABLE_CPU_CORES",
    "ZONE_ALLOCATION_DESIRED",
    "ZONE_ALLOCATION_MAXIMUM",
    "ZONE_ALLOCATION_MINIMUM",
    "ZONE_CPU_RATIO",
    "ZONE_ENDPOINTS",
    "ZONE_HINTED_ENDPOINTS",
    "ZONE_LOAD_FACTOR",
    "ZONE_LOSS_SERVICES_LOSING_HINTS",
]
