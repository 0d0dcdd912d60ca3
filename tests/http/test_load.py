"""Idle, slow and many clients against the real exporter process: scrapes and probes go on.

Each test measures its own unloaded figure first, on the same machine and moment, and
compares the loaded one with it (issue 13: items 1, 7 and 8).
"""

from __future__ import annotations

import resource
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import msgspec
import pytest

from bench.cluster import ClusterSize, cluster_objects
from exporter.http.limits import HttpLimits
from tests.conftest import require_binary
from tests.http.support import (
    Served,
    client_context,
    latencies,
    limit_open_files,
    make_certificates,
    median,
    open_idle,
    percentile,
    probe_ok,
    scrape_ok,
    serve,
    timed,
)
from tests.scrape import wait_until

IDLE_CLIENTS = 50
SLOW_CLIENTS = 20
SAMPLES = 40
BLOCKS = 4
# Below this a median is scheduler noise on a shared 2-core machine, not the server's speed.
NOISE_FLOOR = 0.010
# deploy/'s livenessProbe and readinessProbe timeoutSeconds.
PROBE_TIMEOUT = 5.0


def report(what: str, **figures: float) -> None:
    shown = ", ".join(f"{name}={value * 1000:.1f} ms" for name, value in figures.items())
    print(f"\n[figures] {what}: {shown}", file=sys.stderr)  # noqa: T201 - the figures asked for


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certificates(require_binary("openssl"), tmp_path_factory.mktemp("tls"))


def still_open(sock: socket.socket) -> bool:
    """False once the server has closed the connection."""
    sock.setblocking(False)  # noqa: FBT003
    try:
        # An SSLSocket takes no flags; the server sends it nothing to lose but tickets.
        peeked = sock.recv(1) if isinstance(sock, ssl.SSLSocket) else sock.recv(1, socket.MSG_PEEK)
        return bool(peeked)  # b"": the server closed it
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)  # noqa: FBT003


class SlowHeaderClients:
    """Clients that send a request head one byte at a time and never finish it."""

    def __init__(self, served: Served, count: int) -> None:
        self._stop = threading.Event()
        self.sockets: list[socket.socket] = []
        for _ in range(count):
            sock = socket.create_connection((served.host, served.port), timeout=10)
            if served.tls is not None:
                sock = served.tls.wrap_socket(sock, server_hostname=served.host)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            self.sockets.append(sock)
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def _trickle(self) -> None:
        while not self._stop.wait(0.2):
            for sock in self.sockets:
                try:
                    sock.sendall(b"a")
                except OSError:
                    continue

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process holds 1,100 client sockets: raise its own soft limit if needed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2048
    if soft >= wanted:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-file hard limit {hard} is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.server
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_idle_and_slow_clients_do_not_delay_scrapes_or_probes(
    tls: bool,  # noqa: FBT001 - a parameter
    certificates: dict[str, Path],
) -> None:
    """50 silent connections and 20 slow-header clients: latency stays within 2x unloaded.

    With TLS the silent clients never send a ClientHello: before, one such client stopped
    every probe, because the handshake ran in the accepting thread.
    """
    flags = (
        ("--tls-cert-file", str(certificates["server"]), "--tls-key-file",
         str(certificates["server-key"]))
        if tls
        else ()
    )  # fmt: skip
    context = client_context(certificates) if tls else None
    unloaded: list[float] = []
    loaded: list[float] = []
    with serve(*flags, tls=context) as served:
        latencies(served, 6)  # warm-up: first renders, imports, TLS session setup
        # Unloaded and loaded blocks alternate, so that the machine's own load (other
        # processes on 2 shared cores) weighs on both figures alike.
        for _ in range(BLOCKS):
            unloaded += latencies(served, SAMPLES // BLOCKS)
            idle = open_idle(served.host, served.port, IDLE_CLIENTS)
            try:
                with SlowHeaderClients(served, SLOW_CLIENTS) as slow:
                    loaded += latencies(served, SAMPLES // BLOCKS)
                    assert all(still_open(sock) for sock in idle), "idle clients were dropped"
                    assert all(still_open(sock) for sock in slow.sockets), "slow clients dropped"
            finally:
                for sock in idle:
                    sock.close()
    report(
        f"{'https' if tls else 'http'} unloaded vs {IDLE_CLIENTS} idle + {SLOW_CLIENTS} slow",
        unloaded_median=median(unloaded),
        loaded_median=median(loaded),
        unloaded_max=max(unloaded),
        loaded_max=max(loaded),
    )
    assert median(loaded) <= 2 * max(median(unloaded), NOISE_FLOOR)
    # What this guards against was no answer at all until the client gave up; a bound far
    # below deploy/'s 5 s probe timeout, yet above a loaded 2-core machine's worst stall.
    assert max(loaded) < PROBE_TIMEOUT / 2


@pytest.mark.server
@pytest.mark.usefixtures("many_files")
def test_1100_idle_connections_under_a_1024_open_file_limit() -> None:
    """More silent clients than the process may hold files: probes and scrapes still answer.

    The server keeps its connections below the open-file limit and closes the connection
    that has waited longest for its client to admit a new one.
    """
    with serve(preexec_fn=limit_open_files(1024)) as served:
        unloaded = [timed(lambda: probe_ok(served)), timed(lambda: scrape_ok(served))]
        idle = open_idle(served.host, served.port, 1100)
        try:
            probe = timed(lambda: probe_ok(served))
            scrape = timed(lambda: scrape_ok(served))
            status, _, body = served.get("/readyz")
            assert (status, body) == (200, b"ready\n")
            closed = sum(not still_open(sock) for sock in idle)
        finally:
            for sock in idle:
                sock.close()
        assert served.process is not None
        assert served.process.poll() is None, "the exporter died"
    report(
        f"1100 idle connections, RLIMIT_NOFILE 1024 ({closed} closed by the server)",
        unloaded_probe=unloaded[0],
        unloaded_scrape=unloaded[1],
        probe=probe,
        scrape=scrape,
    )
    assert closed >= 1100 - 1024
    # Accepting 1,100 connections (and closing 200) is Python work that the first probe
    # after the burst waits for: well under a second on an idle machine.
    assert probe < PROBE_TIMEOUT / 2
    assert scrape < PROBE_TIMEOUT / 2


# Linux retransmits an unanswered SYN after 1 s (TCP_TIMEOUT_INIT).
SYN_RETRY_SECONDS = 1.0


@pytest.mark.server
def test_twenty_parallel_scrapers_have_a_tight_tail() -> None:
    """20 scrapers at once: none waits for a SYN retransmission (a listen backlog of 5 made
    p99 1 s and max 4 s: the kernel drops the SYNs it cannot queue, and a client retries
    after 1 s, then 3 s). Measured against that 1 s, not against p50: with at most
    HttpLimits.max_scrapes responses under way some scrapes queue for one scrape's time by
    design, and a relative bound fails on a loaded machine for no fault of the server."""
    scrapers, rounds = 20, 15
    with serve() as served:
        latencies(served, 6)
        samples: list[float] = []
        lock = threading.Lock()
        start = threading.Barrier(scrapers)
        failures: list[BaseException] = []

        def scraper() -> None:
            start.wait()
            try:
                for _ in range(rounds):
                    seconds = timed(lambda: scrape_ok(served))
                    with lock:
                        samples.append(seconds)
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                failures.append(error)

        threads = [threading.Thread(target=scraper) for _ in range(scrapers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures, failures
    assert len(samples) == scrapers * rounds
    p50, p99 = percentile(samples, 0.50), percentile(samples, 0.99)
    report("20 parallel scrapers", p50=p50, p99=p99, max=max(samples))
    assert max(samples) < SYN_RETRY_SECONDS


@pytest.fixture(scope="module")
def large_snapshot(tmp_path_factory: pytest.TempPathFactory) -> str:
    """4,000 Services of the benchmark's generator: a 10 MB /metrics body, more than the
    kernel buffers for a client that never reads (3-4 MB on loopback)."""
    objects = cluster_objects(ClusterSize().scaled(0.4))
    path = tmp_path_factory.mktemp("large") / "cluster.json"
    path.write_bytes(msgspec.json.encode({"kind": "List", "items": list(objects)}))
    return str(path)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def answered(sock: socket.socket) -> bool:
    """Whether the server has sent this client anything (peeked: the client reads nothing)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


NEVER_READING = 300
# Kubernetes' default probe timeoutSeconds: a probe slower than this fails. The issue asks
# for probes within it under this load; they took 2.7 s (990 clients: 6.8 s) before.
PROBE_BOUND = 1.0


@pytest.mark.server
def test_300_clients_that_never_read_metrics_cost_bounded_memory_and_no_probe(
    large_snapshot: str,
) -> None:
    """Each asked for /metrics (10 MB) and read nothing: RSS grew 330 MiB and /readyz took
    2.7 s. Now a response holds one write batch, 16 are written at once, 64 queue and the
    rest are answered 503 at once; probes never wait for any of it."""
    queued = HttpLimits().max_queued
    with serve(snapshot=large_snapshot) as served:
        assert served.process is not None
        pid = served.process.pid
        wait_until(lambda: served.get("/readyz")[0] == 200, timeout=60)
        for accept_encoding in ("gzip", "identity", "gzip"):
            status, _, _ = served.get("/metrics", headers={"Accept-Encoding": accept_encoding})
            assert status == 200
        before = rss_mib(pid)
        sockets: list[socket.socket] = []
        probes: list[float] = []
        peak = before
        try:
            for _ in range(NEVER_READING):
                sock = socket.socket()
                # Set before connecting, so that the window the client offers stays small.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(10)
                sock.connect((served.host, served.port))
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
                sockets.append(sock)
            # Probe while the server works through them, until all but the queued have an
            # answer under way, then 20 more times.
            extra = 20
            while extra:
                probes.append(timed(lambda: probe_ok(served)))
                status, _, body = served.get("/readyz")
                assert (status, body) == (200, b"ready\n")
                peak = max(peak, rss_mib(pid))
                if sum(map(answered, sockets)) >= NEVER_READING - queued:
                    extra -= 1
            assert served.process.poll() is None, "the exporter died"
            # Prometheus gets its turn while they still hold their connections: the queued
            # ones take the slots of those stalled, and stall in turn (503 meanwhile).
            started = time.monotonic()
            scrape = served.get("/metrics")
            deadline = started + 60
            while scrape[0] == 503 and time.monotonic() < deadline:
                scrape = served.get("/metrics")
            assert scrape[0] == 200
            assert len(scrape[2]) > 10_000_000
            scraped_after = time.monotonic() - started
            peak = max(peak, rss_mib(pid))
        finally:
            for sock in sockets:
                sock.close()
    report(
        f"{NEVER_READING} clients that never read a 10 MB /metrics",
        probe_max=max(probes),
        probe_median=median(probes),
        scrape_served_after=scraped_after,
    )
    print(f"[figures] RSS {before:.0f} MiB -> peak {peak:.0f} MiB", file=sys.stderr)  # noqa: T201
    assert peak - before <= 100
    assert max(probes) < PROBE_BOUND
