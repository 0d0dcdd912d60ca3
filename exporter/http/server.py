"""The HTTP surface: a small HTTP/1.1 server for WSGI apps that no client can stall.

Why not wsgiref or http.server: they give each connection a thread with no bound and no
read timeout, run the TLS handshake in the accepting thread (one silent client stopped
every probe) and listen with a backlog of 5. Why not a WSGI server package: none of the
well-kept pure-Python ones terminates TLS, and mutual TLS is part of the brief.

The design: one event loop thread (asyncio, standard library) owns every socket. It
accepts, runs each TLS handshake with a timeout, reads requests through h11 (python-hyper's
sans-I/O HTTP/1.1 parser, which bounds the request head) and writes responses, a batch at
a time, each once the previous one has left. Only a complete request reaches the WSGI app,
on a small thread pool (a scrape the app has at hand, `ScrapeCosts.prepared`, on the loop
thread itself); probes have a pool of their own, so a queue of slow scrapes never
delays the kubelet, and credentials not seen before are checked (bcrypt) on a thread of
their own. Scrapes, and among them the expensive ones, take slots of a bounded number, with
a bounded queue. An idle, slow or half-open client costs one socket and a few hundred bytes,
never a thread; one that stops reading, one write batch more. Connections are bounded: at the
bound (or at the open-file limit) the connection that has waited longest for its client is
closed to admit the new one, so a thousand idle clients cannot lock a scraper out.

This module is that loop: listening, accepting and evicting connections, and each
connection's exchange of requests and responses. Its parts live beside it: reading a
request (`request`), the response and its batches (`response`), the WSGI environ and app
call (`wsgi`), slots and their queue (`slots`), authentication (`auth`), routes and probes
(`routes`), the limits (`limits`), the one log line of a failed request (`failure`); TLS
and basic-auth settings come from `webconfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import resource
import socket
import ssl
import sys
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from email.utils import formatdate
from typing import TYPE_CHECKING, cast

import h11
import structlog

from exporter.http.auth import Authenticator
from exporter.http.failure import log_failure
from exporter.http.limits import HttpLimits
from exporter.http.request import READ_SIZE, Request, read_request
from exporter.http.response import REASONS, Response, batches, busy, error_response
from exporter.http.routes import PROBE_PATHS, SCRAPE_PATHS
from exporter.http.slots import Gate, ScrapeCosts
from exporter.http.wsgi import build_environ, call_app

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment

logger = structlog.get_logger("exporter.http")

SERVER_HEADER = "topology-hints-exporter"
# Kept free for the Kubernetes client, log files and the process' own use.
FD_RESERVE = 128


def parse_listen_address(address: str) -> tuple[str, int]:
    """HOST:PORT, :PORT (every interface) or [IPv6]:PORT."""
    host, separator, port = address.rpartition(":")
    if not separator or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


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
        costs: ScrapeCosts | None = None,
        auth: Authenticator | None = None,
    ) -> None:
        """`costs` says which scrapes are expensive and which prepared (`ScrapeCosts`);
        `auth` is checked before any app runs, on its own threads."""
        self._app = app
        self._tls = tls
        self.tls = tls is not None
        self._limits = limits or HttpLimits()
        self._max_connections = max(
            16, min(self._limits.max_connections, _file_limit() - FD_RESERVE)
        )
        self._extra_headers = [(name.encode(), value.encode()) for name, value in headers]
        self._probe_paths = probe_paths
        self._costs = costs or ScrapeCosts()
        self._auth = auth
        limits = self._limits
        self._scrapes = Gate(limits.max_scrapes, limits)
        self._expensive_scrapes = Gate(limits.max_expensive_scrapes, limits)
        self._auth_checks = Gate(limits.auth_workers, limits)
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
            reader = asyncio.StreamReader(limit=READ_SIZE, loop=self._loop)
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
        except Exception as error:  # noqa: BLE001 - logged once, by log_failure
            # A bug here must cost one connection, never the server or a file descriptor.
            log_failure("connection failed", error, peer=connection.peer[0])
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
                request = await read_request(parser, reader, writer, self._limits, first=first)
            except h11.RemoteProtocolError as error:
                status = error.error_status_hint if error.error_status_hint in REASONS else 400
                await self._respond(
                    parser, writer, error_response(status, REASONS[status]), head=False
                )
                await self._linger(reader, writer)
                return
            if request is None:
                writer.transport.abort()
                return
            self._set_waiting(connection, waiting=False)
            if isinstance(request, Response):
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

    async def _handle(
        self,
        request: Request,
        connection: _Connection,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Answer one request; whatever fails in answering it is a 500 and one log line.

        Connection trouble (a client gone or not reading) goes on to `_serve`, which closes
        the connection quietly. Anything else is a bug reached by this request: it is
        logged once (`failure.log_failure`) and answered 500 if no response has begun, else
        the half-written response is cut (the client sees a short body, never a hang)."""
        head = request.head.method == b"HEAD"
        try:
            await self._answer(request, connection, parser, writer, head=head)
        except (ConnectionError, TimeoutError):
            raise
        except Exception as error:  # noqa: BLE001 - logged once, by log_failure
            log_failure(
                "request failed",
                error,
                method=request.head.method.decode("latin-1"),
                target=request.head.target.decode("latin-1")[:200],
            )
            if parser.our_state in {h11.IDLE, h11.SEND_RESPONSE}:
                await self._respond(parser, writer, error_response(500, REASONS[500]), head=head)
            else:
                writer.transport.abort()

    async def _answer(
        self,
        request: Request,
        connection: _Connection,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
        *,
        head: bool,
    ) -> None:
        """Authenticate, wait for a slot if the request needs one, run the app, respond."""
        try:
            environ = build_environ(
                request,
                writer,
                server_name=str(self._address[0]),
                server_port=self.port,
                remote_addr=str(connection.peer[0]),
                tls=self.tls,
            )
        except ValueError:
            await self._respond(parser, writer, error_response(400, REASONS[400]), head=head)
            return
        path = environ["PATH_INFO"]
        refusal = await self._authenticate(environ)
        if refusal is not None:
            await self._respond(parser, writer, refusal, head=head)
            return
        gates: list[Gate] = []
        if path in SCRAPE_PATHS:
            if self._costs.expensive(environ):
                # First: a scrape waiting its turn to be expensive holds no ordinary slot.
                gates.append(self._expensive_scrapes)
            gates.append(self._scrapes)
        held: list[Gate] = []
        try:
            for gate in gates:
                if not await gate.acquire():
                    await self._respond(parser, writer, busy(), head=head)
                    return
                held.append(gate)
            if gates and self._costs.prepared(environ):
                response = call_app(self._app, environ)
            else:
                pool = self._probe_pool if path in self._probe_paths else self._pool
                response = await self._loop.run_in_executor(pool, call_app, self._app, environ)
            await self._respond(
                parser, writer, response, head=head, path=path, holder=(connection, held)
            )
        finally:
            for gate in held:
                gate.release()

    async def _authenticate(self, environ: WSGIEnvironment) -> Response | None:
        """None when the request may go on, else the answer (401, or 503 while busy).

        Credentials verified before are known at once; others wait for the auth threads,
        so a flood of wrong passwords delays new logins, never probes or scrapes."""
        if self._auth is None:
            return None
        header = environ.get("HTTP_AUTHORIZATION", "")
        verdict = self._auth.known(header)
        if verdict is None:
            if not await self._auth_checks.acquire():
                return busy()
            try:
                verdict = await self._loop.run_in_executor(
                    self._auth_pool, self._auth.check, header
                )
            except Exception as error:  # noqa: BLE001 - logged once, by log_failure
                log_failure("checking credentials failed", error)
                return error_response(500, REASONS[500])
            finally:
                self._auth_checks.release()
        if verdict:
            return None
        return error_response(
            401, REASONS[401], [(b"WWW-Authenticate", self._auth.challenge.encode())]
        )

    async def _respond(
        self,
        parser: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Response,
        *,
        head: bool,
        path: str | None = None,
        holder: tuple[_Connection, Sequence[Gate]] | None = None,
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
            for batch in () if head else batches(response.body):
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
        holder: tuple[_Connection, Sequence[Gate]] | None,
        path: str | None,
    ) -> None:
        """Wait until the batch has left; a slot holder waiting for its client may be
        closed meanwhile to make room (`Gate.acquire`)."""
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
                        data = await reader.read(READ_SIZE)
                        if not data:
                            break
                        discarded += len(data)
        await self._close(writer)
