"""What a reference run builds: Nodes, Services and the Pods behind their endpoints.

A plan is plain data, so a failing one can be written to a file and built again: the
conformance vectors (tests/realcluster/vectors.py) and the random generator
(tests/realcluster/random_clusters.py) both produce plans, and tests/realcluster/reference.py
builds them on a real control plane and compares the exporter with the controller.

The endpoint a Pod becomes is the controller's `podToEndpoint`
(k8s.io/endpointslice utils.go): the Pod's IP, its node, the node's zone label when it is not
empty, `serving` = the Pod is Ready, `terminating` = it has a deletion timestamp, and
`ready` = serving and not terminating (always true under `publishNotReadyAddresses`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcluster.cluster import ZONE_LABEL

Json = dict[str, Any]
# The label the suite selects a Service's Pods by (the vectors' own selectors may overlap).
SELECTOR_LABEL = "suite.test/service"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"


@dataclass(frozen=True)
class PodPlan:
    """One Pod bound to a node, Running at `ip`; Ready or not; terminating or not."""

    name: str
    node: str
    ip: str
    ready: bool = True
    terminating: bool = False


# (address, nodeName, zone, ready, serving, terminating): an endpoint as the checks read it.
EndpointKey = tuple[str, str | None, str | None, bool | None, bool | None, bool | None]


@dataclass(frozen=True)
class ServicePlan:
    """A Service, created first without its hint mechanism, which is patched in once the
    controller has written every endpoint (see reference.py for why)."""

    namespace: str
    name: str
    # The Service's spec without selector, trafficDistribution or annotations.
    spec: Mapping[str, Any]
    pods: tuple[PodPlan, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    traffic_distribution: str | None = None
    selector: bool = True
    # The vector's expected verdict of the IPv4 entry (its section 8 fields), when the
    # cluster reproduces that entry's inputs; None for random Services.
    expected: Mapping[str, Any] | None = None
    # How the entry was adapted to be expressible (empty when it was not).
    adapted: tuple[str, ...] = ()
    # The conformance vector it comes from ("" for random Services).
    vector: str = ""

    def body(self) -> Json:
        spec = json.loads(json.dumps(dict(self.spec)))
        if self.selector:
            spec["selector"] = {SELECTOR_LABEL: self.name}
        return {"metadata": {"name": self.name}, "spec": spec}

    def mechanism_patch(self) -> Json | None:
        """The annotations and trafficDistribution, as one merge patch (None: nothing)."""
        patch: Json = {}
        if self.annotations:
            patch["metadata"] = {"annotations": dict(self.annotations)}
        if self.traffic_distribution is not None:
            patch["spec"] = {"trafficDistribution": self.traffic_distribution}
        return patch or None

    @property
    def publishes_not_ready(self) -> bool:
        return bool(self.spec.get("publishNotReadyAddresses"))


@dataclass(frozen=True)
class ClusterPlan:
    """One node set with its Services: what one reference run builds."""

    name: str
    # How to get this plan again (a vector's name, or the generator's seed and index).
    origin: str
    nodes: tuple[Json, ...]
    services: tuple[ServicePlan, ...]
    # EndpointSlices written by hand (not the controller's), created as they are.
    slices: tuple[Json, ...] = ()
    # The vector's expected "cluster" object (its section 8 fields), if any.
    expected_cluster: Mapping[str, Any] | None = None

    @property
    def namespaces(self) -> tuple[str, ...]:
        found = {service.namespace for service in self.services}
        found.update(item["metadata"]["namespace"] for item in self.slices)
        return tuple(sorted(found))

    def node_zones(self) -> dict[str, str | None]:
        """Each node's zone as the controller writes it into endpoints (None: no label or "")."""
        zones: dict[str, str | None] = {}
        for node in self.nodes:
            zone = node["metadata"].get("labels", {}).get(ZONE_LABEL)
            zones[node["metadata"]["name"]] = zone or None
        return zones

    def expected_endpoints(self, service: ServicePlan) -> set[EndpointKey]:
        """The endpoints the controller must write for `service`, from its Pods."""
        zones = self.node_zones()
        if not service.selector:
            return set()
        return {
            (
                pod.ip,
                pod.node,
                zones.get(pod.node),
                service.publishes_not_ready or (pod.ready and not pod.terminating),
                pod.ready,
                pod.terminating,
            )
            for pod in service.pods
        }

    def write(self, path: Path) -> Path:
        """The plan as JSON, so that a failure can be looked at and built again."""
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True))
        return path


def endpoint_key(endpoint: Mapping[str, Any]) -> EndpointKey:
    conditions = endpoint.get("conditions", {})
    addresses = endpoint.get("addresses") or [""]
    return (
        addresses[0],
        endpoint.get("nodeName"),
        endpoint.get("zone"),
        conditions.get("ready"),
        conditions.get("serving"),
        conditions.get("terminating"),
    )


def managed(endpoint_slice: Mapping[str, Any]) -> bool:
    return bool(endpoint_slice["metadata"].get("labels", {}).get(MANAGED_BY) == CONTROLLER)
