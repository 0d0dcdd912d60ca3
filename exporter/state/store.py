"""One store for every watched resource, recording which Services a change affects.

Sources (informers, a snapshot file) write into it from their own threads; the evaluator
takes the accumulated changes in one step under the lock, so bursts coalesce into one
re-evaluation. Every write, a whole relist (`replace_*`) included, is applied under one
hold of the lock: no reader ever sees a relist half applied.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from exporter.engine import EndpointSlice, Node, Service
from exporter.vocabulary import ControllerEvent, ObjectKey, Resource, ServiceKey


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed since the evaluator last looked, with the data it needs to re-evaluate."""

    nodes: tuple[Node, ...] | None  # all nodes, when any node changed
    services: Mapping[ServiceKey, tuple[Service | None, tuple[EndpointSlice, ...]]]
    events_changed: bool

    @property
    def empty(self) -> bool:
        return self.nodes is None and not self.services and not self.events_changed


@dataclass
class _Pending:
    nodes: bool = False
    services: set[ServiceKey] = field(default_factory=set)
    events: bool = False


class ClusterStore:
    """The exporter's copy of the watched objects, written by the sources, remembering which
    Services each write touched until the evaluator takes the changes."""

    def __init__(self, *, accepts_service: Callable[[str, str], bool] | None = None) -> None:
        # Services (and their slices and events) outside the namespaces or the shard this
        # exporter covers are never stored: cheaper than filtering at every scrape.
        self._accepts = accepts_service or (lambda _namespace, _name: True)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._nodes: dict[str, Node] = {}
        self._services: dict[ServiceKey, Service] = {}
        self._slices: dict[ObjectKey, EndpointSlice] = {}
        self._slices_of: dict[ServiceKey, dict[str, EndpointSlice]] = {}
        self._events: dict[str, ControllerEvent] = {}
        self._pending = _Pending()

    # -- writers -----------------------------------------------------------------------

    def _mark_service(self, key: ServiceKey) -> None:
        # The writer that marks wakes the evaluator once, not once per Service (a relist
        # marks thousands).
        self._pending.services.add(key)

    def _mark_nodes(self) -> None:
        self._pending.nodes = True
        self._changed.notify_all()

    def upsert_node(self, node: Node) -> None:
        with self._lock:
            if self._nodes.get(node.name) != node:
                self._nodes[node.name] = node
                self._mark_nodes()

    def delete_node(self, name: str) -> None:
        with self._lock:
            if self._nodes.pop(name, None) is not None:
                self._mark_nodes()

    def replace_nodes(self, nodes: Iterable[Node]) -> None:
        fresh = {node.name: node for node in nodes}
        with self._lock:
            if fresh != self._nodes:
                self._nodes = fresh
                self._mark_nodes()

    def upsert_service(self, service: Service) -> None:
        if not self._accepts(service.namespace, service.name):
            return
        with self._lock:
            if self._services.get(service.key) != service:
                self._services[service.key] = service
                self._mark_service(service.key)
                self._changed.notify_all()

    def delete_service(self, namespace: str, name: str) -> None:
        with self._lock:
            if self._services.pop((namespace, name), None) is not None:
                self._mark_service((namespace, name))
                self._changed.notify_all()

    def replace_services(self, services: Iterable[Service]) -> None:
        fresh = {
            service.key: service
            for service in services
            if self._accepts(service.namespace, service.name)
        }
        with self._lock:
            for key in self._services.keys() | fresh.keys():
                if self._services.get(key) != fresh.get(key):
                    self._mark_service(key)
            self._services = fresh
            self._changed.notify_all()

    def _slice_owner(self, endpoint_slice: EndpointSlice) -> ServiceKey | None:
        if endpoint_slice.service_name is None:
            return None
        if not self._accepts(endpoint_slice.namespace, endpoint_slice.service_name):
            return None
        return (endpoint_slice.namespace, endpoint_slice.service_name)

    def _remove_slice_locked(self, key: ObjectKey) -> None:
        old = self._slices.pop(key, None)
        if old is None:
            return
        owner = self._slice_owner(old)
        if owner is not None:
            siblings = self._slices_of.get(owner, {})
            siblings.pop(old.name, None)
            if not siblings:
                self._slices_of.pop(owner, None)
            self._mark_service(owner)

    def _upsert_slice_locked(self, endpoint_slice: EndpointSlice) -> None:
        owner = self._slice_owner(endpoint_slice)
        key = ObjectKey((endpoint_slice.namespace, endpoint_slice.name))
        if self._slices.get(key) == endpoint_slice:
            return
        # The service-name label can change: drop the slice from its old owner first.
        self._remove_slice_locked(key)
        if owner is None:
            return
        self._slices[key] = endpoint_slice
        self._slices_of.setdefault(owner, {})[endpoint_slice.name] = endpoint_slice
        self._mark_service(owner)

    def upsert_endpoint_slice(self, endpoint_slice: EndpointSlice) -> None:
        with self._lock:
            self._upsert_slice_locked(endpoint_slice)
            self._changed.notify_all()

    def delete_endpoint_slice(self, namespace: str, name: str) -> None:
        with self._lock:
            self._remove_slice_locked(ObjectKey((namespace, name)))
            self._changed.notify_all()

    def replace_endpoint_slices(self, slices: Iterable[EndpointSlice]) -> None:
        fresh = {
            ObjectKey((endpoint_slice.namespace, endpoint_slice.name)): endpoint_slice
            for endpoint_slice in slices
            if self._slice_owner(endpoint_slice) is not None
        }
        with self._lock:
            for key in self._slices.keys() - fresh.keys():
                self._remove_slice_locked(key)
            for endpoint_slice in fresh.values():
                self._upsert_slice_locked(endpoint_slice)
            self._changed.notify_all()

    def _upsert_event_locked(self, event: ControllerEvent) -> None:
        if self._events.get(event.uid) != event:
            self._events[event.uid] = event
            self._pending.events = True
            self._changed.notify_all()

    def upsert_event(self, event: ControllerEvent) -> None:
        if not self._accepts(event.namespace, event.service):
            return
        with self._lock:
            self._upsert_event_locked(event)

    def delete_event(self, uid: str) -> None:
        # A deleted Event (they expire after an hour) does not undo its occurrence: the
        # last-seen timestamp and the counter keep it. Forget it only to bound memory.
        with self._lock:
            self._events.pop(uid, None)

    def replace_events(self, events: Iterable[ControllerEvent]) -> None:
        # Events missing from a relist are kept, as a deleted Event is (see delete_event).
        accepted = [event for event in events if self._accepts(event.namespace, event.service)]
        with self._lock:
            for event in accepted:
                self._upsert_event_locked(event)

    # -- readers -----------------------------------------------------------------------

    def counts(self) -> dict[Resource, int]:
        with self._lock:
            return {
                Resource.NODES: len(self._nodes),
                Resource.SERVICES: len(self._services),
                Resource.ENDPOINT_SLICES: len(self._slices),
                Resource.EVENTS: len(self._events),
            }

    def events(self) -> tuple[ControllerEvent, ...]:
        with self._lock:
            return tuple(self._events.values())

    def wait_for_changes(self, timeout: float) -> bool:
        """Block until something changed (True) or the timeout passed (False)."""
        with self._lock:
            return self._changed.wait_for(self._has_pending, timeout)

    def _has_pending(self) -> bool:
        pending = self._pending
        return pending.nodes or bool(pending.services) or pending.events

    def _slices_of_locked(self, key: ServiceKey) -> tuple[EndpointSlice, ...]:
        # By slice name: the order every step evaluates a Service's slices in.
        return tuple(
            endpoint_slice for _, endpoint_slice in sorted(self._slices_of.get(key, {}).items())
        )

    def slices_of(self, key: ServiceKey) -> tuple[EndpointSlice, ...]:
        """The Service's slices now, in the order `take_changes` hands them over."""
        with self._lock:
            return self._slices_of_locked(key)

    def take_changes(self) -> Changes:
        """Hand over what changed since the last call and reset the record."""
        with self._lock:
            pending, self._pending = self._pending, _Pending()
            services = {
                key: (self._services.get(key), self._slices_of_locked(key))
                for key in pending.services
            }
            nodes = tuple(self._nodes.values()) if pending.nodes else None
            return Changes(nodes=nodes, services=services, events_changed=pending.events)
