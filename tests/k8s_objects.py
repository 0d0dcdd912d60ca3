"""Raw Kubernetes objects, as the API server and `kubectl get -o json` write them."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
MANAGED_BY = "endpointslice-controller.k8s.io"


def node(
    name: str,
    zone: str | None,
    cpu: str | None = "4",
    *,
    ready: bool = True,
    control_plane: bool = False,
) -> Obj:
    labels = {"kubernetes.io/hostname": name}
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = zone
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    allocatable = {"memory": "16Gi", "pods": "110"}
    if cpu is not None:
        allocatable["cpu"] = cpu
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": labels},
        "status": {
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def service(
    namespace: str,
    name: str,
    *,
    topology_mode: str | None = None,
    traffic_distribution: str | None = None,
    internal_traffic_policy: str = "Cluster",
    cluster_ip: str = "10.96.0.10",
) -> Obj:
    metadata: Obj = {"name": name, "namespace": namespace, "uid": f"uid-svc-{namespace}-{name}"}
    if topology_mode is not None:
        metadata["annotations"] = {"service.kubernetes.io/topology-mode": topology_mode}
    spec: Obj = {
        "type": "ClusterIP",
        "clusterIP": cluster_ip,
        "internalTrafficPolicy": internal_traffic_policy,
        "ports": [{"port": 80, "protocol": "TCP"}],
        # A selector, as most Services have: the EndpointSlice controller syncs it.
        "selector": {"app": name},
    }
    if traffic_distribution is not None:
        spec["trafficDistribution"] = traffic_distribution
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}


def endpoint(
    address: str,
    zone: str | None,
    node_name: str | None = None,
    *,
    ready: bool | None = True,
    hint_zones: tuple[str, ...] | None = None,
    hint_nodes: tuple[str, ...] | None = None,
) -> Obj:
    result: Obj = {"addresses": [address], "conditions": {}}
    if ready is not None:
        result["conditions"]["ready"] = ready
    if zone is not None:
        result["zone"] = zone
    if node_name is not None:
        result["nodeName"] = node_name
    hints: Obj = {}
    if hint_zones is not None:
        hints["forZones"] = [{"name": zone_name} for zone_name in hint_zones]
    if hint_nodes is not None:
        hints["forNodes"] = [{"name": node_hint} for node_hint in hint_nodes]
    if hints:
        result["hints"] = hints
    return result


def endpoint_slice(
    namespace: str,
    name: str,
    service_name: str,
    endpoints: list[Obj],
    *,
    address_type: str = "IPv4",
    managed: bool = True,
) -> Obj:
    labels = {"kubernetes.io/service-name": service_name}
    if managed:
        labels["endpointslice.kubernetes.io/managed-by"] = MANAGED_BY
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-slice-{namespace}-{name}",
            "labels": labels,
        },
        "addressType": address_type,
        "ports": [{"port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }


def event(
    namespace: str,
    name: str,
    service_name: str,
    reason: str,
    *,
    count: int = 1,
    last_timestamp: str = "2026-11-29T10:00:00Z",
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-event-{namespace}-{name}"},
        "involvedObject": {"kind": "Service", "namespace": namespace, "name": service_name},
        "reason": reason,
        "message": "Topology Aware Hints has been disabled",
        "type": "Warning",
        "count": count,
        "source": {"component": "endpoint-slice-controller"},
        "firstTimestamp": last_timestamp,
        "lastTimestamp": last_timestamp,
    }


def three_zone_nodes(per_zone: int = 1, cpu: str = "4") -> list[Obj]:
    return [
        node(f"node-{zone}-{index}", f"zone-{zone}", cpu)
        for zone in "abc"
        for index in range(per_zone)
    ]


def zone_endpoints(count: int, *, hinted: bool = True, prefix: str = "10.0.0") -> list[Obj]:
    """`count` ready endpoints spread round-robin over zone-a, zone-b, zone-c."""
    endpoints = []
    for index in range(count):
        zone = f"zone-{'abc'[index % 3]}"
        endpoints.append(
            endpoint(
                f"{prefix}.{index + 1}",
                zone,
                f"node-{zone[-1]}-0",
                hint_zones=(zone,) if hinted else None,
            )
        )
    return endpoints


def as_list(*groups: list[Obj] | Obj) -> Obj:
    items: list[Obj] = []
    for group in groups:
        items.extend(group if isinstance(group, list) else [group])
    return {"apiVersion": "v1", "kind": "List", "items": items}
