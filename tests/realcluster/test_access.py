"""Who the exporter is and what it may read, answered by the real API server's RBAC and
authentication instead of the test API server's scripted 403s (moved from tests/live,
tests/e2e, tests/report and tests/sources, their assertions kept).

An identity without a permission is the shipped one (deploy/'s ClusterRole, binding and
ServiceAccount) under another name with that resource left out of its ClusterRole, as an
operator who leaves out the optional Events permission would install it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from exporter.engine import DataPlane
from tests.conftest import PROJECT_ROOT, exporter_command
from tests.e2e.prometheus import prometheus_stack
from tests.live.conftest import eventually
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.installed import (
    KUSTOMIZE,
    apply,
    credentials,
    grant_as_shipped,
    identity,
    kubectl,
    renamed,
    rendered,
)
from tests.realcluster.live import exporter_as
from tests.realcluster.live_agreement import AUTO, Shape, build_namespaces
from tests.scrape import Scrape, base_url, http_get, wait_until

pytestmark = pytest.mark.real

WEB = {"namespace": "shop", "service": "web", "address_type": "IPv4"}
RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
ALERT_TIMEOUT = 90.0
NAMESPACES = {
    # Nine ready endpoints in three zones: hints on.
    "shop": (
        Shape("web", 9, annotations=AUTO),
        Shape("gone", 3, traffic_distribution="PreferClose"),
    ),
    # Eight in three equal zones: refused, explain exits 1.
    "payments": (Shape("ledger", 8, annotations=AUTO),),
}


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    real = RealCluster(control_plane)
    try:
        build_namespaces(real, NAMESPACES)
        yield real
    finally:
        real.close()


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*exporter_command(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=PROJECT_ROOT,
        env=env,
    )


def _ready_endpoints(result: Scrape) -> float | None:
    return result.value("topology_hints_service_ready_endpoints", **WEB)


def _restarts(result: Scrape, resource: str, cause: str) -> float:
    return result.value("topology_hints_watch_restarts_total", resource=resource, cause=cause) or 0


def without(cluster: RealCluster, resource: str, folder: Path) -> Any:
    """Credentials of the shipped identity without `resource` in its ClusterRole."""
    return credentials(
        cluster,
        renamed(identity(KUSTOMIZE), f"exporter-without-{resource}", without=resource),
        folder,
    )


# --- from tests/live/test_reliability.py ------------------------------------------------------


def test_forbidden_events_degrade_to_no_event_metrics(cluster: RealCluster, tmp_path: Path) -> None:
    """403 on Events: ready anyway, hint metrics work, events watch_up 0, one log line."""
    creds = without(cluster, "events", tmp_path)
    with capture_logs() as logs, exporter_as(creds) as exporter:
        result = eventually(
            exporter,
            lambda r: _restarts(r, "events", "forbidden") >= 3 and _ready_endpoints(r) == 9,
        )
        assert result.value("topology_hints_watch_up", resource="events") == 0
        assert result.value("topology_hints_watch_up", resource="services") == 1
        status, body = http_get(base_url(exporter) + "/readyz")
        assert status == 200
        assert "- events: the API server refuses to list or watch them (403 Forbidden)" in body
    forbidden_lines = [
        entry
        for entry in logs
        if entry.get("resource") == "events" and entry.get("cause") == "forbidden"
    ]
    assert len(forbidden_lines) == 1


def test_forbidden_nodes_fail_readiness_with_the_reason(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """403 on Nodes: /readyz fails naming the resource, no hint metrics; granted later, ready."""
    creds = without(cluster, "nodes", tmp_path)
    with exporter_as(creds, wait_ready=False) as exporter:
        url = base_url(exporter)
        wait_until(lambda: "Forbidden" in http_get(url + "/readyz")[1])
        status, body = http_get(url + "/readyz")
        assert status == 503
        assert "- nodes: the API server refuses to list or watch them (403 Forbidden)" in body
        assert "ClusterRole grants list and watch on nodes" in body
        result = eventually(exporter, lambda r: r.value("topology_hints_ready") == 0)
        assert result.labelled("topology_hints_service_info") == []
        assert result.value("topology_hints_sufficient_node_info") is None
        grant_as_shipped(cluster, creds.install)
        healed = eventually(exporter, lambda r: r.value("topology_hints_ready") == 1)
        assert _ready_endpoints(healed) == 9
        assert http_get(url + "/readyz")[0] == 200


# --- from tests/e2e/test_optional_watch.py ----------------------------------------------------


@pytest.mark.e2e
def test_forbidden_events_warn_and_do_not_page(cluster: RealCluster, tmp_path: Path) -> None:
    """TopologyHintsExporterOptionalWatchDown reaches Alertmanager as a warning for the events
    watch, while TopologyHintsExporterWatchDown (critical), evaluated in the same group at the
    same instants, stays silent."""
    creds = without(cluster, "events", tmp_path)
    with (
        exporter_as(creds) as exporter,
        prometheus_stack(
            f"127.0.0.1:{exporter.server.port}", RULE_FILE, tmp_path / "stack", rule_for="0s"
        ) as stack,
    ):

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


# --- from tests/report/test_explain_cluster.py -------------------------------------------------


def test_forbidden_nodes_are_named_not_diagnosed(cluster: RealCluster, tmp_path: Path) -> None:
    """Without permission to list Nodes: a warning naming it, no insufficient-node diagnosis."""
    creds = without(cluster, "nodes", tmp_path)
    completed = run("explain", "--kubeconfig", str(creds.kubeconfig), "--summary")
    assert completed.returncode == 2
    assert completed.stdout.startswith("Warning: cannot list nodes: forbidden")
    assert "InsufficientNodeInfo" not in completed.stdout


def a_users_kubeconfig(plane: ControlPlane, folder: Path) -> Path:
    """A copy of the admin's kubeconfig, as a user keeps one in ~/.kube/config."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config"
    shutil.copy(plane.admin_kubeconfig, path)
    return path


def test_default_kubeconfig_is_read_like_kubectl(cluster: RealCluster, tmp_path: Path) -> None:
    """Without --snapshot or --kubeconfig, $KUBECONFIG's current context is read."""
    kubeconfig = a_users_kubeconfig(cluster.plane, tmp_path / "home")
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    completed = run("explain", "-n", "payments", "ledger", env=env)
    assert completed.returncode == 1, completed.stderr
    assert "Service payments/ledger (IPv4)" in completed.stdout
    missing = run("explain", env={**env, "KUBECONFIG": str(kubeconfig.parent / "nope")})
    assert missing.returncode == 2
    assert len(missing.stderr.splitlines()) == 1
    assert "--snapshot" in missing.stderr


def test_bare_name_is_looked_up_in_the_context_namespace(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """As kubectl: NAME without -n is in the kubeconfig context's namespace."""
    kubeconfig = a_users_kubeconfig(cluster.plane, tmp_path)
    config = yaml.safe_load(kubeconfig.read_text())
    config["contexts"][0]["context"]["namespace"] = "payments"
    kubeconfig.write_text(yaml.safe_dump(config))
    completed = run("explain", "--kubeconfig", str(kubeconfig), "ledger")
    assert completed.returncode == 1, completed.stderr
    assert "Service payments/ledger (IPv4)" in completed.stdout


# --- from tests/sources/test_kubeconfig_files.py -----------------------------------------------


def test_a_relative_token_file_is_read_from_the_kubeconfigs_directory(
    cluster: RealCluster, tmp_path: Path
) -> None:
    """The check resolves paths as the client does: a good relative tokenFile still works."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path / "identity")
    directory = tmp_path / "conf"
    directory.mkdir()
    (directory / "token").write_text(creds.token.path.read_text())
    config = yaml.safe_load(creds.kubeconfig.read_text())
    config["users"][0]["user"] = {"tokenFile": "token"}
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    completed = run("explain", "--kubeconfig", str(kubeconfig), "shop/web")
    assert completed.returncode == 0, completed.stderr
    assert "shop/web" in completed.stdout


# --- from tests/live/test_dataplane_detection.py ------------------------------------------------

DETECTION_COMPONENT = "deploy/components/dataplane-detection"


def daemonset(name: str, image: str) -> dict[str, Any]:
    """A DaemonSet as a data plane's installer leaves it (no controller runs it here)."""
    labels = {"k8s-app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": name, "image": image}]},
            },
        },
    }


def info(result: Scrape) -> list[tuple[str, str]]:
    return sorted(
        (labels["dataplane"], labels["source"])
        for labels in result.labelled("topology_hints_dataplane_info")
    )


def routed_by(result: Scrape, dataplane: DataPlane) -> bool:
    return bool(result.labelled("topology_hints_service_local_routing_ratio", dataplane=dataplane))


# What the cilium-1.18.0 case of tests/live/test_dataplane_detection.py loads.
KUBE_SYSTEM_OBJECTS: tuple[dict[str, Any], ...] = (
    daemonset("cilium", "quay.io/cilium/cilium:v1.18.0"),
    daemonset("kube-proxy", "registry.k8s.io/kube-proxy:v1.31.2"),
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cilium-config", "namespace": "kube-system"},
        "data": {"kube-proxy-replacement": "true", "enable-service-topology": "true"},
    },
)


@pytest.fixture(scope="module")
def cilium_installed(cluster: RealCluster) -> Iterator[None]:
    cluster.create_namespace("kube-system")
    apply(cluster.plane, KUBE_SYSTEM_OBJECTS)
    try:
        yield
    finally:
        for doc in KUBE_SYSTEM_OBJECTS:
            kubectl(
                cluster.plane,
                "delete",
                doc["kind"].lower(),
                "-n",
                "kube-system",
                doc["metadata"]["name"],
                "--ignore-not-found",
            )


def test_forbidden_detection_falls_back_to_the_flag_with_one_log_line(
    cluster: RealCluster, cilium_installed: None, tmp_path: Path
) -> None:
    """Without the component's RBAC (403), the --dataplane default applies; one warning."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    with capture_logs() as logs, exporter_as(creds, detect_dataplanes=True) as exporter:
        result = eventually(exporter, lambda r: routed_by(r, DataPlane.KUBE_PROXY))
    assert info(result) == [("kube-proxy", "flag")]
    detection = [entry for entry in logs if "detection" in str(entry.get("event"))]
    assert len(detection) == 1, logs
    assert detection[0]["log_level"] == "warning"
    assert "403" in detection[0]["error"]


def test_the_detection_components_rbac_is_enough_to_detect(
    cluster: RealCluster, cilium_installed: None, tmp_path: Path
) -> None:
    """With deploy/components/dataplane-detection's Role and RoleBinding applied as kustomize
    renders them, the same exporter reads kube-system's DaemonSets: Cilium 1.18.0, detected."""
    detection = tuple(
        doc
        for doc in rendered(KUSTOMIZE, components=(DETECTION_COMPONENT,))
        if doc["kind"] in {"Role", "RoleBinding"}
    )
    assert {doc["kind"] for doc in detection} == {"Role", "RoleBinding"}
    apply(cluster.plane, detection)
    try:
        creds = credentials(cluster, KUSTOMIZE, tmp_path)
        with exporter_as(creds, detect_dataplanes=True) as exporter:
            result = eventually(exporter, lambda r: routed_by(r, DataPlane.CILIUM_1_18_0))
    finally:
        for doc in detection:
            name = doc["metadata"]["name"]
            kubectl(cluster.plane, "delete", doc["kind"].lower(), "-n", "kube-system", name)
    assert info(result) == [(str(DataPlane.CILIUM_1_18_0), "detected")]
