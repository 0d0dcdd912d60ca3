"""Read a cluster snapshot file: what `kubectl get nodes,services,endpointslices -A -o json` prints.

Accepts a `List` (JSON or YAML), multi-document YAML of Lists or single objects, from a
file or standard input. Objects of other kinds are ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import yaml

from exporter.decode import (
    InvalidObjectError,
    decode_endpoint_slice,
    decode_node,
    decode_service,
    object_name,
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

STDIN = "-"


class SnapshotError(Exception):
    """The snapshot cannot be used; the message is one line naming the file and the object."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: tuple[Node, ...]
    services: tuple[Service, ...]
    endpoint_slices: tuple[EndpointSlice, ...]

    def evaluate(self, dataplanes: Sequence[DataPlane] = DEFAULT_DATAPLANES) -> Evaluation:
        return evaluate(self.nodes, self.services, self.endpoint_slices, dataplanes)


def _read_bytes(source: str) -> bytes:
    if source == STDIN:
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as error:
        raise SnapshotError(f"{source}: cannot read: {error.strerror or error}") from None


def _parse_documents(source: str, data: bytes) -> list[Any]:
    try:
        return [msgspec.json.decode(data)]
    except msgspec.DecodeError:
        pass
    except RecursionError:
        raise SnapshotError(f"{source}: JSON nested too deeply") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return [document for document in yaml.load_all(data, Loader=loader) if document is not None]
    except RecursionError:
        raise SnapshotError(f"{source}: YAML nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise SnapshotError(f"{source}: not JSON or YAML{where}") from None


def _objects(source: str, documents: list[Any]) -> Iterator[tuple[int, Any]]:
    if not documents:
        raise SnapshotError(f"{source}: empty: expected a Kubernetes List")
    for document in documents:
        if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
            raise SnapshotError(f"{source}: not a Kubernetes List (no 'kind' at the top level)")
        if "items" in document:
            items = document["items"]
            if items is None:
                continue
            if not isinstance(items, list):
                raise SnapshotError(f"{source}: 'items' of the {document['kind']} is not a list")
            yield from enumerate(items)
        else:
            yield 0, document


_DECODERS = {
    "Node": decode_node,
    "Service": decode_service,
    "EndpointSlice": decode_endpoint_slice,
}


def parse_snapshot(source: str, data: bytes) -> Snapshot:
    nodes: list[Node] = []
    services: dict[tuple[str, str], Service] = {}
    slices: list[EndpointSlice] = []
    for index, item in _objects(source, _parse_documents(source, data)):
        if not isinstance(item, dict):
            raise SnapshotError(f"{source}: item {index} is not an object")
        kind = item.get("kind")
        decoder = _DECODERS.get(kind) if isinstance(kind, str) else None
        if decoder is None:
            continue
        try:
            decoded = decoder(item)
        except InvalidObjectError as error:
            raise SnapshotError(f"{source}: {error}") from None
        except (ValueError, ArithmeticError) as error:
            # A value the decoder's helpers reject outside its own checks (e.g. CPU "inf").
            raise SnapshotError(f"{source}: {kind} {object_name(item)}: {error}") from None
        if isinstance(decoded, Node):
            nodes.append(decoded)
        elif isinstance(decoded, Service):
            services[decoded.key] = decoded
        elif isinstance(decoded, EndpointSlice):
            slices.append(decoded)
    return Snapshot(tuple(nodes), tuple(services.values()), tuple(slices))


def load_snapshot(source: str) -> Snapshot:
    """Read and decode a snapshot; raises SnapshotError with a one-line message."""
    return parse_snapshot(source, _read_bytes(source))
