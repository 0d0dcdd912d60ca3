"""Kubernetes JSON to the engine's slim types.

The raw shapes below name only the fields the rules read; msgspec skips the rest of
each object while decoding, so neither snapshot files nor watch payloads ever build
the `kubernetes` client's models. Both sources use this one decoder.
"""

from __future__ import annotations

import functools
import sys
from datetime import datetime
from fractions import Fraction
from typing import Any, Generic, TypeVar

import msgspec
from kubernetes.utils.quantity import parse_quantity

from exporter.engine.model import (
    CONTROL_PLANE_LABELS,
    DEPRECATED_HINTS_ANNOTATION,
    ENDPOINTSLICE_CONTROLLER,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    TOPOLOGY_MODE_ANNOTATION,
    ZONE_LABEL,
    Endpoint,
    EndpointSlice,
    Node,
    Service,
)
from exporter.engine.reasons import HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT
from exporter.store import ControllerEvent

_Item = TypeVar("_Item")


class InvalidObjectError(ValueError):
    """An object of a kind we read lacks a field the rules need, or has the wrong type."""

    def __init__(self, kind: str, name: str, problem: str) -> None:
        super().__init__(f"{kind} {name}: {problem}")
        self.kind = kind
        self.name = name
        self.problem = problem


class _Meta(msgspec.Struct):
    name: str
    namespace: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    resourceVersion: str = ""  # noqa: N815 - the API's spelling
    uid: str = ""
    creationTimestamp: str | None = None  # noqa: N815


class _Condition(msgspec.Struct):
    type: str
    status: str = ""


class _NodeStatus(msgspec.Struct):
    allocatable: dict[str, str | float] | None = None
    conditions: list[_Condition] | None = None


class RawNode(msgspec.Struct):
    metadata: _Meta
    status: _NodeStatus | None = None
    kind: str = ""  # set in watch events, absent from LIST items


class _ServiceSpec(msgspec.Struct):
    type: str = "ClusterIP"
    clusterIP: str | None = None  # noqa: N815
    trafficDistribution: str | None = None  # noqa: N815
    internalTrafficPolicy: str | None = None  # noqa: N815


class RawService(msgspec.Struct):
    metadata: _Meta
    spec: _ServiceSpec
    kind: str = ""  # set in watch events, absent from LIST items


class _Named(msgspec.Struct):
    name: str


class _Hints(msgspec.Struct):
    forZones: list[_Named] | None = None  # noqa: N815
    forNodes: list[_Named] | None = None  # noqa: N815


class _EndpointConditions(msgspec.Struct):
    ready: bool | None = None


class _Endpoint(msgspec.Struct):
    addresses: list[str]
    conditions: _EndpointConditions | None = None
    zone: str | None = None
    nodeName: str | None = None  # noqa: N815
    hints: _Hints | None = None


class RawEndpointSlice(msgspec.Struct):
    metadata: _Meta
    addressType: str  # noqa: N815
    endpoints: list[_Endpoint] | None = None
    kind: str = ""  # set in watch events, absent from LIST items


class _InvolvedObject(msgspec.Struct):
    kind: str = ""
    namespace: str = ""
    name: str = ""


class RawEvent(msgspec.Struct):
    metadata: _Meta
    involvedObject: _InvolvedObject  # noqa: N815
    reason: str = ""
    message: str = ""
    type: str = ""
    count: int | None = None
    lastTimestamp: str | None = None  # noqa: N815
    eventTime: str | None = None  # noqa: N815
    firstTimestamp: str | None = None  # noqa: N815
    kind: str = ""  # set in watch events, absent from LIST items


class ListMeta(msgspec.Struct):
    resourceVersion: str = ""  # noqa: N815
    continue_: str | None = msgspec.field(default=None, name="continue")


class ListPage(msgspec.Struct, Generic[_Item]):
    """One page of a LIST response; items are decoded straight into the raw shapes."""

    metadata: ListMeta
    items: list[_Item] | None = None


class WatchEvent(msgspec.Struct):
    """One line of a watch stream; the object is decoded once its type is known."""

    type: str
    object: msgspec.Raw


class _EventMeta(msgspec.Struct):
    # BOOKMARK objects carry only a resourceVersion: nothing here may be required.
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""  # noqa: N815


class ObjectMeta(msgspec.Struct):
    """Just enough of any watch event's object to delete it and follow resourceVersions."""

    metadata: _EventMeta = msgspec.field(default_factory=_EventMeta)
    kind: str = ""  # set in watch events, absent from LIST items


class Status(msgspec.Struct):
    code: int = 0
    reason: str = ""
    message: str = ""


_Raw = TypeVar("_Raw", RawNode, RawService, RawEndpointSlice, RawEvent)

_intern = sys.intern


# No machine has 10^15 cores; the bound keeps Fraction() from building a 10^999999999
# integer out of a hostile or mistyped quantity such as "1e999999999".
_MAX_CPU_EXPONENT = 15


@functools.lru_cache(maxsize=4096)
def cpu_cores(quantity: str | float) -> Fraction:
    """Allocatable CPU as exact cores, parsed by the client library's quantity helper."""
    parsed = parse_quantity(quantity)  # type: ignore[no-untyped-call]
    if not parsed.is_finite() or parsed.adjusted() > _MAX_CPU_EXPONENT:
        raise ValueError(f"CPU quantity {quantity!r} is out of range")
    return Fraction(parsed)


def object_name(item: Any) -> str:
    """namespace/name (or name) of a raw object, for error messages, whatever its shape."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(metadata, dict):
        return "<unnamed>"
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str):
        return "<unnamed>"
    return f"{namespace}/{name}" if isinstance(namespace, str) and namespace else name


def convert_raw(kind: str, item: Any, raw_type: type[_Raw]) -> _Raw:
    """Validate a parsed object against its raw shape, naming the object on failure."""
    try:
        return msgspec.convert(item, raw_type)
    except msgspec.ValidationError as error:
        raise InvalidObjectError(kind, object_name(item), str(error)) from None


def node_from_raw(raw: RawNode) -> Node:
    labels = raw.metadata.labels or {}
    status = raw.status or _NodeStatus()
    cpu_quantity = (status.allocatable or {}).get("cpu")
    try:
        cpu = cpu_cores(cpu_quantity) if cpu_quantity is not None else None
    except ValueError:
        raise InvalidObjectError(
            "Node", raw.metadata.name, f"status.allocatable.cpu {cpu_quantity!r} is not a quantity"
        ) from None
    zone = labels.get(ZONE_LABEL)
    return Node(
        name=_intern(raw.metadata.name),
        zone=_intern(zone) if zone is not None else None,
        allocatable_cpu=cpu,
        ready=any(
            condition.type == "Ready" and condition.status == "True"
            for condition in status.conditions or ()
        ),
        control_plane=any(label in labels for label in CONTROL_PLANE_LABELS),
    )


def _require_namespace(kind: str, metadata: _Meta) -> str:
    if not metadata.namespace:
        raise InvalidObjectError(kind, metadata.name, "metadata.namespace is missing")
    return metadata.namespace


def service_from_raw(raw: RawService) -> Service:
    annotations = raw.metadata.annotations or {}
    return Service(
        namespace=_intern(_require_namespace("Service", raw.metadata)),
        name=raw.metadata.name,
        deprecated_hints_annotation=annotations.get(DEPRECATED_HINTS_ANNOTATION),
        topology_mode_annotation=annotations.get(TOPOLOGY_MODE_ANNOTATION),
        traffic_distribution=raw.spec.trafficDistribution,
        internal_traffic_policy=raw.spec.internalTrafficPolicy,
        type=raw.spec.type,
        cluster_ip=raw.spec.clusterIP,
    )


def _names(named: list[_Named] | None) -> tuple[str, ...]:
    return tuple(_intern(item.name) for item in named) if named else ()


def _endpoint_from_raw(raw: _Endpoint) -> Endpoint:
    hints = raw.hints
    return Endpoint(
        address=raw.addresses[0] if raw.addresses else None,
        ready=raw.conditions.ready if raw.conditions is not None else None,
        zone=_intern(raw.zone) if raw.zone is not None else None,
        node_name=_intern(raw.nodeName) if raw.nodeName is not None else None,
        zone_hints=_names(hints.forZones) if hints is not None else (),
        node_hints=_names(hints.forNodes) if hints is not None else (),
    )


def endpoint_slice_from_raw(raw: RawEndpointSlice) -> EndpointSlice:
    labels = raw.metadata.labels or {}
    service_name = labels.get(SERVICE_NAME_LABEL)
    return EndpointSlice(
        namespace=_intern(_require_namespace("EndpointSlice", raw.metadata)),
        name=raw.metadata.name,
        service_name=service_name,
        address_type=_intern(raw.addressType),
        managed=labels.get(MANAGED_BY_LABEL) == ENDPOINTSLICE_CONTROLLER,
        endpoints=tuple(_endpoint_from_raw(endpoint) for endpoint in raw.endpoints or ()),
    )


def decode_node(item: Any) -> Node:
    return node_from_raw(convert_raw("Node", item, RawNode))


def decode_service(item: Any) -> Service:
    return service_from_raw(convert_raw("Service", item, RawService))


def decode_endpoint_slice(item: Any) -> EndpointSlice:
    return endpoint_slice_from_raw(convert_raw("EndpointSlice", item, RawEndpointSlice))


CONTROLLER_EVENT_REASONS = frozenset({HINTS_DISABLED_EVENT, HINTS_ENABLED_EVENT})


def _unix_time(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


def controller_event_from_raw(raw: RawEvent) -> ControllerEvent | None:
    """The EndpointSlice controller's hint events on Services; None for any other event."""
    involved = raw.involvedObject
    if involved.kind != "Service" or raw.reason not in CONTROLLER_EVENT_REASONS:
        return None
    timestamp = (
        _unix_time(raw.lastTimestamp)
        or _unix_time(raw.eventTime)
        or _unix_time(raw.firstTimestamp)
        or _unix_time(raw.metadata.creationTimestamp)
    )
    return ControllerEvent(
        uid=raw.metadata.uid or f"{raw.metadata.namespace}/{raw.metadata.name}",
        namespace=involved.namespace or raw.metadata.namespace,
        service=involved.name,
        reason=raw.reason,
        count=max(raw.count or 1, 1),
        timestamp=timestamp,
    )
