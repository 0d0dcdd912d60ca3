"""Writing responses and who waits for what, on an in-process server (issue 22 items 1, 4, 7).

Apps here block on events instead of being slow, so that every assertion is about counts
and order, never about how long something took.
"""

from __future__ import annotations

import base64
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import bcrypt
import pytest
from structlog.testing import capture_logs

from exporter.http.auth import BasicAuth
from exporter.http.limits import HttpLimits
from exporter.http.routes import default_routes, make_app
from exporter.http.server import MetricsServer
from exporter.http.slots import ScrapeCosts
from tests.http.support import Served

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

# Long enough for a loaded 2-core machine to pass a request through; only a broken server
# (a request queued behind blocked work) reaches it.
WAIT = 10.0
KIB = 1024


@contextmanager
def in_process(
    metrics: WSGIApplication, limits: HttpLimits | None = None, **options: object
) -> Iterator[tuple[MetricsServer, Served]]:
    routes = default_routes(metrics, ready=lambda: (True, "ready"), healthy=lambda: (True, "ok"))
    routes["/page"] = hello
    server = MetricsServer(make_app(routes), "127.0.0.1:0", limits=limits, **options)  # type: ignore[arg-type]
    server.start()
    try:
        yield server, Served("127.0.0.1", server.port, None, process=None)
    finally:
        server.stop()


def hello(_environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


def body_app(chunks: list[bytes]) -> WSGIApplication:
    def app(_environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return chunks

    return app


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a client killed mid-scrape (or a scrape timeout) does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.server
def test_a_client_reset_mid_response_is_logged_once_structured(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """20 MB in 1 KiB chunks; the client reads 1 MiB and resets. Each write after the reset
    used to add an unstructured asyncio warning (8,143 lines for 100 resets)."""
    body = [b"x" * KIB] * 20_000
    with (
        caplog.at_level(logging.WARNING, logger="asyncio"),
        capture_logs() as logs,
        in_process(body_app(body)) as (_, served),
    ):
        sock = socket.create_connection((served.host, served.port), timeout=WAIT)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        received = 0
        while received < 1024 * KIB:
            received += len(sock.recv(64 * KIB))
        reset(sock)
        wait_for(lambda: any(log["event"] == "response abandoned" for log in logs), "the log line")
        # The server is done with the connection once it has said so; nothing follows.
        assert served.get("/healthz")[0] == 200
    abandoned = [log for log in logs if log["event"] == "response abandoned"]
    assert len(abandoned) == 1
    assert abandoned[0]["path"] == "/metrics"
    assert abandoned[0]["reason"] == "connection lost"
    assert 0 < abandoned[0]["body_bytes_sent"] < 20_000 * KIB
    assert [record.getMessage() for record in caplog.records if record.name == "asyncio"] == []


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError("no VmRSS")


@pytest.mark.server
def test_a_client_that_never_reads_holds_one_write_batch_not_a_copy_of_the_body() -> None:
    """100 clients that never read a 16 MiB body made of one shared 4 MiB chunk: the
    server's memory grows by far less than one copy per client (1 MiB each before)."""
    chunk = b"m" * (4096 * KIB)
    body = [chunk] * 4
    clients = 100
    with in_process(body_app(body), HttpLimits(max_scrapes=clients)) as (_, served):
        served.get("/healthz")
        before = rss_bytes()
        sockets = []
        try:
            for _ in range(clients):
                sock = socket.create_connection((served.host, served.port), timeout=WAIT)
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
                sockets.append(sock)
            # Every response under way: each client has its first bytes (peeked, not read).
            wait_for(
                lambda: all(
                    sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) for sock in sockets
                ),
                "every response to start",
            )
            assert served.get("/healthz")[0] == 200
            grown = rss_bytes() - before
        finally:
            for sock in sockets:
                sock.close()
    # 64 KiB (a batch) per client plus the interpreter's own noise; before: 1 MiB each.
    assert grown < clients * 256 * KIB, f"grew {grown / 2**20:.1f} MiB"


class Blocking:
    """An app that blocks until released, counting how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0

    def enter(self) -> None:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            assert self.release.wait(WAIT), "never released"
        finally:
            with self._lock:
                self.running -= 1


def in_threads(
    count: int, call: Callable[[], object]
) -> tuple[list[object], list[threading.Thread]]:
    results: list[object] = []

    def run() -> None:
        try:
            results.append(call())
        except Exception as error:  # noqa: BLE001 - the test reads it
            results.append(error)

    threads = [threading.Thread(target=run, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return results, threads


@pytest.mark.server
def test_expensive_scrapes_queue_for_one_slot_and_ordinary_ones_go_past() -> None:
    """8 clients asking for what prometheus_client renders (`escaping=dots`) took all four
    workers; now one renders at a time, the others queue, and ordinary scrapes and pages
    are served meanwhile."""
    blocking = Blocking()

    def metrics(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if "HTTP_X_EXPENSIVE" in environ:
            blocking.enter()
        return hello(environ, start_response)

    def expensive(environ: WSGIEnvironment) -> bool:
        return "HTTP_X_EXPENSIVE" in environ

    with in_process(metrics, costs=ScrapeCosts(expensive=expensive)) as (_, served):
        results, threads = in_threads(
            8, lambda: served.get("/metrics", headers={"X-Expensive": "1"})[0]
        )
        wait_for(lambda: blocking.running == 1, "an expensive render")
        for path in ("/metrics", "/page", "/readyz", "/metrics"):
            assert served.get(path)[:1] == (200,), path
        assert blocking.running == 1
        blocking.release.set()
        for thread in threads:
            thread.join(WAIT)
    assert results == [200] * 8
    assert blocking.most == 1
    assert blocking.calls == 8


@pytest.mark.server
def test_queued_scrapes_beyond_the_bound_are_answered_503_at_once() -> None:
    blocking = Blocking()

    def metrics(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        blocking.enter()
        return hello(environ, start_response)

    limits = HttpLimits(max_scrapes=2, max_queued=3)
    with in_process(metrics, limits) as (server, served):
        results, threads = in_threads(5, lambda: served.get("/metrics")[0])
        wait_for(lambda: blocking.running == 2, "two scrapes")
        # All three others in the queue before the sixth: otherwise the sixth may take a
        # queue place and wait, and one of the five be refused.
        wait_for(lambda: server.queued_scrapes == 3, "three queued")
        status, headers, body = served.get("/metrics")
        assert (status, headers["Retry-After"], body) == (503, "1", b"busy, retry later\n")
        assert served.get("/readyz")[0] == 200
        blocking.release.set()
        for thread in threads:
            thread.join(WAIT)
    assert results == [200] * 5
    assert blocking.most == 2


class SlowAuth:
    """As BasicAuth: no credentials are refused and "good" ones accepted at once (verified
    before); any other needs a check, which blocks."""

    challenge = 'Basic realm="test"'

    def __init__(self) -> None:
        self.blocking = Blocking()

    def known(self, header: str) -> bool | None:
        if not header:
            return False
        return True if header == basic("good") else None

    def check(self, header: str) -> bool:
        self.blocking.enter()
        return header == basic("good")


def basic(password: str) -> str:
    return "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()


@pytest.mark.server
def test_a_wrong_password_flood_delays_neither_probes_nor_scrapes() -> None:
    """bcrypt for wrong passwords ran on the probe threads: authorised /readyz waited behind
    it (p50 1.45 s). Checks now run on their own thread; known credentials skip them."""
    auth = SlowAuth()
    with in_process(body_app([b"metrics\n"]), auth=auth) as (_, served):
        results, threads = in_threads(
            8, lambda: served.get("/readyz", headers={"Authorization": basic("wrong")})[0]
        )
        wait_for(lambda: auth.blocking.running == 1, "a credentials check")
        good = {"Authorization": basic("good")}
        for path in ("/readyz", "/healthz", "/metrics", "/readyz"):
            assert served.get(path, headers=good)[0] == 200, path
        status, headers, _ = served.get("/readyz")
        assert (status, headers["WWW-Authenticate"]) == (401, 'Basic realm="test"')
        auth.blocking.release.set()
        for thread in threads:
            thread.join(WAIT)
    assert results == [401] * 8
    assert auth.blocking.most == 1


@pytest.mark.server
def test_scrapes_stalled_on_clients_that_never_read_give_their_slots_to_waiting_ones() -> None:
    """Both slots held by clients that never read a 16 MiB body: a scrape that comes
    next used to wait for write_timeout (30 s) and get 503; the stalled ones make room."""
    chunk = b"m" * (4096 * KIB)
    limits = HttpLimits(max_scrapes=2, stall_grace=0.2)
    with capture_logs() as logs, in_process(body_app([chunk] * 4), limits) as (_, served):
        stalled = []
        for _ in range(2):
            sock = socket.create_connection((served.host, served.port), timeout=WAIT)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
            stalled.append(sock)
        wait_for(
            lambda: all(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) for sock in stalled),
            "both responses to start",
        )
        status, _, body = served.get("/metrics")
        for sock in stalled:
            sock.close()
    assert status == 200
    assert len(body) == 16 * 1024 * KIB
    reasons = [log["reason"] for log in logs if log["event"] == "response abandoned"]
    assert "client stopped reading; its slot went to a waiting request" in reasons


def test_basic_auth_knows_without_bcrypt_only_what_needs_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the event loop decides itself: no or malformed credentials (refused) and
    credentials verified before (accepted); every other header goes to the auth thread."""
    auth = BasicAuth({"prometheus": bcrypt.hashpw(b"good", bcrypt.gensalt(4))})
    assert auth.known("") is False
    assert auth.known("Basic !!!") is False
    assert auth.known("Bearer token") is False
    assert auth.known(basic("good")) is None
    assert auth.check(basic("good")) is True

    def no_bcrypt(_password: bytes, _hashed: bytes) -> bool:
        raise AssertionError("bcrypt ran")

    monkeypatch.setattr(bcrypt, "checkpw", no_bcrypt)
    assert auth.known(basic("good")) is True
    assert auth.check(basic("good")) is True
    assert auth.known(basic("wrong")) is None
    # Unknown users too: their decoy check takes bcrypt's time, on the auth thread.
    nobody = "Basic " + base64.b64encode(b"nobody:good").decode()
    assert auth.known(nobody) is None


@pytest.mark.server
def test_a_prepared_scrape_is_answered_on_the_loop_thread_and_others_on_workers() -> None:
    """A scrape the app has at hand skips the hop to a worker and back (two waits for the
    scheduler on a busy machine); one it has to render, and pages, still go to workers."""
    threads: dict[str, str] = {}

    def metrics(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        threads[environ.get("HTTP_X_CASE", "")] = threading.current_thread().name
        return hello(environ, start_response)

    def prepared(environ: WSGIEnvironment) -> bool:
        return environ.get("HTTP_X_CASE") == "prepared"

    with in_process(metrics, costs=ScrapeCosts(prepared=prepared)) as (_, served):
        for case in ("prepared", "rendered"):
            assert served.get("/metrics", headers={"X-Case": case})[:1] == (200,)
    assert threads["prepared"] == "http"
    assert threads["rendered"].startswith("http-worker")
