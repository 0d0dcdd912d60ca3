"""behaviour §12 live: `serve` evaluates under the API server's /version, over HTTP end to end.

The real `kubernetes` client reads the test API server's `GET /version`; the answer decides
the profile at start and again at each relist, and /metrics, /api/v1 and the status page
report it.
"""

from __future__ import annotations

import json
import time

import pytest
from structlog.testing import capture_logs

from exporter.engine.profile import Gate, ProfileFlags
from exporter.run.serve import Exporter, ServeOptions
from exporter.sources.kubeapi import ConfigError
from tests.k8s_objects import (
    Obj,
    endpoint,
    endpoint_slice,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import FAST, StartExporter, eventually
from tests.live.test_dataplane_detection import daemonset
from tests.scrape import Scrape, base_url, http_get

ZONAL = {"namespace": "shop", "service": "zonal"}
CLOSE = {"namespace": "shop", "service": "close"}


def _cluster() -> list[Obj]:
    node_hinted = [
        endpoint(
            f"10.2.0.{index + 1}",
            f"zone-{zone}",
            f"node-{zone}-0",
            hint_zones=(f"zone-{zone}",),
            hint_nodes=(f"node-{zone}-0",),
        )
        for index, zone in enumerate("abc")
    ]
    return [
        *three_zone_nodes(),
        service("shop", "zonal", traffic_distribution="PreferSameZone"),
        endpoint_slice("shop", "zonal-1", "zonal", zone_endpoints(6)),
        service("shop", "close", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "close-1", "close", zone_endpoints(6, prefix="10.1.0")),
        service("shop", "nodal", traffic_distribution="PreferSameNode"),
        endpoint_slice("shop", "nodal-1", "nodal", node_hinted),
    ]


def _cluster_info(result: Scrape) -> list[tuple[str, str]]:
    return [
        (labels["kubernetes_version"], labels["source"])
        for labels in result.labelled("topology_hints_cluster_info")
    ]


def _gates(result: Scrape, component: str) -> dict[tuple[str, str], float]:
    """(name, stage) -> value of the component's topology_hints_feature_gate_enabled."""
    return {
        (dict(labels)["name"], dict(labels)["stage"]): value
        for labels, value in result.series("topology_hints_feature_gate_enabled").items()
        if dict(labels)["component"] == component
    }


def _issues(result: Scrape, **service_labels: str) -> set[str]:
    return {
        labels["issue"]
        for labels in result.labelled("topology_hints_service_config_issue", **service_labels)
    }


def _notices(result: Scrape, **service_labels: str) -> set[str]:
    return {
        labels["notice"]
        for labels in result.labelled("topology_hints_service_notice", **service_labels)
    }


def test_serve_exports_the_api_servers_version_and_what_it_refuses(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """/version 1.33: PreferSameZone is refused (config issue, mechanism none), no notice for
    PreferClose, both gates reported; /api/v1/evaluation carries the same profile."""
    kube_api.kubernetes_version = "1.33"
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert _cluster_info(result) == [("1.33", "api")]
        assert _issues(result, **ZONAL) == {"traffic-distribution-unsupported"}
        assert result.labelled("topology_hints_service_info", **ZONAL)[0]["mechanism"] == "none"
        assert _notices(result, **CLOSE) == set()
        for component in ("controller", "kube-proxy"):
            assert _gates(result, component) == {
                ("TopologyAwareHints", ""): 1,
                ("ServiceTrafficDistribution", ""): 1,
                ("PreferSameTrafficDistribution", "ALPHA"): 0,
            }
        # kube-proxy 1.33 ignores node hints: the PreferSameNode Service routes same-zone.
        nodal = result.labelled(
            "topology_hints_service_proxy_mode", namespace="shop", service="nodal"
        )
        assert {labels["mode"] for labels in nodal} == {"PreferSameZone"}
        status, body = http_get(base_url(exporter) + "/api/v1/evaluation")
        assert status == 200
        profile = json.loads(body)["kubernetes"]
        assert (profile["version"], profile["source"]) == ("1.33", "api")
        assert profile["kube_proxy"]["source"] == "control-plane"
        status, page = http_get(base_url(exporter) + "/")
        assert status == 200
        assert "1.33 (the API server" in page


def test_an_upgrade_is_seen_at_the_next_relist(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """1.33 -> 1.34 under a running exporter: after the relist the issue is gone and
    PreferClose gets its notice."""
    kube_api.kubernetes_version = "1.33"
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        eventually(exporter, lambda r: _cluster_info(r) == [("1.33", "api")])
        kube_api.kubernetes_version = "1.34"
        # The upgrade replaces nodes while the watches are down; their resource version
        # expires, so the informers relist (410 Gone), and with the Nodes /version is read.
        kube_api.down()
        kube_api.apply(three_zone_nodes(cpu="8")[0])
        kube_api.compact()
        kube_api.up()
        result = eventually(exporter, lambda r: _cluster_info(r) == [("1.34", "api")])
        result = eventually(exporter, lambda r: not _issues(r, **ZONAL))
        assert _notices(result, **CLOSE) == {"prefer-close-deprecated"}


def test_flags_win_and_detection_gives_kube_proxys_version(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """--kubernetes-version wins over /version; with --dataplane auto kube-proxy's version is
    its DaemonSet's image tag (1.32: no node hints)."""
    kube_api.load([*_cluster(), daemonset("kube-proxy", "registry.k8s.io/kube-proxy:v1.32.4")])
    flags = ProfileFlags(kubernetes_minor=35)
    with start_exporter(profile_flags=flags, detect_dataplanes=True) as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert _cluster_info(result) == [("1.35", "flag")]
        assert _issues(result, **ZONAL) == set()
        assert _gates(result, "kube-proxy") == {
            ("TopologyAwareHints", "BETA"): 1,
            ("ServiceTrafficDistribution", "BETA"): 1,
        }
        status, body = http_get(base_url(exporter) + "/api/v1/evaluation")
        assert status == 200
        assert json.loads(body)["kubernetes"]["kube_proxy"] == {
            "version": "1.32",
            "source": "detected",
            "feature_gates": {"TopologyAwareHints": True, "ServiceTrafficDistribution": True},
        }


def test_a_gate_the_servers_version_locks_stops_serve_at_start(
    kube_api: FakeKubeAPI, kubeconfig: object
) -> None:
    """--feature-gates ServiceTrafficDistribution=false against a 1.34 API server: one line."""
    kube_api.load(_cluster())
    options = ServeOptions(
        listen_address="127.0.0.1:0",
        kubeconfig=str(kubeconfig),
        context="fake",
        informer=FAST,
        profile_flags=ProfileFlags(gates={Gate.SERVICE_TRAFFIC_DISTRIBUTION: False}),
    )
    exporter = Exporter(options)
    try:
        exporter.start()
        # The probes are up meanwhile; the refusal stops the exporter and says why.
        with pytest.raises(
            ConfigError,
            match=r"cannot set feature gate ServiceTrafficDistribution to false, feature is "
            r"locked to true in Kubernetes 1\.34",
        ):
            exporter.wait()
    finally:
        exporter.stop()


def test_an_upgrade_that_locks_a_flagged_gate_keeps_the_locked_value(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """PreferSameTrafficDistribution=false is allowed on 1.34; after an upgrade to 1.35 the
    gate is locked on: the exporter keeps running with it on, and logs why."""
    kube_api.kubernetes_version = "1.34"
    kube_api.load(_cluster())
    flags = ProfileFlags(gates={Gate.PREFER_SAME_TRAFFIC_DISTRIBUTION: False})
    with capture_logs() as logs, start_exporter(profile_flags=flags) as exporter:
        result = eventually(exporter, lambda r: _cluster_info(r) == [("1.34", "api")])
        assert _issues(result, **ZONAL) == {"traffic-distribution-unsupported"}
        kube_api.kubernetes_version = "1.35"
        kube_api.down()
        kube_api.apply(three_zone_nodes(cpu="8")[0])
        kube_api.compact()
        kube_api.up()
        eventually(exporter, lambda r: _cluster_info(r) == [("1.35", "api")])
        result = eventually(exporter, lambda r: not _issues(r, **ZONAL))
        assert _gates(result, "controller")[("PreferSameTrafficDistribution", "")] == 1
    assert any(entry["event"] == "a --feature-gates value is ignored" for entry in logs)


# -- emulated control planes and hostile /version answers (issue 27; issue 30 3, 7, 13) --------


def test_serve_evaluates_an_emulating_api_server_at_its_emulated_version(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """A 1.36 API server started with --emulated-version=1.33 runs 1.33's gate defaults:
    PreferSameZone is refused, and the binary's version is reported beside."""
    kube_api.kubernetes_version = "1.36"
    kube_api.emulated_version = "1.33"
    kube_api.load(_cluster())
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert result.labelled("topology_hints_cluster_info") == [
            {"kubernetes_version": "1.33", "binary_version": "1.36", "source": "api"}
        ]
        assert _issues(result, **ZONAL) == {"traffic-distribution-unsupported"}
        assert result.labelled("topology_hints_service_info", **ZONAL)[0]["mechanism"] == "none"
        # The 1.36 binary has only PreferSameTrafficDistribution, at its 1.33 spec; kube-proxy
        # (no emulation) is taken to be 1.33.
        assert _gates(result, "controller") == {("PreferSameTrafficDistribution", "ALPHA"): 0}
        assert ("ServiceTrafficDistribution", "") in _gates(result, "kube-proxy")
        status, body = http_get(base_url(exporter) + "/api/v1/evaluation")
        assert status == 200
        profile = json.loads(body)["kubernetes"]
        assert (profile["version"], profile["binary_version"], profile["source"]) == (
            "1.33",
            "1.36",
            "api",
        )
        status, page = http_get(base_url(exporter) + "/")
        assert "1.33, emulated by a 1.36 API server" in page
    # Without emulation a 1.36 server accepts it.
    kube_api.emulated_version = "1.36"
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert result.labelled("topology_hints_cluster_info") == [
            {"kubernetes_version": "1.36", "binary_version": "", "source": "api"}
        ]
        assert _issues(result, **ZONAL) == set()


def test_a_version_minor_of_5000_digits_is_a_warning_not_a_crash(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Issue 30 finding 3: the parse sat outside the try; serve crashed at start."""
    kube_api.kubernetes_version = "1." + "3" * 5000
    kube_api.load(_cluster())
    with capture_logs() as logs, start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert _cluster_info(result) == [("", "assumed")]
    (warning,) = [
        entry for entry in logs if entry["event"].startswith("evaluating with the newest")
    ]
    assert "does not read as 1.MINOR" in warning["problem"]
    assert len(warning["problem"]) < 200


def test_an_endless_version_body_is_cut_short(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Issue 30 finding 13: a 200 MB /version was read whole. It is read to 64 KiB."""
    kube_api.version_body = b" " * 65536
    kube_api.version_body_repeat = 3200
    kube_api.load(_cluster())
    with capture_logs() as logs, start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.labelled("topology_hints_cluster_info")))
        assert _cluster_info(result) == [("", "assumed")]
    versions = [request for request in kube_api.requests if request.path == "/version"]
    # What the server got written before the exporter hung up: socket buffers, not 200 MB.
    assert versions
    assert all(version.served.bytes < 32 * 1024 * 1024 for version in versions)
    (warning,) = [
        entry for entry in logs if entry["event"].startswith("evaluating with the newest")
    ]
    assert "larger than 64 KiB" in warning["problem"]


def test_probes_answer_while_version_hangs(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Issue 30 finding 7: /version that answers after 90 s left /healthz unanswered for
    61 s (it was read before the HTTP server served). The probes answer at once; readiness
    waits, and says for what."""
    kube_api.version_delay = 90.0
    kube_api.load(_cluster())
    started = time.monotonic()
    with start_exporter(wait_ready=False) as exporter:
        status, body = http_get(base_url(exporter) + "/healthz", timeout=1.0)
        assert status == 200, body
        assert time.monotonic() - started < 1.0
        status, body = http_get(base_url(exporter) + "/readyz", timeout=1.0)
        assert status == 503
        assert "reading the API server's /version" in body
        assert time.monotonic() - started < 2.0
