"""Reading one HTTP request off a connection, within the limits: whole, refused, or nothing.

h11 (python-hyper's sans-I/O HTTP/1.1 parser) parses and bounds a head that arrives in
pieces; what it leaves to the server (a head that arrives whole, the versions, methods and
body sizes served, a body framed twice) is refused here, before any body is read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

import h11

from exporter.http.limits import HttpLimits
from exporter.http.response import REASONS, Response, error_response

ALLOWED_METHODS = (b"GET", b"HEAD")
# The request versions served; any other (HTTP/2.0, HTTP/3.0 in HTTP/1 syntax) gets 505.
HTTP_VERSIONS = frozenset({b"1.0", b"1.1"})
READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """A whole request as read off a connection: h11's head and the body."""

    head: h11.Request
    body: bytes


async def read_request(
    parser: h11.Connection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    limits: HttpLimits,
    *,
    first: bool,
) -> Request | Response | None:
    """A complete request, an error to answer with, or None: close without a word."""
    loop = asyncio.get_running_loop()
    # A new connection gets request_timeout for its first request; a kept-alive one
    # may idle longer between scrapes.
    deadline = loop.time() + (limits.request_timeout if first else limits.idle_timeout)
    started = False
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = parser.next_event()
        if event is h11.NEED_DATA:
            try:
                async with asyncio.timeout_at(deadline):
                    data = await reader.read(READ_SIZE)
            except TimeoutError:
                return error_response(408, REASONS[408]) if started else None
            if data and not started:
                started = True
                deadline = loop.time() + limits.request_timeout
            parser.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
            refused = refusal(event, limits)
            if refused is not None:
                return refused
            _continue(parser, writer)
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > limits.max_body_bytes:
                return error_response(413, REASONS[413])
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            return Request(head, bytes(body))
        else:
            # ConnectionClosed (or PAUSED, which cannot happen here): the client left.
            return None


def refusal(head: h11.Request, limits: HttpLimits) -> Response | None:
    """The answer to a request refused on its head alone, before any body is read."""
    # h11 bounds a head that arrives in pieces; one that arrives whole is measured here.
    if _head_size(head) > limits.max_header_bytes:
        return error_response(431, REASONS[431])
    if head.http_version not in HTTP_VERSIONS:
        return error_response(505, REASONS[505])
    names = {name for name, _ in head.headers}
    if b"transfer-encoding" in names and b"content-length" in names:
        # RFC 9112 6.1: a request that frames its body twice is how requests are
        # smuggled past a proxy; it is refused and its connection closed.
        return error_response(400, REASONS[400])
    if head.method not in ALLOWED_METHODS:
        return error_response(405, REASONS[405], [(b"Allow", b"GET, HEAD")])
    length = _content_length(head.headers)
    if length is not None and length > limits.max_body_bytes:
        return error_response(413, REASONS[413])
    return None


def _continue(parser: h11.Connection, writer: asyncio.StreamWriter) -> None:
    """Tell a client that sent `Expect: 100-continue` to send its (small) body."""
    if parser.they_are_waiting_for_100_continue:
        writer.write(parser.send(h11.InformationalResponse(status_code=100, headers=[])))


def _head_size(head: h11.Request) -> int:
    """The request head's size on the wire, give or take optional whitespace."""
    line = len(head.method) + len(head.target) + len(b"  HTTP/1.1\r\n")
    return line + sum(len(name) + len(value) + 4 for name, value in head.headers) + 2


def _content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            # h11 has already checked that it is a number.
            return int(value)
    return None
