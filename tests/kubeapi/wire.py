"""The watch stream's wire format: one JSON line per event (an object's, a BOOKMARK, an ERROR),
sent in chunks."""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from tests.kubeapi.objects import Resource
from tests.kubeapi.options import INITIAL_EVENTS_END
from tests.kubeapi.status import status_body

_CHUNK_TARGET = 1 << 20  # watch events are batched into chunks of about this many bytes


def event_line(kind: str, obj: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (kind.encode(), obj)


def bookmark_line(served: Resource, rv: int, *, initial_events_end: bool = False) -> bytes:
    annotations = b',"annotations":{"%s":"true"}' % INITIAL_EVENTS_END.encode()
    return event_line(
        "BOOKMARK",
        served.prefix
        + b'"metadata":{"resourceVersion":"%d"%s}}'
        % (rv, annotations if initial_events_end else b""),
    )


def expired_line(rv: int, oldest: int) -> bytes:
    status = status_body(410, "Expired", f"too old resource version: {rv} ({oldest})")
    return event_line("ERROR", orjson.dumps(status))


def is_error_line(line: bytes) -> bool:
    return line.startswith(b'{"type":"ERROR"')


def is_bookmark_line(line: bytes) -> bool:
    return line.startswith(b'{"type":"BOOKMARK"')


def batches(lines: list[bytes]) -> Iterator[bytes]:
    """Lines joined into chunks of about 1 MiB."""
    batch: list[bytes] = []
    size = 0
    for line in lines:
        batch.append(line)
        size += len(line)
        if size >= _CHUNK_TARGET:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)
