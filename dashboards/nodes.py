"""The nodes dashboard: kube-proxy modes per node and zone, nodes missing topology info."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_builders

from alerts.recording import NODE_SERVICES_BY_MODE
from dashboards.panels import (
    NAMESPACES,
    NODES_UID,
    Query,
    cluster_variable,
    datasource_variable,
    graph,
    grid,
    namespace_variable,
    new_dashboard,
    rec,
    row,
    sel,
    single,
)
from exporter.metrics import families as f
from exporter.metrics.monitoring import MonitoringConfig


def nodes(c: MonitoringConfig) -> dashboard_builders.Dashboard:
    """kube-proxy's topology modes per node and zone, and nodes missing topology info."""
    node_modes = f"sum by (node, zone, mode) ({rec(c, NODE_SERVICES_BY_MODE)})"
    dash = new_dashboard(
        NODES_UID,
        "Topology hints / Nodes",
        "The topology mode kube-proxy runs exported Services in, per node and per zone.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable(c))
    dash.with_variable(namespace_variable(c, multi=True))

    dash.with_row(row("Nodes"))
    dash.with_panel(
        single(
            "Nodes by kube-proxy mode",
            "Nodes where kube-proxy runs at least one exported Service in each mode.",
            "short",
            [Query(f"count by (mode) ({node_modes} > 0)", "{{mode}}")],
            width=8,
            height=8,
        )
    )
    dash.with_panel(
        graph(
            "Services per mode, by zone",
            "Exported (Service, address type) entries in each kube-proxy mode, summed over the "
            "nodes of each zone.",
            "short",
            [Query(f"sum by (zone, mode) ({node_modes})", "{{zone}}: {{mode}}")],
            width=16,
        )
    )
    dash.with_panel(
        grid(
            "kube-proxy modes per node",
            "For every node, how many exported Services kube-proxy runs in each topology mode.",
            "short",
            Query(node_modes),
            value_column="services",
            width=12,
            height=10,
        )
    )
    dash.with_panel(
        grid(
            "Nodes missing topology info",
            "Ready worker nodes without a zone label or allocatable CPU; each disables `auto` "
            "hints cluster-wide.",
            "none",
            Query(f"max by (node, missing) ({sel(c, f.NODE_MISSING_TOPOLOGY_INFO.name)})"),
            width=12,
            height=10,
        )
    )

    dash.with_row(row("Services"))
    dash.with_panel(
        grid(
            "Nodes per mode, by Service",
            "For every exported Service of the selected namespaces, how many nodes run "
            "kube-proxy in each mode for it. Click a row to drill down.",
            "short",
            Query(
                "max by (namespace, service, address_type, mode) "
                f"({sel(c, f.SERVICE_PROXY_NODES.name, NAMESPACES)})"
            ),
            value_column="nodes",
            width=12,
            height=10,
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Mode by zone, by Service",
            "The kube-proxy mode of each zone's nodes, for every exported Service of the "
            "selected namespaces.",
            "none",
            Query(
                "max by (namespace, service, address_type, zone, mode) "
                f"({sel(c, f.SERVICE_PROXY_MODE.name, NAMESPACES)})"
            ),
            width=12,
            height=10,
            link_to_service=True,
        )
    )
    return dash
