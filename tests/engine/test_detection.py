"""Which data planes the kube-system objects show (exporter.engine.detection)."""

from __future__ import annotations

import pytest

from exporter.engine import DataPlane
from exporter.engine.detection import DaemonSetFacts, DataPlaneFacts, detect

KUBE_PROXY_1_31 = DaemonSetFacts(images=("registry.k8s.io/kube-proxy:v1.31.2",))
KUBE_PROXY_1_29 = DaemonSetFacts(images=("registry.k8s.io/kube-proxy:v1.29.9",))
CILIUM_1_18_0 = DaemonSetFacts(images=("quay.io/cilium/cilium:v1.18.0@sha256:0123",))
CILIUM_1_18_1 = DaemonSetFacts(images=("quay.io/cilium/cilium:v1.18.1",))
CALICO_EBPF = DaemonSetFacts(
    images=("docker.io/calico/node:v3.32.0",), env={"FELIX_BPFENABLED": "true"}
)
CALICO_IPTABLES = DaemonSetFacts(images=("docker.io/calico/node:v3.32.0",))
REPLACE_WITH_TOPOLOGY = {"kube-proxy-replacement": "true", "enable-service-topology": "true"}


@pytest.mark.parametrize(
    ("daemonsets", "config", "expected"),
    [
        ({"kube-proxy": KUBE_PROXY_1_31}, None, (DataPlane.KUBE_PROXY,)),
        ({"kube-proxy": KUBE_PROXY_1_29}, None, (DataPlane.KUBE_PROXY_1_29,)),
        # An image without a version tag: the current kube-proxy.
        ({"kube-proxy": DaemonSetFacts(images=("kube-proxy",))}, None, (DataPlane.KUBE_PROXY,)),
        # Cilium beside kube-proxy without replacing it: kube-proxy routes Services.
        (
            {"kube-proxy": KUBE_PROXY_1_31, "cilium": CILIUM_1_18_1},
            {"kube-proxy-replacement": "false"},
            (DataPlane.KUBE_PROXY,),
        ),
        # Replacement with the topology switch off (its default): hints ignored.
        (
            {"cilium": CILIUM_1_18_1},
            {"kube-proxy-replacement": "true"},
            (DataPlane.CILIUM_NO_TOPOLOGY,),
        ),
        ({"cilium": CILIUM_1_18_1}, REPLACE_WITH_TOPOLOGY, (DataPlane.CILIUM,)),
        ({"cilium": CILIUM_1_18_0}, REPLACE_WITH_TOPOLOGY, (DataPlane.CILIUM_1_18_0,)),
        # A leftover kube-proxy DaemonSet beside the replacement routes nothing.
        (
            {"kube-proxy": KUBE_PROXY_1_31, "cilium": CILIUM_1_18_1},
            {"kube-proxy-replacement": "strict", "enable-service-topology": "true"},
            (DataPlane.CILIUM,),
        ),
        ({"calico-node": CALICO_EBPF}, None, (DataPlane.CALICO_EBPF,)),
        (
            {"calico-node": CALICO_IPTABLES, "kube-proxy": KUBE_PROXY_1_31},
            None,
            (DataPlane.KUBE_PROXY,),
        ),
        # Cilium without its ConfigMap: not known to replace kube-proxy.
        ({"cilium": CILIUM_1_18_1}, None, ()),
        ({}, None, ()),
    ],
)
def test_detect(
    daemonsets: dict[str, DaemonSetFacts],
    config: dict[str, str] | None,
    expected: tuple[DataPlane, ...],
) -> None:
    assert detect(DataPlaneFacts(daemonsets=daemonsets, cilium_config=config)) == expected
