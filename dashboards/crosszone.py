"""The "Cross-zone traffic" rows of the overview and the Service drill-down (SPEC section 13).

Every panel reads the recording rules of alerts/traffic.py: the expected share (the
exporter's model, max over address types and data planes), the measured share (mesh byte
counters, docs/traffic.md), and the avoidable bytes and cost per hour and per day, each with
`basis` `expected` (`effective - floor`) or `measured` (`measured - floor`).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_builders

from alerts.traffic import (
    AVOIDABLE_BYTES_PER_DAY,
    AVOIDABLE_BYTES_PER_HOUR,
    AVOIDABLE_BYTES_RATE,
    AVOIDABLE_COST_PER_DAY,
    AVOIDABLE_COST_PER_HOUR,
    EXPECTED_SHARE,
    EXPECTED_ZONE_SHARE,
    MEASURED_SHARE,
    MEASURED_ZONE_SHARE,
    SERVICE_BYTES,
)
from dashboards.panels import NAMESPACE, NAMESPACES, SERVICE, Query, graph, grid, rec, row, single
from exporter.metrics.monitoring import MonitoringConfig

ROW = "Cross-zone traffic"
MODEL_NOTE = (
    "Expected: the exporter's model (clients weighted by allocatable CPU, spread evenly over "
    "the endpoints their routing gives them); measured: the mesh's byte counters "
    "(docs/traffic.md)."
)
CURRENCY_NOTE = "In the currency of --cross-zone-price-per-gib; empty without it."
TOP = 10


def overview_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """Cluster-wide: what crossing zones costs, and which Services could stop it."""
    dash.with_row(row(ROW))
    dash.with_panel(
        single(
            "Avoidable cross-zone cost per day",
            "What the avoidable cross-zone bytes of the selected namespaces cost per day at "
            "today's rate: bytes x (effective - floor) x price (expected) and bytes x "
            f"(measured - floor) x price (measured). {CURRENCY_NOTE}",
            "short",
            [
                Query(
                    f"sum by (basis) ({rec(c, AVOIDABLE_COST_PER_DAY, NAMESPACES)})",
                    "{{basis}}",
                )
            ],
            width=6,
            height=8,
        )
    )
    dash.with_panel(
        single(
            "Avoidable cross-zone bytes per day",
            "Bytes per day that cross zones although an endpoint runs in the client's zone, at "
            "today's rate, by basis (expected: the model's share; measured: the mesh's).",
            "bytes",
            [
                Query(
                    f"sum by (basis) ({rec(c, AVOIDABLE_BYTES_PER_DAY, NAMESPACES)})",
                    "{{basis}}",
                )
            ],
            width=6,
            height=8,
        )
    )
    dash.with_panel(
        grid(
            "Top Services by avoidable cost",
            f"The {TOP} Services whose avoidable cross-zone bytes cost most per day, per "
            f"basis. {CURRENCY_NOTE} Click a row to drill down.",
            "short",
            Query(
                f"topk({TOP}, max by (namespace, service, basis) "
                f"({rec(c, AVOIDABLE_COST_PER_DAY, NAMESPACES)}))"
            ),
            value_column="cost per day",
            width=12,
            link_to_service=True,
        )
    )
    dash.with_panel(
        grid(
            "Cross-zone share: expected and measured",
            "Per Service, the share of its bytes that crosses zones: expected with today's "
            "routing (effective) and with none avoidable (floor), and measured. "
            f"{MODEL_NOTE} Click a row to drill down.",
            "percentunit",
            Query(
                f"max by (namespace, service, scenario) ({rec(c, EXPECTED_SHARE, NAMESPACES)})\n"
                "or\n"
                "label_replace(max by (namespace, service) "
                f'({rec(c, MEASURED_SHARE, NAMESPACES)}), "scenario", "measured", "", "")'
            ),
            value_column="cross-zone share",
            width=24,
            link_to_service=True,
        )
    )


def service_row(dash: dashboard_builders.Dashboard, c: MonitoringConfig) -> None:
    """One Service: expected against measured, per client zone, and what it costs."""

    def this(name: str, *matchers: str) -> str:
        return rec(c, name, NAMESPACE, SERVICE, *matchers)

    dash.with_row(row(ROW))
    dash.with_panel(
        graph(
            "Cross-zone share: expected vs measured",
            f"Share of the Service's bytes that crosses zones. {MODEL_NOTE} Measured far above "
            "effective is TopologyHintsMeasuredCrossZone (docs/runbooks.md).",
            "percentunit",
            [
                Query(f"max by (scenario) ({this(EXPECTED_SHARE)})", "expected {{scenario}}"),
                Query(f"max({this(MEASURED_SHARE)})", "measured"),
            ],
            width=12,
        )
    )
    dash.with_panel(
        graph(
            "Cross-zone share per client zone",
            "Expected (effective) and measured cross-zone share of the clients of each zone. "
            "Only Istio ambient knows the client's zone (docs/traffic.md).",
            "percentunit",
            [
                Query(f"max by (zone) ({this(EXPECTED_ZONE_SHARE)})", "expected {{zone}}"),
                Query(f"max by (zone) ({this(MEASURED_ZONE_SHARE)})", "measured {{zone}}"),
            ],
            width=12,
        )
    )
    dash.with_panel(
        graph(
            "Bytes by locality",
            "The Service's bytes per second (both directions) from clients in the same zone, "
            "another zone, or an unknown one (clients outside the mesh: never in a share).",
            "Bps",
            [Query(f"sum by (locality) ({this(SERVICE_BYTES)})", "{{locality}}")],
            width=12,
            stack=True,
        )
    )
    dash.with_panel(
        graph(
            "Avoidable cross-zone bytes",
            "Bytes per second that cross zones although an endpoint runs in the client's zone: "
            "bytes x (effective - floor) (expected) or bytes x (measured - floor) (measured).",
            "Bps",
            [Query(f"max by (basis) ({this(AVOIDABLE_BYTES_RATE)})", "{{basis}}")],
            width=12,
        )
    )
    for title, name, unit, note in (
        ("Avoidable bytes per hour", AVOIDABLE_BYTES_PER_HOUR, "bytes", ""),
        ("Avoidable bytes per day", AVOIDABLE_BYTES_PER_DAY, "bytes", ""),
        ("Avoidable cost per hour", AVOIDABLE_COST_PER_HOUR, "short", f" {CURRENCY_NOTE}"),
        ("Avoidable cost per day", AVOIDABLE_COST_PER_DAY, "short", f" {CURRENCY_NOTE}"),
    ):
        dash.with_panel(
            single(
                title,
                f"At today's rate, by basis (expected: effective - floor; measured: measured - "
                f"floor).{note}",
                unit,
                [Query(f"max by (basis) ({this(name)})", "{{basis}}")],
                width=6,
            )
        )
