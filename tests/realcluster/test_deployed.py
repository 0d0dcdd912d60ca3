"""The exporter as a cluster runs it: `serve` as the ServiceAccount the project's manifests
(kustomize) and chart (Helm) create, bound by their own ClusterRole, against the real API
server. It becomes ready, exports what `evaluate` of a dump taken at the same moment says,
and its requests, read from the API server's audit log, are only the lists, watches and
gets it needs, started from the watch cache or as streaming lists, with bookmarks, never
refused. The kubectl plugin, with the real kubectl, says the same.

The audit-log summaries (a start, a churn) are printed: `pytest -s` shows them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.engine.profile import Source
from tests.conftest import require_binary
from tests.processes import serving
from tests.realcluster import audit
from tests.realcluster.cluster import RealCluster
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.installed import KUSTOMIZE, SOURCES, credentials
from tests.realcluster.live_agreement import (
    NODES,
    SHAPES,
    build,
    comparable,
    evaluate_dump,
    live_evaluation,
    wait_agreeing,
)
from tests.realcluster.requests import asked_properly, is_initial, started_from_the_watch_cache
from tests.scrape import scrape, wait_until

pytestmark = pytest.mark.real

NAMESPACE = "deployed"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
START_TIMEOUT = 90.0
# The churn of the audit summary; 600 gives the ten minutes.
CHURN_SECONDS = float(os.environ.get("REAL_CHURN_SECONDS", "5"))


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[RealCluster]:
    """The session's control plane with this module's Services, built once."""
    real = RealCluster(control_plane)
    try:
        build(real, NAMESPACE)
        yield real
    finally:
        real.close()


@pytest.mark.parametrize("source", SOURCES)
def test_serve_as_the_shipped_service_account_agrees_with_a_dump(
    source: str, cluster: RealCluster, tmp_path: Path
) -> None:
    """Ready as the ServiceAccount `source` installs, with only the ClusterRole it ships;
    the same evaluation as a dump's, the metrics saying the same; only list/watch of the
    four resources and get /version, started from the watch cache or as streaming lists,
    with bookmarks, never refused."""
    creds = credentials(cluster, source, tmp_path)
    with serving(
        "--kubeconfig", str(creds.kubeconfig), log=tmp_path / "exporter.log", timeout=START_TIMEOUT
    ) as exporter:
        reference = evaluate_dump(cluster, tmp_path)
        live = wait_agreeing(exporter.url, reference)
        assert live["kubernetes"]["version"] == reference["kubernetes"]["version"]
        assert live["kubernetes"]["source"] == Source.API
        expected = {
            entry["name"]: float(entry["expected_state"] == "enabled")
            for entry in reference["services"]
            if entry["namespace"] == NAMESPACE and entry["mechanism"] != "none"
        }
        exported = {
            dict(labels)["service"]: value
            for labels, value in scrape(exporter.url)
            .series("topology_hints_service_expected_enabled")
            .items()
            if dict(labels)["namespace"] == NAMESPACE
        }
    assert exported == expected
    assert set(expected) == {s.name for s in SHAPES if s.annotations or s.traffic_distribution}
    assert expected["web-8"] == 0
    assert expected["web-7"] == 1
    made = audit.requests(cluster.plane.audit_log, creds.install.username, creds.token.read())
    print(audit.report(f"{source}: a start", made))  # noqa: T201 - for the closing note
    assert made, "the audit log has no request of the exporter's user"
    assert asked_properly(made) == []
    assert started_from_the_watch_cache(made) == []


def test_the_kubectl_plugin_agrees_with_the_exporter(cluster: RealCluster, tmp_path: Path) -> None:
    """`kubectl topology-hints evaluate` (the plugin found on PATH by the real kubectl)
    gives the exporter's evaluation; its explain summary names the refused Service."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    kubectl = Path(require_binary("kubectl"))
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{kubectl.parent}",
        "KUBECONFIG": str(cluster.plane.admin_kubeconfig),
        "HOME": str(tmp_path),
    }

    def plugin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "topology-hints", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )

    with serving(
        "--kubeconfig", str(creds.kubeconfig), log=tmp_path / "exporter.log", timeout=START_TIMEOUT
    ) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        evaluated = plugin("evaluate")
        live = live_evaluation(exporter.url)
    assert evaluated.returncode == 0, evaluated.stderr
    assert live is not None
    assert comparable(json.loads(evaluated.stdout)) == comparable(live)
    summary = plugin("explain", "-n", NAMESPACE, "--summary")
    assert summary.returncode == 1, summary.stderr  # web-8 is refused: some lack hints
    refused = [line for line in summary.stdout.splitlines() if "web-8" in line]
    assert refused, summary.stdout
    assert "MinAllocationExceedsOverloadThreshold" in refused[0], summary.stdout


def endpoints_of(cluster: RealCluster, service: str) -> int:
    return sum(
        len(slice_.endpoints or [])
        for slice_ in cluster.endpoint_slices(NAMESPACE)
        if slice_.metadata.labels.get(SERVICE_NAME_LABEL) == service
    )


def churn(cluster: RealCluster, seconds: float) -> int:
    """Change the cluster for `seconds`, at the controller's pace: each round a replica more
    for web-7 (hints off), a node unready, a Service touched, then the replica gone (hints
    on) and the node ready again; each step waits until the controller has written the
    endpoint. The number of rounds."""
    deadline = time.monotonic() + seconds
    rounds = 0
    replicas = endpoints_of(cluster, "web-7")
    while rounds == 0 or time.monotonic() < deadline:
        rounds += 1
        name = f"web-7-surge-{rounds}"
        cluster.run_pod(
            NAMESPACE,
            name,
            node=NODES[rounds % len(NODES)],
            ip=f"10.99.{rounds // 250}.{rounds % 250 + 1}",
            labels={"app": "web-7"},
        )
        cluster.set_node_ready(NODES[0], ready=False)
        cluster.touch_service(NAMESPACE, "close", rounds + 1)
        wait_until(lambda: endpoints_of(cluster, "web-7") == replicas + 1, timeout=60, interval=0.1)
        cluster.core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
        cluster.set_node_ready(NODES[0], ready=True)
        wait_until(lambda: endpoints_of(cluster, "web-7") == replicas, timeout=60, interval=0.1)
    return rounds


# pytest-timeout's default (300 s) is shorter than a long churn.
@pytest.mark.timeout(CHURN_SECONDS + 300)
def test_a_start_and_a_churn_ask_only_what_is_needed(cluster: RealCluster, tmp_path: Path) -> None:
    """Through a churn (REAL_CHURN_SECONDS, 600 for the issue's ten minutes) the exporter
    keeps the dump's evaluation, resumes its watches without listing again, and asks
    nothing else; the summary of what it asked is printed (and written to
    REAL_AUDIT_REPORT when set)."""
    creds = credentials(cluster, KUSTOMIZE, tmp_path)
    log, username, token = cluster.plane.audit_log, creds.install.username, creds.token.read()
    with serving(
        "--kubeconfig", str(creds.kubeconfig), log=tmp_path / "exporter.log", timeout=START_TIMEOUT
    ) as exporter:
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
        started = audit.requests(log, username, token)
        rounds = churn(cluster, CHURN_SECONDS)
        cluster.settle()
        wait_agreeing(exporter.url, evaluate_dump(cluster, tmp_path))
    made = audit.requests(log, username, token)
    during = made[len(started) :]
    text = "\n".join(
        [
            audit.report("a start", started),
            audit.report(f"{CHURN_SECONDS:g} s of churn ({rounds} rounds)", during),
        ]
    )
    print(text)  # noqa: T201 - for the closing note
    if report := os.environ.get("REAL_AUDIT_REPORT"):
        Path(report).write_text(text + "\n")
    assert asked_properly(made) == []
    assert started_from_the_watch_cache(started) == []
    relists = [r.describe() for r in during if is_initial(r)]
    assert relists == []
