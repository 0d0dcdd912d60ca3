"""Tiny builders for engine inputs, so that engine tests read like tables.

CPU quantities go through `exporter.sources.decode.cpu_cores`, the parser the exporter uses.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

from exporter.engine import (
    ClusterCapacity,
    Endpoint,
    EndpointSlice,
    EntryVerdict,
    Node,
    Service,
    cluster_capacity,
)
from exporter.sources.decode import cpu_cores
from tests.results import result_of

_addresses = itertools.count(1)


def _next_address() -> str:
    number = next(_addresses)
    return f"10.{number // 65536 % 256}.{number // 256 % 256}.{number % 256}"


def node(
    name: str,
    zone: str | None,
    cpu: str | None = "4",
    *,
    ready: bool = True,
    control_plane: bool = False,
) -> Node:
    """A Node; `zone=None` means no zone label, `cpu=None` no allocatable CPU."""
    return Node(
        name=name,
        zone=zone,
        allocatable_cpu=cpu_cores(cpu) if cpu is not None else None,
        ready=ready,
        control_plane=control_plane,
    )


def zone_nodes(cpu_by_zone: Mapping[str, Sequence[str]]) -> list[Node]:
    """Ready worker nodes named `<zone>-<i>`, one per CPU quantity listed for the zone."""
    return [
        node(f"{zone}-{index}", zone, cpu)
        for zone, quantities in cpu_by_zone.items()
        for index, cpu in enumerate(quantities)
    ]


def equal_zones(count: int, cpu: str = "4") -> list[Node]:
    """One ready worker node per zone, `zone-0` to `zone-<count-1>`, all of equal CPU."""
    return zone_nodes({f"zone-{index}": [cpu] for index in range(count)})


def capacity(cpu_by_zone: Mapping[str, str]) -> ClusterCapacity:
    """The controller's view of a cluster with one node of the given CPU per zone."""
    return cluster_capacity(zone_nodes({zone: [cpu] for zone, cpu in cpu_by_zone.items()}))


def endpoint(
    zone: str | None = "zone-a",
    *,
    ready: bool | None = True,
    address: str | None = None,
    node_name: str | None = None,
    hints: Sequence[str] = (),
    node_hints: Sequence[str] = (),
) -> Endpoint:
    """An endpoint with a fresh unique address unless one is given."""
    return Endpoint(
        address=address if address is not None else _next_address(),
        ready=ready,
        zone=zone,
        node_name=node_name,
        zone_hints=tuple(hints),
        node_hints=tuple(node_hints),
    )


def hinted(zone: str, *, ready: bool | None = True, node_name: str | None = None) -> Endpoint:
    """A ready endpoint in `zone` hinted for its own zone, as the controller writes it."""
    return endpoint(zone, ready=ready, node_name=node_name, hints=(zone,))


_slice_names = itertools.count(1)


def endpoint_slice(
    *endpoints: Endpoint,
    service: str | None = "web",
    namespace: str = "default",
    address_type: str = "IPv4",
    managed: bool = True,
    name: str | None = None,
) -> EndpointSlice:
    """An EndpointSlice of `service` (None: no service-name label)."""
    return EndpointSlice(
        namespace=namespace,
        name=name if name is not None else f"{service or 'orphan'}-{next(_slice_names)}",
        service_name=service,
        address_type=address_type,
        managed=managed,
        endpoints=tuple(endpoints),
    )


def service(
    name: str = "web",
    namespace: str = "default",
    *,
    mode: str | None = None,
    deprecated: str | None = None,
    traffic_distribution: str | None = None,
    internal_traffic_policy: str | None = None,
    type_: str = "ClusterIP",
    cluster_ip: str | None = "10.96.0.10",
) -> Service:
    """A Service; `mode` is the topology-mode annotation, `deprecated` the old hints one."""
    return Service(
        namespace=namespace,
        name=name,
        deprecated_hints_annotation=deprecated,
        topology_mode_annotation=mode,
        traffic_distribution=traffic_distribution,
        internal_traffic_policy=internal_traffic_policy,
        type=type_,
        cluster_ip=cluster_ip,
    )


def auto_service(name: str = "web", namespace: str = "default") -> Service:
    return service(name, namespace, mode="Auto")


def verdict(nodes: Iterable[Node], svc: Service, slices: Iterable[EndpointSlice]) -> EntryVerdict:
    """The one verdict the pipeline gives for a single Service and address type."""
    evaluation = result_of(nodes, [svc], slices)
    assert len(evaluation.verdicts()) == 1, evaluation.verdicts()
    return evaluation.verdicts()[0]
