"""The pure engine: what the EndpointSlice controller and kube-proxy do with topology hints.

Plain functions over immutable data: no I/O, no clock, no logging, no globals, and no
import of `kubernetes` or `prometheus_client` (a test enforces it).
"""

from exporter.engine.allocation import (
    OVERLOAD_LIMIT,
    OVERLOAD_THRESHOLD,
    Allocation,
    NearestFeasible,
    allocate,
    nearest_feasible,
)
from exporter.engine.capacity import ClusterCapacity, MissingInfo, NodeProblem, cluster_capacity
from exporter.engine.context import DEFAULT_DATAPLANES, NodeContext, node_context
from exporter.engine.dataplanes import DATA_PLANES, DataPlaneRule, route
from exporter.engine.evaluate import (
    EntryVerdict,
    ExpectedState,
    ZoneVerdict,
    evaluate_service,
)
from exporter.engine.health import DriftKind
from exporter.engine.kubeproxy import ProxyMode, ProxyView, ReadyNodes
from exporter.engine.mechanism import ConfigIssue, Mechanism, config_issues, mechanism_of
from exporter.engine.model import Endpoint, EndpointSlice, Node, Service
from exporter.engine.reasons import DisableReason
from exporter.engine.routing import (
    Cause,
    DataPlane,
    Routing,
    RoutingView,
    ServiceEndpoints,
    ZoneRouting,
    service_endpoints,
)

__all__ = [
    "DATA_PLANES",
    "DEFAULT_DATAPLANES",
    "OVERLOAD_LIMIT",
    "OVERLOAD_THRESHOLD",
    "Allocation",
    "Cause",
    "ClusterCapacity",
    "ConfigIssue",
    "DataPlane",
    "DataPlaneRule",
    "DisableReason",
    "DriftKind",
    "Endpoint",
    "EndpointSlice",
    "EntryVerdict",
    "ExpectedState",
    "Mechanism",
    "MissingInfo",
    "NearestFeasible",
    "Node",
    "NodeContext",
    "NodeProblem",
    "ProxyMode",
    "ProxyView",
    "ReadyNodes",
    "Routing",
    "RoutingView",
    "Service",
    "ServiceEndpoints",
    "ZoneRouting",
    "ZoneVerdict",
    "allocate",
    "cluster_capacity",
    "config_issues",
    "evaluate_service",
    "mechanism_of",
    "nearest_feasible",
    "node_context",
    "route",
    "service_endpoints",
]
