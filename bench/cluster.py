"""A synthetic cluster of a given size, shaped like what a real API server returns.

Objects are as full as a real cluster's (an EKS cluster's, in shape and size), because
the exporter's cost of listing, decoding and watching them is what the benchmark
measures: `managedFields` with realistic `fieldsV1` trees, kubectl's
last-applied-configuration annotation, Helm-style labels, owner references, endpoint
`targetRef`s, and Node status with images, conditions with timestamps, addresses and
`nodeInfo`. A Node is about 9 kB of JSON, a Service about 3 kB, an EndpointSlice about
1.5 kB plus 0.4 kB an endpoint.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

Obj = dict[str, Any]
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
# Uneven capacity: zone a has big nodes, c small ones, so ratios are not 1/3 each.
ZONE_NODE_CPU = {"us-east-1a": "15890m", "us-east-1b": "7910m", "us-east-1c": "3920m"}
MANAGED_BY = "endpointslice-controller.k8s.io"
SLICE_CAPACITY = 100
CREATED = "2024-03-11T09:14:27Z"
HEARTBEAT = "2024-05-02T17:42:03Z"
KUBELET_VERSION = "v1.29.3-eks-ae9a62a"
# What a node of an EKS cluster has pulled: system images and a few workloads'.
IMAGES = (
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni",
        "v1.18.1-eksbuild.3",
        59_421_771,
    ),
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni-init",
        "v1.18.1-eksbuild.3",
        60_937_284,
    ),
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon/aws-network-policy-agent",
        "v1.1.1-eksbuild.1",
        33_344_211,
    ),
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy",
        "v1.29.3-minimal-eksbuild.2",
        35_694_227,
    ),
    ("602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause", "3.5", 298_689),
    ("602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/coredns", "v1.11.1-eksbuild.9", 18_204_195),
    ("602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-ebs-csi-driver", "v1.30.0", 33_874_320),
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/csi-node-driver-registrar",
        "v2.10.1-eks-1-30-4",
        9_113_447,
    ),
    (
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/livenessprobe",
        "v2.12.0-eks-1-30-4",
        8_730_286,
    ),
    ("quay.io/prometheus/node-exporter", "v1.8.0", 11_982_412),
    ("registry.k8s.io/kube-state-metrics/kube-state-metrics", "v2.12.0", 16_012_331),
    ("docker.io/grafana/promtail", "2.9.3", 79_134_009),
    ("public.ecr.aws/aws-observability/aws-otel-collector", "v0.38.1", 61_220_134),
    ("docker.io/bitnami/redis", "7.2.4-debian-12-r9", 47_121_456),
    ("docker.io/library/nginx", "1.25.4", 70_537_162),
    ("ghcr.io/example/checkout-api", "2024.05.01-3f9c2e1", 154_231_775),
    ("ghcr.io/example/orders-worker", "2024.04.29-a81d0c4", 132_004_218),
    ("ghcr.io/example/catalog-web", "2024.05.02-77e1b3a", 98_112_640),
    ("ghcr.io/example/payments-gateway", "2024.04.30-c0ffee1", 121_887_310),
    ("docker.io/envoyproxy/envoy", "v1.30.1", 61_010_992),
)


@dataclass(frozen=True)
class ClusterSize:
    """The shape of a benchmark cluster: how many nodes, Services, endpoints and namespaces, and
    the seed that draws them."""

    nodes: int = 5000
    services: int = 10000
    endpoints: int = 150000
    namespaces: int = 50
    seed: int = 7

    def scaled(self, factor: float) -> ClusterSize:
        """The default shape at `factor` times its size (at least one of each object)."""
        return ClusterSize(
            nodes=max(3, round(self.nodes * factor)),
            services=max(1, round(self.services * factor)),
            endpoints=max(1, round(self.endpoints * factor)),
            namespaces=self.namespaces,
            seed=self.seed,
        )


def object_uid(kind: int, index: int, number: int = 0) -> str:
    """A stable UUID for an object, as the API server assigns (unique per kind and index)."""
    return str(uuid.UUID(int=(kind << 120) | (index << 40) | number))


def _fields(*names: str) -> Obj:
    """A fieldsV1 set of leaf fields: {"f:name": {}, ...}."""
    return {f"f:{name}": {} for name in names}


def _labels_fields(labels: dict[str, str]) -> Obj:
    return {".": {}, **_fields(*labels)}


def _managed(manager: str, fields: Obj, *, subresource: str | None = None) -> Obj:
    entry: Obj = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": CREATED,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource is not None:
        entry["subresource"] = subresource
    return entry


_CONDITIONS = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
_NODE_INFO = ("architecture", "bootID", "containerRuntimeVersion", "kernelVersion",
              "kubeProxyVersion", "kubeletVersion", "machineID", "operatingSystem",
              "osImage", "systemUUID")  # fmt: skip


def _node_managed_fields(
    labels: dict[str, str], annotations: dict[str, str], cidr: str
) -> list[Obj]:
    resources = _fields(
        "cpu", "ephemeral-storage", "hugepages-1Gi", "hugepages-2Mi", "memory", "pods"
    )
    return [
        _managed("kubelet", {
            "f:metadata": {
                "f:annotations": {".": {}, **_fields(*annotations)},
                "f:labels": _labels_fields(labels),
            },
            "f:spec": _fields("providerID"),
        }),
        _managed("kube-controller-manager", {
            "f:metadata": {"f:annotations": _fields("node.alpha.kubernetes.io/ttl")},
            "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {".": {}, f'v:"{cidr}"': {}}},
        }),
        _managed("kubelet", {
            "f:status": {
                "f:allocatable": resources,
                "f:capacity": resources,
                "f:conditions": {
                    f'k:{{"type":"{kind}"}}': _fields(
                        "lastHeartbeatTime", "lastTransitionTime", "message", "reason", "status"
                    )
                    for kind, *_ in _CONDITIONS
                },
                "f:daemonEndpoints": {"f:kubeletEndpoint": _fields("Port")},
                "f:images": {},
                "f:nodeInfo": _fields(*_NODE_INFO),
            },
        }, subresource="status"),
    ]  # fmt: skip


def node(index: int, *, cpu: str | None = None) -> Obj:
    """Node `index`; `cpu` overrides its allocatable CPU (a resize that moves zone shares)."""
    zone = ZONES[index % len(ZONES)]
    name = f"ip-10-{index // 250}-{index % 250}.ec2.internal"
    address = f"10.{index // 250}.{index % 250}.10"
    cidr = f"100.{64 + index // 250 % 64}.{index % 250}.0/24"
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "m6i.4xlarge",
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": f"general-{zone}",
        "eks.amazonaws.com/nodegroup-image": "ami-0c1e3f2a9b8d7e6f5",
        "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0a1b2c3d4e5f60718",
        "eks.amazonaws.com/sourceLaunchTemplateVersion": "7",
        "failure-domain.beta.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "a94c1f7d0e2b3c4d5e6f708192a3b4c5",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "m6i.4xlarge",
        "topology.ebs.csi.aws.com/zone": zone,
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": zone,
    }
    annotations = {
        "alpha.kubernetes.io/provided-node-ip": address,
        "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{index:017x}"}}',
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    resources = {"ephemeral-storage": "95551679124", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": object_uid(1, index),
            "creationTimestamp": CREATED,
            "labels": labels,
            "annotations": annotations,
            "managedFields": _node_managed_fields(labels, annotations, cidr),
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "providerID": f"aws:///{zone}/i-{index:017x}",
        },
        "status": {
            "allocatable": {
                "cpu": cpu or ZONE_NODE_CPU[zone], "memory": "61920964Ki", "pods": "234",
                **resources,
            },
            "capacity": {"cpu": "16", "memory": "64116932Ki", "pods": "234", **resources},
            "conditions": [
                {"type": kind, "status": status, "reason": reason, "message": message,
                 "lastHeartbeatTime": HEARTBEAT, "lastTransitionTime": CREATED}
                for kind, status, reason, message in _CONDITIONS
            ],
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"ec2{index:029x}",
                "systemUUID": f"ec2{index:05x}-0000-0000-0000-000000000000",
                "bootID": object_uid(9, index),
                "kernelVersion": "5.10.215-203.850.amzn2.x86_64",
                "osImage": "Amazon Linux 2",
                "containerRuntimeVersion": "containerd://1.7.11",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [
                {"names": [f"{image}@sha256:{(index * 31 + number):064x}", f"{image}:{tag}"],
                 "sizeBytes": size}
                for number, (image, tag, size) in enumerate(IMAGES)
            ],
        },
    }  # fmt: skip


@dataclass(frozen=True)
class ServicePlan:
    """One Service of a benchmark cluster, planned before its objects are made: its routing
    setting and endpoint count."""

    namespace: str
    name: str
    kind: str  # "auto", "prefer-close", "prefer-same-zone", "none"
    endpoints: int
    partial: bool


def plan(size: ClusterSize) -> list[ServicePlan]:
    """Which Services exist, with how many endpoints: the same for a given size and seed."""
    rng = random.Random(size.seed)
    remaining = size.endpoints
    plans = []
    for index in range(size.services):
        left = size.services - index
        mean = remaining / left
        count = (
            remaining
            if left == 1
            else max(1, min(remaining - (left - 1), round(rng.uniform(0.2, 1.8) * mean)))
        )
        remaining -= count
        roll = rng.random()
        kind = (
            "auto" if roll < 0.35 else
            "prefer-close" if roll < 0.55 else
            "prefer-same-zone" if roll < 0.65 else "none"
        )  # fmt: skip
        plans.append(
            ServicePlan(
                namespace=f"team-{index % size.namespaces}",
                name=f"svc-{index}",
                kind=kind,
                endpoints=count,
                partial=kind != "none" and rng.random() < 0.05,
            )
        )
    return plans


def _app_labels(svc: ServicePlan) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": "server",
        "app.kubernetes.io/instance": svc.name,
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/name": svc.name,
        "app.kubernetes.io/part-of": svc.namespace,
        "app.kubernetes.io/version": "2024.05.01",
        "helm.sh/chart": f"{svc.name}-1.14.2",
    }


def service(svc: ServicePlan, index: int) -> Obj:
    labels = _app_labels(svc)
    ip = f"172.20.{index // 250}.{index % 250}"
    spec: Obj = {
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": "metrics"},
        ],
        "selector": {"app.kubernetes.io/instance": svc.name, "app.kubernetes.io/name": svc.name},
        "type": "ClusterIP",
    }
    annotations = {
        "meta.helm.sh/release-name": svc.name,
        "meta.helm.sh/release-namespace": svc.namespace,
    }
    if svc.kind == "auto":
        annotations["service.kubernetes.io/topology-mode"] = "Auto"
    elif svc.kind == "prefer-close":
        spec["trafficDistribution"] = "PreferClose"
    elif svc.kind == "prefer-same-zone":
        spec["trafficDistribution"] = "PreferSameZone"
    applied = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"annotations": dict(annotations), "labels": labels, "name": svc.name,
                     "namespace": svc.namespace},
        "spec": spec,
    }  # fmt: skip
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = (
        orjson.dumps(applied).decode() + "\n"
    )
    spec_fields: Obj = {
        "f:internalTrafficPolicy": {},
        "f:ports": {
            ".": {},
            **{
                f'k:{{"port":{port["port"]},"protocol":"TCP"}}': {
                    ".": {}, **_fields("name", "port", "protocol", "targetPort")
                }
                for port in spec["ports"]
            },
        },
        "f:selector": {},
        "f:sessionAffinity": {},
        "f:type": {},
    }  # fmt: skip
    if "trafficDistribution" in spec:
        spec_fields["f:trafficDistribution"] = {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": svc.name,
            "namespace": svc.namespace,
            "uid": object_uid(2, index),
            "creationTimestamp": CREATED,
            "labels": labels,
            "annotations": annotations,
            "managedFields": [
                _managed(
                    "kubectl-client-side-apply",
                    {
                        "f:metadata": {
                            "f:annotations": {".": {}, **_fields(*annotations)},
                            "f:labels": _labels_fields(labels),
                        },
                        "f:spec": spec_fields,
                    },
                ),
            ],
        },
        "spec": {
            **spec,
            "clusterIP": ip,
            "clusterIPs": [ip],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None",
        },
        "status": {"loadBalancer": {}},
    }


def _pod_ip(service_index: int, number: int) -> str:
    """Distinct within a Service (up to 4,096 endpoints), as pod IPs are."""
    value = (service_index * 4096 + number) % (1 << 24)
    return f"10.{value >> 16}.{value >> 8 & 255}.{value & 255}"


def endpoint(
    svc: ServicePlan, service_index: int, number: int, nodes: int, *, ready: bool = True
) -> Obj:
    node_index = (service_index * 7919 + number * 104729) % nodes
    zone = ZONES[node_index % len(ZONES)]
    result: Obj = {
        "addresses": [_pod_ip(service_index, number)],
        "conditions": {"ready": ready, "serving": ready, "terminating": False},
        "nodeName": f"ip-10-{node_index // 250}-{node_index % 250}.ec2.internal",
        "targetRef": {
            "kind": "Pod",
            "name": f"{svc.name}-7d9f8c6b5-{number:05x}",
            "namespace": svc.namespace,
            "uid": object_uid(3, service_index, number),
        },
        "zone": zone,
    }
    hinted = svc.kind != "none" and not (svc.partial and number % 3 == 0)
    if hinted:
        result["hints"] = {"forZones": [{"name": zone}]}
    return result


def endpoint_slices(
    svc: ServicePlan, service_index: int, nodes: int, *, ready_count: int | None = None
) -> Iterator[Obj]:
    count = svc.endpoints
    ready = count if ready_count is None else ready_count
    labels = {
        **_app_labels(svc),
        "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
        "kubernetes.io/service-name": svc.name,
    }
    owner_uid = object_uid(2, service_index)
    for first in range(0, count, SLICE_CAPACITY):
        numbers = range(first, min(count, first + SLICE_CAPACITY))
        yield {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{svc.name}-{first // SLICE_CAPACITY:05x}",
                "generateName": f"{svc.name}-",
                "namespace": svc.namespace,
                "uid": object_uid(4, service_index, first),
                "generation": 1 + (count - ready),
                "creationTimestamp": CREATED,
                "labels": labels,
                "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": HEARTBEAT},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "name": svc.name,
                        "uid": owner_uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "managedFields": [
                    _managed(
                        "kube-controller-manager",
                        {
                            "f:addressType": {},
                            "f:endpoints": {},
                            "f:metadata": {
                                "f:annotations": {
                                    ".": {},
                                    **_fields("endpoints.kubernetes.io/last-change-trigger-time"),
                                },
                                "f:generateName": {},
                                "f:labels": _labels_fields(labels),
                                "f:ownerReferences": {".": {}, f'k:{{"uid":"{owner_uid}"}}': {}},
                            },
                            "f:ports": {},
                        },
                    )
                    | {"apiVersion": "discovery.k8s.io/v1"},
                ],
            },
            "addressType": "IPv4",
            "ports": [
                {"name": "http", "port": 8080, "protocol": "TCP"},
                {"name": "metrics", "port": 9090, "protocol": "TCP"},
            ],
            "endpoints": [endpoint(svc, service_index, n, nodes, ready=n < ready) for n in numbers],
        }


def cluster_objects(size: ClusterSize) -> Iterator[Obj]:
    for index in range(size.nodes):
        yield node(index)
    plans = plan(size)
    for index, svc in enumerate(plans):
        yield service(svc, index)
    for index, svc in enumerate(plans):
        yield from endpoint_slices(svc, index, size.nodes)


def write_snapshot(size: ClusterSize, path: Path) -> dict[str, int]:
    """The cluster as `kubectl get nodes,services,endpointslices -A -o json` prints it; how
    many objects of each kind it holds."""
    with path.open("wb") as out:
        return _write_list(size, out)


def _write_list(size: ClusterSize, out: BinaryIO) -> dict[str, int]:
    counts: dict[str, int] = {}
    out.write(b'{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[')
    for number, obj in enumerate(cluster_objects(size)):
        if number:
            out.write(b",")
        out.write(orjson.dumps(obj))
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    out.write(b"]}")
    return counts
