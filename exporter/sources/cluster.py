"""The four informers of a live exporter, wired to the store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from exporter.engine import EndpointSlice, Node, Service
from exporter.sources.controller_events import controller_event_from_raw, is_controller_event_json
from exporter.sources.decode import (
    RawEndpointSlice,
    RawEvent,
    RawNode,
    RawService,
    endpoint_slice_from_raw,
    node_from_raw,
    service_from_raw,
)
from exporter.sources.spec import ResourceSpec
from exporter.state.store import ClusterStore
from exporter.vocabulary import OPTIONAL_RESOURCES, ControllerEvent, Resource

_Slim = TypeVar("_Slim")

NODES: ResourceSpec[RawNode, Node] = ResourceSpec(
    Resource.NODES, "Node", "/api/v1/nodes", RawNode, node_from_raw
)
SERVICES: ResourceSpec[RawService, Service] = ResourceSpec(
    Resource.SERVICES, "Service", "/api/v1/services", RawService, service_from_raw
)
ENDPOINT_SLICES: ResourceSpec[RawEndpointSlice, EndpointSlice] = ResourceSpec(
    Resource.ENDPOINT_SLICES,
    "EndpointSlice",
    "/apis/discovery.k8s.io/v1/endpointslices",
    RawEndpointSlice,
    endpoint_slice_from_raw,
)
# Field selectors cannot OR two reasons; selecting Service events server-side and the two
# hint reasons client-side keeps one watch.
EVENTS: ResourceSpec[RawEvent, ControllerEvent] = ResourceSpec(
    Resource.EVENTS,
    "Event",
    "/api/v1/events",
    RawEvent,
    controller_event_from_raw,
    field_selector="involvedObject.kind=Service",
    required=Resource.EVENTS not in OPTIONAL_RESOURCES,
    relevant=is_controller_event_json,
)


@dataclass(frozen=True, slots=True)
class StoreSink(Generic[_Slim]):
    """What an informer calls, bound to the store's methods for one resource."""

    replace: Callable[[list[_Slim]], None]
    upsert: Callable[[_Slim], None]
    # (namespace, name, uid): each resource keys its objects differently.
    delete: Callable[[str, str, str], None]


def sinks(store: ClusterStore) -> dict[Resource, StoreSink[Any]]:
    return {
        Resource.NODES: StoreSink(
            store.replace_nodes,
            store.upsert_node,
            lambda _namespace, name, _uid: store.delete_node(name),
        ),
        Resource.SERVICES: StoreSink(
            store.replace_services,
            store.upsert_service,
            lambda namespace, name, _uid: store.delete_service(namespace, name),
        ),
        Resource.ENDPOINT_SLICES: StoreSink(
            store.replace_endpoint_slices,
            store.upsert_endpoint_slice,
            lambda namespace, name, _uid: store.delete_endpoint_slice(namespace, name),
        ),
        Resource.EVENTS: StoreSink(
            store.replace_events,
            store.upsert_event,
            lambda namespace, name, uid: store.delete_event(uid or f"{namespace}/{name}"),
        ),
    }
