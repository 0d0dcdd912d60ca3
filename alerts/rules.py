"""The building blocks every alerting rule is written with (alerts/generate.py, alerts/problems.py).

Selectors, the cluster label every aggregation keeps, Go-template queries of the alert's own
Service, and `alert`, which gives a rule its `for` duration, labels and runbook URL. They read
a `RuleConfig`: the generator's CONFIG (alerts/generate.py) is one.
"""

from __future__ import annotations

from typing import Any, Protocol

from exporter.metrics import families as f
from exporter.metrics.monitoring import ENTRY_IDENTITY, MonitoringConfig


class RuleConfig(Protocol):
    """What the rules read of the generator's configuration (alerts/generate.py's Config)."""

    @property
    def monitoring(self) -> MonitoringConfig: ...

    def for_duration(self, alert: str) -> str:
        """How long the alert's condition must hold before it fires."""
        ...


SERVICE = ENTRY_IDENTITY
SERVICE_TEXT = "{{ $labels.namespace }}/{{ $labels.service }} ({{ $labels.address_type }})"


def hints_selector(config: RuleConfig, *matchers: str) -> str:
    """The label selector of a topology_hints_* series, with extra matchers."""
    return config.monitoring.series("", *matchers)


def labels(config: RuleConfig, *names: str) -> str:
    """A `by`/`on` label list: the cluster label, then these."""
    return config.monitoring.labels(*names)


def templated_query(
    config: RuleConfig,
    metric: str,
    *,
    scoped: tuple[str, ...] = (),
    matcher: str = "",
    suffix: str = "",
) -> str:
    """A Go-template pipeline yielding a query for `metric` whose `scoped` labels (and the
    cluster label) equal the alert's own."""
    names = (config.monitoring.cluster_label, *scoped)
    placeholders = [f"{name}=%q" for name in names]
    query = f"{metric}{hints_selector(config, *placeholders, matcher)}{suffix}"
    if "`" in query:
        raise ValueError(f"a query inside a template cannot contain a backquote: {query}")
    return f"printf `{query}` " + " ".join(f"$labels.{name}" for name in names)


def aggregate(config: RuleConfig, operator: str, *names: str) -> str:
    """`operator by (...)` over the cluster label and these: alerts of two clusters never merge."""
    return f"{operator} by {labels(config, *names)}"


def explain_url(config: RuleConfig) -> str:
    """The Service's page on the exporter's status page, as dashboard_url links a dashboard.

    The exporter publishes where users reach it (serve --external-url) in status_page_info
    (the one of the alert's own cluster); without it the annotation is empty rather than a
    broken link.
    """
    page = templated_query(config, f.STATUS_PAGE_INFO.name)
    return (
        f'{{{{ with {page} | query }}}}{{{{ . | first | label "url" }}}}'
        "/services/{{ $labels.namespace }}/{{ $labels.service }}{{ end }}"
    )


def alert(
    config: RuleConfig,
    name: str,
    expr: str,
    severity: str,
    summary: str,
    description: str,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr.strip() + "\n"}
    duration = config.for_duration(name)
    if duration not in {"0m", "0s"}:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": config.monitoring.runbook_url(name),
    }
    return rule


def linked_to_services(config: RuleConfig, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rules whose alerts name a Service, each with a link to the Service's status page."""
    for rule in rules:
        rule["annotations"]["explain_url"] = explain_url(config)
    return rules


def nearest_feasible_text(config: RuleConfig) -> str:
    """The Service's nearest ready endpoint counts that enable hints, read at alert time."""
    below, above = (
        templated_query(
            config,
            f.SERVICE_NEAREST_FEASIBLE_ENDPOINTS.name,
            scoped=SERVICE,
            matcher=f'direction="{direction}"',
        )
        for direction in ("below", "above")
    )
    return (
        f"{{{{ with {below} | query }}}}{{{{ . | first | value | humanize }}}}"
        "{{ else }}none{{ end }} below, "
        f"{{{{ with {above} | query }}}}{{{{ . | first | value | humanize }}}}"
        "{{ else }}none{{ end }} above"
    )
