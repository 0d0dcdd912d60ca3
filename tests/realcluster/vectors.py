"""The public conformance vectors as clusters the real controller can be given.

A vector is a `kubectl` dump: Nodes, Services and EndpointSlices. A real cluster gets its
managed slices from the controller, which writes them from Pods, so a vector's entry can be
built only where a Pod on one of its Nodes makes each of its managed endpoints. An entry is
left out, with the reason, when:

- an endpoint's zone differs from its node's zone label (the controller copies the label,
  and never writes an empty zone), or its node is not in the vector;
- an endpoint has no nodeName and no node of the vector carries its zone;
- one address appears twice among the Service's managed endpoints;
- `ready` and `terminating` are both true (the controller writes that only under
  publishNotReadyAddresses);
- managed slices belong to a Service without selector or of type ExternalName (the
  controller never writes those: they were written by hand);
- the address type is IPv6 (the suite's API server is single-stack);
- both annotations are set, to different values (the API server refuses that:
  validation.go `ValidateService`, "must match annotations[...topology-aware-hints] when
  both are specified");
- `trafficDistribution` is a value the API server refuses at admission (every version
  admits only PreferClose, PreferSameZone and PreferSameNode: validation.go
  `validateServiceTrafficDistribution`).

Adapted, and said so in the plan: an endpoint without nodeName runs on a node of its zone
(the controller always writes the Pod's node: under PreferSameNode that adds a node hint);
`ready` absent becomes a Pod that is not Ready (the controller counts only `ready: true`);
`serving` takes the value the Pod's readiness gives. None of these changes the controller's
inputs for the verdict (N, zones, the Service), so the vector's expected verdict is compared
too. Hand-written (unmanaged) slices are created as they are: the controller leaves them
alone. Vectors with the same Nodes share one plan (one node set) for their `auto`
Services, each in namespaces of its own; every other Service (trafficDistribution, or no
mechanism) goes into one plan with the Nodes of every vector, renamed per vector: the
controller's hints for those read no CPU, only each endpoint's own zone and node.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcluster.cluster import ZONE_LABEL
from tests.realcluster.plans import (
    SERVICE_NAME,
    ClusterPlan,
    Json,
    PodPlan,
    ServicePlan,
    managed,
)

VECTORS = Path(__file__).resolve().parents[1] / "conformance"
DEFAULT_PORT = 8080
TOPOLOGY_MODE = "service.kubernetes.io/topology-mode"
DEPRECATED_HINTS = "service.kubernetes.io/topology-aware-hints"
# What kube-apiserver admits (PreferSameZone and PreferSameNode need its
# PreferSameTrafficDistribution gate): pkg/apis/core/validation.
ADMITTED_DISTRIBUTIONS = frozenset({"PreferClose", "PreferSameZone", "PreferSameNode"})
_SPEC_KEYS = (
    "type",
    "internalTrafficPolicy",
    "publishNotReadyAddresses",
    "externalName",
    "sessionAffinity",
)


@dataclass
class VectorReading:
    """One vector as far as it can be built, and what was left out or adapted, and why."""

    name: str
    nodes: tuple[Json, ...]
    services: list[ServicePlan] = field(default_factory=list)
    slices: list[Json] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    # Services without slices (so without entries) that could not be created either.
    not_created: list[str] = field(default_factory=list)
    entries: int = 0
    expected_cluster: Mapping[str, Any] | None = None

    @property
    def built_entries(self) -> int:
        return self.entries - len(self.left_out)

    @property
    def version_sensitive(self) -> bool:
        """trafficDistribution values or node hints: what section 12's versions change."""
        return any(service.traffic_distribution for service in self.services)


def _node(item: Json) -> Json:
    metadata = item["metadata"]
    body: Json = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": metadata["name"], "labels": dict(metadata.get("labels", {}))},
        "status": item.get("status", {}),
    }
    if item.get("spec"):
        body["spec"] = item["spec"]
    return body


def _spec(spec: Mapping[str, Any]) -> Json:
    kept: Json = {key: spec[key] for key in _SPEC_KEYS if key in spec}
    if spec.get("clusterIP") == "None":
        kept["clusterIP"] = "None"
    if spec.get("type") in {"NodePort", "LoadBalancer"} and "externalTrafficPolicy" in spec:
        kept["externalTrafficPolicy"] = spec["externalTrafficPolicy"]
    ports = []
    for port in spec.get("ports") or []:
        target = port.get("targetPort", port["port"])
        ports.append(
            {
                key: value
                for key, value in (
                    ("name", port.get("name")),
                    ("protocol", port.get("protocol")),
                    ("port", port["port"]),
                    ("targetPort", target if isinstance(target, int) else DEFAULT_PORT),
                )
                if value is not None
            }
        )
    if ports:
        kept["ports"] = ports
    return kept


class _Reader:
    def __init__(self, name: str, items: list[Json]) -> None:
        self.name = name
        self.nodes = {i["metadata"]["name"]: i for i in items if i["kind"] == "Node"}
        self.zones = {
            name: (node["metadata"].get("labels", {}).get(ZONE_LABEL) or None)
            for name, node in self.nodes.items()
        }

    def node_for(self, endpoint: Json, placed: Counter[str]) -> tuple[str | None, str]:
        """The node a Pod for `endpoint` runs on, and what was adapted (or why none)."""
        zone = endpoint.get("zone")
        node = endpoint.get("nodeName")
        if node is not None:
            if node not in self.nodes:
                return None, f"node {node} is not in the vector"
            if self.zones[node] != zone:
                return (
                    None,
                    f"zone {zone!r} on node {node}, whose zone label is {self.zones[node]!r}",
                )
            return node, ""
        candidates = sorted(name for name, found in self.zones.items() if found == zone)
        if not candidates:
            return None, f"no nodeName, and no node carries zone {zone!r}"
        # Spread over the zone's nodes, as a scheduler would.
        chosen = min(candidates, key=lambda name: (placed[name], name))
        placed[chosen] += 1
        return chosen, "nodeName added"


def _pod(
    endpoint: Json, reader: _Reader, name: str, placed: Counter[str]
) -> tuple[PodPlan | None, str]:
    addresses = endpoint.get("addresses") or []
    if not addresses:
        return None, "an endpoint without address"
    conditions = endpoint.get("conditions", {})
    ready, serving, terminating = (
        conditions.get("ready"),
        conditions.get("serving"),
        conditions.get("terminating") is True,
    )
    if ready is True and terminating:
        return None, "ready and terminating at once"
    node, adapted = reader.node_for(endpoint, placed)
    if node is None:
        return None, adapted
    pod_ready = ready is True or (terminating and serving is not False)
    made = (pod_ready and not terminating, pod_ready, terminating)
    notes = [adapted] if adapted else []
    if made != (ready, serving, conditions.get("terminating")):
        notes.append(f"conditions {ready}/{serving}/{conditions.get('terminating')} -> {made}")
    return PodPlan(name, node, addresses[0], ready=pod_ready, terminating=terminating), "; ".join(
        notes
    )


def _admission_problems(item: Json) -> list[str]:
    """What the API server refuses of the Service itself (validation.go)."""
    problems = []
    annotations = item["metadata"].get("annotations", {})
    both = {TOPOLOGY_MODE, DEPRECATED_HINTS} <= set(annotations)
    if both and annotations[TOPOLOGY_MODE] != annotations[DEPRECATED_HINTS]:
        problems.append("the API server refuses topology-mode unequal to topology-aware-hints")
    distribution = item.get("spec", {}).get("trafficDistribution")
    if distribution is not None and distribution not in ADMITTED_DISTRIBUTIONS:
        problems.append(f"the API server refuses trafficDistribution {distribution!r}")
    return problems


@dataclass
class _Pods:
    """The Pods behind one Service's managed IPv4 endpoints, or why there can be none."""

    pods: list[PodPlan] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    adapted: list[str] = field(default_factory=list)


def _service_pods(
    name: str, own: list[Json], reader: _Reader, placed: Counter[str], *, selector: bool
) -> _Pods:
    found = _Pods()
    seen: set[str] = set()
    for endpoint_slice in own:
        if endpoint_slice["addressType"] != "IPv4" or not managed(endpoint_slice):
            continue
        if not selector:
            found.problems.append("managed slices of a Service the controller does not serve")
            break
        for endpoint in endpoint_slice.get("endpoints") or []:
            address = (endpoint.get("addresses") or [""])[0]
            if address in seen:
                found.problems.append(f"address {address} twice")
                continue
            seen.add(address)
            pod, note = _pod(endpoint, reader, f"{name}-{len(found.pods)}", placed)
            if pod is None:
                found.problems.append(note)
                continue
            found.pods.append(pod)
            if note:
                found.adapted.append(f"{address}: {note}")
    return found


def _slices_by_service(items: list[Json]) -> dict[tuple[str, str], list[Json]]:
    slices: dict[tuple[str, str], list[Json]] = {}
    for item in items:
        if item["kind"] == "EndpointSlice":
            namespace = item["metadata"].get("namespace", "default")
            service = item["metadata"].get("labels", {}).get(SERVICE_NAME, "")
            slices.setdefault((namespace, service), []).append(item)
    return slices


def read_vector(path: Path, index: int) -> VectorReading:
    """The vector at `path`, its namespaces prefixed `v<index>-`."""
    name = path.name.removesuffix(".snapshot.json")
    items: list[Json] = json.loads(path.read_text())["items"]
    expected = json.loads(path.with_name(f"{name}.expected.json").read_text())
    expected_entries = {
        (e["namespace"], e["name"], e["address_type"]): e for e in expected["services"]
    }
    reader = _Reader(name, items)
    reading = VectorReading(
        name,
        tuple(_node(node) for node in reader.nodes.values()),
        expected_cluster=expected["cluster"],
    )
    slices = _slices_by_service(items)
    placed: Counter[str] = Counter()
    for item in (item for item in items if item["kind"] == "Service"):
        namespace = item["metadata"].get("namespace", "default")
        service_name = item["metadata"]["name"]
        spec = item.get("spec", {})
        own = slices.get((namespace, service_name), [])
        types = sorted({s["addressType"] for s in own})
        reading.entries += len(types)
        where = f"{namespace}/{service_name}"
        if "IPv6" in types:
            reading.left_out.append(f"{where} IPv6: the suite's API server is single-stack")
        selector = bool(spec.get("selector")) and spec.get("type") != "ExternalName"
        found = _service_pods(service_name, own, reader, placed, selector=selector)
        problems = found.problems + _admission_problems(item)
        if spec.get("publishNotReadyAddresses") and found.pods:
            problems.append("publishNotReadyAddresses")
        if problems:
            why = "; ".join(sorted(set(problems)))
            if "IPv4" in types:
                reading.left_out.append(f"{where} IPv4: {why}")
            else:
                reading.not_created.append(f"{where} (no slices): {why}")
            continue
        logical = f"v{index}-{namespace}"
        reading.services.append(
            ServicePlan(
                namespace=logical,
                name=service_name,
                spec=_spec(spec),
                pods=tuple(found.pods),
                annotations=dict(item["metadata"].get("annotations", {})),
                traffic_distribution=spec.get("trafficDistribution"),
                selector=selector,
                expected=expected_entries.get((namespace, service_name, "IPv4")),
                adapted=tuple(found.adapted),
                vector=name,
            )
        )
        reading.slices += [
            _hand_written(endpoint_slice, logical)
            for endpoint_slice in own
            if endpoint_slice["addressType"] == "IPv4" and not managed(endpoint_slice)
        ]
    return reading


def _hand_written(item: Json, namespace: str) -> Json:
    metadata = item["metadata"]
    body = {
        key: item[key] for key in ("addressType", "endpoints", "ports") if item.get(key) is not None
    }
    body["endpoints"] = body.get("endpoints") or []
    body.update(
        apiVersion="discovery.k8s.io/v1",
        kind="EndpointSlice",
        metadata={
            "name": metadata["name"],
            "namespace": namespace,
            "labels": metadata.get("labels", {}),
        },
    )
    return body


def readings() -> list[VectorReading]:
    return [
        read_vector(path, index)
        for index, path in enumerate(sorted(VECTORS.glob("*.snapshot.json")))
    ]


def _node_key(reading: VectorReading) -> str:
    return json.dumps(
        sorted(reading.nodes, key=lambda node: node["metadata"]["name"]), sort_keys=True
    )


def reads_capacity(service: ServicePlan) -> bool:
    """The controller's output for the Service depends on the cluster's CPU: its `auto`
    annotation is on (section 1: the deprecated key decides when present)."""
    annotations = service.annotations
    value = annotations.get(DEPRECATED_HINTS, annotations.get(TOPOLOGY_MODE))
    return value in {"Auto", "auto"}


def _renamed(node: Json, prefix: str) -> Json:
    body: Json = json.loads(json.dumps(node))
    body["metadata"]["name"] = f"{prefix}-{node['metadata']['name']}"
    return body


def _moved(service: ServicePlan, prefix: str) -> ServicePlan:
    """The Service in the shared plan: its nodes, name and Pods named after its vector, in
    a namespace shared by the vectors (few namespaces keep the settle's Event reads few)."""
    pods = tuple(
        dataclasses.replace(pod, name=f"{prefix}-{pod.name}", node=f"{prefix}-{pod.node}")
        for pod in service.pods
    )
    return dataclasses.replace(
        service, namespace=_shared(service.namespace), name=f"{prefix}-{service.name}", pods=pods
    )


def _shared(namespace: str) -> str:
    return "free-" + namespace.split("-", 1)[1]


def _moved_slice(item: Json, prefix: str) -> Json:
    body: Json = json.loads(json.dumps(item))
    metadata = body["metadata"]
    metadata["name"] = f"{prefix}-{metadata['name']}"
    metadata["namespace"] = _shared(metadata["namespace"])
    labels = metadata.setdefault("labels", {})
    if SERVICE_NAME in labels:
        labels[SERVICE_NAME] = f"{prefix}-{labels[SERVICE_NAME]}"
    return body


def _of(item: Json, services: list[ServicePlan]) -> bool:
    """The hand-written slice belongs to one of `services`."""
    owner = (item["metadata"]["namespace"], item["metadata"].get("labels", {}).get(SERVICE_NAME))
    return owner in {(service.namespace, service.name) for service in services}


def vector_plans(chosen: list[VectorReading] | None = None) -> list[ClusterPlan]:
    """One plan per node set among the vectors' capacity-reading (`auto`) Services, and
    one for every other Service of every vector, whose hints no Node's CPU changes: that
    plan holds all the vectors' Nodes at once, each named after its vector."""
    groups: dict[str, list[VectorReading]] = {}
    free: list[tuple[VectorReading, list[ServicePlan]]] = []
    for reading in chosen if chosen is not None else readings():
        if any(reads_capacity(service) for service in reading.services):
            groups.setdefault(_node_key(reading), []).append(reading)
        others = [service for service in reading.services if not reads_capacity(service)]
        if others:
            free.append((reading, others))
    plans = []
    for members in groups.values():
        first = members[0]
        services = [s for member in members for s in member.services if reads_capacity(s)]
        plans.append(
            ClusterPlan(
                name=f"vectors-{first.name}"
                + (f"-and-{len(members) - 1}" if len(members) > 1 else ""),
                origin="tests/conformance: " + ", ".join(member.name for member in members),
                nodes=first.nodes,
                services=tuple(services),
                slices=tuple(
                    item for member in members for item in member.slices if _of(item, services)
                ),
                expected_cluster=first.expected_cluster,
            )
        )
    if free:
        prefixes = {reading.name: f"v{index}" for index, (reading, _) in enumerate(free)}
        plans.append(
            ClusterPlan(
                name="vectors-without-auto",
                origin="tests/conformance: " + ", ".join(reading.name for reading, _ in free),
                # The Nodes that run an endpoint: the only ones these Services' hints read.
                nodes=tuple(
                    _renamed(node, prefixes[reading.name])
                    for reading, services in free
                    for node in reading.nodes
                    if node["metadata"]["name"] in {pod.node for s in services for pod in s.pods}
                ),
                services=tuple(
                    _moved(service, prefixes[reading.name])
                    for reading, services in free
                    for service in services
                ),
                slices=tuple(
                    _moved_slice(item, prefixes[reading.name])
                    for reading, services in free
                    for item in reading.slices
                    if _of(item, services)
                ),
            )
        )
    return plans
