"""End to end: the real exporter, scraped by real Prometheus, alerting through Alertmanager."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command
from tests.e2e.prometheus import prometheus_stack
from tests.processes import serving

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
SNAPSHOT = EXAMPLES_DIR / "eight-replicas-refused.json"
ALERT_TIMEOUT = 90.0


def rule_severity(alert: str) -> str:
    document = yaml.safe_load(RULE_FILE.read_text(encoding="utf-8"))
    for group in document["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                return str(rule["labels"]["severity"])
    raise LookupError(alert)


def expected_disabled_services(snapshot: Path) -> set[tuple[str, str, str, str]]:
    """(namespace, service, address_type, reason) of every `auto` Service that `evaluate` finds
    expected disabled."""
    result = subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", str(snapshot)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        (entry["namespace"], entry["name"], entry["address_type"], entry["reason"])
        for entry in json.loads(result.stdout)["services"]
        if entry["mechanism"] == "auto" and entry["expected_state"] == "disabled"
    }


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[str]:
    """`topology-hints-exporter serve` on a static snapshot; yields its host:port once ready."""
    with serving("--snapshot", str(SNAPSHOT), log=tmp_path / "exporter.log") as running:
        yield running.address


@pytest.mark.e2e
def test_disabled_hints_reach_alertmanager(exporter: str, tmp_path: Path) -> None:
    """A Service the exporter finds refused by the controller reaches Alertmanager as
    TopologyHintsDisabled, labelled with its namespace, service, address type, reason and the
    rule's severity."""
    expected = expected_disabled_services(SNAPSHOT)
    assert expected, f"{SNAPSHOT.name} should hold an `auto` Service expected disabled"
    severity = rule_severity("TopologyHintsDisabled")

    with prometheus_stack(exporter, RULE_FILE, tmp_path / "stack", rule_for="0s") as stack:

        def disabled_alerts() -> list[dict[str, Any]]:
            alerts = [
                alert
                for alert in stack.alerts_in_alertmanager()
                if alert["labels"].get("alertname") == "TopologyHintsDisabled"
            ]
            return alerts if len(alerts) >= len(expected) else []

        alerts = stack.wait_for(
            disabled_alerts, ALERT_TIMEOUT, what="TopologyHintsDisabled in Alertmanager"
        )
        assert stack.query('up{job="topology-hints-exporter"} == 1'), "exporter not scraped"

    got = {
        (
            alert["labels"]["namespace"],
            alert["labels"]["service"],
            alert["labels"]["address_type"],
            alert["labels"]["reason"],
        )
        for alert in alerts
    }
    assert got == expected
    for alert in alerts:
        assert alert["labels"]["severity"] == severity
        assert alert["status"]["state"] == "active"
        labels = alert["labels"]
        assert f"{labels['namespace']}/{labels['service']}" in alert["annotations"]["description"]
        assert alert["annotations"]["runbook_url"].endswith("#topologyhintsdisabled")
