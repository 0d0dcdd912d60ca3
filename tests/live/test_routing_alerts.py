"""The two silent failures of SPEC section 10, live: the test API server, the exporter watching
it, real Prometheus evaluating the generated rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exporter.engine import DataPlane
from tests.conftest import PROJECT_ROOT
from tests.e2e.prometheus import PrometheusStack, prometheus_stack
from tests.k8s_objects import Obj, endpoint, endpoint_slice, service, three_zone_nodes
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.scrape import base_url

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
ALERT_TIMEOUT = 90.0
WEB = {"namespace": "shop", "service": "web", "address_type": "IPv4"}


def hinted_endpoints(hint_for: dict[str, str] | None = None) -> list[Obj]:
    """9 ready endpoints, 3 per zone, each hinted for its own zone unless `hint_for` remaps it."""
    remap = hint_for or {}
    return [
        endpoint(
            f"10.0.0.{index + 1}",
            f"zone-{zone}",
            f"node-{zone}-0",
            hint_zones=(remap.get(f"zone-{zone}", f"zone-{zone}"),),
        )
        for index, zone in enumerate("abc" * 3)
    ]


def firing(stack: PrometheusStack, alert: str) -> list[dict[str, Any]]:
    return [
        item
        for item in stack.alerts_in_prometheus()
        if item["labels"].get("alertname") == alert and item["state"] == "firing"
    ]


def service_alerts(stack: PrometheusStack) -> set[str]:
    return {
        item["labels"]["alertname"]
        for item in stack.alerts_in_prometheus()
        if item["labels"].get("service") == "web" and item["state"] == "firing"
    }


@pytest.mark.e2e
def test_endpoint_without_ready_condition_fires_ignored(
    kube_api: FakeKubeAPI, start_exporter: StartExporter, tmp_path: Path
) -> None:
    """An endpoint whose conditions are {}: kube-proxy counts it, the controller never hints
    it, so kube-proxy keeps nothing local; TopologyHintsIgnored fires, and nothing else."""
    unknown = endpoint("10.0.0.99", "zone-a", "node-a-0", ready=None)
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", [*hinted_endpoints(), unknown]),
        ]
    )
    with start_exporter() as exporter:
        metrics = eventually(
            exporter,
            lambda r: (
                r.value("topology_hints_service_local_routing_ratio", **WEB, dataplane="kube-proxy")
                == 0
            ),
        )
        # Every controller-side figure looks healthy.
        assert metrics.value("topology_hints_service_expected_enabled", **WEB) == 1
        assert metrics.value("topology_hints_service_hint_completeness", **WEB) == 1
        target = base_url(exporter).removeprefix("http://")
        with prometheus_stack(target, RULE_FILE, tmp_path / "stack", rule_for="0s") as stack:
            (alert,) = stack.wait_for(
                lambda: firing(stack, "TopologyHintsIgnored"),
                ALERT_TIMEOUT,
                what="TopologyHintsIgnored firing",
            )
            assert alert["labels"] | WEB == alert["labels"]
            assert alert["labels"]["dataplane"] == "kube-proxy"
            assert service_alerts(stack) == {"TopologyHintsIgnored"}


@pytest.mark.e2e
def test_cilium_1_18_0_without_hints_for_a_zone_fires_fail_closed(
    kube_api: FakeKubeAPI, start_exporter: StartExporter, tmp_path: Path
) -> None:
    """Zone c's endpoints are hinted for zone a: Cilium 1.18.0 gives zone c's clients no
    endpoint; TopologyHintsFailClosed fires for zone c, and no other alert for the Service."""
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", hinted_endpoints({"zone-c": "zone-a"})),
        ]
    )
    with start_exporter(dataplanes=(DataPlane.CILIUM_1_18_0,)) as exporter:
        metrics = eventually(
            exporter,
            lambda r: (
                r.value(
                    "topology_hints_service_routing_nodes",
                    **WEB,
                    dataplane="cilium-1.18.0",
                    zone="zone-c",
                    routing="no-endpoints",
                )
                == 1
            ),
        )
        assert metrics.labelled("topology_hints_dataplane_info") == [
            {"dataplane": "cilium-1.18.0", "source": "flag"}
        ]
        target = base_url(exporter).removeprefix("http://")
        with prometheus_stack(target, RULE_FILE, tmp_path / "stack", rule_for="0s") as stack:
            (alert,) = stack.wait_for(
                lambda: firing(stack, "TopologyHintsFailClosed"),
                ALERT_TIMEOUT,
                what="TopologyHintsFailClosed firing",
            )
            assert alert["labels"]["zone"] == "zone-c"
            assert alert["labels"]["severity"] == "critical"
            assert service_alerts(stack) == {"TopologyHintsFailClosed"}
