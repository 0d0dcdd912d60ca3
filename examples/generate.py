# ruff: noqa: INP001 - examples/ holds data files and this one script, not a package
"""Write the example cluster snapshots of this folder.

Each snapshot is a Kubernetes `List` shaped exactly as
`kubectl get nodes,services,endpointslices -A -o json` prints it (keys sorted,
4-space indent, Nodes then Services then EndpointSlices), and tells one story.
Everything is derived from names, so running the script again writes identical
bytes:

    python examples/generate.py [OUTPUT_DIR]
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGION = "eu-west-1"
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
CREATED = "2025-03-04T09:12:44Z"
CHANGED = "2025-06-17T14:03:21Z"
UUID_NAMESPACE = uuid.UUID("6f1c9a52-3d0e-4b8a-9c55-0d1e2f3a4b5c")

AUTO = {"service.kubernetes.io/topology-mode": "Auto"}

Json = dict[str, Any]


def uid(*parts: str) -> str:
    return str(uuid.uuid5(UUID_NAMESPACE, "/".join(parts)))


def digest(*parts: str) -> int:
    return int(hashlib.sha256("/".join(parts).encode()).hexdigest()[:8], 16)


def suffix(*parts: str, length: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    value = digest(*parts)
    chars = []
    for _ in range(length):
        value, index = divmod(value, len(alphabet))
        chars.append(alphabet[index])
    return "".join(chars)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    zone: str | None
    cpu: str = "3920m"
    capacity_cpu: str = "4"
    memory: str = "15147932Ki"
    capacity_memory: str = "16093596Ki"
    instance_type: str = "m6i.xlarge"


@dataclass(frozen=True)
class PodSpec:
    node: NodeSpec
    ready: bool = True
    # None: no hint; else the zone hinted (normally the pod's own zone).
    hint: str | None = None


def aws_node(subnet: int, host: int, zone: str, **extra: str) -> NodeSpec:
    return NodeSpec(f"ip-10-0-{subnet}-{host}.{REGION}.compute.internal", zone, **extra)


def node_object(spec: NodeSpec) -> Json:
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
    }
    provider: Json = {}
    if spec.zone is not None:
        labels |= {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": spec.instance_type,
            "beta.kubernetes.io/os": "linux",
            "failure-domain.beta.kubernetes.io/region": REGION,
            "failure-domain.beta.kubernetes.io/zone": spec.zone,
            "node.kubernetes.io/instance-type": spec.instance_type,
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": spec.zone,
        }
        instance = f"i-0{digest(spec.name):08x}{digest('instance', spec.name):08x}"
        provider = {"providerID": f"aws:///{spec.zone}/{instance}"}
    resources = {
        "cpu": spec.cpu,
        "ephemeral-storage": "76224326324",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": spec.memory,
        "pods": "58",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": CREATED,
            "labels": labels,
            "name": spec.name,
            "resourceVersion": str(100000 + digest(spec.name) % 900000),
            "uid": uid("node", spec.name),
        },
        "spec": provider,
        "status": {
            "allocatable": resources,
            "capacity": resources | {"cpu": spec.capacity_cpu, "memory": spec.capacity_memory},
            "conditions": [
                node_condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                node_condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                node_condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                node_condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.132-147.221.amzn2023.x86_64",
                "kubeProxyVersion": "v1.33.1",
                "kubeletVersion": "v1.33.1",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.7.20250512",
            },
        },
    }


def node_condition(kind: str, status: str, reason: str, message: str) -> Json:
    return {
        "lastHeartbeatTime": CHANGED,
        "lastTransitionTime": CREATED,
        "message": message,
        "reason": reason,
        "status": status,
        "type": kind,
    }


def cluster_ip(namespace: str, name: str) -> str:
    value = digest("svc", namespace, name)
    return f"172.20.{value % 250 + 1}.{value // 250 % 250 + 2}"


def service_object(
    namespace: str,
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    traffic_distribution: str | None = None,
) -> Json:
    address = cluster_ip(namespace, name)
    spec: Json = {
        "clusterIP": address,
        "clusterIPs": [address],
        "internalTrafficPolicy": "Cluster",
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        "selector": {"app.kubernetes.io/name": name},
        "sessionAffinity": "None",
        "type": "ClusterIP",
    }
    if traffic_distribution is not None:
        spec["trafficDistribution"] = traffic_distribution
    metadata: Json = {
        "creationTimestamp": CREATED,
        "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": namespace},
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(200000 + digest("svc", namespace, name) % 800000),
        "uid": uid("service", namespace, name),
    }
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": spec,
        "status": {"loadBalancer": {}},
    }


class Addresses:
    """Pod IPs from each zone's /24 (node names carry the node IPs: ip-10-0-1-23 is 10.0.1.23)."""

    def __init__(self) -> None:
        self.last_host: dict[int, int] = {}

    def next(self, node: NodeSpec) -> str:
        subnet = ZONES.index(node.zone) + 1 if node.zone in ZONES else 9
        host = self.last_host.get(subnet, 150) + 1
        self.last_host[subnet] = host
        return f"10.0.{subnet}.{host}"


def endpoint_object(namespace: str, service: str, index: int, pod: PodSpec, address: str) -> Json:
    pod_name = (
        f"{service}-{suffix('rs', namespace, service, length=9)}-{suffix(str(index), service)}"
    )
    endpoint: Json = {
        "addresses": [address],
        "conditions": {"ready": pod.ready, "serving": pod.ready, "terminating": False},
        "nodeName": pod.node.name,
        "targetRef": {
            "kind": "Pod",
            "name": pod_name,
            "namespace": namespace,
            "uid": uid("pod", namespace, pod_name),
        },
    }
    if pod.node.zone is not None:
        endpoint["zone"] = pod.node.zone
    if pod.hint is not None:
        endpoint["hints"] = {"forZones": [{"name": pod.hint}]}
    return endpoint


def endpoint_slice_object(
    namespace: str, service: str, pods: list[PodSpec], addresses: Addresses
) -> Json:
    name = f"{service}-{suffix('slice', namespace, service)}"
    return {
        "addressType": "IPv4",
        "apiVersion": "discovery.k8s.io/v1",
        "endpoints": [
            endpoint_object(namespace, service, index, pod, addresses.next(pod.node))
            for index, pod in enumerate(pods)
        ],
        "kind": "EndpointSlice",
        "metadata": {
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": CHANGED},
            "creationTimestamp": CREATED,
            "generateName": f"{service}-",
            "generation": 3 + digest("gen", namespace, service) % 40,
            "labels": {
                "app.kubernetes.io/name": service,
                "app.kubernetes.io/part-of": namespace,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "kubernetes.io/service-name": service,
            },
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "Service",
                    "name": service,
                    "uid": uid("service", namespace, service),
                }
            ],
            "resourceVersion": str(300000 + digest("slice", namespace, service) % 700000),
            "uid": uid("endpointslice", namespace, name),
        },
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def spread(nodes: list[NodeSpec], per_zone: dict[str, int], *, hinted: bool) -> list[PodSpec]:
    """Pods round-robin over each zone's nodes, hinted for their own zone when asked."""
    pods = []
    for zone, count in per_zone.items():
        zone_nodes = [node for node in nodes if node.zone == zone]
        pods.extend(
            PodSpec(zone_nodes[index % len(zone_nodes)], hint=zone if hinted else None)
            for index in range(count)
        )
    return pods


@dataclass(frozen=True)
class Story:
    nodes: list[NodeSpec]
    # (service object, pods) pairs
    services: list[tuple[Json, list[PodSpec]]]

    def snapshot(self) -> Json:
        services = sorted(
            self.services,
            key=lambda pair: (pair[0]["metadata"]["namespace"], pair[0]["metadata"]["name"]),
        )
        addresses = Addresses()
        slices = [
            endpoint_slice_object(
                service["metadata"]["namespace"], service["metadata"]["name"], pods, addresses
            )
            for service, pods in services
        ]
        return {
            "apiVersion": "v1",
            "items": [
                *(node_object(node) for node in sorted(self.nodes, key=lambda node: node.name)),
                *(service for service, _ in services),
                *slices,
            ],
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }


def six_nodes() -> list[NodeSpec]:
    return [
        aws_node(zone_index + 1, host, zone)
        for zone_index, zone in enumerate(ZONES)
        for host in (23 + 40 * zone_index, 118 - 17 * zone_index)
    ]


def equal(count_a: int, count_b: int, count_c: int) -> dict[str, int]:
    return dict(zip(ZONES, (count_a, count_b, count_c), strict=True))


def healthy_three_zones() -> Story:
    """auto with 9 endpoints in 3 equal zones, hints in place; and a PreferClose Service."""
    nodes = six_nodes()
    return Story(
        nodes,
        [
            (
                service_object("shop", "cart", annotations=AUTO),
                spread(nodes, equal(3, 3, 3), hinted=True),
            ),
            (
                service_object("shop", "catalog", traffic_distribution="PreferClose"),
                spread(nodes, equal(2, 2, 2), hinted=True),
            ),
        ],
    )


def eight_replicas_refused() -> Story:
    """auto with 8 endpoints in 3 equal zones: 3+3+3 minimums exceed 8, no hints."""
    nodes = [
        aws_node(
            index + 1,
            77 + 31 * index,
            zone,
            cpu="7910m",
            capacity_cpu="8",
            memory="31236732Ki",
            capacity_memory="32408700Ki",
            instance_type="m6i.2xlarge",
        )
        for index, zone in enumerate(ZONES)
    ]
    return Story(
        nodes,
        [
            (
                service_object("payments", "ledger", annotations=AUTO),
                spread(nodes, equal(3, 3, 2), hinted=False),
            )
        ],
    )


def node_without_zone() -> Story:
    """A worker joined without topology labels: every auto Service loses its hints."""
    zoned = [aws_node(index + 1, 41 + 29 * index, zone) for index, zone in enumerate(ZONES)]
    nodes = [*zoned, NodeSpec("worker-manual-01", None)]
    return Story(
        nodes,
        [
            (
                service_object("shop", "cart", annotations=AUTO),
                spread(zoned, equal(3, 3, 3), hinted=False),
            ),
            (
                service_object("payments", "gateway", annotations=AUTO),
                spread(zoned, equal(2, 2, 2), hinted=False),
            ),
        ],
    )


def prefer_same_zone_thin_zone() -> Story:
    """PreferSameZone never refuses: eu-west-1c's single endpoint takes all its zone's traffic."""
    nodes = six_nodes()
    return Story(
        nodes,
        [
            (
                service_object("shop", "search", traffic_distribution="PreferSameZone"),
                spread(nodes, equal(2, 2, 1), hinted=True),
            )
        ],
    )


def annotation_overrides_field() -> Story:
    """topology-mode: Auto shadows trafficDistribution: PreferClose; auto refuses 4 endpoints."""
    nodes = six_nodes()
    return Story(
        nodes,
        [
            (
                service_object(
                    "payments", "checkout", annotations=AUTO, traffic_distribution="PreferClose"
                ),
                spread(nodes, equal(2, 1, 1), hinted=False),
            )
        ],
    )


def partial_hints_ignored() -> Story:
    """Two new endpoints without hints yet: kube-proxy ignores the four hinted ones too."""
    nodes = six_nodes()
    pods = spread(nodes, equal(2, 2, 2), hinted=True)
    pods[1] = PodSpec(pods[1].node)
    pods[5] = PodSpec(pods[5].node)
    return Story(
        nodes,
        [(service_object("shop", "inventory", traffic_distribution="PreferClose"), pods)],
    )


def demo_cluster() -> Story:
    """Every story that fits one healthy-node cluster: what `make run` serves."""
    nodes = six_nodes()
    partial = spread(nodes, equal(2, 2, 2), hinted=True)
    partial[1] = PodSpec(partial[1].node)
    partial[5] = PodSpec(partial[5].node)
    return Story(
        nodes,
        [
            (
                service_object("shop", "cart", annotations=AUTO),
                spread(nodes, equal(3, 3, 3), hinted=True),
            ),
            (
                service_object("shop", "catalog", traffic_distribution="PreferClose"),
                spread(nodes, equal(2, 2, 2), hinted=True),
            ),
            (
                service_object("payments", "ledger", annotations=AUTO),
                spread(nodes, equal(3, 3, 2), hinted=False),
            ),
            (
                service_object("shop", "search", traffic_distribution="PreferSameZone"),
                spread(nodes, equal(2, 2, 1), hinted=True),
            ),
            (
                service_object(
                    "payments", "checkout", annotations=AUTO, traffic_distribution="PreferClose"
                ),
                spread(nodes, equal(2, 1, 1), hinted=False),
            ),
            (service_object("shop", "inventory", traffic_distribution="PreferClose"), partial),
            (service_object("shop", "frontend"), spread(nodes, equal(2, 2, 2), hinted=False)),
        ],
    )


STORIES = {
    "healthy-three-zones": healthy_three_zones,
    "eight-replicas-refused": eight_replicas_refused,
    "node-without-zone": node_without_zone,
    "prefer-same-zone-thin-zone": prefer_same_zone_thin_zone,
    "annotation-overrides-field": annotation_overrides_field,
    "partial-hints-ignored": partial_hints_ignored,
    "demo-cluster": demo_cluster,
}


def render(story: Story) -> str:
    return json.dumps(story.snapshot(), indent=4, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    output = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    output.mkdir(parents=True, exist_ok=True)
    for name, build in STORIES.items():
        (output / f"{name}.json").write_text(render(build()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
