"""The exporter as a subprocess on a free loopback port, and clients to load it."""

from __future__ import annotations

import functools
import http.client
import resource
import socket
import ssl
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import EXAMPLES_DIR
from tests.processes import serving

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")


@dataclass(frozen=True)
class Served:
    host: str
    port: int
    tls: ssl.SSLContext | None
    # None for a server running in the test's own process.
    process: subprocess.Popen[bytes] | None

    def connection(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        if self.tls is not None:
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self.tls
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(
        self, path: str, method: str = "GET", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a new connection, as a scraper or the kubelet makes it."""
        connection = self.connection()
        try:
            connection.request(method, path, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()


def limit_open_files(count: int) -> Callable[[], None]:
    """A preexec_fn that caps the child's open files (RLIMIT_NOFILE) at `count`."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return apply


@contextmanager
def serve(
    *args: str,
    tls: ssl.SSLContext | None = None,
    preexec_fn: Callable[[], None] | None = None,
    snapshot: str = DEMO,
) -> Iterator[Served]:
    """`serve --snapshot demo` on a free loopback port; yields once it listens (whatever TLS
    or authentication it asks of clients), stops it afterwards."""
    with serving(
        "--snapshot", snapshot, "--log-format", "json", *args, ready=None, preexec_fn=preexec_fn
    ) as running:
        yield Served("127.0.0.1", running.port, tls, running.process)


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def scrape_ok(served: Served) -> None:
    status, _, body = served.get("/metrics")
    assert status == 200
    assert b"topology_hints_" in body


def probe_ok(served: Served) -> None:
    status, _, body = served.get("/healthz")
    assert (status, body) == (200, b"ok\n")


def latencies(served: Served, count: int) -> list[float]:
    """Alternating scrapes and probes, each on a new connection."""
    calls: tuple[Callable[[Served], None], ...] = (scrape_ok, probe_ok)
    return [timed(functools.partial(calls[index % 2], served)) for index in range(count)]


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def open_idle(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` TCP connections that never send a byte (no TLS ClientHello either)."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=10)
        sockets.append(sock)
    return sockets


def make_certificates(openssl: str, folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by it."""

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    files = {name: folder / f"{name}.pem" for name in
             ("ca", "ca-key", "server", "server-key", "client", "client-key", "csr")}  # fmt: skip
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test CA",
        "-keyout", str(files["ca-key"]), "-out", str(files["ca"]))  # fmt: skip
    extensions = folder / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\n")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/CN=prometheus")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
            "-keyout", str(files[f"{name}-key"]), "-out", str(files["csr"]))  # fmt: skip
        run("x509", "-req", "-in", str(files["csr"]), "-CA", str(files["ca"]),
            "-CAkey", str(files["ca-key"]), "-CAcreateserial", "-days", "1",
            *(["-extfile", str(extensions)] if name == "server" else []),
            "-out", str(files[name]))  # fmt: skip
    return files


def client_context(files: dict[str, Path], *, with_certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(files["ca"]))
    if with_certificate:
        context.load_cert_chain(str(files["client"]), str(files["client-key"]))
    return context
