"""A synthetic cluster of a given size, shaped like what a real API server returns."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
# Uneven capacity: zone a has big nodes, c small ones, so ratios are not 1/3 each.
ZONE_NODE_CPU = {"us-east-1a": "15890m", "us-east-1b": "7910m", "us-east-1c": "3920m"}
MANAGED_BY = "endpointslice-controller.k8s.io"
SLICE_CAPACITY = 100


@dataclass(frozen=True)
class ClusterSize:
    nodes: int = 5000
    services: int = 10000
    endpoints: int = 150000
    namespaces: int = 50
    seed: int = 7


def node(index: int) -> Obj:
    zone = ZONES[index % len(ZONES)]
    name = f"ip-10-{index // 250}-{index % 250}.ec2.internal"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{index}",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": zone,
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{index:017x}"},
        "status": {
            "allocatable": {"cpu": ZONE_NODE_CPU[zone], "memory": "31236732Ki", "pods": "58"},
            "capacity": {"cpu": "16", "memory": "32408700Ki", "pods": "58"},
            "conditions": [
                {
                    "type": "MemoryPressure",
                    "status": "False",
                    "reason": "KubeletHasSufficientMemory",
                },
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{index // 250}.{index % 250}.10"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


@dataclass(frozen=True)
class ServicePlan:
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


def service(svc: ServicePlan, index: int) -> Obj:
    metadata: Obj = {
        "name": svc.name,
        "namespace": svc.namespace,
        "uid": f"svc-uid-{index}",
        "labels": {"app.kubernetes.io/name": svc.name},
    }
    spec: Obj = {
        "type": "ClusterIP",
        "clusterIP": f"172.20.{index // 250}.{index % 250}",
        "clusterIPs": [f"172.20.{index // 250}.{index % 250}"],
        "ipFamilies": ["IPv4"],
        "ipFamilyPolicy": "SingleStack",
        "internalTrafficPolicy": "Cluster",
        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        "selector": {"app.kubernetes.io/name": svc.name},
        "sessionAffinity": "None",
    }
    if svc.kind == "auto":
        metadata["annotations"] = {"service.kubernetes.io/topology-mode": "Auto"}
    elif svc.kind == "prefer-close":
        spec["trafficDistribution"] = "PreferClose"
    elif svc.kind == "prefer-same-zone":
        spec["trafficDistribution"] = "PreferSameZone"
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def endpoint(
    svc: ServicePlan, service_index: int, number: int, nodes: int, *, ready: bool = True
) -> Obj:
    node_index = (service_index * 7919 + number * 104729) % nodes
    zone = ZONES[node_index % len(ZONES)]
    pod = f"{svc.name}-{number:05d}"
    result: Obj = {
        "addresses": [f"10.{100 + service_index % 100}.{service_index // 100}.{number}"],
        "conditions": {"ready": ready, "serving": ready, "terminating": False},
        "nodeName": f"ip-10-{node_index // 250}-{node_index % 250}.ec2.internal",
        "targetRef": {
            "kind": "Pod",
            "name": pod,
            "namespace": svc.namespace,
            "uid": f"pod-{service_index}-{number}",
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
    for first in range(0, count, SLICE_CAPACITY):
        numbers = range(first, min(count, first + SLICE_CAPACITY))
        yield {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{svc.name}-{first // SLICE_CAPACITY:05x}",
                "namespace": svc.namespace,
                "uid": f"slice-uid-{service_index}-{first}",
                "labels": {
                    "kubernetes.io/service-name": svc.name,
                    "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "name": svc.name,
                        "uid": f"svc-uid-{service_index}",
                    }
                ],
            },
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
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
