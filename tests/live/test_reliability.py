"""The live exporter survives dropped watches, 410 Gone, outages and server errors, and recovers.

RBAC gaps (403 on Events, on Nodes) are the real API server's: tests/realcluster/test_access.py.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.processes import serving
from tests.scrape import Scrape, base_url, http_get

WEB = {"namespace": "shop", "service": "web", "address_type": "IPv4"}
REQUIRED = ("nodes", "services", "endpointslices")


def _cluster(replicas: int = 9) -> list[dict[str, object]]:
    return [
        *three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(replicas)),
        service("shop", "gone", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "gone-1", "gone", zone_endpoints(3, prefix="10.0.7")),
    ]


def _ready_endpoints(result: Scrape) -> float | None:
    return result.value("topology_hints_service_ready_endpoints", **WEB)


def _restarts(result: Scrape, resource: str, cause: str) -> float:
    return result.value("topology_hints_watch_restarts_total", resource=resource, cause=cause) or 0


def test_dropped_watch_is_resumed(kube_api: FakeKubeAPI, start_exporter: StartExporter) -> None:
    """A watch cut mid-stream is re-opened from its resourceVersion; later changes arrive."""
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("endpointslices")
        assert kube_api.drop_watches("endpointslices") == 1
        kube_api.wait_for_watches("endpointslices")
        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(7)))
        result = eventually(exporter, lambda r: _ready_endpoints(r) == 7)
        restarted = _restarts(result, "endpointslices", "error") + _restarts(
            result, "endpointslices", "closed"
        )
        assert restarted >= 1
        # Resumed, not relisted: one LIST of endpointslices in the whole run.
        lists = [
            request
            for request in kube_api.requests
            if request.path.endswith("/endpointslices") and "watch" not in request.query
        ]
        assert len(lists) == 1


def test_bookmarks_advance_without_restarting_watches(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """BOOKMARK events (only a resourceVersion) are counted and never break a watch."""
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        kube_api.wait_for_watches("services")
        kube_api.bookmark("services")
        result = eventually(
            exporter,
            lambda r: (
                (
                    r.value(
                        "topology_hints_watch_events_total", resource="services", type="BOOKMARK"
                    )
                    or 0
                )
                >= 2
            ),
        )
        for cause in ("closed", "expired", "error", "forbidden"):
            assert _restarts(result, "services", cause) == 0
        assert result.value("topology_hints_watch_up", resource="services") == 1


def test_gone_resource_version_relists_and_drops_objects_deleted_meanwhile(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """410 Gone after a gap: a full relist, and objects deleted during the gap leave no series."""
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        eventually(
            exporter, lambda r: bool(r.labelled("topology_hints_service_info", service="gone"))
        )
        kube_api.down()
        kube_api.delete("Service", "shop", "gone")
        kube_api.delete("EndpointSlice", "shop", "gone-1")
        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(8)))
        kube_api.compact()
        kube_api.up()
        result = eventually(
            exporter,
            lambda r: (
                not r.labelled("topology_hints_service_info", service="gone")
                and _ready_endpoints(r) == 8
            ),
        )
        assert _restarts(result, "services", "expired") >= 1
        assert _restarts(result, "endpointslices", "expired") >= 1
        assert not any(("service", "gone") in labels for (_, labels) in result.samples)
        assert result.value("topology_hints_service_expected_enabled", **WEB) == 0


def test_api_outage_keeps_last_state_and_recovers(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """While the API server is down the last state is served with watch_up 0; then it heals."""
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        eventually(exporter, lambda r: _ready_endpoints(r) == 9)
        kube_api.down()
        during = eventually(
            exporter,
            lambda r: all(
                r.value("topology_hints_watch_up", resource=resource) == 0 for resource in REQUIRED
            ),
        )
        assert _ready_endpoints(during) == 9
        assert during.value("topology_hints_service_expected_enabled", **WEB) == 1
        assert http_get(base_url(exporter) + "/healthz")[0] == 200
        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(6)))
        kube_api.up()
        after = eventually(
            exporter,
            lambda r: (
                _ready_endpoints(r) == 6
                and all(
                    r.value("topology_hints_watch_up", resource=resource) == 1
                    for resource in REQUIRED
                )
            ),
        )
        assert _restarts(after, "nodes", "error") >= 1


def test_server_errors_are_retried_with_backoff(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """500s on the first requests of a resource are retried until the list succeeds."""
    kube_api.load(_cluster())
    kube_api.fail("endpointslices", status=500, times=3)
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: _ready_endpoints(r) == 9)
        assert _restarts(result, "endpointslices", "error") == 3


def test_sigterm_stops_within_seconds(
    kube_api: FakeKubeAPI, kubeconfig: Path, tmp_path: Path
) -> None:
    """The real command exits 0 soon after SIGTERM, with its watches open."""
    kube_api.load(_cluster())
    with serving(
        "--kubeconfig", str(kubeconfig), "--context", "fake", "--log-format", "json",
        log=tmp_path / "exporter.log", env={**os.environ, "KUBERNETES_SERVICE_HOST": ""},
    ) as exporter:  # fmt: skip
        # Ready: /readyz answered 200.
        kube_api.wait_for_watches("endpointslices")
        started = time.monotonic()
        exporter.process.send_signal(signal.SIGTERM)
        assert exporter.process.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
        output = exporter.output()
        assert '"event": "stopped"' in output
        assert "Traceback" not in output
