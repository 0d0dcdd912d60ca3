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
import re
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import msgspec

from exporter.engine import (
    DEFAULT_DATAPLANES,
    DataPlane,
    EndpointSlice,
    Evaluation,
    Node,
    Service,
    evaluate,
)
from exporter.engine.profile import ASSUMED, Profile
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

    def evaluate(
        self, dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES, profile: Profile = ASSUMED
    ) -> Evaluation:
        return evaluate(self.nodes, self.services, self.endpoint_slices, dataplanes, profile)


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


def _open_regular(source: str, max_bytes: int) -> int:
    """A descriptor of the regular file `source`, at most max_bytes long."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer would otherwise wait for ever.
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            status = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
    problem = None
    if stat.S_ISDIR(status.st_mode):
        problem = SnapshotError(f"{source}: is a directory")
    elif not stat.S_ISREG(status.st_mode):
        problem = SnapshotError(
            f"{source}: not a regular file (a FIFO, device or socket); "
            "pipe it to --snapshot - instead"
        )
    elif status.st_size > max_bytes:
        problem = _too_large(source, max_bytes)
    if problem is not None:
        os.close(fd)
        raise problem
    return fd


def read_input(source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, or of stdin for "-", at most max_bytes of them."""
    if source == STDIN:
        return _read_stream(source, sys.stdin.buffer, max_bytes)
    fd = _open_regular(source, max_bytes)
    try:
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


# -- JSON, streamed -----------------------------------------------------------------------
#
# A List file is read in chunks and handed to msgspec one item at a time, so only a
# window of the file is resident while the objects are built (the whole file would be
# 1-2x the size of everything decoded from it). Whenever the stream is not a plain
# List, or anything in it is wrong, the file is read again whole and decoded as above:
# one code path decides every error message, and the stream only has to be right on
# well-formed input.


class _StreamDeclinedError(Exception):
    """The streamed reading cannot decide; decode the whole file instead."""


_WHITESPACE = re.compile(rb"[ \t\r\n]*")
# After the opening quote: the rest of a string, its closing quote included.
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^ \t\r\n,:\[\]{}\"]+")
_STRUCTURE = re.compile(rb'["\[\]{}]')
_SKIP_VALUE = msgspec.json.Decoder(msgspec.Raw)
_TRUNCATED = "Input data was truncated"
_TRAILING = re.compile(r"trailing characters \(byte ([0-9]+)\)")
# Bytes kept before the read position when the buffer is refilled: enough to see the
# indentation of an item's opening brace.
_HISTORY = 256


class _ChunkReader:
    """A window over a byte stream, refilled in chunks, checked to be UTF-8 as it comes."""

    def __init__(self, source: str, stream: IO[bytes], max_bytes: int) -> None:
        self._source = source
        self._stream = stream
        self._max_bytes = max_bytes
        self._size = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.buffer = b""
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append a chunk to the window (dropping what lies well behind pos); False at EOF."""
        if self.eof:
            return False
        chunk = self._stream.read(min(_READ_CHUNK, self._max_bytes + 1 - self._size))
        try:
            self._utf8.decode(chunk, final=not chunk)
        except UnicodeDecodeError:
            raise _StreamDeclinedError from None
        if not chunk:
            self.eof = True
            return False
        self._size += len(chunk)
        if self._size > self._max_bytes:
            raise _too_large(self._source, self._max_bytes)
        start = max(0, self.pos - _HISTORY)
        self.buffer = self.buffer[start:] + chunk
        self.pos -= start
        return True

    def skip_whitespace(self) -> int | None:
        """The next byte that is not whitespace (pos is on it); None at the end."""
        while True:
            match = _WHITESPACE.match(self.buffer, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.more():
                return None

    def expect(self, byte: bytes) -> None:
        if self.skip_whitespace() != byte[0]:
            raise _StreamDeclinedError
        self.pos += 1

    def value_end(self) -> int:
        """Where the JSON value at pos ends (a scan of strings and brackets, not a parse)."""
        if self.buffer[self.pos] not in b'"[{':
            return self._scalar_end()
        depth = 0
        # Relative to pos: refilling the buffer moves pos, never what lies after it.
        scanned = 0
        while True:
            match = _STRUCTURE.search(self.buffer, self.pos + scanned)
            if match is None:
                scanned = len(self.buffer) - self.pos
                if not self.more():
                    raise _StreamDeclinedError
                continue
            token = match.group()
            if token == b'"':
                scanned = self._string_end(match.end() - self.pos)
            else:
                scanned = match.end() - self.pos
                depth += 1 if token in b"[{" else -1
            if depth == 0:
                return self.pos + scanned

    def _scalar_end(self) -> int:
        while True:
            match = _SCALAR.match(self.buffer, self.pos)
            if match is None:
                raise _StreamDeclinedError
            if match.end() < len(self.buffer) or not self.more():
                return match.end()

    def _string_end(self, after_quote: int) -> int:
        """Past the closing quote of the string whose opening quote ends before after_quote."""
        while (string := _STRING_REST.match(self.buffer, self.pos + after_quote)) is None:
            if not self.more():
                raise _StreamDeclinedError
        return string.end() - self.pos

    def take_value(self) -> bytes:
        """The JSON value at pos, which pos then passes."""
        end = self.value_end()
        # value_end may refill the buffer, which moves pos (and end with it).
        value = self.buffer[self.pos : end]
        self.pos = end
        return value

    def take_item(self) -> bytes:
        """The array element at pos, found fast where it is laid out as kubectl prints it.

        kubectl indents: an item's closing brace is the first line holding only a brace at
        the indentation of its opening one. The guess is confirmed by the caller's decode,
        which fails unless the bytes are exactly one JSON value.
        """
        line_start = self.buffer.rfind(b"\n", 0, self.pos) + 1
        indent = self.buffer[line_start : self.pos] if line_start else b"?"
        if self.buffer[self.pos] != ord("{") or indent.strip(b" \t"):
            return self._take_decoded()
        closing = b"\n" + indent + b"}"
        searched = 0  # relative to pos, as in value_end
        while (found := self.buffer.find(closing, self.pos + searched)) < 0:
            searched = max(0, len(self.buffer) - len(closing) - self.pos)
            if not self.more():
                return self._take_decoded()
        end = found + len(closing)
        value = self.buffer[self.pos : end]
        self.pos = end
        return value

    def _take_decoded(self) -> bytes:
        """The value at pos, its end found by msgspec: decoding the window, it names the
        first byte past the value. What it cannot tell is left to value_end's scan."""
        while True:
            try:
                _SKIP_VALUE.decode(memoryview(self.buffer)[self.pos :])
            except msgspec.DecodeError as error:
                if str(error) == _TRUNCATED and self.more():
                    continue
                past = _TRAILING.search(str(error))
                if past is None:
                    return self.take_value()
                # msgspec counts the byte it stopped at, the first one past the value
                # and its whitespace; a miscount fails the caller's exact decode.
                end = self.pos + int(past.group(1)) - 1
            except RecursionError:
                # Nested deeper than msgspec goes: the scan decides, the decode refuses.
                return self.take_value()
            else:
                end = len(self.buffer)
            value = self.buffer[self.pos : end]
            self.pos = end
            return value


def _stream_items(reader: _ChunkReader) -> Iterator[bytes]:
    if reader.skip_whitespace() == ord("]"):
        reader.pos += 1
        return
    while True:
        if reader.skip_whitespace() is None:
            raise _StreamDeclinedError
        yield reader.take_item()
        after = reader.skip_whitespace()
        reader.pos += 1
        if after == ord("]"):
            return
        if after != ord(","):
            raise _StreamDeclinedError


def _add_streamed_item(collector: _Collector, item: bytes) -> None:
    # A DecodeError here (not exactly one JSON value: broken input, or an item laid out
    # unlike kubectl's) makes the caller decode the whole file instead.
    kind = _kind_of(_KIND_PROBE.decode(item).kind)
    spec = _KINDS.get(kind) if kind is not None else None
    if spec is not None:
        collector.add(spec.decoder.kind, spec.convert(spec.decoder.decode(item)))


def _stream_top_level(reader: _ChunkReader, collector: _Collector) -> dict[str, bytes]:
    """The List's members other than its items, which go to the collector as they come."""
    top: dict[str, bytes] = {}
    reader.expect(b"{")
    while True:
        if reader.skip_whitespace() != ord('"'):
            raise _StreamDeclinedError
        key = _KIND_TEXT.decode(reader.take_value())
        reader.expect(b":")
        # A key given twice: msgspec keeps the last; let the whole-file decoding say so.
        if reader.skip_whitespace() is None or key in top:
            raise _StreamDeclinedError
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
            raise _StreamDeclinedError


def _stream_json(source: str, stream: IO[bytes], max_bytes: int) -> Snapshot:
    """A JSON List decoded item by item; _StreamDeclinedError if it is anything else."""
    reader = _ChunkReader(source, stream, max_bytes)
    if not reader.more():
        raise _StreamDeclinedError
    if reader.buffer.startswith(codecs.BOM_UTF8):
        reader.pos = len(codecs.BOM_UTF8)
    collector = _Collector(source)
    try:
        top = _stream_top_level(reader, collector)
    except (SnapshotError, InvalidObjectError, msgspec.DecodeError, NestingError):
        raise _StreamDeclinedError from None
    # Only a List whose items were streamed; a single object, an 'items' that is null or
    # not a list, or a missing kind is decoded (or refused) whole.
    if reader.skip_whitespace() is not None or top.get("items") != b"[]":
        raise _StreamDeclinedError
    if _kind_of(msgspec.Raw(top["kind"]) if "kind" in top else None) is None:
        raise _StreamDeclinedError
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
    """Read and decode a snapshot; raises SnapshotError with a one-line message.

    A JSON List file is streamed (see above); standard input, which cannot be read twice,
    YAML and anything the stream declines are read whole.
    """
    if source != STDIN:
        fd = _open_regular(source, max_bytes)
        try:
            with os.fdopen(fd, "rb", closefd=False) as stream:
                return _stream_json(source, stream, max_bytes)
        except _StreamDeclinedError:
            pass
        except OSError as error:
            raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None
        finally:
            os.close(fd)
    return parse_snapshot(source, read_input(source, max_bytes))
