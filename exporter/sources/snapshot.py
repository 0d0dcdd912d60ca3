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

This module turns the input into objects and decides every error message about them;
the bytes are read, bounded and checked by `exporter.sources.snapshot_input`, YAML is
loaded within bounds by `exporter.sources.snapshot_yaml`.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import msgspec

from exporter.engine import EndpointSlice, Node, Service
from exporter.sources.decode import (
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
from exporter.sources.snapshot_input import (
    DEFAULT_MAX_INPUT_BYTES,
    STDIN,
    ChunkReader,
    SnapshotError,
    StreamDeclinedError,
    open_regular,
    read_input,
    utf8,
)
from exporter.sources.snapshot_yaml import AliasError, yaml_documents, yaml_error
from exporter.state.store import ClusterStore


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A whole cluster as one-shot inputs give it (a file or a LIST): its nodes, Services and
    EndpointSlices."""

    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    endpoint_slices: tuple[EndpointSlice, ...]

    def write_to(self, store: ClusterStore) -> None:
        """Into the store, each kind replaced whole, as the informers' first lists do."""
        store.replace_nodes(self.nodes)
        store.replace_services(self.services)
        store.replace_endpoint_slices(self.endpoint_slices)


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


# -- JSON, streamed -----------------------------------------------------------------------
#
# A List file is read in chunks and handed to msgspec one item at a time, so only a
# window of the file is resident while the objects are built (the whole file would be
# 1-2x the size of everything decoded from it). Whenever the stream is not a plain
# List, or anything in it is wrong, the file is read again whole and decoded as above:
# one code path decides every error message, and the stream only has to be right on
# well-formed input.


def _stream_items(reader: ChunkReader) -> Iterator[bytes]:
    if reader.skip_whitespace() == ord("]"):
        reader.pos += 1
        return
    while True:
        if reader.skip_whitespace() is None:
            raise StreamDeclinedError
        yield reader.take_item()
        after = reader.skip_whitespace()
        reader.pos += 1
        if after == ord("]"):
            return
        if after != ord(","):
            raise StreamDeclinedError


def _add_streamed_item(collector: _Collector, item: bytes) -> None:
    # A DecodeError here (not exactly one JSON value: broken input, or an item laid out
    # unlike kubectl's) makes the caller decode the whole file instead.
    kind = _kind_of(_KIND_PROBE.decode(item).kind)
    spec = _KINDS.get(kind) if kind is not None else None
    if spec is not None:
        collector.add(spec.decoder.kind, spec.convert(spec.decoder.decode(item)))


def _stream_top_level(reader: ChunkReader, collector: _Collector) -> dict[str, bytes]:
    """The List's members other than its items, which go to the collector as they come."""
    top: dict[str, bytes] = {}
    reader.expect(b"{")
    while True:
        if reader.skip_whitespace() != ord('"'):
            raise StreamDeclinedError
        key = _KIND_TEXT.decode(reader.take_value())
        reader.expect(b":")
        # A key given twice: msgspec keeps the last; let the whole-file decoding say so.
        if reader.skip_whitespace() is None or key in top:
            raise StreamDeclinedError
        if key == "items" and reader.buffer[reader.pos] == ord("["):
            reader.pos += 1
            for item in _stream_items(reader):
                _add_streamed_item(collector, item)
            top[key] = b"[]"
        else:
            top[key] = reader.take_value()
        after = reader.skip_whitespace()
        reader.pos += 1
        if after == ord("}"):
            return top
        if after != ord(","):
            raise StreamDeclinedError


def _stream_json(source: str, stream: IO[bytes], max_bytes: int) -> Snapshot:
    """A JSON List decoded item by item; StreamDeclinedError if it is anything else."""
    reader = ChunkReader(source, stream, max_bytes)
    if not reader.more():
        raise StreamDeclinedError
    if reader.buffer.startswith(codecs.BOM_UTF8):
        reader.pos = len(codecs.BOM_UTF8)
    collector = _Collector(source)
    try:
        top = _stream_top_level(reader, collector)
    except (SnapshotError, InvalidObjectError, msgspec.DecodeError, NestingError):
        raise StreamDeclinedError from None
    # Only a List whose items were streamed; a single object, an 'items' that is null or
    # not a list, or a missing kind is decoded (or refused) whole.
    if reader.skip_whitespace() is not None or top.get("items") != b"[]":
        raise StreamDeclinedError
    if _kind_of(msgspec.Raw(top["kind"]) if "kind" in top else None) is None:
        raise StreamDeclinedError
    return collector.snapshot()


# -- YAML ---------------------------------------------------------------------------------


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
        for index, item in _yaml_items(source, yaml_documents(data)):
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
    except (AliasError, yaml.YAMLError, RecursionError, ValueError, OverflowError) as error:
        raise yaml_error(source, error) from None
    return collector.snapshot()


# -- entry points -------------------------------------------------------------------------


def parse_snapshot(source: str, data: bytes) -> Snapshot:
    """Decode a snapshot's bytes; raises SnapshotError with a one-line message."""
    data = utf8(source, data)
    if not data.strip():
        raise SnapshotError(f"{source}: empty: expected a Kubernetes List")
    snapshot = _parse_json(source, data)
    return snapshot if snapshot is not None else _parse_yaml(source, data)


def load_snapshot(source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Snapshot:
    """Read and decode a snapshot; raises SnapshotError with a one-line message.

    A JSON List file is streamed (see above); standard input, which cannot be read twice,
    YAML and anything the stream declines are read whole.
    """
    if source != STDIN:
        fd = open_regular(source, max_bytes)
        try:
            with os.fdopen(fd, "rb", closefd=False) as stream:
                return _stream_json(source, stream, max_bytes)
        except StreamDeclinedError:
            pass
        except OSError as error:
            raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
        finally:
            os.close(fd)
    return parse_snapshot(source, read_input(source, max_bytes))
