"""HTTP semantics on real sockets: methods, HEAD, size limits, errors that reveal nothing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from exporter.http.limits import HttpLimits
from exporter.http.routes import make_app, route
from exporter.http.server import MetricsServer
from tests.http.support import Served, serve

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serve() as running:
        yield running


def exchange(served: Served, raw: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes, read until the server closes or stays silent; return what came back."""
    with socket.create_connection((served.host, served.port), timeout=timeout) as sock:
        sock.sendall(raw)
        return read_all(sock, quiet=1.0)


def read_all(sock: socket.socket, quiet: float) -> bytes:
    received = b""
    sock.settimeout(quiet)
    while True:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return received
        except ConnectionResetError:
            return received
        if not data:
            return received
        received += data


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def headers_of(response: bytes) -> dict[str, str]:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    pairs = (line.split(":", 1) for line in head.split("\r\n")[1:])
    return {name.strip().lower(): value.strip() for name, value in pairs}


def body_of(response: bytes) -> bytes:
    return response.split(b"\r\n\r\n", 1)[1]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "TRACE", "OPTIONS", "PATCH", "FOO"])
def test_only_get_and_head_are_served(served: Served, method: str) -> None:
    """Any other method: 405 with Allow, a short body, never the exposition."""
    status, headers, body = served.get("/metrics", method=method)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert body == b"method not allowed\n"


def test_post_with_a_body_is_refused_and_the_connection_closed(served: Served) -> None:
    response = exchange(
        served,
        b"POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    )
    assert status_of(response) == 405
    assert headers_of(response)["connection"] == "close"


def test_head_has_the_headers_of_get_and_no_body(served: Served) -> None:
    """HEAD answers like GET without a body: the next pipelined response follows at once."""
    response = exchange(
        served,
        b"HEAD /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n"
        b"Connection: close\r\n\r\n",
    )
    head, rest = response.split(b"\r\n\r\n", 1)
    assert status_of(head) == 200
    assert headers_of(response)["content-length"] == "3"
    assert rest.startswith(b"HTTP/1.1 200 OK\r\n")
    assert rest.endswith(b"\r\n\r\nok\n")
    status, headers, body = served.get("/metrics", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"].startswith("text/plain")
    assert int(headers["Content-Length"]) > 1000


def test_unknown_paths_are_404_without_echoing_the_path(served: Served) -> None:
    """Unknown paths reach the status pages' 404, which names neither the path nor the query."""
    status, _, body = served.get("/secret%3Cscript%3E?q=%3Cb%3E")
    assert status == 404
    assert b"Nothing is served at this address." in body
    for echo in (b"secret", b"%3C", b"<b>", b"q="):
        assert echo not in body


def test_server_header_names_no_version(served: Served) -> None:
    for path in ("/metrics", "/healthz", "/nope"):
        _, headers, _ = served.get(path)
        assert headers["Server"] == "topology-hints-exporter"


def test_oversized_header_is_431(served: Served) -> None:
    """One header over the 16 KiB head limit, arriving whole, is refused."""
    big = b"a" * (20 * 1024)
    response = exchange(served, b"GET /metrics HTTP/1.1\r\nHost: a\r\nX-Big: " + big + b"\r\n\r\n")
    assert status_of(response) == 431
    assert body_of(response) == b"request header fields too large\n"


def test_a_megabyte_of_headers_is_431_and_not_read_to_the_end(served: Served) -> None:
    """5.4 MB of headers used to be accepted; the server stops reading at the limit."""
    with socket.create_connection((served.host, served.port), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n")

        def flood() -> None:
            try:
                for index in range(20_000):
                    sock.sendall(b"X-H%d: %s\r\n" % (index, b"v" * 40))
            except OSError:
                return  # the server closed the connection: what is expected

        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        response = read_all(sock, quiet=5.0)
        sender.join(10)
    assert status_of(response) == 431


def test_long_request_line_is_refused(served: Served) -> None:
    response = exchange(served, b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n")
    assert status_of(response) == 431


def test_a_large_declared_body_is_413_without_reading_it(served: Served) -> None:
    response = exchange(
        served, b"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\nxyz"
    )
    assert status_of(response) == 413
    assert headers_of(response)["connection"] == "close"


def test_a_large_chunked_body_is_413(served: Served) -> None:
    chunk = b"8000\r\n" + b"z" * 0x8000 + b"\r\n"
    response = exchange(
        served,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 4,
    )
    assert status_of(response) == 413


def test_a_small_body_on_get_is_read_and_ignored(served: Served) -> None:
    response = exchange(
        served,
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    )
    assert status_of(response) == 200
    assert body_of(response) == b"ok\n"


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nNo colon here\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\n\r\n",  # HTTP/1.1 requires Host
        b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
    ],
    ids=["garbage", "bad-header", "no-host", "asterisk"],
)
def test_malformed_requests_are_400_and_reveal_nothing(served: Served, raw: bytes) -> None:
    response = exchange(served, raw)
    assert status_of(response) == 400
    assert body_of(response) == b"bad request\n"


def test_absolute_form_targets_are_served(served: Served) -> None:
    response = exchange(
        served, b"GET http://example/healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    )
    assert status_of(response) == 200


@pytest.mark.parametrize(
    ("target", "expected"),
    [(b"http://example/healthz?probe=1", b"ok\n"), (b"http://example:9808?x=1", b"<html")],
    ids=["with-path", "without-path"],
)
def test_absolute_form_targets_with_a_query_are_routed_by_their_path(
    served: Served, target: bytes, expected: bytes
) -> None:
    """`http://host?x=1` has the path "/" (RFC 9112 3.2.2), not "" (which was a 404)."""
    response = exchange(
        served, b"GET " + target + b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
    )
    assert status_of(response) == 200
    assert expected in body_of(response)


def test_content_length_with_transfer_encoding_is_400_and_closes(served: Served) -> None:
    """RFC 9112 6.1: a request framed both ways may be smuggled; it was served and kept open."""
    response = exchange(
        served,
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    assert status_of(response) == 400
    assert headers_of(response)["connection"] == "close"
    # Closed after the refusal: the pipelined request behind it is not answered.
    assert response.count(b"HTTP/1.1 ") == 1


@pytest.mark.parametrize("version", [b"HTTP/3.0", b"HTTP/2.0"])
def test_other_http_versions_are_505_and_close(served: Served, version: bytes) -> None:
    """HTTP/3.0 in HTTP/1 syntax was served as 1.1."""
    response = exchange(served, b"GET /healthz " + version + b"\r\nHost: a\r\n\r\n")
    assert status_of(response) == 505
    assert headers_of(response)["connection"] == "close"
    assert body_of(response) == b"http version not supported\n"


def test_kept_alive_connections_serve_several_requests(served: Served) -> None:
    connection = served.connection()
    try:
        for path in ("/healthz", "/readyz", "/metrics", "/healthz"):
            connection.request("GET", path)
            response = connection.getresponse()
            assert response.status == 200
            response.read()
    finally:
        connection.close()


@pytest.mark.server
def test_a_failing_app_answers_500_without_its_exception() -> None:
    """An exception's text goes to the log; the client sees only that it failed."""

    def broken(_environ: WSGIEnvironment, _start_response: StartResponse) -> Iterable[bytes]:
        raise RuntimeError("secret detail /etc/passwd")

    server = MetricsServer(make_app({"/broken": broken}), "127.0.0.1:0", limits=HttpLimits())
    server.start()
    try:
        running = Served("127.0.0.1", server.port, None, process=None)
        status, _, body = running.get("/broken")
        assert (status, body) == (500, b"internal server error\n")
        assert running.get("/nope")[0] == 404
    finally:
        server.stop()


def test_route_table_serves_exact_paths_and_prefixes() -> None:
    def app(_environ: WSGIEnvironment, _start_response: StartResponse) -> Iterable[bytes]:
        return []

    routes = {"/": app, "/api/v1/*": app, "/metrics": app}
    assert route(routes, "/") is app
    assert route(routes, "/api/v1/services/a/b") is app
    assert route(routes, "/api/v2") is None
    assert route(routes, "/metricsx") is None


@contextmanager
def in_process(limits: HttpLimits) -> Iterator[Served]:
    """An in-process server with the given limits, to see them act within a test's time."""

    def hello(_environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello\n"]

    server = MetricsServer(make_app({"/": hello}), "127.0.0.1:0", limits=limits)
    server.start()
    try:
        yield Served("127.0.0.1", server.port, None, process=None)
    finally:
        server.stop()


@pytest.mark.server
def test_a_slow_request_head_gets_408_and_the_connection_closes() -> None:
    with (
        in_process(HttpLimits(request_timeout=0.5)) as served,
        socket.create_connection((served.host, served.port), timeout=10) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        sock.settimeout(0.1)
        response = b""
        for _ in range(50):  # 5 s at most; the server gives up after 0.5 s
            try:
                sock.sendall(b"a")
                response = sock.recv(1024)
            except TimeoutError:
                continue
            except OSError:
                break
            break
    assert status_of(response) == 408


@pytest.mark.server
def test_a_silent_connection_is_closed_after_the_request_timeout() -> None:
    with (
        in_process(HttpLimits(request_timeout=0.5)) as served,
        socket.create_connection((served.host, served.port), timeout=5) as sock,
    ):
        assert sock.recv(1) == b""  # closed without a word, well before the 5 s timeout


@pytest.mark.server
def test_idle_connections_beyond_the_bound_give_way_to_new_clients() -> None:
    """40 silent connections against a bound of 16: the oldest are closed, requests served."""
    with in_process(HttpLimits(max_connections=16)) as served:
        idle = [socket.create_connection((served.host, served.port)) for _ in range(40)]
        try:
            for _ in range(3):
                status, _, body = served.get("/")
                assert (status, body) == (200, b"hello\n")
            closed = 0
            for sock in idle:
                sock.settimeout(0.2)  # the evicted ones have their EOF already
                try:
                    closed += sock.recv(1) == b""
                except TimeoutError:
                    continue
        finally:
            for sock in idle:
                sock.close()
    assert closed >= 40 - 16
