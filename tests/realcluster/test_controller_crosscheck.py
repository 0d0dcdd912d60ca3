"""The production cross-check, end to end: real Prometheus scrapes the real
kube-controller-manager of the suite (its /metrics over its self-signed HTTPS) and the
real `serve`, and evaluates the shipped rule file, unchanged (alerts/controller.py).

- An exporter that judges the control plane right: the recording rule's counts equal the
  controller's `endpoint_slice_controller_services_count_by_traffic_distribution` value by
  value, the alert's expression has no series and the alert is inactive.
- An exporter told `--kubernetes-version 1.33` on this 1.37 control plane judges
  PreferSameZone and PreferSameNode not honoured (1.33's PreferSameTrafficDistribution gate
  is off) while the controller honours them: the alert is pending for exactly those two
  values, at minus the controller's count. Pending is the state of an alert whose condition
  holds and whose `for` (30m) has not passed: the shipped rule shows it at its first
  evaluation, so no shortened copy is needed; promtool's unit tests
  (alerts/tests/controller.test.yaml) cover the 30 minutes to firing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.controller import ALERT, CONTROLLER_COUNT, SERVICES_BY_TRAFFIC_DISTRIBUTION
from tests.conftest import PROJECT_ROOT
from tests.e2e.prometheus import PrometheusStack, http_get_json, prometheus_stack
from tests.processes import serving
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.installed import KUSTOMIZE, Credentials, credentials
from tests.realcluster.live_agreement import AUTO, Shape, build, evaluate_dump, wait_agreeing

pytestmark = [pytest.mark.real, pytest.mark.e2e]

NAMESPACE = "crosscheck"
RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
TIMEOUT = 120.0
SHAPES = (
    Shape("close", 3, traffic_distribution="PreferClose"),
    Shape("zonal", 3, traffic_distribution="PreferSameZone"),
    Shape("same-node", 2, traffic_distribution="PreferSameNode"),
    # The annotation wins: neither side counts its trafficDistribution.
    Shape("shadowed", 3, annotations=AUTO, traffic_distribution="PreferClose"),
)
NEWER_VALUES = {"PreferSameZone", "PreferSameNode"}
# Services the controller never syncs (no selector; ExternalName), whatever their
# trafficDistribution says: neither side counts them.
UNSYNCED = (
    {
        "metadata": {"name": "no-selector"},
        "spec": {"ports": [{"port": 80}], "trafficDistribution": "PreferClose"},
    },
    {
        "metadata": {"name": "external"},
        "spec": {
            "type": "ExternalName",
            "externalName": "example.com",
            "trafficDistribution": "PreferClose",
        },
    },
)


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    real = RealCluster(control_plane)
    try:
        build(real, NAMESPACE, SHAPES)
        for body in UNSYNCED:
            real.create_service(NAMESPACE, body)
        yield real
    finally:
        real.close()


def alert_expr() -> str:
    document = yaml.safe_load(RULE_FILE.read_text(encoding="utf-8"))
    (rule,) = (r for g in document["groups"] for r in g["rules"] if r.get("alert") == ALERT)
    return str(rule["expr"])


def by_value(stack: PrometheusStack, expr: str) -> dict[str, float]:
    return {
        sample["metric"].get("traffic_distribution", ""): float(sample["value"][1])
        for sample in stack.query(expr)
    }


def controller_counts(stack: PrometheusStack) -> dict[str, float]:
    return by_value(stack, f"max by (traffic_distribution) ({CONTROLLER_COUNT}) > 0")


def alert_state(stack: PrometheusStack) -> str:
    rules = http_get_json(stack.prometheus_url + "/api/v1/rules?type=alert")["data"]["groups"]
    (rule,) = (r for g in rules for r in g["rules"] if r["name"] == ALERT)
    return str(rule["state"])


def scraped(plane: ControlPlane, exporter_address: str, folder: Path) -> Any:
    """Prometheus scraping the exporter (as its job) and kube-controller-manager."""
    return prometheus_stack(
        exporter_address,
        RULE_FILE,
        folder,
        extra_scrape_configs=[
            {
                "job_name": "kube-controller-manager",
                "scheme": "https",
                # Its serving certificate is self-signed (--cert-dir), as kubeadm's is.
                "tls_config": {"insecure_skip_verify": True},
                "static_configs": [{"targets": [f"127.0.0.1:{plane.controller_manager_port}"]}],
            }
        ],
    )


def serve(creds: Credentials, folder: Path, *flags: str) -> Any:
    return serving(
        "--kubeconfig", str(creds.kubeconfig), *flags, log=folder / "exporter.log", timeout=90
    )


def wait(stack: PrometheusStack, check: Callable[[], Any], what: str) -> Any:
    return stack.wait_for(check, TIMEOUT, what=what)


def test_agreeing_counts_leave_the_alert_inactive(cluster: RealCluster, tmp_path: Path) -> None:
    """The recording rule's count equals the controller's for every value it honours (the
    shadowed Service, the one without a selector and the ExternalName one counted by
    neither); the alert's expression is empty, its state inactive."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with serve(creds, tmp_path) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        with scraped(cluster.plane, exporter.address, tmp_path / "prometheus") as stack:

            def agreeing() -> dict[str, float] | None:
                mine = by_value(stack, SERVICES_BY_TRAFFIC_DISTRIBUTION)
                theirs = controller_counts(stack)
                return mine if mine and mine == theirs else None

            counts = wait(stack, agreeing, "the recording rule equal to the controller's count")
            assert set(counts) >= {"PreferClose", *NEWER_VALUES}
            assert stack.query(alert_expr()) == []
            # The rule's state is that of its last evaluation, which may predate the
            # agreement (one side scraped first): inactive from the next one on.
            wait(stack, lambda: alert_state(stack) == "inactive" or None, "the alert inactive")


def test_an_exporter_that_misjudges_the_version_makes_the_alert_pending(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """`--kubernetes-version 1.33`: the exporter honours PreferClose only; the alert is
    pending for PreferSameZone and PreferSameNode, valued minus the controller's count."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with (
        serve(creds, tmp_path, "--kubernetes-version", "1.33") as exporter,
        scraped(cluster.plane, exporter.address, tmp_path / "prometheus") as stack,
    ):

        def pending() -> list[dict[str, Any]] | None:
            alerts = [a for a in stack.alerts_in_prometheus() if a["labels"]["alertname"] == ALERT]
            values = {a["labels"].get("traffic_distribution") for a in alerts}
            return alerts if values == NEWER_VALUES else None

        alerts = wait(stack, pending, f"{ALERT} pending for {sorted(NEWER_VALUES)}")
        theirs = controller_counts(stack)
        assert alert_state(stack) == "pending"
    for alert in alerts:
        value = alert["labels"]["traffic_distribution"]
        assert alert["state"] == "pending"
        assert alert["labels"]["severity"] == "warning"
        assert float(alert["value"]) == -theirs[value], (value, theirs)
