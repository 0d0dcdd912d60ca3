"""The four informers of a live exporter, wired to the store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.decode import (
    RawEndpointSlice,
    RawEvent,
    RawNode,
    RawService,
    controller_event_from_raw,
    endpoint_slice_from_raw,
    node_from_raw,
    service_from_raw,
)
from exporter.engine import EndpointSlice, Node, Service
from exporter.sources.informer import ResourceSpec
from exporter.store import ClusterStore, ControllerEvent

NODES: ResourceSpec[RawNode, Node] = ResourceSpec("nodes", "/api/v1/nodes", RawNode, node_from_raw)
SERVICES: ResourceSpec[RawService, Service] = ResourceSpec(
    "services", "/api/v1/services", RawService, service_from_raw
)
ENDPOINT_SLICES: ResourceSpec[RawEndpointSlice, EndpointSlice] = ResourceSpec(
    "endpointslices",
    "/apis/discovery.k8s.io/v1/endpointslices",
    RawEndpointSlice,
    endpoint_slice_from_raw,
)
# Field selectors cannot OR two reasons; selecting Service events server-side and the two
# hint reasons client-side keeps one watch.
EVENTS: ResourceSpec[RawEvent, ControllerEvent] = ResourceSpec(
    "events",
    "/api/v1/events",
    RawEvent,
    controller_event_from_raw,
    field_selector="involvedObject.kind=Service",
    required=False,
)


@dataclass(frozen=True, slots=True)
class NodeSink:
    store: ClusterStore

    def replace(self, objects: list[Node]) -> None:
        self.store.replace_nodes(objects)

    def upsert(self, obj: Node) -> None:
        self.store.upsert_node(obj)

    def delete(self, namespace: str, name: str, uid: str) -> None:  # noqa: ARG002
        self.store.delete_node(name)


@dataclass(frozen=True, slots=True)
class ServiceSink:
    store: ClusterStore

    def replace(self, objects: list[Service]) -> None:
        self.store.replace_services(objects)

    def upsert(self, obj: Service) -> None:
        self.store.upsert_service(obj)

    def delete(self, namespace: str, name: str, uid: str) -> None:  # noqa: ARG002
        self.store.delete_service(namespace, name)


@dataclass(frozen=True, slots=True)
class EndpointSliceSink:
    store: ClusterStore

    def replace(self, objects: list[EndpointSlice]) -> None:
        self.store.replace_endpoint_slices(objects)

    def upsert(self, obj: EndpointSlice) -> None:
        self.store.upsert_endpoint_slice(obj)

    def delete(self, namespace: str, name: str, uid: str) -> None:  # noqa: ARG002
        self.store.delete_endpoint_slice(namespace, name)


@dataclass(frozen=True, slots=True)
class EventSink:
    store: ClusterStore

    def replace(self, objects: list[ControllerEvent]) -> None:
        self.store.replace_events(objects)

    def upsert(self, obj: ControllerEvent) -> None:
        self.store.upsert_event(obj)

    def delete(self, namespace: str, name: str, uid: str) -> None:
        self.store.delete_event(uid or f"{namespace}/{name}")


def sinks(store: ClusterStore) -> dict[str, Any]:
    return {
        "nodes": NodeSink(store),
        "services": ServiceSink(store),
        "endpointslices": EndpointSliceSink(store),
        "events": EventSink(store),
    }
