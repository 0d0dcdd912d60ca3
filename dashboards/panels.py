"""Shared building blocks of the dashboards: settings, selectors, variables and panels.

Metric names come from the exporter's family table and mode names from the engine (through
`exporter.metrics.monitoring`). The exporter itself exports no ``cluster`` label: it comes
from Prometheus (an external label, or a relabelling of the scrape target). Every query
selects ``cluster="$cluster"``; in a single-cluster setup the variable is empty and that
matcher selects series without the label, as kubernetes-mixin does.
"""

from __future__ import annotations

from typing import TypeVar

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from exporter.metrics import families as f
from exporter.metrics.monitoring import MonitoringConfig, ProxyMode

# --- Configuration ---------------------------------------------------------------------------
# The selector, the cluster label, showing the `cluster` variable and the thresholds are the
# MonitoringConfig every generator shares (exporter/metrics/monitoring.py); these are the
# dashboards' own.
TAGS = ["topology-hints", "kubernetes"]
REFRESH = "1m"
TIME_FROM = "now-6h"

OVERVIEW_UID = "topology-hints-overview"
SERVICE_UID = "topology-hints-service"
NODES_UID = "topology-hints-nodes"

DATASOURCE = models.DataSourceRef(type_val="prometheus", uid="${datasource}")

# --- Selectors ---------------------------------------------------------------------------------
NAMESPACES = 'namespace=~"$namespace"'  # multi-value variable on overview and nodes
NAMESPACE = 'namespace="$namespace"'  # single value on the Service drill-down
SERVICE = 'service="$service"'

# A number per kube-proxy mode, so that a state timeline can colour one row per zone.
PROXY_MODE_CODES = {
    ProxyMode.PREFER_SAME_NODE: 4,
    ProxyMode.PREFER_SAME_ZONE: 3,
    ProxyMode.CLUSTER: 2,
    ProxyMode.LOCAL: 1,
}
PROXY_MODE_COLORS = {
    ProxyMode.PREFER_SAME_NODE: "blue",
    ProxyMode.PREFER_SAME_ZONE: "green",
    ProxyMode.CLUSTER: "orange",
    ProxyMode.LOCAL: "purple",
}


def cluster(c: MonitoringConfig) -> str:
    """The matcher of the `cluster` variable. On a single cluster the variable is empty, and
    `cluster=""` selects the series without the label (kubernetes-mixin's behaviour)."""
    return f'{c.cluster_label}="$cluster"'


def sel(c: MonitoringConfig, metric: str, *matchers: str) -> str:
    """The exporter's series of `metric` in the selected cluster, with these matchers."""
    return c.series(metric, cluster(c), *matchers)


def rec(c: MonitoringConfig, name: str, *matchers: str) -> str:
    """A recorded series (alerts/recording.py) of the selected cluster: the recording rules
    already applied the selector and aggregated the scrape targets away."""
    return f"{name}{{{', '.join((cluster(c), *matchers))}}}"


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


def cluster_variable(c: MonitoringConfig) -> dashboard_builders.QueryVariable:
    """The cluster label Prometheus adds in multi-cluster setups. Shown by default: on a single
    cluster it has no value, and the panels' `cluster=""` matchers select every series."""
    hide = (
        models.VariableHide.DONT_HIDE if c.show_multi_cluster else models.VariableHide.HIDE_VARIABLE
    )
    return (
        dashboard_builders.QueryVariable("cluster")
        .label("Cluster")
        .hide(hide)
        .datasource(DATASOURCE)
        .query(f"label_values({c.series(f.BUILD_INFO.name)}, {c.cluster_label})")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .description("The cluster label of the series (empty in a single-cluster Prometheus).")
    )


def namespace_variable(c: MonitoringConfig, *, multi: bool) -> dashboard_builders.QueryVariable:
    """Namespaces that have exported Services."""
    variable = (
        dashboard_builders.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query(f"label_values({sel(c, f.SERVICE_INFO.name)}, namespace)")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .description("Namespaces with Services the exporter reports on.")
    )
    if multi:
        variable.multi(multi=True).include_all(include_all=True).all_value(".*")
    return variable


def service_variable(c: MonitoringConfig) -> dashboard_builders.QueryVariable:
    """Services of the selected namespace."""
    return (
        dashboard_builders.QueryVariable("service")
        .label("Service")
        .datasource(DATASOURCE)
        .query(f"label_values({sel(c, f.SERVICE_INFO.name, NAMESPACE)}, service)")
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
