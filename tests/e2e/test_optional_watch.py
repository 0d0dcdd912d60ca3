"""End to end: an exporter without the (optional) events permission, scraped by real Prometheus,
warns through Alertmanager and never fires the critical watch alert."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.run.serve import ServeOptions
from tests.conftest import PROJECT_ROOT
from tests.e2e.prometheus import prometheus_stack
from tests.k8s_objects import as_list, endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.scrape import running_exporter, wait_until

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
ALERT_TIMEOUT = 90.0


@pytest.fixture
def exporter_without_events(kube_api: FakeKubeAPI, kubeconfig: Path) -> Iterator[str]:
    """The exporter watching the test API server, which answers 403 to every Events request."""
    kube_api.load(
        as_list(
            three_zone_nodes(per_zone=2),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
        )["items"]
    )
    kube_api.forbid("events")
    options = ServeOptions(listen_address="127.0.0.1:0", kubeconfig=str(kubeconfig), context="fake")
    with running_exporter(options) as live:
        wait_until(lambda: live.readiness()[0], timeout=30)
        yield f"127.0.0.1:{live.server.port}"


@pytest.mark.e2e
def test_forbidden_events_warn_and_do_not_page(
    exporter_without_events: str, tmp_path: Path
) -> None:
    """TopologyHintsExporterOptionalWatchDown reaches Alertmanager as a warning for the events
    watch, while TopologyHintsExporterWatchDown (critical), evaluated in the same group at the
    same instants, stays silent."""
    with prometheus_stack(
        exporter_without_events, RULE_FILE, tmp_path / "stack", rule_for="0s"
    ) as stack:

        def optional_watch_alerts() -> list[dict[str, Any]]:
            return [
                alert
                for alert in stack.alerts_in_alertmanager()
                if alert["labels"].get("alertname") == "TopologyHintsExporterOptionalWatchDown"
            ]

        (warning,) = stack.wait_for(
            optional_watch_alerts, ALERT_TIMEOUT, what="the optional watch's alert in Alertmanager"
        )
        firing = {alert["labels"]["alertname"] for alert in stack.alerts_in_prometheus()}
        watch_up = {
            sample["metric"]["resource"]: sample["value"][1]
            for sample in stack.query("topology_hints_watch_up")
        }
    assert warning["labels"]["severity"] == "warning"
    assert warning["labels"]["resource"] == "events"
    assert warning["annotations"]["runbook_url"].endswith("#topologyhintsexporteroptionalwatchdown")
    assert "TopologyHintsExporterWatchDown" not in firing
    assert watch_up == {"nodes": "1", "services": "1", "endpointslices": "1", "events": "0"}
