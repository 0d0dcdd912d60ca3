"""Grafana dashboards for topology-hints-exporter, generated with grafana-foundation-sdk.

Run ``python dashboards/generate.py [OUTDIR]`` (default: this folder) to write the three
dashboards as JSON. The output is deterministic (sorted keys, two-space indent, trailing
newline) and committed; a test regenerates it and compares byte for byte.

Metric names and labels are those of SPEC.md section 9. The exporter itself exports no
``cluster`` label: it comes from Prometheus (an external label, or a relabelling of the scrape
target). Every query selects ``cluster="$cluster"``; in a single-cluster setup the variable is
empty and that matcher selects series without the label, as kubernetes-mixin does.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

# --- Configuration ---------------------------------------------------------------------------
# Show the `cluster` variable: turn on when one Prometheus (or Thanos / Mimir) holds the series
# of several clusters, told apart by a `cluster` label.
SHOW_MULTI_CLUSTER = False
TAGS = ["topology-hints", "kubernetes"]
REFRESH = "1m"
TIME_FROM = "now-6h"
# The `auto` overload guard of SPEC section 3: one endpoint may take at most 1.2x its fair share.
OVERLOAD_THRESHOLD = 1.2

OVERVIEW_UID = "topology-hints-overview"
SERVICE_UID = "topology-hints-service"
NODES_UID = "topology-hints-nodes"

DATASOURCE = models.DataSourceRef(type_val="prometheus", uid="${datasource}")

# --- Selectors ---------------------------------------------------------------------------------
CLUSTER = 'cluster="$cluster"'
NAMESPACES = 'namespace=~"$namespace"'  # multi-value variable on overview and nodes
NAMESPACE = 'namespace="$namespace"'  # single value on the Service drill-down
SERVICE = 'service="$service"'

PROXY_MODES = ("PreferSameNode", "PreferSameZone", "Cluster", "Local")
# A number per kube-proxy mode, so that a state timeline can colour one row per zone.
PROXY_MODE_CODES = {"PreferSameNode": 4, "PreferSameZone": 3, "Cluster": 2, "Local": 1}
PROXY_MODE_COLORS = {
    "PreferSameNode": "blue",
    "PreferSameZone": "green",
    "Cluster": "orange",
    "Local": "purple",
}


def sel(metric: str, *matchers: str) -> str:
    """A vector selector: the metric with its label matchers."""
    return f"{metric}{{{', '.join(matchers)}}}"


def service_url() -> str:
    """The drill-down dashboard for the Service on the clicked table row."""
    return (
        f"/d/{SERVICE_UID}/topology-hints-service?${{datasource:queryparam}}"
        "&${cluster:queryparam}&var-namespace=${__data.fields.namespace}"
        "&var-service=${__data.fields.service}&${__url_time_range}"
    )


# --- Queries and panels ------------------------------------------------------------------------
class Query:
    """One PromQL target: expression, legend and whether it is an instant table query."""

    def __init__(self, expr: str, legend: str = "", *, table_format: bool = False) -> None:
        self.expr = expr
        self.legend = legend
        self.table_format = table_format

    def build(self, ref_id: str) -> prometheus.Dataquery:
        """The SDK target for this query."""
        target = prometheus.Dataquery().expr(self.expr).ref_id(ref_id).datasource(DATASOURCE)
        if self.table_format:
            return target.instant().format(PromQueryFormat.TABLE).legend_format("__auto")
        return target.range().legend_format(self.legend or "__auto")


Panel = TypeVar("Panel", timeseries.Panel, stat.Panel, table.Panel, statetimeline.Panel)


def _panel(
    panel: Panel,
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    width: int,
    height: int,
) -> Panel:
    panel.title(title).description(description).unit(unit).datasource(DATASOURCE)
    panel.span(width).height(height)
    for index, query in enumerate(queries):
        panel.with_target(query.build(chr(ord("A") + index)))
    return panel


def thresholds(*steps: tuple[float | None, str]) -> dashboard_builders.ThresholdsConfig:
    """Absolute thresholds; the first step's value is None (the base colour)."""
    return (
        dashboard_builders.ThresholdsConfig()
        .mode(models.ThresholdsMode.ABSOLUTE)
        .steps([models.Threshold(value=value, color=color) for value, color in steps])
    )


def value_map(mapping: dict[str, tuple[str, str]]) -> list[models.ValueMapping]:
    """A value-to-text mapping: raw value -> (text, colour)."""
    options = {
        value: models.ValueMappingResult(text=text, color=color, index=index)
        for index, (value, (text, color)) in enumerate(mapping.items())
    }
    return [models.ValueMap(options=options)]


def graph(
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    *,
    width: int = 12,
    height: int = 8,
    stack: bool = False,
    bars: bool = False,
) -> timeseries.Panel:
    """A time series panel with a table legend."""
    panel = _panel(timeseries.Panel(), title, description, unit, queries, width, height)
    panel.legend(
        common_builders.VizLegendOptions()
        .display_mode(common.LegendDisplayMode.TABLE)
        .placement(common.LegendPlacement.BOTTOM)
        .show_legend(show_legend=True)
        .calcs(["lastNotNull", "max"])
    )
    panel.tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI))
    if stack:
        panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
        panel.fill_opacity(30)
    if bars:
        panel.draw_style(common.GraphDrawStyle.BARS).fill_opacity(60)
    return panel


def single(
    title: str,
    description: str,
    unit: str,
    queries: list[Query],
    *,
    width: int = 6,
    height: int = 5,
    mappings: list[models.ValueMapping] | None = None,
    steps: dashboard_builders.ThresholdsConfig | None = None,
) -> stat.Panel:
    """A stat panel showing the last value of each series."""
    panel = _panel(stat.Panel(), title, description, unit, queries, width, height)
    panel.reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
    panel.graph_mode(common.BigValueGraphMode.NONE)
    panel.color_mode(
        common.BigValueColorMode.VALUE if steps is None else common.BigValueColorMode.BACKGROUND
    )
    panel.thresholds(steps or thresholds((None, "text")))
    if mappings:
        panel.mappings(mappings)
    return panel


def grid(
    title: str,
    description: str,
    unit: str,
    query: Query,
    *,
    value_column: str | None = None,
    width: int = 12,
    height: int = 8,
    link_to_service: bool = False,
) -> table.Panel:
    """A table of the current series: one row per label set, Time hidden.

    `value_column` names the value column; when None the value (always 1 for state-like
    families) is hidden.
    """
    query.table_format = True
    panel = _panel(table.Panel(), title, description, unit, [query], width, height)
    organize: dict[str, object] = {"excludeByName": {"Time": True}}
    if value_column is None:
        organize["excludeByName"] = {"Time": True, "Value": True}
    else:
        organize["renameByName"] = {"Value": value_column}
    panel.with_transformation(models.DataTransformerConfig(id_val="organize", options=organize))
    panel.no_value("none")
    if link_to_service:
        panel.data_links(
            [dashboard_builders.DashboardLink("Open the Service drill-down").url(service_url())]
        )
    return panel


def timeline(
    title: str,
    description: str,
    queries: list[Query],
    mappings: list[models.ValueMapping],
    *,
    width: int = 12,
    height: int = 8,
) -> statetimeline.Panel:
    """A state timeline: one row per series, coloured by the mapped value."""
    panel = _panel(statetimeline.Panel(), title, description, "none", queries, width, height)
    panel.mappings(mappings).show_value(common.VisibilityMode.AUTO).merge_values(merge_values=True)
    return panel


def row(title: str) -> dashboard_builders.Row:
    """An expanded row; the panels added after it belong to it."""
    return dashboard_builders.Row(title).collapsed(collapsed=False)


# --- Variables ---------------------------------------------------------------------------------
def datasource_variable() -> dashboard_builders.DatasourceVariable:
    """The Prometheus data source every panel uses."""
    return (
        dashboard_builders.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .description("Prometheus that scrapes topology-hints-exporter.")
    )


def cluster_variable() -> dashboard_builders.QueryVariable:
    """The `cluster` label Prometheus adds in multi-cluster setups; hidden otherwise."""
    hide = (
        models.VariableHide.DONT_HIDE if SHOW_MULTI_CLUSTER else models.VariableHide.HIDE_VARIABLE
    )
    return (
        dashboard_builders.QueryVariable("cluster")
        .label("Cluster")
        .hide(hide)
        .datasource(DATASOURCE)
        .query("label_values(topology_hints_build_info, cluster)")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .description("The cluster label of the series (empty in a single-cluster Prometheus).")
    )


def namespace_variable(*, multi: bool) -> dashboard_builders.QueryVariable:
    """Namespaces that have exported Services."""
    variable = (
        dashboard_builders.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query(f"label_values({sel('topology_hints_service_info', CLUSTER)}, namespace)")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .description("Namespaces with Services the exporter reports on.")
    )
    if multi:
        variable.multi(multi=True).include_all(include_all=True).all_value(".*")
    return variable


def service_variable() -> dashboard_builders.QueryVariable:
    """Services of the selected namespace."""
    return (
        dashboard_builders.QueryVariable("service")
        .label("Service")
        .datasource(DATASOURCE)
        .query(f"label_values({sel('topology_hints_service_info', CLUSTER, NAMESPACE)}, service)")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .description("The Service to drill into.")
    )


def new_dashboard(uid: str, title: str, description: str) -> dashboard_builders.Dashboard:
    """A dashboard with the shared settings: uid, tags, time, links to its siblings."""
    return (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .time(TIME_FROM, "now")
        .refresh(REFRESH)
        .timezone("browser")
        .tooltip(models.DashboardCursorSync.CROSSHAIR)
        .link(
            dashboard_builders.DashboardLink("Topology hints")
            .type(models.DashboardLinkType.DASHBOARDS)
            .tags([TAGS[0]])
            .as_dropdown(as_dropdown=True)
            .include_vars(include_vars=True)
            .keep_time(keep_time=True)
        )
    )


# --- Overview ----------------------------------------------------------------------------------
def overview() -> dashboard_builders.Dashboard:
    """Cluster-wide view: node info, zone shares, Services by state, what needs attention."""
    mechanism_by_service = (
        "max by (namespace, service, mechanism) "
        f"({sel('topology_hints_service_info', CLUSTER, NAMESPACES)})"
    )

    def expected(value: int) -> str:
        return (
            "count by (mechanism) (("
            "max by (namespace, service, address_type) "
            f"({sel('topology_hints_service_expected_enabled', CLUSTER, NAMESPACES)}) == {value}) "
            f"* on (namespace, service) group_left (mechanism) {mechanism_by_service})"
        )

    dash = new_dashboard(
        OVERVIEW_UID,
        "Topology hints / Overview",
        "Whether topology-aware routing works in the cluster, and which Services need attention.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable())
    dash.with_variable(namespace_variable(multi=True))

    dash.with_row(row("Cluster"))
    dash.with_panel(
        single(
            "Node info",
            "Whether every Ready worker node has a zone label and allocatable CPU, and at least "
            "two zones have CPU. When not, the EndpointSlice controller disables `auto` hints "
            "for every Service (InsufficientNodeInfo).",
            "none",
            [Query(f"min({sel('topology_hints_sufficient_node_info', CLUSTER)})")],
            mappings=value_map({"1": ("sufficient", "green"), "0": ("insufficient", "red")}),
            steps=thresholds((None, "red"), (1, "green")),
            width=4,
            height=8,
        )
    )
    dash.with_panel(
        single(
            "Zones",
            "Zones with CPU in the controller's node view (no series while node info is "
            "insufficient).",
            "short",
            [Query(f"count(max by (zone) ({sel('topology_hints_zone_cpu_ratio', CLUSTER)}))")],
            width=4,
            height=8,
        )
    )
    dash.with_panel(
        graph(
            "Zone CPU share",
            "Each zone's share of allocatable CPU, as the EndpointSlice controller computes it. "
            "Under `auto`, endpoints are allocated to zones in these proportions.",
            "percentunit",
            [Query(f"max by (zone) ({sel('topology_hints_zone_cpu_ratio', CLUSTER)})", "{{zone}}")],
            width=8,
            stack=True,
        ).max(1)
    )
    dash.with_panel(
        graph(
            "Allocatable CPU per zone",
            "CPU cores the controller counts for each zone (Ready worker nodes only).",
            "short",
            [
                Query(
                    f"max by (zone) ({sel('topology_hints_zone_allocatable_cpu_cores', CLUSTER)})",
                    "{{zone}}",
                )
            ],
            width=8,
        )
    )
    dash.with_panel(
        grid(
            "Nodes missing topology info",
            "Ready worker nodes without a zone label or allocatable CPU. One such node is "
            "enough to disable `auto` hints for every Service.",
            "none",
            Query(
                "max by (node, missing) "
                f"({sel('topology_hints_node_missing_topology_info', CLUSTER)})"
            ),
        )
    )
    dash.with_panel(
        graph(
            "Controller events",
            "TopologyAwareHintsEnabled / TopologyAwareHintsDisabled events the EndpointSlice "
            "controller recorded, over all Services.",
            "short",
            [
                Query(
                    "sum by (reason) (increase("
                    f"{sel('topology_hints_controller_events_total', CLUSTER)}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            bars=True,
        )
    )

    dash.with_row(row("Services"))
    dash.with_panel(
        single(
            "Services by mechanism",
            "Exported Services by the mechanism that decides their hints: `auto` (the "
            "topology-mode annotation), `traffic-distribution` (spec.trafficDistribution) or "
            "`none`.",
            "short",
            [Query(f"count by (mechanism) ({mechanism_by_service})", "{{mechanism}}")],
            width=8,
            height=8,
        )
    )
    dash.with_panel(
        single(
            "Service entries by mechanism and expected state",
            "(Service, address type) entries whose hints the controller is expected to enable "
            "or disable; Services of mechanism `none` have no expected state.",
            "short",
            [
                Query(expected(1), "{{mechanism}}: enabled"),
                Query(expected(0), "{{mechanism}}: disabled"),
            ],
            width=8,
            height=8,
        )
    )
    dash.with_panel(
        graph(
            "Service entries by disabled reason",
            "Why the controller refuses `auto` hints, counted over (Service, address type) "
            "entries.",
            "short",
            [
                Query(
                    "count by (reason) (max by (namespace, service, address_type, reason) "
                    f"({sel('topology_hints_service_disabled_reason', CLUSTER, NAMESPACES)}))",
                    "{{reason}}",
                )
            ],
            width=8,
            stack=True,
        )
    )

    dash.with_row(row("Needs attention"))
    dash.with_panel(
        grid(
            "Disabled auto Services",
            "Services asking for `auto` hints that the controller disables, with the reason "
            "and the number of ready endpoints. Click a row to drill down.",
            "short",
            Query(
                "max by (namespace, service, address_type) "
                f"({sel('topology_hints_service_ready_endpoints', CLUSTER, NAMESPACES)}) "
                "* on (namespace, service, address_type) group_left (reason) "
                "max by (namespace, service, address_type, reason) "
                f"({sel('topology_hints_service_disabled_reason', CLUSTER, NAMESPACES)})"
            ),
            value_column="ready endpoints",
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Incomplete hints",
            "Services where some but not all ready endpoints carry a zone hint: kube-proxy then "
            "ignores every hint of the Service.",
            "percentunit",
            Query(
                "max by (namespace, service, address_type) "
                f"({sel('topology_hints_service_hint_completeness', CLUSTER, NAMESPACES)}) "
                "> 0 < 1"
            ),
            value_column="hint completeness",
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Drift",
            "Services whose observed hints differ from the expected result. A short drift is "
            "normal while the controller catches up; a lasting one is not.",
            "none",
            Query(
                "max by (namespace, service, address_type, kind) "
                f"({sel('topology_hints_service_drift', CLUSTER, NAMESPACES)})"
            ),
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Config issues",
            "Annotations and fields that do not do what they seem to: an annotation shadowing "
            "trafficDistribution, unknown values, internalTrafficPolicy Local with hints.",
            "none",
            Query(
                "max by (namespace, service, issue) "
                f"({sel('topology_hints_service_config_issue', CLUSTER, NAMESPACES)})"
            ),
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Overloaded zones",
            f"Zones whose hinted endpoints get more than {OVERLOAD_THRESHOLD}x their fair "
            "share of traffic when traffic follows CPU (the load factor). Common with "
            "trafficDistribution, which has no overload guard.",
            "none",
            Query(
                "max by (namespace, service, address_type, zone) "
                f"({sel('topology_hints_zone_load_factor', CLUSTER, NAMESPACES)}) "
                f"> {OVERLOAD_THRESHOLD}"
            ),
            value_column="load factor",
            width=24,
            link_to_service=True,
        ).decimals(2)
    )

    dash.with_row(row("Exporter"))
    dash.with_panel(
        timeline(
            "Watch up",
            "Whether the exporter's watch of each Kubernetes resource is established.",
            [
                Query(
                    f"min by (resource) ({sel('topology_hints_watch_up', CLUSTER)})",
                    "{{resource}}",
                )
            ],
            value_map({"1": ("up", "green"), "0": ("down", "red")}),
            width=8,
        )
    )
    dash.with_panel(
        single(
            "Last evaluation age",
            "Seconds since the exporter last evaluated its snapshot of the cluster.",
            "s",
            [
                Query(
                    "time() - max("
                    f"{sel('topology_hints_last_evaluation_timestamp_seconds', CLUSTER)})"
                )
            ],
            steps=thresholds((None, "green"), (60, "orange"), (300, "red")),
            width=4,
            height=8,
        )
    )
    duration = "topology_hints_evaluation_duration_seconds"
    dash.with_panel(
        graph(
            "Evaluation duration",
            "Time one evaluation of the whole cluster takes: 50th and 99th percentile, and mean.",
            "s",
            [
                Query(
                    "histogram_quantile(0.5, sum by (le) "
                    f"(rate({sel(duration + '_bucket', CLUSTER)}[$__rate_interval])))",
                    "p50",
                ),
                Query(
                    "histogram_quantile(0.99, sum by (le) "
                    f"(rate({sel(duration + '_bucket', CLUSTER)}[$__rate_interval])))",
                    "p99",
                ),
                Query(
                    f"sum(rate({sel(duration + '_sum', CLUSTER)}[$__rate_interval])) "
                    f"/ sum(rate({sel(duration + '_count', CLUSTER)}[$__rate_interval]))",
                    "mean",
                ),
            ],
            width=12,
        )
    )
    dash.with_panel(
        graph(
            "Watch restarts",
            "Restarts of the exporter's watches, by resource and cause.",
            "short",
            [
                Query(
                    "sum by (resource, cause) (increase("
                    f"{sel('topology_hints_watch_restarts_total', CLUSTER)}[$__rate_interval]))",
                    "{{resource}}: {{cause}}",
                )
            ],
            width=8,
            bars=True,
        )
    )
    dash.with_panel(
        graph(
            "Objects in the store",
            "Kubernetes objects the exporter holds, by resource.",
            "short",
            [
                Query(
                    f"max by (resource) ({sel('topology_hints_objects', CLUSTER)})",
                    "{{resource}}",
                )
            ],
            width=8,
        )
    )
    dash.with_panel(
        graph(
            "Invalid objects",
            "Objects the exporter could not decode and skipped, by resource.",
            "short",
            [
                Query(
                    "sum by (resource) (increase("
                    f"{sel('topology_hints_invalid_objects_total', CLUSTER)}[$__rate_interval]))",
                    "{{resource}}",
                )
            ],
            width=8,
            bars=True,
        )
    )
    dash.with_panel(
        graph(
            "Watch events",
            "Events the exporter's watches received, by resource and event type.",
            "short",
            [
                Query(
                    "sum by (resource, type) (increase("
                    f"{sel('topology_hints_watch_events_total', CLUSTER)}[$__rate_interval]))",
                    "{{resource}}: {{type}}",
                )
            ],
            width=16,
            bars=True,
        )
    )
    dash.with_panel(
        single(
            "Exporter versions",
            "Running exporter processes by version.",
            "short",
            [
                Query(
                    f"count by (version) ({sel('topology_hints_build_info', CLUSTER)})",
                    "{{version}}",
                )
            ],
            width=8,
            height=8,
        )
    )
    return dash


# --- Service drill-down --------------------------------------------------------------------------
def service() -> dashboard_builders.Dashboard:
    """One Service: allocation per zone against hints, endpoints, kube-proxy modes, drift."""

    def svc(metric: str, *extra: str) -> str:
        return sel(metric, CLUSTER, NAMESPACE, SERVICE, *extra)

    def per(labels: str, metric: str, *extra: str) -> str:
        return f"max by ({labels}) ({svc(metric, *extra)})"

    dash = new_dashboard(
        SERVICE_UID,
        "Topology hints / Service",
        "One Service: expected allocation per zone against the hints it has, and what "
        "kube-proxy does with them.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable())
    dash.with_variable(namespace_variable(multi=False)).with_variable(service_variable())

    dash.with_row(row("State"))
    dash.with_panel(
        grid(
            "Service configuration",
            "The mechanism deciding the hints, and the raw trafficDistribution and "
            "internalTrafficPolicy fields (empty when unset).",
            "none",
            Query(
                per(
                    "mechanism, traffic_distribution, internal_traffic_policy",
                    "topology_hints_service_info",
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
                    per("address_type", "topology_hints_service_expected_enabled"),
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
                    per("address_type, reason", "topology_hints_service_disabled_reason"),
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
                    per("address_type", "topology_hints_service_ready_endpoints"),
                    "ready ({{address_type}})",
                ),
                Query(
                    per("address_type", "topology_hints_service_hinted_endpoints"),
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
                    per("address_type", "topology_hints_service_hint_completeness"),
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
                        "address_type, direction",
                        "topology_hints_service_nearest_feasible_endpoints",
                    ),
                    "{{direction}} ({{address_type}})",
                )
            ],
            width=8,
            height=8,
        )
    )

    dash.with_row(row("Zones"))
    allocation = [
        ("minimum", "topology_hints_zone_allocation_minimum"),
        ("desired", "topology_hints_zone_allocation_desired"),
        ("maximum", "topology_hints_zone_allocation_maximum"),
        ("hinted", "topology_hints_zone_hinted_endpoints"),
        ("located", "topology_hints_zone_endpoints"),
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
                    per("address_type, zone", metric), f"{{{{zone}}}} {name} ({{{{address_type}}}})"
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
        f"{OVERLOAD_THRESHOLD}. A zone with no hinted endpoint has no factor.",
        "none",
        [
            Query(
                per("address_type, zone", "topology_hints_zone_load_factor"),
                "{{zone}} ({{address_type}})",
            )
        ],
        width=8,
    )
    load_factor.decimals(2).thresholds(thresholds((None, "green"), (OVERLOAD_THRESHOLD, "red")))
    load_factor.thresholds_style(
        common_builders.GraphThresholdsStyleConfig().mode(common.GraphThresholdsStyleMode.DASHED)
    )
    dash.with_panel(load_factor)
    mode_expr = " or ".join(
        per("address_type, zone", "topology_hints_service_proxy_mode", 'mode="' + mode + '"')
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
                    per("address_type, mode", "topology_hints_service_proxy_nodes"),
                    "{{mode}} ({{address_type}})",
                )
            ],
            width=8,
            stack=True,
        )
    )

    dash.with_row(row("Changes"))
    dash.with_panel(
        timeline(
            "Drift",
            "Observed hints that differ from the expected result, by kind: hints-missing, "
            "unexpected-hints, zone-out-of-range. Short drift is normal while the controller "
            "catches up.",
            [
                Query(
                    per("address_type, kind", "topology_hints_service_drift"),
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
                    f"{svc('topology_hints_service_state_changes_total')}[$__rate_interval]))",
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
            Query(
                "time() - " + per("reason", "topology_hints_service_last_event_timestamp_seconds")
            ),
            value_column="age",
            width=8,
        )
    )
    return dash


# --- Nodes -------------------------------------------------------------------------------------
def nodes() -> dashboard_builders.Dashboard:
    """kube-proxy's topology modes per node and zone, and nodes missing topology info."""
    node_modes = f"max by (node, zone, mode) ({sel('topology_hints_node_proxy_services', CLUSTER)})"
    dash = new_dashboard(
        NODES_UID,
        "Topology hints / Nodes",
        "The topology mode kube-proxy runs exported Services in, per node and per zone.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable())
    dash.with_variable(namespace_variable(multi=True))

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
            Query(
                "max by (node, missing) "
                f"({sel('topology_hints_node_missing_topology_info', CLUSTER)})"
            ),
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
                f"({sel('topology_hints_service_proxy_nodes', CLUSTER, NAMESPACES)})"
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
                f"({sel('topology_hints_service_proxy_mode', CLUSTER, NAMESPACES)})"
            ),
            width=12,
            height=10,
            link_to_service=True,
        )
    )
    return dash


# --- Output ------------------------------------------------------------------------------------
DASHBOARDS = {
    "topology-hints-overview.json": overview,
    "topology-hints-service.json": service,
    "topology-hints-nodes.json": nodes,
}


def render(builder: dashboard_builders.Dashboard) -> str:
    """The dashboard as deterministic JSON, with panel ids numbered in layout order."""
    model = builder.build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number
    return json.dumps(model, cls=JSONEncoder, sort_keys=True, indent=2) + "\n"


def panel_queries(dashboard_json: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (panel title, PromQL expression) of a dashboard, rows' nested panels included."""
    queries: list[tuple[str, str]] = []
    pending = list(dashboard_json.get("panels", []))
    while pending:
        panel = pending.pop(0)
        pending[0:0] = panel.get("panels", [])
        queries.extend(
            (panel["title"], target["expr"])
            for target in panel.get("targets", [])
            if target.get("expr")
        )
    return queries


def write_all(outdir: Path) -> list[Path]:
    """Write every dashboard into outdir; returns the written paths."""
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, build in DASHBOARDS.items():
        path = outdir / filename
        path.write_text(render(build()), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    """Entry point: `generate.py [OUTDIR]`."""
    if len(argv) > 1:
        sys.stderr.write("usage: generate.py [OUTDIR]\n")
        return 2
    outdir = Path(argv[0]) if argv else Path(__file__).resolve().parent
    for path in write_all(outdir):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
