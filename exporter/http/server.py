"""The HTTP surface: a small HTTP/1.1 server for WSGI apps that no client can stall.

Why not wsgiref or http.server: they give each connection a thread with no bound and no
read timeout, run the TLS handshake in the accepting thread (one silent client stopped
every probe) and listen with a backlog of 5. Why not a WSGI server package: none of the
well-kept pure-Python ones terminates TLS, and mutual TLS is part of the brief.

The design: one event loop thread (asyncio, standard library) owns every socket. It
accepts, runs each TLS handshake with a timeout, reads requests through h11 (python-hyper's
sans-I/O HTTP/1.1 parser, which bounds the request head) and writes responses, a batch at
a time, each once the previous one has left. Only a complete request reaches the WSGI app,
on a small thread pool; probes have a pool of their own, so a queue of slow scrapes never
delays the kubelet, and credentials not seen before are checked (bcrypt) on a thread of
their own. Scrapes, and among them the expensive ones, take slots of a bounded number, with
a bounded queue. An idle, slow or half-open client costs one socket and a few hundred bytes,
never a thread; one that stops reading, one write batch more. Connections are bounded: at the
bound (or at the open-file limit) the connection that has waited longest for its client is
closed to admit the new one, so a thousand idle clients cannot lock a scraper out.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import errno
import io
import resource
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from email.utils import formatdate
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import unquote_to_bytes, urlsplit

import h11
import structlog

from exporter.http.webconfig import PasswordCheck

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

logger = structlog.get_logger("exporter.http")

Check = Callable[[], tuple[bool, str]]
# Path -> app. A key ending in "/*" also serves every path below it ("/api/v1/*").
Routes = dict[str, "WSGIApplication"]

SERVER_HEADER = "topology-hints-exporter"
ALLOWED_METHODS = (b"GET", b"HEAD")
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
SCRAPE_PATHS = frozenset({"/metrics"})
# The request versions served; any other (HTTP/2.0, HTTP/3.0 in HTTP/1 syntax) gets 505.
HTTP_VERSIONS = frozenset({b"1.0", b"1.1"})
# Kept free for the Kubernetes client, log files and the process' own use.
FD_RESERVE = 128
_READ_SIZE = 64 * 1024
# A response is written in batches of about this size, each sent on once the previous one
# has left for the kernel: what a client that stops reading makes the server hold.
_WRITE_BATCH = 64 * 1024
# Hop-by-hop headers are the server's business, not the app's (PEP 3333).
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_connections: int = 1000
    workers: int = 4
    probe_workers: int = 2
    max_header_bytes: int = 16 * 1024
    max_body_bytes: int = 64 * 1024
    handshake_timeout: float = 10.0
    # From a request's first byte to its last.
    request_timeout: float = 10.0
    # A kept-alive connection waiting for its next request (Prometheus reuses connections
    # between scrapes; an idle one is also the first closed when connections run short).
    idle_timeout: float = 60.0
    # Writing a response may stall this long without progress.
    write_timeout: float = 30.0
    # The kernel caps it at net.core.somaxconn (4096 since Linux 5.4): many scrapers
    # connecting at once must not wait for a SYN retransmit.
    backlog: int = 4096
    # Scrapes (SCRAPE_PATHS) answered at once, each from the app call to its last byte
    # written: one that never reads holds its slot until write_timeout. A slot costs a
    # reference to a rendered body and at most one write batch (_WRITE_BATCH) of copies.
    max_scrapes: int = 16
    # Of those, the ones the app calls expensive (prometheus_client renders the whole
    # registry anew, ~7x the cached body's time, into a private copy of the body).
    max_expensive_scrapes: int = 1
    # Threads that check credentials seen for the first time (bcrypt, tens of ms each by
    # design), apart from every other pool: a wrong-password flood waits here, not probes.
    auth_workers: int = 1
    # Requests waiting for one of the slots above: beyond `max_queued` per kind, or after
    # `queue_timeout` of waiting, the answer is 503 with Retry-After.
    max_queued: int = 64
    queue_timeout: float = 10.0
    # While a request waits for a scrape slot, a scrape that has waited this long for its
    # client to read gives its slot up (closed, as the oldest idle connection is): clients
    # that never read cannot keep Prometheus out for write_timeout.
    stall_grace: float = 1.0


# -- the app: routes, probes, auth ----------------------------------------------------------


def plain_text(
    start_response: StartResponse,
    status: str,
    body: str,
    content_type: str = "text/plain",
    headers: Iterable[tuple[str, str]] = (),
) -> list[bytes]:
    data = body.encode()
    start_response(
        status,
        [
            ("Content-Type", f"{content_type}; charset=utf-8"),
            ("Content-Length", str(len(data))),
            *headers,
        ],
    )
    return [data]


def default_routes(metrics_app: WSGIApplication, *, ready: Check, healthy: Check) -> Routes:
    """/metrics, /healthz and /readyz; the status pages merge their routes on top."""

    def probe(check: Check) -> WSGIApplication:
        def app(_environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            ok, detail = check()
            status = "200 OK" if ok else "503 Service Unavailable"
            return plain_text(start_response, status, detail + "\n")

        return app

    return {
        "/metrics": metrics_app,
        "/healthz": probe(healthy),
        "/readyz": probe(ready),
    }


def route(routes: Mapping[str, WSGIApplication], path: str) -> WSGIApplication | None:
    """The app for an exact path, else for the longest "/prefix/*" route above it."""
    found = routes.get(path)
    if found is not None:
        return found
    best: tuple[int, WSGIApplication] | None = None
    for key, app in routes.items():
        if (
            key.endswith("/*")
            and path.startswith(key[:-1])
            and (best is None or len(key) > best[0])
        ):
            best = (len(key), app)
    return best[1] if best else None


def make_app(routes: Mapping[str, WSGIApplication]) -> WSGIApplication:
    """Serve `routes`, read on each request: routes merged in before start() are served."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        target = route(routes, environ.get("PATH_INFO", "/"))
        if target is None:
            # The path is not echoed: a response never reflects what the client sent.
            return plain_text(start_response, "404 Not Found", "not found\n")
        body: Iterable[bytes] = target(environ, start_response)
        return body

    return app


class Authenticator(Protocol):
    """What the server asks of an authentication scheme, in two steps: `known` runs on the
    event loop and must be cheap; `check` may be slow (bcrypt) and runs on its own threads."""

    # The WWW-Authenticate header of a 401.
    challenge: str

    def known(self, header: str) -> bool | None:
        """The verdict on an Authorization header if it needs no slow work, else None."""

    def check(self, header: str) -> bool:
        """The verdict on an Authorization header that `known` left open."""


class BasicAuth:
    """HTTP basic auth as exporter-toolkit's basic_auth_users: webconfig.PasswordCheck checks
    the credentials (bcrypt), what needs no bcrypt on the loop, the rest on a thread."""

    challenge = 'Basic realm="topology-hints-exporter", charset="UTF-8"'

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._check = PasswordCheck(users)

    def known(self, header: str) -> bool | None:
        """False for missing or malformed credentials and for passwords bcrypt cannot read,
        True for ones verified before; None for the rest (unknown users too: their decoy
        check must take bcrypt's time)."""
        credentials = _basic_credentials(header)
        if credentials is None:
            return False
        return self._check.known(*credentials)

    def check(self, header: str) -> bool:
        credentials = _basic_credentials(header)
        return credentials is not None and self._check.verify(*credentials)


def _basic_credentials(header: str) -> tuple[bytes, bytes] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, separator, password = decoded.partition(b":")
    return (user, password) if separator else None


def parse_listen_address(address: str) -> tuple[str, int]:
    """HOST:PORT, :PORT (every interface) or [IPv6]:PORT."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


# -- the server -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Request:
    head: h11.Request
    body: bytes


@dataclass(frozen=True, slots=True)
class _Response:
    status: int
    headers: list[tuple[bytes, bytes]]
    # The body as the app returned it, in chunks written in order, never joined: /metrics
    # is 20 MB of cached blocks.
    body: Sequence[bytes]
    close: bool = False
    reason: bytes = b""


class _Connection:
    """One client; `waiting` while the server waits for it (and may close it for another)."""

    __slots__ = ("peer", "sock", "started", "task", "waiting")

    def __init__(self, peer: tuple[str, int], sock: socket.socket) -> None:
        self.peer = peer
        # The accepted socket, until its task runs and hands it to a transport.
        self.sock = sock
        self.started = False
        self.task: asyncio.Task[None] | None = None
        self.waiting = True


def _error(status: int, text: str, extra: Iterable[tuple[bytes, bytes]] = ()) -> _Response:
    body = text.encode() + b"\n"
    headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", str(len(body)).encode()),
        *extra,
    ]
    return _Response(
        status,
        headers,
        (body,),
        close=status in {400, 408, 413, 431, 505},
        reason=_REASON_PHRASES[status],
    )


_REASONS = {
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


_REASON_PHRASES = {
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


def _file_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return sys.maxsize if soft == resource.RLIM_INFINITY else soft


class MetricsServer:
    """Serves a WSGI app; `start()` returns once it accepts connections."""

    def __init__(
        self,
        app: WSGIApplication,
        address: str,
        *,
        tls: ssl.SSLContext | None = None,
        limits: HttpLimits | None = None,
        headers: Iterable[tuple[str, str]] = (),
        probe_paths: frozenset[str] = PROBE_PATHS,
        expensive: Callable[[WSGIEnvironment], bool] | None = None,
        auth: Authenticator | None = None,
    ) -> None:
        """`expensive` says which scrapes cost more than a cached body (they queue for
        max_expensive_scrapes); `auth` is checked before any app runs, on its own threads."""
        self._app = app
        self._tls = tls
        self.tls = tls is not None
        self._limits = limits or HttpLimits()
        self._max_connections = max(
            16, min(self._limits.max_connections, _file_limit() - FD_RESERVE)
        )
        self._extra_headers = [(name.encode(), value.encode()) for name, value in headers]
        self._probe_paths = probe_paths
        self._expensive = expensive
        self._auth = auth
        limits = self._limits
        self._scrapes = _Gate(limits.max_scrapes, limits)
        self._expensive_scrapes = _Gate(limits.max_expensive_scrapes, limits)
        self._auth_checks = _Gate(limits.auth_workers, limits)
        host, port = parse_listen_address(address)
        host = host or "0.0.0.0"  # noqa: S104 - ":PORT" means every interface, as Go exporters do
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            # A restarted exporter may bind while old connections linger in TIME_WAIT.
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(self._limits.backlog)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)  # noqa: FBT003 - the stdlib's signature
        self._address = self._listener.getsockname()
        self._loop = asyncio.new_event_loop()
        self._connections: dict[_Connection, None] = {}
        self._pool = ThreadPoolExecutor(self._limits.workers, thread_name_prefix="http-worker")
        self._probe_pool = ThreadPoolExecutor(
            self._limits.probe_workers, thread_name_prefix="http-probe"
        )
        self._auth_pool = ThreadPoolExecutor(
            self._limits.auth_workers, thread_name_prefix="http-auth"
        )
        self._thread = threading.Thread(target=self._run, name="http", daemon=True)
        self._running = threading.Event()

    @property
    def port(self) -> int:
        return int(self._address[1])

    @property
    def url(self) -> str:
        host = str(self._address[0])
        shown = "127.0.0.1" if host in {"0.0.0.0", ""} else host  # noqa: S104
        if ":" in shown:
            shown = f"[{shown}]"
        return f"{'https' if self.tls else 'http'}://{shown}:{self.port}/"

    @property
    def max_connections(self) -> int:
        return self._max_connections

    @property
    def queued_scrapes(self) -> int:
        """Scrapes waiting for a slot now (an int the loop thread writes: safe to read)."""
        return self._scrapes.waiting

    def start(self) -> None:
        self._thread.start()
        self._running.wait()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._shutdown)
            self._thread.join(timeout=10)
        else:
            self._listener.close()
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._probe_pool.shutdown(wait=False, cancel_futures=True)
        self._auth_pool.shutdown(wait=False, cancel_futures=True)

    # -- event loop ------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.add_reader(self._listener.fileno(), self._accept)
        self._loop.call_soon(self._running.set)
        try:
            self._loop.run_forever()
            tasks = [conn.task for conn in self._connections if conn.task is not None]
            for task in tasks:
                task.cancel()
            if tasks:
                self._loop.run_until_complete(
                    asyncio.wait(tasks, timeout=self._limits.write_timeout)
                )
        finally:
            self._listener.close()
            self._loop.close()

    def _shutdown(self) -> None:
        self._loop.remove_reader(self._listener.fileno())
        self._loop.stop()

    def _accept(self) -> None:
        # Accept everything pending now: under a burst the backlog empties in one wake-up.
        for _ in range(self._limits.backlog):
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}:
                    self._out_of_descriptors()
                    return
                # ECONNABORTED and the like: that client is gone, the next one is not.
                continue
            if len(self._connections) >= self._max_connections and not self._evict():
                # Every connection is being served: refuse this one rather than break one.
                sock.close()
                continue
            sock.setblocking(False)  # noqa: FBT003
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = _Connection(peer, sock)
            self._connections[connection] = None
            connection.task = self._loop.create_task(self._serve(connection, sock))

    def _out_of_descriptors(self) -> None:
        """The process has no file descriptor left: free some, and listen again shortly."""
        logger.warning("out of file descriptors; closing idle connections")
        for _ in range(8):
            if not self._evict():
                break
        self._loop.remove_reader(self._listener.fileno())

        def resume() -> None:
            if self._listener.fileno() != -1:  # not closed by stop() meanwhile
                self._loop.add_reader(self._listener.fileno(), self._accept)

        # The evicted sockets close on the loop's next turns.
        self._loop.call_later(0.05, resume)

    def _evict(self) -> bool:
        """Close the connection that has waited longest for its client; False if none waits."""
        for connection in self._connections:
            if connection.waiting and connection.task is not None:
                del self._connections[connection]
                connection.task.cancel()
                if not connection.started:
                    # A task cancelled before its first step never runs its `finally`, and
                    # the socket would wait for the cycle collector: close it now.
                    connection.sock.close()
                connection.task = None
                return True
        return False

    def _set_waiting(self, connection: _Connection, *, waiting: bool) -> None:
        connection.waiting = waiting
        if waiting and connection in self._connections:
            # Re-inserted at the end: the dict is ordered by how long each has waited.
            del self._connections[connection]
            self._connections[connection] = None

    # -- one connection --------------------------------------------------------------------

    async def _serve(self, connection: _Connection, sock: socket.socket) -> None:
        transport: asyncio.Transport | None = None
        connection.started = True
        try:
            reader = asyncio.StreamReader(limit=_READ_SIZE, loop=self._loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=self._loop)
            if self._tls is None:
                transport, _ = await self._loop.connect_accepted_socket(lambda: protocol, sock)
            else:
                transport, _ = await self._loop.connect_accepted_socket(
                    lambda: protocol,
                    sock,
                    ssl=self._tls,
                    ssl_handshake_timeout=self._limits.handshake_timeout,
                    ssl_shutdown_timeout=self._limits.handshake_timeout,
                )
            # No buffer beyond what one write leaves unsent: drain() waits until it has gone.
            transport.set_write_buffer_limits(high=0)
            writer = asyncio.StreamWriter(transport, protocol, reader, self._loop)
            await self._exchange(connection, reader, writer)
        except (OSError, asyncio.CancelledError, h11.ProtocolError, TimeoutError):
            # A client that vanished, failed its handshake, timed out or was closed to make
            # room: nothing to tell anyone (mTLS refusals are the client's to see).
            if transport is not None:
                transport.abort()
        except Exception:
            # A bug here must cost one connection, never the server or a file descriptor.
            logger.exception("connection failed")
            if transport is not None:
                transport.abort()
        finally:
            self._connections.pop(connection, None)
            # No cycle through the task's traceback keeps the connection (and its socket).
            connection.task = None
            if transport is None:
                sock.close()

    async def _exchange(
        self, connection: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        parser = h11.Connection(h11.SERVER, max_incomplete_event_size=self._limits.max_header_bytes)
        first = True
        while True:
            self._set_waiting(connection, waiting=True)
            try:
                request = await self._read_request(parser, reader, writer, first=first)
            except h11.RemoteProtocolError as error:
                status = error.error_status_hint if error.error_status_hint in _REASONS else 400
                await self._respond(parser, writer, _error(status, _REASONS[status]), head=False)
                await self._linger(reader, writer)
                return
            if request is None:
                writer.transport.abort()
                return
            self._set_waiting(connection, waiting=False)
            if isinstance(request, _Response):
                # Refused before its body was read: the connection cannot carry another.
                await self._respond(parser, writer, replace(request, close=True), head=False)
                await self._linger(reader, writer)
                return
            await self._handle(request, connection, parser, writer)
            if parser.our_state is not h11.DONE or parser.their_state is not h11.DONE:
                await self._close(writer)
                return
            parser.start_next_cycle()
            first = False

    async def _read_request(
        self,
        parser: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        first: bool,
    ) -> _Request | _Response | None:
        """A complete request, an error to answer with, or None: close without a word."""
        limits = self._limits
        # A new connection gets request_timeout for its first request; a kept-alive one
        # may idle longer between scrapes.
        deadline = self._loop.time() + (limits.request_timeout if first else limits.idle_timeout)
        started = False
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = parser.next_event()
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout_at(deadline):
                        data = await reader.read(_READ_SIZE)
                except TimeoutError:
                    return _error(408, _REASONS[408]) if started else None
                if data and not started:
                    started = True
                    deadline = self._loop.time() + limits.request_timeout
                parser.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
                refusal = self._refusal(event)
                if refusal is not None:
                    return refusal
                _continue(parser, writer)
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limits.max_body_bytes:
                    return _error(413, _REASONS[413])
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return _Request(head, bytes(body))
            else:
                # ConnectionClosed (or PAUSED, which cannot happen here): the client left.
                return None

    def _refusal(self, head: h11.Request) -> _Response | None:
        """The answer to a request refused on its head alone, before any body is read."""
        # h11 bounds a head that arrives in pieces; one that arrives whole is measured here.
        if _head_size(head) > self._limits.max_header_bytes:
            return _error(431, _REASONS[431])
        if head.http_version not in HTTP_VERSIONS:
            return _error(505, _REASONS[505])
        names = {name for name, _ in head.headers}
        if b"transfer-encoding" in names and b"content-length" in names:
            # RFC 9112 6.1: a request that frames its body twice is how requests are
            # smuggled past a proxy; it is refused and its connection closed.
            return _error(400, _REASONS[400])
        if head.method not in ALLOWED_METHODS:
            return _error(405, _REASONS[405], [(b"Allow", b"GET, HEAD")])
        length = _content_length(head.headers)
        if length is not None and length > self._limits.max_body_bytes:
            return _error(413, _REASONS[413])
        return None

    async def _handle(
        self,
        request: _Request,
        connection: _Connection,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Authenticate, wait for a slot if the request needs one, run the app, respond."""
        head = request.head.method == b"HEAD"
        try:
            environ = self._environ(request, connection, writer)
        except ValueError:
            await self._respond(parser, writer, _error(400, _REASONS[400]), head=head)
            return
        path = environ["PATH_INFO"]
        refusal = await self._authenticate(environ)
        if refusal is not None:
            await self._respond(parser, writer, refusal, head=head)
            return
        gates: list[_Gate] = []
        if path in SCRAPE_PATHS:
            if self._expensive is not None and self._expensive(environ):
                # First: a scrape waiting its turn to be expensive holds no ordinary slot.
                gates.append(self._expensive_scrapes)
            gates.append(self._scrapes)
        held: list[_Gate] = []
        try:
            for gate in gates:
                if not await gate.acquire():
                    await self._respond(parser, writer, _busy(), head=head)
                    return
                held.append(gate)
            pool = self._probe_pool if path in self._probe_paths else self._pool
            response = await self._loop.run_in_executor(pool, self._call_app, environ)
            await self._respond(
                parser, writer, response, head=head, path=path, holder=(connection, held)
            )
        finally:
            for gate in held:
                gate.release()

    async def _authenticate(self, environ: WSGIEnvironment) -> _Response | None:
        """None when the request may go on, else the answer (401, or 503 while busy).

        Credentials verified before are known at once; others wait for the auth threads,
        so a flood of wrong passwords delays new logins, never probes or scrapes."""
        if self._auth is None:
            return None
        header = environ.get("HTTP_AUTHORIZATION", "")
        verdict = self._auth.known(header)
        if verdict is None:
            if not await self._auth_checks.acquire():
                return _busy()
            try:
                verdict = await self._loop.run_in_executor(
                    self._auth_pool, self._auth.check, header
                )
            except Exception:
                logger.exception("checking credentials failed")
                return _error(500, _REASONS[500])
            finally:
                self._auth_checks.release()
        if verdict:
            return None
        return _error(401, _REASONS[401], [(b"WWW-Authenticate", self._auth.challenge.encode())])

    def _environ(
        self, request: _Request, connection: _Connection, writer: asyncio.StreamWriter
    ) -> WSGIEnvironment:
        target = request.head.target.decode("ascii")
        if target.startswith("/"):
            path, _, query = target.partition("?")
        elif target != "*" and "://" in target:
            # Absolute-form (RFC 9112 3.2.2): routed by its path, "/" when it has none.
            parts = urlsplit(target)
            path, query = parts.path or "/", parts.query
        else:
            raise ValueError("not an origin-form or absolute-form target")
        environ: dict[str, object] = {
            "REQUEST_METHOD": request.head.method.decode("ascii"),
            "SCRIPT_NAME": "",
            # PEP 3333: the decoded path, as latin-1 "bytes in a str".
            "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query,
            "SERVER_NAME": str(self._address[0]),
            "SERVER_PORT": str(self.port),
            "SERVER_PROTOCOL": "HTTP/" + request.head.http_version.decode("ascii"),
            "REMOTE_ADDR": str(connection.peer[0]),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.tls else "http",
            "wsgi.input": io.BytesIO(request.body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        peercert = writer.get_extra_info("peercert")
        if peercert:
            environ["exporter.client_certificate"] = peercert
        for raw_name, raw_value in request.head.headers:
            name = raw_name.decode("latin-1").upper().replace("-", "_")
            value = raw_value.decode("latin-1")
            if name in {"CONTENT_TYPE", "CONTENT_LENGTH"}:
                environ[name] = value
                continue
            key = "HTTP_" + name
            existing = environ.get(key)
            environ[key] = value if existing is None else f"{existing},{value}"
        return environ

    def _call_app(self, environ: WSGIEnvironment) -> _Response:
        """Run the WSGI app (in a worker thread) and collect its whole response."""
        started: list[tuple[str, list[tuple[str, str]]]] = []
        written: list[bytes] = []

        def start_response(
            status: str,
            headers: list[tuple[str, str]],
            exc_info: tuple[type[BaseException], BaseException, TracebackType]
            | tuple[None, None, None]
            | None = None,
        ) -> Callable[[bytes], object]:
            if exc_info is not None and exc_info[1] is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [(status, headers)]
            return written.append

        try:
            result = self._app(environ, start_response)
            try:
                chunks = [*written, *result]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:
            # The traceback goes to the log; the client learns only that it failed.
            logger.exception("request failed", path=environ.get("PATH_INFO"))
            return _error(500, _REASONS[500])
        if not started:
            logger.error("app returned without starting a response", path=environ["PATH_INFO"])
            return _error(500, _REASONS[500])
        status, app_headers = started[0]
        headers = [
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in app_headers
            if name.lower().encode("latin-1") not in _HOP_BY_HOP
        ]
        if not any(name.lower() == b"content-length" for name, _ in headers):
            headers.append((b"Content-Length", str(sum(map(len, chunks))).encode()))
        code, _, reason = status.partition(" ")
        return _Response(int(code), headers, chunks, reason=reason.encode("latin-1"))

    async def _respond(
        self,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
        response: _Response,
        *,
        head: bool,
        path: str | None = None,
        holder: tuple[_Connection, Sequence[_Gate]] | None = None,
    ) -> None:
        """Write a response batch by batch, each once the previous one has left.

        What a slow client costs is then one batch, and the body's own chunks (shared with
        every other response of the same state) are never copied into a buffer of its own.
        A client that goes away stops the writing at once, with one line in the log.
        """
        if parser.our_state not in {h11.IDLE, h11.SEND_RESPONSE}:
            return
        headers = [
            *response.headers,
            (b"Server", SERVER_HEADER.encode()),
            (b"Date", formatdate(usegmt=True).encode()),
            *self._extra_headers,
        ]
        if response.close:
            headers.append((b"Connection", b"close"))
        sent = 0
        try:
            writer.write(
                parser.send(
                    h11.Response(
                        status_code=response.status, headers=headers, reason=response.reason
                    )
                )
            )
            for batch in () if head else _batches(response.body):
                if writer.transport.is_closing():
                    raise ConnectionResetError("connection lost")
                # h11 only counts a batch against Content-Length and passes it through.
                data = h11.Data(data=cast("bytes", batch))
                for piece in parser.send_with_data_passthrough(data) or ():
                    writer.write(piece)
                await self._drain(writer, holder, path)
                sent += len(batch)
            writer.write(parser.send(h11.EndOfMessage()))
            async with asyncio.timeout(self._limits.write_timeout):
                await writer.drain()
        except (ConnectionError, TimeoutError) as error:
            if path is not None:
                logger.info(
                    "response abandoned",
                    reason="client stopped reading"
                    if isinstance(error, TimeoutError)
                    else "connection lost",
                    path=path,
                    status=response.status,
                    body_bytes_sent=sent,
                )
            raise

    async def _drain(
        self,
        writer: asyncio.StreamWriter,
        holder: tuple[_Connection, Sequence[_Gate]] | None,
        path: str | None,
    ) -> None:
        """Wait until the batch has left; a slot holder waiting for its client may be
        closed meanwhile to make room (`_Gate.acquire`)."""
        if writer.transport.get_write_buffer_size() == 0 and not writer.transport.is_closing():
            # All of it went to the kernel: no wait, and no timer to set and cancel.
            return
        if holder is not None:
            for gate in holder[1]:
                gate.stalled(holder[0], self._loop.time(), path)
        try:
            async with asyncio.timeout(self._limits.write_timeout):
                await writer.drain()
        finally:
            if holder is not None:
                for gate in holder[1]:
                    gate.moving(holder[0])

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        """Close after the response has left (close() flushes; wait_closed() waits for it)."""
        writer.close()
        try:
            async with asyncio.timeout(self._limits.write_timeout):
                await writer.wait_closed()
        except (TimeoutError, OSError):
            writer.transport.abort()

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """After an error, read and drop what the client still sends for a moment.

        Closing a socket with unread data makes the kernel send a reset, and the client
        may then lose the error response it was about to read (Go's server does the same).
        """
        if writer.can_write_eof():
            writer.write_eof()
            discarded = 0
            with contextlib.suppress(TimeoutError, OSError):
                async with asyncio.timeout(1.0):
                    while discarded < 4 * 1024 * 1024:
                        data = await reader.read(_READ_SIZE)
                        if not data:
                            break
                        discarded += len(data)
        await self._close(writer)


def _batches(chunks: Iterable[bytes]) -> Iterator[bytes | memoryview]:
    """The body in writes of about _WRITE_BATCH bytes: small chunks joined (one send for
    many gzip segments), large ones cut into views of themselves (never copied)."""
    pending: list[bytes] = []
    size = 0
    for chunk in chunks:
        if len(chunk) >= _WRITE_BATCH:
            if pending:
                yield b"".join(pending)
                pending, size = [], 0
            view = memoryview(chunk)
            for offset in range(0, len(chunk), _WRITE_BATCH):
                yield view[offset : offset + _WRITE_BATCH]
            continue
        if chunk:
            pending.append(chunk)
            size += len(chunk)
            if size >= _WRITE_BATCH:
                yield b"".join(pending)
                pending, size = [], 0
    if pending:
        yield b"".join(pending)


class _Gate:
    """At most `slots` requests at once, at most `max_queued` more waiting, each for
    `queue_timeout` at most; a waiting one closes a holder stalled `stall_grace` on its
    client, the one stalled longest. Used only on the event loop thread."""

    def __init__(self, slots: int, limits: HttpLimits) -> None:
        self._semaphore = asyncio.Semaphore(slots)
        self._limits = limits
        self._waiting = 0
        # Holders waiting for their client to read: since when, and what they answer.
        self._stalled: dict[_Connection, tuple[float, str | None]] = {}

    async def acquire(self) -> bool:
        """True once the request holds a slot (release() it); False: answer it 503."""
        limits = self._limits
        if self._semaphore.locked() and self._waiting >= limits.max_queued:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.queue_timeout
        self._waiting += 1
        try:
            while True:
                self._close_stalled(loop.time() - limits.stall_grace)
                try:
                    async with asyncio.timeout(min(limits.stall_grace, deadline - loop.time())):
                        await self._semaphore.acquire()
                except TimeoutError:
                    if loop.time() >= deadline:
                        return False
                    continue
                return True
        finally:
            self._waiting -= 1

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return self._waiting

    def release(self) -> None:
        self._semaphore.release()

    def stalled(self, connection: _Connection, since: float, path: str | None) -> None:
        self._stalled[connection] = (since, path)

    def moving(self, connection: _Connection) -> None:
        self._stalled.pop(connection, None)

    def _close_stalled(self, before: float) -> None:
        """Close the holder stalled longest, if since `before`: its slot goes to a waiter."""
        if not self._semaphore.locked() or not self._stalled:
            return
        connection, (since, path) = next(iter(self._stalled.items()))
        if since > before:
            return
        del self._stalled[connection]
        if connection.task is not None:
            logger.info(
                "response abandoned",
                reason="client stopped reading; its slot went to a waiting request",
                path=path,
            )
            connection.task.cancel()


def _busy() -> _Response:
    """Every slot taken and the queue full (or waited on too long): come back shortly."""
    return replace(_error(503, _REASONS[503], [(b"Retry-After", b"1")]), close=True)


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
