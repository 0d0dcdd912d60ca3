"""Read a cluster snapshot file: what `kubectl get nodes,services,endpointslices -A -o json` prints.

Accepts a `List` (JSON or YAML), multi-document YAML of Lists or single objects, from a
file or standard input. Objects of other kinds are ignored.

JSON is decoded as the live path decodes a LIST page: the top level into raw item
slices, then each Node, Service and EndpointSlice straight into its typed shape and on
into the engine's objects, so no tree of plain Python objects for the whole file ever
exists. YAML has no such decoder and is loaded document by document.

Whatever the input, it costs bounded time and memory and fails with one line: the size
is bounded (`max_bytes`), special files are refused, text must be UTF-8 (or UTF-16 with
a byte-order mark, as Windows PowerShell writes it), YAML aliases may not expand the
document by more than `MAX_ALIAS_NODES` nodes, and an object given twice is an error
(it would silently change zone shares or endpoint counts).
"""

from __future__ import annotations

import codecs
import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import msgspec

from exporter.decode import (
    InvalidObjectError,
    JsonDecoder,
    Name,
    NestingError,
    ObjectDecoder,
    RawEndpointSlice,
    RawNode,
    RawService,
    convert_raw,
    endpoint_slice_from_raw,
    node_from_raw,
    service_from_raw,
)
from exporter.engine import (
    DEFAULT_DATAPLANES,
    DataPlane,
    EndpointSlice,
    Evaluation,
    Node,
    Service,
    evaluate,
)

if TYPE_CHECKING:
    import yaml

STDIN = "-"
# Far above any real cluster (kubectl's JSON for 5,000 nodes and 150,000 endpoints is a
# few hundred MB), and still a bound: /dev/zero on stdin stops here.
DEFAULT_MAX_INPUT_BYTES = 1 << 30
# Nodes that YAML aliases may add beyond the document's own: generous for hand-written
# anchors, far below a "billion laughs" expansion.
MAX_ALIAS_NODES = 100_000
_READ_CHUNK = 1 << 20


class SnapshotError(Exception):
    """The snapshot cannot be used; the message is one line naming the file and the object."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    endpoint_slices: tuple[EndpointSlice, ...]

    def evaluate(self, dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES) -> Evaluation:
        return evaluate(self.nodes, self.services, self.endpoint_slices, dataplanes)


# -- bytes --------------------------------------------------------------------------------


def _too_large(source: str, max_bytes: int) -> SnapshotError:
    return SnapshotError(f"{source}: larger than {max_bytes} bytes (see --max-input-bytes)")


def _read_stream(source: str, stream: IO[bytes], max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_READ_CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(source, max_bytes)
    return b"".join(chunks)


def read_input(source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, or of stdin for "-", at most max_bytes of them."""
    if source == STDIN:
        return _read_stream(source, sys.stdin.buffer, max_bytes)
    try:
        # O_NONBLOCK: opening a FIFO without a writer would otherwise wait for ever.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise SnapshotError(f"{source}: is a directory")
        if not stat.S_ISREG(status.st_mode):
            raise SnapshotError(
                f"{source}: not a regular file (a FIFO, device or socket); "
                "pipe it to --snapshot - instead"
            )
        if status.st_size > max_bytes:
            raise _too_large(source, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return _read_stream(source, stream, max_bytes)
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _utf8(source: str, data: bytes) -> bytes:
    """The input as UTF-8 without a byte-order mark; SnapshotError if it is not text."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16").encode()
        except UnicodeDecodeError:
            raise SnapshotError(f"{source}: not text (starts as UTF-16 but is not)") from None
    # Checked in chunks: decoding the whole file at once would hold a copy of it.
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(data), _READ_CHUNK):
        try:
            decoder.decode(
                view[start : start + _READ_CHUNK], final=start + _READ_CHUNK >= len(data)
            )
        except UnicodeDecodeError as error:
            offset = start + error.start
            raise SnapshotError(f"{source}: not UTF-8 text (byte {offset})") from None
    return data


# -- objects ------------------------------------------------------------------------------

_Slim = Node | Service | EndpointSlice


@dataclass(frozen=True, slots=True)
class _Kind:
    decoder: ObjectDecoder[Any]
    raw_type: type[Any]
    convert: Callable[[Any], _Slim]


_KINDS = {
    "Node": _Kind(ObjectDecoder(RawNode), RawNode, node_from_raw),
    "Service": _Kind(ObjectDecoder(RawService), RawService, service_from_raw),
    "EndpointSlice": _Kind(
        ObjectDecoder(RawEndpointSlice), RawEndpointSlice, endpoint_slice_from_raw
    ),
}


class _Collector:
    """The decoded objects, each kind keyed by (namespace, name) to refuse duplicates."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._objects: dict[str, dict[tuple[str, str], _Slim]] = {kind: {} for kind in _KINDS}

    def add(self, kind: str, decoded: _Slim) -> None:
        namespace = "" if isinstance(decoded, Node) else decoded.namespace
        objects = self._objects[kind]
        key = (namespace, decoded.name)
        if key in objects:
            name = f"{namespace}/{decoded.name}" if namespace else decoded.name
            raise SnapshotError(
                f"{self._source}: {kind} {name} is given twice; each object may appear once"
            )
        objects[key] = decoded

    def snapshot(self) -> Snapshot:
        def values(kind: str) -> tuple[Any, ...]:
            return tuple(self._objects[kind].values())

        return Snapshot(values("Node"), values("Service"), values("EndpointSlice"))


# -- JSON ---------------------------------------------------------------------------------


class _KindProbe(msgspec.Struct, gc=False):
    # Raw (msgspec has no Raw | None): an object whose kind is not a string is ignored.
    kind: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


_TOP_LEVEL = JsonDecoder(dict[str, msgspec.Raw])
_ITEMS = JsonDecoder(list[msgspec.Raw] | None)  # type: ignore[arg-type]
_KIND_PROBE = JsonDecoder(_KindProbe)
_KIND_TEXT = JsonDecoder(Name)


def _not_a_list(source: str) -> SnapshotError:
    return SnapshotError(f"{source}: not a Kubernetes List (no 'kind' at the top level)")


def _kind_of(raw: msgspec.Raw | None) -> str | None:
    if not raw:
        return None
    try:
        return _KIND_TEXT.decode(raw)
    except msgspec.ValidationError:
        return None


def _json_items(source: str, data: bytes) -> list[msgspec.Raw] | None:
    """The raw items of a JSON List (or the one object); None if the input is not JSON."""
    try:
        top = _TOP_LEVEL.decode(data)
    except NestingError:
        raise SnapshotError(f"{source}: JSON nested too deeply") from None
    except msgspec.ValidationError:
        raise _not_a_list(source) from None
    except msgspec.DecodeError:
        return None
    document_kind = _kind_of(top.get("kind"))
    if document_kind is None:
        raise _not_a_list(source)
    if "items" in top:
        try:
            items = _ITEMS.decode(top["items"]) or []
        except msgspec.ValidationError:
            raise SnapshotError(f"{source}: 'items' of the {document_kind} is not a list") from None
        return items
    return [msgspec.Raw(data)]


def _parse_json(source: str, data: bytes) -> Snapshot | None:
    """The snapshot if the input is JSON; None if it is not JSON at all (try YAML)."""
    items = _json_items(source, data)
    if items is None:
        return None
    collector = _Collector(source)
    for index, item in enumerate(items):
        try:
            kind = _kind_of(_KIND_PROBE.decode(item).kind)
        except msgspec.ValidationError:
            raise SnapshotError(f"{source}: item {index} is not an object") from None
        spec = _KINDS.get(kind) if kind is not None else None
        if spec is not None:
            try:
                decoded = spec.convert(spec.decoder.decode(item))
            except InvalidObjectError as error:
                raise SnapshotError(f"{source}: {error}") from None
            collector.add(spec.decoder.kind, decoded)
    return collector.snapshot()


# -- YAML ---------------------------------------------------------------------------------

# PyYAML is imported on the first YAML input, not at start: JSON snapshots and the live
# path never need it.


class _AliasError(Exception):
    pass


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases, expanded, add more than MAX_ALIAS_NODES nodes.

    Counted on the composed graph, where an alias is one shared node, before anything
    is constructed: expansion (by the constructor, by merge keys, or by whoever walks the
    result) is what costs time and memory, and it is bounded by this count.
    """
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return []

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children(node))
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _AliasError("YAML aliases refer to their own ancestors")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children(node) if id(child) not in sizes)
    if sizes[id(root)] - len(sizes) > MAX_ALIAS_NODES:
        raise _AliasError(f"YAML aliases expand to more than {MAX_ALIAS_NODES} extra nodes")


@functools.cache
def _bounded_yaml_loader() -> type[Any]:
    """PyYAML's safe loader (the C one when built), refusing alias bombs."""
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedYamlLoader(base):  # type: ignore[misc]
        # Without a "*" in the text there is no alias, and no need to walk each document.
        may_have_aliases = True

        def construct_document(self, node: yaml.Node) -> object:
            if self.may_have_aliases:
                _check_expansion(node)
            return super().construct_document(node)

    return BoundedYamlLoader


def _yaml_documents(data: bytes) -> Iterator[Any]:
    loader = _bounded_yaml_loader()(data)
    loader.may_have_aliases = b"*" in data
    try:
        while loader.check_data():
            document = loader.get_data()
            if document is not None:
                yield document
    finally:
        loader.dispose()


def _yaml_error(source: str, error: Exception) -> SnapshotError:
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    if isinstance(error, _AliasError):
        return SnapshotError(f"{source}: {error}")
    if isinstance(error, RecursionError):
        return SnapshotError(f"{source}: YAML nested too deeply")
    if isinstance(error, yaml.YAMLError):
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return SnapshotError(f"{source}: not JSON or YAML{where}")
    # ValueError/OverflowError from a scalar's constructor: an integer of more than
    # 4,300 digits, a date such as 2020-13-45.
    return SnapshotError(
        f"{source}: YAML holds a value that cannot be read (an invalid date or an oversized number)"
    )


def _yaml_items(source: str, documents: Iterator[Any]) -> Iterator[tuple[int, Any]]:
    empty = True
    for document in documents:
        empty = False
        if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
            raise _not_a_list(source)
        if "items" in document:
            items = document["items"]
            if items is None:
                continue
            if not isinstance(items, list):
                raise SnapshotError(f"{source}: 'items' of the {document['kind']} is not a list")
            yield from enumerate(items)
        else:
            yield 0, document
    if empty:
        raise SnapshotError(f"{source}: empty: expected a Kubernetes List")


def _parse_yaml(source: str, data: bytes) -> Snapshot:
    import yaml  # noqa: PLC0415 - loaded with the first YAML input

    collector = _Collector(source)
    try:
        for index, item in _yaml_items(source, _yaml_documents(data)):
            if not isinstance(item, dict):
                raise SnapshotError(f"{source}: item {index} is not an object")
            kind = item.get("kind")
            spec = _KINDS.get(kind) if isinstance(kind, str) else None
            if spec is not None:
                try:
                    decoded = spec.convert(convert_raw(spec.decoder.kind, item, spec.raw_type))
                except InvalidObjectError as error:
                    raise SnapshotError(f"{source}: {error}") from None
                collector.add(spec.decoder.kind, decoded)
    except (_AliasError, yaml.YAMLError, RecursionError, ValueError, OverflowError) as error:
        raise _yaml_error(source, error) from None
    return collector.snapshot()


# -- entry points -------------------------------------------------------------------------


def parse_snapshot(source: str, data: bytes) -> Snapshot:
    """Decode a snapshot's bytes; raises SnapshotError with a one-line message."""
    data = _utf8(source, data)
    if not data.strip():
        raise SnapshotError(f"{source}: empty: expected a Kubernetes List")
    snapshot = _parse_json(source, data)
    return snapshot if snapshot is not None else _parse_yaml(source, data)


def load_snapshot(source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Snapshot:
    """Read and decode a snapshot; raises SnapshotError with a one-line message."""
    return parse_snapshot(source, read_input(source, max_bytes))
