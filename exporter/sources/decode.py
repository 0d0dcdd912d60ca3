"""Kubernetes JSON to the engine's slim types, with every value bounded.

The raw shapes below name only the fields the rules read; msgspec skips the rest of
each object while decoding, so neither snapshot files nor watch payloads ever build
the `kubernetes` client's models. Both sources use this one decoder.

Every string the shapes keep has a length bound and every number a range, taken from
what the API server itself allows (names of at most 253 characters, label keys of 317,
annotations of 256 KiB, int32 counts), so that one hostile or corrupt object costs
bounded time and memory; CPU quantities go through the bounded parser of
`exporter.sources.quantity`. Whatever is wrong with an object (a wrong type, a value out of
range, a string that is not UTF-8, nesting deeper than the interpreter allows) is one
`InvalidObjectError` naming it: the informers count it and skip the object, the CLI
prints it as one line.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from fractions import Fraction
from typing import Annotated, Any, ClassVar, Generic, TypeVar

import msgspec

from exporter.engine.model import (
    CONTROL_PLANE_LABELS,
    DEPRECATED_HINTS_ANNOTATION,
    ENDPOINTSLICE_CONTROLLER,
    ISTIO_TRAFFIC_DISTRIBUTION_ANNOTATION,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    TOPOLOGY_MODE_ANNOTATION,
    ZONE_LABEL,
    Endpoint,
    EndpointSlice,
    Node,
    Service,
)
from exporter.sources.quantity import parse_quantity

_Item = TypeVar("_Item")
_T = TypeVar("_T")

# Bounds, from the API server's validation: object names and most identifiers are DNS
# subdomains (253); a qualified label or annotation key is a 253-character prefix, a
# slash and a 63-character name; all annotations of an object total 256 KiB. Event names
# and texts are looser upstream, so they get looser bounds here.
MAX_NAME = 253
MAX_KEY = 317
MAX_ANNOTATION = 256 * 1024
MAX_TEXT = 64 * 1024
MAX_INT32 = 2**31 - 1

Name = Annotated[str, msgspec.Meta(max_length=MAX_NAME)]
_Key = Annotated[str, msgspec.Meta(max_length=MAX_KEY)]
_Annotation = Annotated[str, msgspec.Meta(max_length=MAX_ANNOTATION)]
_Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
_Int32 = Annotated[int, msgspec.Meta(ge=-MAX_INT32 - 1, le=MAX_INT32)]
# A quantity as JSON writes it: a string, or a number (which the API server also accepts).
_QuantityValue = Annotated[str, msgspec.Meta(max_length=64)] | float


class InvalidObjectError(ValueError):
    """An object of a kind we read lacks a field the rules need, or has the wrong type."""

    def __init__(self, kind: str, name: str, problem: str) -> None:
        super().__init__(f"{kind} {name}: {problem}")
        self.kind = kind
        self.name = name
        self.problem = problem


# Raw shapes are acyclic, so gc=False keeps the cyclic collector away from them.
class _Meta(msgspec.Struct, gc=False):
    name: Name
    namespace: Name = ""
    labels: dict[_Key, Name] | None = None
    annotations: dict[_Key, _Annotation] | None = None
    resourceVersion: Name = ""  # noqa: N815 - the API's spelling
    uid: Name = ""
    creationTimestamp: Name | None = None  # noqa: N815


class _Condition(msgspec.Struct, gc=False):
    type: Name
    status: Name = ""


class _Allocatable(msgspec.Struct, gc=False):
    # Only cpu: the other resources (memory, pods, hugepages...) are skipped unread.
    cpu: _QuantityValue | None = None


class _NodeStatus(msgspec.Struct, gc=False):
    allocatable: _Allocatable | None = None
    conditions: list[_Condition] | None = None


class RawNode(msgspec.Struct, gc=False):
    """The fields of a Node the decoder keeps from the API's JSON, bounded."""

    KIND: ClassVar[str] = "Node"
    metadata: _Meta
    status: _NodeStatus | None = None
    kind: Name = ""  # set in watch events, absent from LIST items


class _ServiceSpec(msgspec.Struct, gc=False):
    type: Name = "ClusterIP"
    clusterIP: Name | None = None  # noqa: N815
    trafficDistribution: Name | None = None  # noqa: N815
    internalTrafficPolicy: Name | None = None  # noqa: N815
    # Only whether it selects anything is kept; its size is bounded by the object's.
    selector: dict[str, str] | None = None


class RawService(msgspec.Struct, gc=False):
    """The fields of a Service the decoder keeps from the API's JSON, bounded."""

    KIND: ClassVar[str] = "Service"
    metadata: _Meta
    spec: _ServiceSpec
    kind: Name = ""  # set in watch events, absent from LIST items


class _Named(msgspec.Struct, gc=False):
    name: Name


class _Hints(msgspec.Struct, gc=False):
    forZones: list[_Named] | None = None  # noqa: N815
    forNodes: list[_Named] | None = None  # noqa: N815


class _EndpointConditions(msgspec.Struct, gc=False):
    # One field per condition the rules read.
    ready: bool | None = None
    terminating: bool | None = None
    serving: bool | None = None


class _Endpoint(msgspec.Struct, gc=False):
    addresses: list[Name]
    conditions: _EndpointConditions | None = None
    zone: Name | None = None
    nodeName: Name | None = None  # noqa: N815
    hints: _Hints | None = None


class RawEndpointSlice(msgspec.Struct, gc=False):
    """The fields of an EndpointSlice the decoder keeps from the API's JSON, bounded."""

    KIND: ClassVar[str] = "EndpointSlice"
    metadata: _Meta
    addressType: Name  # noqa: N815
    endpoints: list[_Endpoint] | None = None
    kind: Name = ""  # set in watch events, absent from LIST items


class _EventObjectMeta(msgspec.Struct, gc=False):
    # Event names embed the involved object's name plus a suffix: looser than MAX_NAME.
    name: _Key
    namespace: Name = ""
    resourceVersion: Name = ""  # noqa: N815
    uid: Name = ""
    creationTimestamp: Name | None = None  # noqa: N815


class _InvolvedObject(msgspec.Struct, gc=False):
    kind: Name = ""
    namespace: Name = ""
    name: Name = ""


class RawEvent(msgspec.Struct, gc=False):
    """The fields of a core/v1 Event the decoder keeps from the API's JSON, bounded."""

    KIND: ClassVar[str] = "Event"
    metadata: _EventObjectMeta
    involvedObject: _InvolvedObject  # noqa: N815
    reason: Name = ""
    # No message: the rules never read it, and Events of other reasons carry messages of
    # any length (more than 64 KiB was counted as an invalid object).
    type: Name = ""
    count: _Int32 | None = None
    lastTimestamp: Name | None = None  # noqa: N815
    eventTime: Name | None = None  # noqa: N815
    firstTimestamp: Name | None = None  # noqa: N815
    kind: Name = ""  # set in watch events, absent from LIST items


class ListMeta(msgspec.Struct, gc=False):
    """A LIST response's metadata: its resourceVersion and continue token."""

    resourceVersion: Name = ""  # noqa: N815
    # Continue tokens are opaque and longer than names; bounded all the same.
    continue_: _Text | None = msgspec.field(default=None, name="continue")


class ListPage(msgspec.Struct, Generic[_Item]):
    """One page of a LIST response; items are decoded straight into the raw shapes."""

    metadata: ListMeta
    items: list[_Item] | None = None


class WatchEvent(msgspec.Struct, gc=False):
    """One line of a watch stream; the object is decoded once its type is known."""

    type: Name
    object: msgspec.Raw


class _EventMeta(msgspec.Struct, gc=False):
    # BOOKMARK objects carry only a resourceVersion: nothing here may be required.
    name: _Key = ""
    namespace: Name = ""
    uid: Name = ""
    resourceVersion: Name = ""  # noqa: N815
    # A streaming list's last BOOKMARK carries k8s.io/initial-events-end: "true".
    annotations: dict[_Key, _Annotation] | None = None


class ObjectMeta(msgspec.Struct, gc=False):
    """Just enough of any watch event's object to delete it and follow resourceVersions."""

    metadata: _EventMeta = msgspec.field(default_factory=_EventMeta)
    kind: Name = ""  # set in watch events, absent from LIST items


class Status(msgspec.Struct, gc=False):
    """A metav1.Status, as an API error body or a watch ERROR event carries it."""

    code: _Int32 = 0
    reason: Name = ""
    message: _Text = ""


_Raw = TypeVar("_Raw", RawNode, RawService, RawEndpointSlice, RawEvent)

_intern = sys.intern


# -- decoding with bounded failures ---------------------------------------------------------


class NestingError(msgspec.ValidationError):
    """JSON nested deeper than the interpreter's recursion limit."""


class JsonDecoder(Generic[_T]):
    """msgspec's JSON decoder, whose every failure is a `msgspec.DecodeError`.

    msgspec reports a string that is not UTF-8 as UnicodeDecodeError and nesting deeper
    than the interpreter's recursion limit as RecursionError; both are properties of one
    value, like a wrong type, so they become `msgspec.ValidationError`s: a caller that
    skips an invalid object (or falls back to decoding a page item by item) handles them
    the same way, and nothing else escapes.
    """

    __slots__ = ("_decoder",)

    def __init__(self, target: type[_T]) -> None:
        self._decoder: msgspec.json.Decoder[_T] = msgspec.json.Decoder(target)

    def decode(self, data: bytes | msgspec.Raw) -> _T:
        try:
            return self._decoder.decode(data)
        except UnicodeDecodeError:
            raise msgspec.ValidationError("a string is not valid UTF-8") from None
        except RecursionError:
            raise NestingError("nested too deeply") from None


def decode_json(data: bytes | msgspec.Raw, target: type[_T]) -> _T:
    """One-off `JsonDecoder(target).decode(data)`."""
    return JsonDecoder(target).decode(data)


class _NameMeta(msgspec.Struct, gc=False):
    name: Name = ""
    namespace: Name = ""


class _Identity(msgspec.Struct, gc=False):
    metadata: _NameMeta | None = None


_IDENTITY = JsonDecoder(_Identity)
UNNAMED = "<unnamed>"


def _qualified(namespace: str, name: str) -> str:
    if not name:
        return UNNAMED
    return f"{namespace}/{name}" if namespace else name


def json_object_name(data: bytes | msgspec.Raw) -> str:
    """namespace/name of an object's JSON, for messages, however broken the rest of it is."""
    try:
        metadata = _IDENTITY.decode(data).metadata
    except msgspec.DecodeError:
        return UNNAMED
    return _qualified(metadata.namespace, metadata.name) if metadata is not None else UNNAMED


def object_name(item: Any) -> str:
    """namespace/name (or name) of a raw object, for error messages, whatever its shape."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(metadata, dict):
        return UNNAMED
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str) or len(name) > MAX_KEY:
        return UNNAMED
    return _qualified(namespace if isinstance(namespace, str) else "", name)


class ObjectDecoder(Generic[_Raw]):
    """One object of a known kind from its JSON; any failure is an InvalidObjectError."""

    __slots__ = ("_decoder", "kind")

    def __init__(self, raw_type: type[_Raw]) -> None:
        self.kind = raw_type.KIND
        self._decoder: JsonDecoder[_Raw] = JsonDecoder(raw_type)

    def decode(self, data: bytes | msgspec.Raw) -> _Raw:
        try:
            return self._decoder.decode(data)
        except msgspec.DecodeError as error:
            raise InvalidObjectError(self.kind, json_object_name(data), str(error)) from None


def convert_raw(kind: str, item: Any, raw_type: type[_Raw]) -> _Raw:
    """Validate a parsed object (from YAML) against its raw shape, naming it on failure."""
    try:
        return msgspec.convert(item, raw_type)
    except msgspec.ValidationError as error:
        raise InvalidObjectError(kind, object_name(item), str(error)) from None
    except RecursionError:
        raise InvalidObjectError(kind, object_name(item), "nested too deeply") from None


# -- CPU ------------------------------------------------------------------------------------

# No machine has 10^15 cores.
MAX_CPU_CORES = 10**15


def cpu_cores(quantity: str | float) -> Fraction:
    """Allocatable CPU as exact cores; ValueError unless a non-negative bounded quantity.

    A JSON number is read as the quantity its shortest text spells ("2.5", "1e+20"), as
    the API server reads a number given for a quantity.
    """
    if isinstance(quantity, bool) or not isinstance(quantity, str | int | float):
        # ValueError, not TypeError: callers treat every bad quantity alike.
        raise ValueError(f"CPU quantity {quantity!r} is not a string or a number")  # noqa: TRY004
    if isinstance(quantity, int) and abs(quantity) > MAX_CPU_CORES:
        # Before str(): a YAML integer may have thousands of digits.
        raise ValueError("CPU quantity is out of range")
    return _cpu_cores(repr(quantity) if isinstance(quantity, float) else str(quantity))


@functools.lru_cache(maxsize=4096)
def _cpu_cores(text: str) -> Fraction:
    cores = parse_quantity(text)
    if cores < 0:
        raise ValueError(f"CPU quantity {text!r} is negative")
    if cores > MAX_CPU_CORES:
        raise ValueError(f"CPU quantity {text!r} is out of range")
    return cores


# -- raw shapes to the engine's types ------------------------------------------------------


def node_from_raw(raw: RawNode) -> Node:
    labels = raw.metadata.labels or {}
    status = raw.status or _NodeStatus()
    cpu_quantity = status.allocatable.cpu if status.allocatable is not None else None
    try:
        cpu = cpu_cores(cpu_quantity) if cpu_quantity is not None else None
    except ValueError as error:
        raise InvalidObjectError(
            "Node", raw.metadata.name, f"status.allocatable.cpu: {error}"
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
        istio_traffic_distribution=annotations.get(ISTIO_TRAFFIC_DISTRIBUTION_ANNOTATION),
        # The API server stores an empty selector as none (protobuf drops empty maps).
        selects=bool(raw.spec.selector),
    )


# Hint lists nearly always name one zone (or one node): the tuple for each name is built
# once and shared by every endpoint hinted to it, which saves a tuple per endpoint (8 MiB
# at 150,000 endpoints) and the time to build it. Bounded, since names come from the API.
_ONE_NAME: dict[str, tuple[str]] = {}
_ONE_NAME_LIMIT = 16_384


def _names(named: list[_Named] | None) -> tuple[str, ...]:
    if not named:
        return ()
    if len(named) == 1:
        name = named[0].name
        shared = _ONE_NAME.get(name)
        if shared is None:
            if len(_ONE_NAME) >= _ONE_NAME_LIMIT:
                _ONE_NAME.clear()
            shared = _ONE_NAME[name] = (_intern(name),)
        return shared
    return tuple([_intern(item.name) for item in named])


# The engine's Endpoint is a frozen slotted dataclass, whose generated __init__ sets each
# field through object.__setattr__: building 150,000 of them that way took twice as long
# as decoding their JSON. The decoder allocates each instance and fills its slots through
# the slot descriptors instead, which is what that __init__ does without its lookups.
# Endpoint has no __post_init__ or validation to skip, and the check below fails the import
# if its fields ever change without this code (tests/sources/test_decode_endpoints.py compares
# the result with Endpoint(...) field by field).
_ENDPOINT_FIELDS = (
    "address",
    "ready",
    "zone",
    "node_name",
    "zone_hints",
    "node_hints",
    "terminating",
    "serving",
)
if (
    tuple(field.name for field in dataclasses.fields(Endpoint)) != _ENDPOINT_FIELDS
    or hasattr(Endpoint, "__post_init__")
    or "__slots__" not in vars(Endpoint)
):
    raise TypeError(
        "exporter.sources.decode builds Endpoint field by field: update _ENDPOINT_FIELDS"
    )
_SET_ENDPOINT_FIELDS = tuple(vars(Endpoint)[name].__set__ for name in _ENDPOINT_FIELDS)


def _endpoints(raws: list[_Endpoint] | None) -> tuple[Endpoint, ...]:
    """The engine's endpoints, in one loop: this runs for every endpoint of a cluster."""
    if not raws:
        return ()
    intern, names, new = _intern, _names, object.__new__
    (
        set_address,
        set_ready,
        set_zone,
        set_node,
        set_zone_hints,
        set_node_hints,
        set_terminating,
        set_serving,
    ) = _SET_ENDPOINT_FIELDS
    endpoints: list[Endpoint] = []
    append = endpoints.append
    for raw in raws:
        endpoint = new(Endpoint)
        addresses, conditions, zone, node_name, hints = (
            raw.addresses,
            raw.conditions,
            raw.zone,
            raw.nodeName,
            raw.hints,
        )
        set_address(endpoint, addresses[0] if addresses else None)
        if conditions is None:
            set_ready(endpoint, None)
            set_terminating(endpoint, None)
            set_serving(endpoint, None)
        else:
            set_ready(endpoint, conditions.ready)
            set_terminating(endpoint, conditions.terminating)
            set_serving(endpoint, conditions.serving)
        set_zone(endpoint, intern(zone) if zone is not None else None)
        set_node(endpoint, intern(node_name) if node_name is not None else None)
        if hints is None:
            set_zone_hints(endpoint, ())
            set_node_hints(endpoint, ())
        else:
            set_zone_hints(endpoint, names(hints.forZones))
            set_node_hints(endpoint, names(hints.forNodes))
        append(endpoint)
    return tuple(endpoints)


def endpoint_slice_from_raw(raw: RawEndpointSlice) -> EndpointSlice:
    labels = raw.metadata.labels or {}
    service_name = labels.get(SERVICE_NAME_LABEL)
    return EndpointSlice(
        namespace=_intern(_require_namespace("EndpointSlice", raw.metadata)),
        name=raw.metadata.name,
        service_name=service_name,
        address_type=_intern(raw.addressType),
        managed=labels.get(MANAGED_BY_LABEL) == ENDPOINTSLICE_CONTROLLER,
        endpoints=_endpoints(raw.endpoints),
    )


def decode_node(item: Any) -> Node:
    return node_from_raw(convert_raw("Node", item, RawNode))


def decode_service(item: Any) -> Service:
    return service_from_raw(convert_raw("Service", item, RawService))


def decode_endpoint_slice(item: Any) -> EndpointSlice:
    return endpoint_slice_from_raw(convert_raw("EndpointSlice", item, RawEndpointSlice))
