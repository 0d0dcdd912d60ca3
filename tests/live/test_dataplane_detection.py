"""`serve --dataplane auto` against the test API server: DaemonSets and cilium-config decide."""

from __future__ import annotations

import pytest

from exporter.engine import DataPlane
from tests.k8s_objects import Obj, endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.scrape import Scrape


def daemonset(name: str, image: str, env: dict[str, str] | None = None) -> Obj:
    container: Obj = {"name": name, "image": image}
    if env:
        container["env"] = [{"name": key, "value": value} for key, value in env.items()]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-ds-{name}"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def cilium_config(**data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cilium-config", "namespace": "kube-system", "uid": "uid-cm"},
        "data": {key.replace("_", "-"): value for key, value in data.items()},
    }


CLUSTER = [
    *three_zone_nodes(),
    service("shop", "web", topology_mode="Auto"),
    endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
]


def info(result: Scrape) -> list[tuple[str, str]]:
    return sorted(
        (labels["dataplane"], labels["source"])
        for labels in result.labelled("topology_hints_dataplane_info")
    )


def routed_by(result: Scrape, dataplane: DataPlane) -> bool:
    return bool(result.labelled("topology_hints_service_local_routing_ratio", dataplane=dataplane))


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        (
            [
                daemonset("cilium", "quay.io/cilium/cilium:v1.18.0"),
                daemonset("kube-proxy", "registry.k8s.io/kube-proxy:v1.31.2"),
                cilium_config(kube_proxy_replacement="true", enable_service_topology="true"),
            ],
            DataPlane.CILIUM_1_18_0,
        ),
        (
            [
                daemonset("cilium", "quay.io/cilium/cilium:v1.17.4"),
                cilium_config(kube_proxy_replacement="true"),
            ],
            DataPlane.CILIUM_NO_TOPOLOGY,
        ),
        (
            [daemonset("kube-proxy", "registry.k8s.io/kube-proxy:v1.29.9")],
            DataPlane.KUBE_PROXY_1_29,
        ),
        (
            [daemonset("calico-node", "calico/node:v3.32.0", {"FELIX_BPFENABLED": "true"})],
            DataPlane.CALICO_EBPF,
        ),
    ],
    ids=["cilium-1.18.0", "cilium-no-topology", "kube-proxy-1.29", "calico-ebpf"],
)
def test_kube_system_objects_select_the_data_plane(
    kube_api: FakeKubeAPI,
    start_exporter: StartExporter,
    objects: list[Obj],
    expected: DataPlane,
) -> None:
    """The detected data plane is evaluated and reported with source="detected"."""
    kube_api.load([*CLUSTER, *objects])
    with start_exporter(detect_dataplanes=True) as exporter:
        result = eventually(exporter, lambda r: routed_by(r, expected))
    assert info(result) == [(str(expected), "detected")]


@pytest.mark.parametrize(
    ("flags", "fallback"),
    [
        (["--dataplane", "auto"], (DataPlane.KUBE_PROXY,)),
        (["--dataplane", "auto,istio"], (DataPlane.ISTIO,)),
    ],
)
def test_serve_dataplane_auto_turns_on_detection(
    flags: list[str], fallback: tuple[DataPlane, ...]
) -> None:
    """`--dataplane auto` detects; the other ids (else kube-proxy) are the fallback."""
    from exporter.cli import build_parser  # noqa: PLC0415
    from exporter.cli.serve import serve_options  # noqa: PLC0415

    options = serve_options(build_parser().parse_args(["serve", *flags]))
    assert options.detect_dataplanes
    assert options.dataplanes == fallback
    plain = serve_options(build_parser().parse_args(["serve", "--dataplane", "istio"]))
    assert not plain.detect_dataplanes
