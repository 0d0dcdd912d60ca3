"""The Service drill-down: allocation per zone against hints, endpoints, kube-proxy modes."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models

from dashboards.panels import (
    NAMESPACE,
    PROXY_MODE_CODES,
    PROXY_MODE_COLORS,
    SERVICE,
    SERVICE_UID,
    Query,
    cluster_variable,
    datasource_variable,
    graph,
    grid,
    namespace_variable,
    new_dashboard,
    row,
    sel,
    service_variable,
    single,
    thresholds,
    timeline,
    value_map,
)
from exporter.metrics import families as f
from exporter.metrics.monitoring import PROXY_MODES, MonitoringConfig


def svc(c: MonitoringConfig, metric: str, *extra: str) -> str:
    """A selector of the drill-down's Service."""
    return sel(c, metric, NAMESPACE, SERVICE, *extra)


def per(c: MonitoringConfig, labels: str, metric: str, *extra: str) -> str:
    """The Service's series, at most one per value of `labels`."""
    return f"max by ({labels}) ({svc(c, metric, *extra)})"


def _state_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The State row and its panels."""
    dash.with_row(row("State"))
    dash.with_panel(
        grid(
            "Service configuration",
            "The mechanism deciding the hints, and the raw trafficDistribution and "
            "internalTrafficPolicy fields (empty when unset).",
            "none",
            Query(
                per(
                    c,
                    "mechanism, traffic_distribution, internal_traffic_policy",
                    f.SERVICE_INFO.name,
                )
            ),
            width=8,
            height=5,
        )
    )
    dash.with_panel(
        timeline(
            "Expected state",
            "Whether the controller is expected to enable or disable hints, per address type "
            "(no series for mechanism `none`).",
            [
                Query(
                    per(c, "address_type", f.SERVICE_EXPECTED_ENABLED.name),
                    "{{address_type}}",
                )
            ],
            value_map({"1": ("enabled", "green"), "0": ("disabled", "red")}),
            width=8,
            height=5,
        )
    )
    dash.with_panel(
        timeline(
            "Disabled reason",
            "Why the controller refuses `auto` hints, per address type.",
            [
                Query(
                    per(c, "address_type, reason", f.SERVICE_DISABLED_REASON.name),
                    "{{address_type}}: {{reason}}",
                )
            ],
            value_map({"1": ("active", "red")}),
            width=8,
            height=5,
        )
    )
    dash.with_panel(
        graph(
            "Ready and hinted endpoints",
            "Ready endpoints (N) and those of them with a zone hint.",
            "short",
            [
                Query(
                    per(c, "address_type", f.SERVICE_READY_ENDPOINTS.name),
                    "ready ({{address_type}})",
                ),
                Query(
                    per(c, "address_type", f.SERVICE_HINTED_ENDPOINTS.name),
                    "hinted ({{address_type}})",
                ),
            ],
            width=8,
        )
    )
    dash.with_panel(
        graph(
            "Hint completeness",
            "Ready endpoints with a zone hint over ready endpoints. Anything strictly between "
            "0% and 100% makes kube-proxy ignore every hint.",
            "percentunit",
            [
                Query(
                    per(c, "address_type", f.SERVICE_HINT_COMPLETENESS.name),
                    "{{address_type}}",
                )
            ],
            width=8,
        )
        .min(0)
        .max(1)
    )
    dash.with_panel(
        single(
            "Nearest feasible endpoints",
            "Under `auto`, the nearest numbers of ready endpoints below and above today's "
            "for which the controller would enable hints, given today's zone ratios.",
            "short",
            [
                Query(
                    per(
                        c,
                        "address_type, direction",
                        f.SERVICE_NEAREST_FEASIBLE_ENDPOINTS.name,
                    ),
                    "{{direction}} ({{address_type}})",
                )
            ],
            width=8,
            height=8,
        )
    )


def _zones_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Zones row and its panels."""
    dash.with_row(row("Zones"))
    allocation = [
        ("minimum", f.ZONE_ALLOCATION_MINIMUM.name),
        ("desired", f.ZONE_ALLOCATION_DESIRED.name),
        ("maximum", f.ZONE_ALLOCATION_MAXIMUM.name),
        ("hinted", f.ZONE_HINTED_ENDPOINTS.name),
        ("located", f.ZONE_ENDPOINTS.name),
    ]
    dash.with_panel(
        graph(
            "Allocation against hints per zone",
            "Per zone: the controller's minimum, desired and maximum allocation (auto, "
            "enabled), the ready endpoints hinted for the zone and those located in it. A "
            "healthy zone has its hinted count within [minimum, maximum].",
            "short",
            [
                Query(
                    per(c, "address_type, zone", metric),
                    f"{{{{zone}}}} {name} ({{{{address_type}}}})",
                )
                for name, metric in allocation
            ],
            width=24,
            height=10,
        ).override_by_regexp(
            ".* (minimum|maximum) .*",
            [
                models.DynamicConfigValue(
                    id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}
                )
            ],
        )
    )
    load_factor = graph(
        "Zone load factor",
        "Traffic one endpoint hinted for the zone gets relative to its fair share, when "
        f"traffic follows CPU. 1.0 is fair; the `auto` guard keeps it at or under "
        f"{c.overload_limit}. A zone with no hinted endpoint has no factor.",
        "none",
        [
            Query(
                per(c, "address_type, zone", f.ZONE_LOAD_FACTOR.name),
                "{{zone}} ({{address_type}})",
            )
        ],
        width=8,
    )
    load_factor.decimals(2).thresholds(thresholds((None, "green"), (c.overload_limit, "red")))
    load_factor.thresholds_style(
        common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
    )
    dash.with_panel(load_factor)
    mode_expr = " or ".join(
        per(c, "address_type, zone", f.SERVICE_PROXY_MODE.name, 'mode="' + mode + '"')
        + f" * {PROXY_MODE_CODES[mode]}"
        for mode in PROXY_MODES
    )
    dash.with_panel(
        timeline(
            "kube-proxy mode by zone",
            "The topology mode kube-proxy runs this Service in on the nodes of each zone "
            "(nodes in PreferSameNode are counted in the next panel).",
            [Query(mode_expr, "{{zone}} ({{address_type}})")],
            value_map(
                {
                    str(PROXY_MODE_CODES[mode]): (mode, PROXY_MODE_COLORS[mode])
                    for mode in PROXY_MODES
                }
            ),
            width=8,
        )
    )
    dash.with_panel(
        graph(
            "Nodes per kube-proxy mode",
            "How many nodes run kube-proxy in each topology mode for this Service.",
            "short",
            [
                Query(
                    per(c, "address_type, mode", f.SERVICE_PROXY_NODES.name),
                    "{{mode}} ({{address_type}})",
                )
            ],
            width=8,
            stack=True,
        )
    )


def _routing_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Effective routing row: what each data plane gives the clients of each zone."""
    dash.with_row(row("Effective routing"))
    dash.with_panel(
        grid(
            "Routing per zone",
            "Ready nodes of each zone by the routing each data plane gives their clients: "
            "same-node, same-zone, local (stay local); cluster, mixed (leave the zone); "
            "no-endpoints (clients refused: the data plane fails closed).",
            "short",
            Query(per(c, "address_type, dataplane, zone, routing", f.SERVICE_ROUTING_NODES.name)),
            value_column="nodes",
            width=16,
        )
    )
    dash.with_panel(
        grid(
            "Local routing ratio",
            "Share of Ready nodes whose traffic to the Service stays local, per data plane.",
            "percentunit",
            Query(per(c, "address_type, dataplane", f.SERVICE_LOCAL_ROUTING_RATIO.name)),
            value_column="local routing ratio",
            width=8,
        )
    )


def _changes_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Changes row and its panels."""
    dash.with_row(row("Changes"))
    dash.with_panel(
        timeline(
            "Drift",
            "Observed hints that differ from the expected result, by kind: hints-missing, "
            "unexpected-hints, zone-out-of-range. Short drift is normal while the controller "
            "catches up.",
            [
                Query(
                    per(c, "address_type, kind", f.SERVICE_DRIFT.name),
                    "{{kind}} ({{address_type}})",
                )
            ],
            value_map({"1": ("drift", "orange")}),
            width=8,
        )
    )
    dash.with_panel(
        graph(
            "Expected state changes",
            "Flips of the expected state between enabled and disabled, as the exporter saw them.",
            "short",
            [
                Query(
                    "sum by (address_type) (increase("
                    f"{svc(c, f.SERVICE_STATE_CHANGES_TOTAL.name)}[$__rate_interval]))",
                    "{{address_type}}",
                )
            ],
            width=8,
            bars=True,
        )
    )
    dash.with_panel(
        grid(
            "Time since last controller event",
            "Age of the last TopologyAwareHintsEnabled / TopologyAwareHintsDisabled event the "
            "EndpointSlice controller recorded on this Service.",
            "s",
            Query("time() - " + per(c, "reason", f.SERVICE_LAST_EVENT_TIMESTAMP_SECONDS.name)),
            value_column="age",
            width=8,
        )
    )


def service(c: MonitoringConfig) -> dashboard_builders.Dashboard:
    """One Service: allocation per zone against hints, endpoints, kube-proxy modes, drift."""

    dash = new_dashboard(
        SERVICE_UID,
        "Topology hints / Service",
        "One Service: expected allocation per zone against the hints it has, and what "
        "kube-proxy does with them.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable(c))
    dash.with_variable(namespace_variable(c, multi=False)).with_variable(service_variable(c))

    _state_row(dash, c)
    _zones_row(dash, c)
    _routing_row(dash, c)
    _changes_row(dash, c)
    return dash
