"""The status pages of the live exporter follow the cluster, as the metrics do."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter
from tests.scrape import base_url, wait_until


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback http
        return str(response.read().decode())


def _web_state(url: str) -> Any:
    return json.loads(_get(f"{url}/api/v1/services/shop/web"))[0]["expected_state"]


def test_pages_follow_the_cluster_and_show_watch_health(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    web_slice = endpoint_slice("shop", "web-1", "web", zone_endpoints(7, hinted=True))
    kube_api.load([*three_zone_nodes(), service("shop", "web", topology_mode="Auto"), web_slice])
    with start_exporter(external_url="https://ops.example.com/topology") as exporter:
        url = base_url(exporter)
        wait_until(lambda: _web_state(url) == "enabled")
        index = _get(url + "/")
        for resource in ("nodes", "services", "endpointslices", "events"):
            assert f'<th scope="row">{resource}</th><td><span class="badge tone-good">' in index
        assert 'href="/topology/services/shop/web"' in index
        assert "source: Kubernetes API" in index

        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(8, hinted=True)))
        wait_until(lambda: _web_state(url) == "disabled")
        page = _get(url + "/topology/services/shop/web")
        assert "MinAllocationExceedsOverloadThreshold" in page
        assert "8 ready endpoints in 3 zones" in page
        evaluation = json.loads(_get(url + "/api/v1/evaluation"))
        assert [s["expected_state"] for s in evaluation["services"]] == ["disabled"]
        # Where the pages are, for the alerts' explain_url annotations.
        metrics = _get(url + "/metrics")
        assert (
            'topology_hints_status_page_info{url="https://ops.example.com/topology"} 1.0' in metrics
        )
