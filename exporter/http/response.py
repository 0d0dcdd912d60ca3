"""One HTTP response as the server holds it: status, headers, body chunks; errors; batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

# A response is written in batches of about this size, each sent on once the previous one
# has left for the kernel: what a client that stops reading makes the server hold.
WRITE_BATCH = 64 * 1024


@dataclass(frozen=True, slots=True)
class Response:
    """What the app answers: status, headers and the body's chunks, written as they are."""

    status: int
    headers: list[tuple[bytes, bytes]]
    # The body as the app returned it, in chunks written in order, never joined: /metrics
    # is 20 MB of cached blocks.
    body: Sequence[bytes]
    close: bool = False
    reason: bytes = b""


def error_response(status: int, text: str, extra: Iterable[tuple[bytes, bytes]] = ()) -> Response:
    body = text.encode() + b"\n"
    headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", str(len(body)).encode()),
        *extra,
    ]
    return Response(
        status,
        headers,
        (body,),
        close=status in {400, 408, 413, 431, 505},
        reason=REASON_PHRASES[status],
    )


def busy() -> Response:
    """Every slot taken and the queue full (or waited on too long): come back shortly."""
    return replace(error_response(503, REASONS[503], [(b"Retry-After", b"1")]), close=True)


REASONS = {
    400: "bad request",
    401: "unauthorized",
    405: "method not allowed",
    408: "request timeout",
    413: "request body too large",
    431: "request header fields too large",
    500: "internal server error",
    503: "busy, retry later",
    505: "http version not supported",
}


REASON_PHRASES = {
    400: b"Bad Request",
    401: b"Unauthorized",
    405: b"Method Not Allowed",
    408: b"Request Timeout",
    413: b"Content Too Large",
    431: b"Request Header Fields Too Large",
    500: b"Internal Server Error",
    503: b"Service Unavailable",
    505: b"HTTP Version Not Supported",
}


def batches(chunks: Iterable[bytes]) -> Iterator[bytes | memoryview]:
    """The body in writes of about WRITE_BATCH bytes: small chunks joined (one send for
    many gzip segments), large ones cut into views of themselves (never copied)."""
    pending: list[bytes] = []
    size = 0
    for chunk in chunks:
        if len(chunk) >= WRITE_BATCH:
            if pending:
                yield b"".join(pending)
                pending, size = [], 0
            view = memoryview(chunk)
            for offset in range(0, len(chunk), WRITE_BATCH):
                yield view[offset : offset + WRITE_BATCH]
            continue
        if chunk:
            pending.append(chunk)
            size += len(chunk)
            if size >= WRITE_BATCH:
                yield b"".join(pending)
                pending, size = [], 0
    if pending:
        yield b"".join(pending)
