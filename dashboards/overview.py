"""The overview dashboard: node info, zone shares, Services by state, what needs attention,
what a lost zone or one pod more or less would do."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_builders

from alerts.recording import (
    ENTRIES_BY_DISABLED_REASON,
    ENTRIES_BY_EXPECTED_STATE,
    SERVICES_BY_MECHANISM,
)
from dashboards import crosszone
from dashboards.panels import (
    NAMESPACES,
    OVERVIEW_UID,
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
    thresholds,
    timeline,
    value_map,
)
from exporter.metrics import families as f
from exporter.metrics.monitoring import MonitoringConfig


def _expected(c: MonitoringConfig, state: str) -> str:
    """(Service, address type) entries in one expected state, counted by mechanism."""
    entries = rec(c, ENTRIES_BY_EXPECTED_STATE, NAMESPACES, 'expected_state="' + state + '"')
    return f"sum by (mechanism) ({entries})"


def _cluster_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Cluster row and its panels."""
    dash.with_row(row("Cluster"))
    dash.with_panel(
        single(
            "Node info",
            "Whether every Ready worker node has a zone label and allocatable CPU, and at least "
            "two zones have CPU. When not, the EndpointSlice controller disables `auto` hints "
            "for every Service (InsufficientNodeInfo).",
            "none",
            [Query(f"min({sel(c, f.SUFFICIENT_NODE_INFO.name)})")],
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
            [Query(f"count(max by (zone) ({sel(c, f.ZONE_CPU_RATIO.name)}))")],
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
            [Query(f"max by (zone) ({sel(c, f.ZONE_CPU_RATIO.name)})", "{{zone}}")],
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
                    f"max by (zone) ({sel(c, f.ZONE_ALLOCATABLE_CPU_CORES.name)})",
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
            Query(f"max by (node, missing) ({sel(c, f.NODE_MISSING_TOPOLOGY_INFO.name)})"),
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
                    f"{sel(c, f.CONTROLLER_EVENTS_TOTAL.name)}[$__rate_interval]))",
                    "{{reason}}",
                )
            ],
            bars=True,
        )
    )
    dash.with_panel(
        grid(
            "Kubernetes version",
            "The control plane's version the rules are evaluated under (an emulating API "
            "server's emulated version, its binary's beside it) and where it came from (flag, "
            "api: the API server's /version, or assumed: the newest semantics). Empty when "
            "assumed: pass --kubernetes-version.",
            "none",
            Query(
                "max by (kubernetes_version, binary_version, source) "
                f"({sel(c, f.CLUSTER_INFO.name)})"
            ),
        )
    )
    dash.with_panel(
        grid(
            "Feature gates",
            "The topology gates each component's version has (TopologyAwareHints, "
            "ServiceTrafficDistribution, PreferSameTrafficDistribution) and their stage, as the "
            "rules take them, for the controller and for kube-proxy (which may lag the control "
            "plane).",
            "none",
            Query(f"max by (component, name, stage) ({sel(c, f.FEATURE_GATE_ENABLED.name)})"),
            value_column="enabled",
        )
    )


def _services_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Services row and its panels."""
    dash.with_row(row("Services"))
    dash.with_panel(
        single(
            "Services by mechanism",
            "Exported Services by the mechanism that decides their hints: `auto` (the "
            "topology-mode annotation), `traffic-distribution` (spec.trafficDistribution) or "
            "`none`.",
            "short",
            [
                Query(
                    f"sum by (mechanism) ({rec(c, SERVICES_BY_MECHANISM, NAMESPACES)})",
                    "{{mechanism}}",
                )
            ],
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
                Query(_expected(c, "enabled"), "{{mechanism}}: enabled"),
                Query(_expected(c, "disabled"), "{{mechanism}}: disabled"),
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
                    f"sum by (reason) ({rec(c, ENTRIES_BY_DISABLED_REASON, NAMESPACES)})",
                    "{{reason}}",
                )
            ],
            width=8,
            stack=True,
        )
    )


def _needs_attention_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Needs attention row and its panels."""
    dash.with_row(row("Needs attention"))
    dash.with_panel(
        grid(
            "Disabled auto Services",
            "Services asking for `auto` hints that the controller disables, with the reason "
            "and the number of ready endpoints. Click a row to drill down.",
            "short",
            Query(
                "max by (namespace, service, address_type) "
                f"({sel(c, f.SERVICE_READY_ENDPOINTS.name, NAMESPACES)}) "
                "* on (namespace, service, address_type) group_left (reason) "
                "max by (namespace, service, address_type, reason) "
                f"({sel(c, f.SERVICE_DISABLED_REASON.name, NAMESPACES)})"
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
                f"({sel(c, f.SERVICE_HINT_COMPLETENESS.name, NAMESPACES)}) "
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
                f"({sel(c, f.SERVICE_DRIFT.name, NAMESPACES)})"
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
                f"({sel(c, f.SERVICE_CONFIG_ISSUE.name, NAMESPACES)})"
            ),
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Notices",
            "Worth knowing, never a problem: e.g. prefer-close-deprecated (PreferSameZone means "
            "the same where the control plane accepts it). No alert fires on them.",
            "none",
            Query(
                f"max by (namespace, service, notice) ({sel(c, f.SERVICE_NOTICE.name, NAMESPACES)})"
            ),
            width=24,
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Overloaded zones",
            f"Zones whose hinted endpoints get more than {c.overload_limit}x their fair "
            "share of traffic when traffic follows CPU (the load factor). Common with "
            "trafficDistribution, which has no overload guard.",
            "none",
            Query(
                "max by (namespace, service, address_type, zone) "
                f"({sel(c, f.ZONE_LOAD_FACTOR.name, NAMESPACES)}) "
                f"> {c.overload_limit}"
            ),
            value_column="load factor",
            width=24,
            link_to_service=True,
        ).decimals(2)
    )


def _routing_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Effective routing row: does each Service's traffic stay local, per data plane."""
    dash.with_row(row("Effective routing"))
    dash.with_panel(
        grid(
            "Local routing ratio",
            "Per Service, address type and data plane (--dataplane): the share of Ready nodes "
            "whose traffic to the Service stays local (same node, same zone, or "
            "internalTrafficPolicy Local). 0 means it leaves its zone on every node, whatever "
            "the controller's verdict says. Click a row to drill down.",
            "percentunit",
            Query(
                "max by (namespace, service, address_type, dataplane) "
                f"({sel(c, f.SERVICE_LOCAL_ROUTING_RATIO.name, NAMESPACES)})"
            ),
            value_column="local routing ratio",
            width=24,
            link_to_service=True,
        )
    )


def _what_if_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The What if row: what a lost zone or one pod more or less would do to the hints."""
    entry = "namespace, service, address_type"
    margin = f"max by ({entry}, direction) ({sel(c, f.SERVICE_ENDPOINT_MARGIN.name, NAMESPACES)})"
    dash.with_row(row("What if"))
    dash.with_panel(
        single(
            "Services losing hints per lost zone",
            "(Service, address type) entries over all exported Services that would lose "
            "topology-aware routing if the zone's nodes and endpoints were lost, as "
            "`topology-hints-exporter what-if --lose-zone ZONE` answers before the fact.",
            "short",
            [
                Query(
                    f"sum by (zone) ({sel(c, f.ZONE_LOSS_SERVICES_LOSING_HINTS.name)})",
                    "{{zone}}",
                )
            ],
            steps=thresholds((None, "green"), (1, "orange")),
            width=8,
            height=8,
        )
    )
    dash.with_panel(
        grid(
            "Services on the edge",
            "`auto` Services with hints enabled whose endpoint margin is 0: one endpoint fewer "
            "(direction down) or more (up) makes the controller remove every hint. The value is "
            "today's ready endpoint count. Click a row to drill down.",
            "short",
            Query(
                f"max by ({entry}) "
                f"({sel(c, f.SERVICE_READY_ENDPOINTS.name, NAMESPACES)}) "
                f"* on ({entry}) group_left (direction) ({margin} == 0)"
            ),
            value_column="ready endpoints",
            width=16,
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Endpoint margins",
            "For each `auto` Service with hints enabled, how many ready endpoints may go "
            "(down) or come (up), one at a time, before the controller removes its hints; "
            "+Inf when no higher count is refused.",
            "short",
            Query(margin),
            value_column="margin",
            width=24,
            link_to_service=True,
        )
    )


def _exporter_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """The Exporter row and its panels."""
    dash.with_row(row("Exporter"))
    dash.with_panel(
        timeline(
            "Watch up",
            "Whether the exporter's watch of each Kubernetes resource is established.",
            [
                Query(
                    f"min by (resource) ({sel(c, f.WATCH_UP.name)})",
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
            [Query(f"time() - max({sel(c, f.LAST_EVALUATION_TIMESTAMP_SECONDS.name)})")],
            steps=thresholds((None, "green"), (60, "orange"), (300, "red")),
            width=4,
            height=8,
        )
    )
    duration = f.EVALUATION_DURATION_SECONDS.name
    dash.with_panel(
        graph(
            "Evaluation duration",
            "Time one evaluation of the whole cluster takes: 50th and 99th percentile, and mean.",
            "s",
            [
                Query(
                    "histogram_quantile(0.5, sum by (le) "
                    f"(rate({sel(c, duration + '_bucket')}[$__rate_interval])))",
                    "p50",
                ),
                Query(
                    "histogram_quantile(0.99, sum by (le) "
                    f"(rate({sel(c, duration + '_bucket')}[$__rate_interval])))",
                    "p99",
                ),
                Query(
                    f"sum(rate({sel(c, duration + '_sum')}[$__rate_interval])) "
                    f"/ sum(rate({sel(c, duration + '_count')}[$__rate_interval]))",
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
                    f"{sel(c, f.WATCH_RESTARTS_TOTAL.name)}[$__rate_interval]))",
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
                    f"max by (resource) ({sel(c, f.OBJECTS.name)})",
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
                    f"{sel(c, f.INVALID_OBJECTS_TOTAL.name)}[$__rate_interval]))",
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
                    f"{sel(c, f.WATCH_EVENTS_TOTAL.name)}[$__rate_interval]))",
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
                    f"count by (version) ({sel(c, f.BUILD_INFO.name)})",
                    "{{version}}",
                )
            ],
            width=8,
            height=8,
        )
    )


def overview(c: MonitoringConfig) -> dashboard_builders.Dashboard:
    """Cluster-wide view: node info, zone shares, Services by state, what needs attention."""
    dash = new_dashboard(
        OVERVIEW_UID,
        "Topology hints / Overview",
        "Whether topology-aware routing works in the cluster, and which Services need attention.",
    )
    dash.with_variable(datasource_variable()).with_variable(cluster_variable(c))
    dash.with_variable(namespace_variable(c, multi=True))

    _cluster_row(dash, c)
    _services_row(dash, c)
    _needs_attention_row(dash, c)
    _routing_row(dash, c)
    crosszone.overview_row(dash, c)
    _what_if_row(dash, c)
    _exporter_row(dash, c)
    return dash
