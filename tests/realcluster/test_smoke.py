"""The real EndpointSlice controller and the exporter agree on the best-known refusal:
8 ready endpoints in 3 equal zones are refused, 7 and 9 get hints."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.realcluster.cluster import RealCluster, node_body

pytestmark = pytest.mark.real

AUTO = {"service.kubernetes.io/topology-mode": "Auto"}


def _service(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "annotations": AUTO},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def test_eight_replicas_in_three_equal_zones_are_refused_by_the_real_controller(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The controller writes hints for 7 and 9 endpoints, none for 8; `evaluate` on a
    kubectl dump says the same Service by Service, with no drift."""
    namespace = "smoke-replicas"
    real_cluster.replace_nodes(node_body(f"node-{i}", zone=f"zone-{i % 3}") for i in range(6))
    real_cluster.create_namespace(namespace)
    for replicas in (7, 8, 9):
        name = f"web-{replicas}"
        real_cluster.create_service(namespace, _service(name))
        for index in range(replicas):
            real_cluster.run_pod(
                namespace,
                f"{name}-{index}",
                node=f"node-{index % 6}",
                ip=f"10.{replicas}.0.{index + 1}",
                labels={"app": name},
            )
    real_cluster.settle()

    hinted = {
        slice_.metadata.labels["kubernetes.io/service-name"]: all(
            endpoint.hints is not None for endpoint in slice_.endpoints
        )
        for slice_ in real_cluster.endpoint_slices(namespace)
    }
    assert hinted == {"web-7": True, "web-8": False, "web-9": True}

    dump = tmp_path_factory.mktemp("dump") / "cluster.json"
    dump.write_bytes(real_cluster.dump())
    result = run_cli("evaluate", "--snapshot", str(dump))
    assert result.returncode == 0, result.stderr
    verdicts = {
        entry["name"]: (entry["expected_state"], entry["reason"], entry["drift"])
        for entry in json.loads(result.stdout)["services"]
        if entry["namespace"] == namespace
    }
    assert verdicts == {
        "web-7": ("enabled", None, []),
        "web-8": ("disabled", "MinAllocationExceedsOverloadThreshold", []),
        "web-9": ("enabled", None, []),
    }
