"""The cluster a scenario changes (behaviour section 11): lose a zone, lose nodes, scale a Service.

A scenario is a list of steps; each step maps the engine's inputs (`Cluster`) to the inputs
of the changed cluster, on which the ordinary rules then run (written into the store and
stepped by the evaluator: exporter.run.oneshot).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from exporter.engine.evaluate import counted_endpoints
from exporter.engine.model import Endpoint, EndpointSlice, Node, Service
from exporter.engine.profile import ASSUMED, Profile

# The largest endpoint count a scenario takes (--scale N, a rollout's surge and
# unavailable): a scenario builds each endpoint and judges each count of a rollout, so
# 100,000,000 took minutes and gigabytes, or ran out of memory. 100,000 answers in a few
# seconds and is far above the endpoint count of any one Service in practice.
MAX_SCENARIO_COUNT = 100_000


class ScenarioError(ValueError):
    """A scenario that names something the cluster does not have, or cannot be applied."""


@dataclass(frozen=True, slots=True)
class Cluster:
    """The engine's inputs, as a scenario sees them."""

    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    slices: tuple[EndpointSlice, ...]
    # behaviour §12: the Kubernetes versions and gates, before and after alike.
    profile: Profile = ASSUMED


@dataclass(frozen=True, slots=True)
class LoseZone:
    """A scenario step: every node of one zone is gone."""

    zone: str

    def describe(self) -> dict[str, str]:
        return {"lose-zone": self.zone}


@dataclass(frozen=True, slots=True)
class LoseNodes:
    """A scenario step: the named nodes are gone."""

    names: tuple[str, ...]

    def describe(self) -> dict[str, str]:
        return {"lose-node": ",".join(self.names)}


@dataclass(frozen=True, slots=True)
class Scale:
    """A scenario step: one Service runs this many ready endpoints."""

    namespace: str
    name: str
    endpoints: int

    def describe(self) -> dict[str, str]:
        return {"scale": f"{self.namespace}/{self.name}={self.endpoints}"}


ScenarioStep = LoseZone | LoseNodes | Scale


def without_endpoints(
    slices: Iterable[EndpointSlice], gone: Callable[[Endpoint], bool]
) -> tuple[EndpointSlice, ...]:
    """The slices minus the endpoints `gone` selects; untouched slices keep their identity."""
    kept: list[EndpointSlice] = []
    for endpoint_slice in slices:
        endpoints = tuple(e for e in endpoint_slice.endpoints if not gone(e))
        if len(endpoints) != len(endpoint_slice.endpoints):
            endpoint_slice = replace(endpoint_slice, endpoints=endpoints)  # noqa: PLW2901
        kept.append(endpoint_slice)
    return tuple(kept)


def lose_zone(cluster: Cluster, zone: str) -> Cluster:
    """Every Node of the zone goes, with every endpoint in the zone or on those Nodes."""
    if not any(node.zone == zone for node in cluster.nodes):
        known = sorted({node.zone for node in cluster.nodes if node.zone})
        raise ScenarioError(f"no node has zone {zone!r} (zones: {', '.join(known) or 'none'})")
    removed = {node.name for node in cluster.nodes if node.zone == zone}
    return replace(
        cluster,
        nodes=tuple(node for node in cluster.nodes if node.name not in removed),
        slices=without_endpoints(
            cluster.slices,
            lambda endpoint: endpoint.zone == zone or endpoint.node_name in removed,
        ),
    )


def lose_nodes(cluster: Cluster, names: Sequence[str]) -> Cluster:
    """The Nodes go, with every endpoint whose nodeName names one of them."""
    known = {node.name for node in cluster.nodes}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ScenarioError(f"no such node: {', '.join(unknown)}")
    removed = set(names)
    return replace(
        cluster,
        nodes=tuple(node for node in cluster.nodes if node.name not in removed),
        slices=without_endpoints(cluster.slices, lambda endpoint: endpoint.node_name in removed),
    )


def _zone_key(endpoint: Endpoint) -> str:
    return endpoint.zone or ""


def _scale_down(slices: Sequence[EndpointSlice], target: int) -> tuple[EndpointSlice, ...]:
    """Remove ready endpoints one at a time from the zone that has most (ties: first name)."""
    counted = counted_endpoints(slices)
    by_zone = Counter(_zone_key(endpoint) for endpoint in counted)
    remove_per_zone: Counter[str] = Counter()
    for _ in range(len(counted) - target):
        zone = min(by_zone, key=lambda z: (-by_zone[z], z))
        by_zone[zone] -= 1
        remove_per_zone[zone] += 1
    # Within a zone, the last endpoints in List order go first.
    doomed: set[int] = set()
    for endpoint in reversed(counted):
        zone = _zone_key(endpoint)
        if remove_per_zone[zone] > 0:
            remove_per_zone[zone] -= 1
            doomed.add(id(endpoint))
    return without_endpoints(slices, lambda endpoint: id(endpoint) in doomed)


def _scale_up(
    slices: Sequence[EndpointSlice], target: int, nodes: Sequence[Node], service: Service
) -> tuple[EndpointSlice, ...]:
    """Add ready endpoints one at a time to the zone with fewest (ties: first name)."""
    nodes_by_zone: dict[str, list[str]] = {}
    for node in nodes:
        if node.ready and not node.control_plane and node.zone:
            nodes_by_zone.setdefault(node.zone, []).append(node.name)
    if not nodes_by_zone:
        raise ScenarioError(
            f"cannot scale {service.namespace}/{service.name} up: no Ready node has a zone"
        )
    counted = counted_endpoints(slices)
    by_zone = Counter(dict.fromkeys(nodes_by_zone, 0))
    by_zone.update(e.zone for e in counted if e.zone in nodes_by_zone)
    added: list[Endpoint] = []
    for index in range(target - len(counted)):
        zone = min(by_zone, key=lambda z: (by_zone[z], z))
        zone_nodes = sorted(nodes_by_zone[zone])
        node_name = zone_nodes[by_zone[zone] % len(zone_nodes)]
        by_zone[zone] += 1
        added.append(
            Endpoint(address=f"what-if-{index}", ready=True, zone=zone, node_name=node_name)
        )
    managed = next((i for i, s in enumerate(slices) if s.managed), None)
    if managed is None:
        template = slices[0]
        extra = EndpointSlice(
            namespace=template.namespace,
            name=f"{template.name}-what-if",
            service_name=template.service_name,
            address_type=template.address_type,
            managed=True,
            endpoints=tuple(added),
        )
        return (*slices, extra)
    grown = replace(slices[managed], endpoints=(*slices[managed].endpoints, *added))
    return (*slices[:managed], grown, *slices[managed + 1 :])


def scale(cluster: Cluster, namespace: str, name: str, endpoints: int) -> Cluster:
    """Set the Service's N to `endpoints` for each of its address types."""
    service = next((s for s in cluster.services if s.key == (namespace, name)), None)
    if service is None:
        raise ScenarioError(f"no such Service: {namespace}/{name}")
    if endpoints < 0:
        raise ScenarioError(f"cannot scale {namespace}/{name} to {endpoints} endpoints")
    own = [s for s in cluster.slices if (s.namespace, s.service_name) == service.key]
    if not own:
        raise ScenarioError(f"Service {namespace}/{name} has no EndpointSlices to scale")
    by_type: dict[str, list[EndpointSlice]] = {}
    for endpoint_slice in own:
        by_type.setdefault(endpoint_slice.address_type, []).append(endpoint_slice)
    replaced: dict[str, tuple[EndpointSlice, ...]] = {}
    for address_type, typed in by_type.items():
        current = len(counted_endpoints(typed))
        if endpoints < current:
            replaced[address_type] = _scale_down(typed, endpoints)
        elif endpoints > current:
            replaced[address_type] = _scale_up(typed, endpoints, cluster.nodes, service)
    if not replaced:
        return cluster
    others = tuple(
        s
        for s in cluster.slices
        if not ((s.namespace, s.service_name) == service.key and s.address_type in replaced)
    )
    return replace(cluster, slices=others + tuple(s for typed in replaced.values() for s in typed))


def apply_step(cluster: Cluster, step: ScenarioStep) -> Cluster:
    match step:
        case LoseZone(zone):
            return lose_zone(cluster, zone)
        case LoseNodes(names):
            return lose_nodes(cluster, names)
        case Scale(namespace, name, endpoints):
            return scale(cluster, namespace, name, endpoints)


def apply_scenario(cluster: Cluster, steps: Iterable[ScenarioStep]) -> Cluster:
    """The cluster after every step, applied in the order given."""
    for step in steps:
        cluster = apply_step(cluster, step)
    return cluster
