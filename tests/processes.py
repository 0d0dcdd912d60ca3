"""The processes tests start, in one place: free loopback ports, and the real `serve` command.

Not a test module, and free of pytest: bench/ starts the exporter with it too.

    with serving("--snapshot", DEMO, log=tmp_path / "exporter.log") as exporter:
        status, body = http_get(exporter.url + "/metrics")

`serving` starts `topology-hints-exporter serve ARGS --listen-address 127.0.0.1:<free port>`,
waits until it answers (/readyz 200 by default), and on leaving the block terminates it (kills
it if it ignores SIGTERM) and reaps it, whatever the test did to it meanwhile.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL_INTERVAL = 0.02
# A port found free can be taken (by another test's server, or a client's ephemeral port)
# before the exporter binds it; that start exits 2 with this text, and is retried on another.
PORT_TAKEN = "Address already in use"
PORT_ATTEMPTS = 3


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def exporter_command() -> list[str]:
    """The real console entry point, as a user runs it."""
    script = Path(sys.executable).with_name("topology-hints-exporter")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "exporter"]


def stop(process: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> None:
    """Terminate `process`, kill it if it is still running `timeout` seconds later, reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


class ExitedError(RuntimeError):
    """The process exited while it was waited for."""

    def __init__(self, returncode: int, output: str) -> None:
        super().__init__(f"the exporter exited with {returncode} before it was ready:\n{output}")
        self.returncode = returncode
        self.output = output


@dataclass(frozen=True)
class ServedExporter:
    """A running `serve` process: where it listens, and the file its output goes to."""

    process: subprocess.Popen[bytes]
    address: str  # 127.0.0.1:PORT
    url: str  # http(s)://127.0.0.1:PORT
    log: Path

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def output(self) -> str:
        """Everything it wrote on stdout and stderr so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")


def _answers(url: str, context: ssl.SSLContext | None) -> bool:
    """True once `url` answers 200 (an error status, a refused connection or TLS: not yet)."""
    # URLError and HTTPError are OSErrors.
    with (
        contextlib.suppress(OSError),
        urllib.request.urlopen(url, timeout=10, context=context) as response,  # noqa: S310 - our URL
    ):
        return bool(response.status == 200)
    return False


def _listens(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=10):
        return True
    return False


def wait_ready(
    exporter: ServedExporter,
    ready: str | None = "/readyz",
    *,
    context: ssl.SSLContext | None = None,
    timeout: float = START_TIMEOUT,
    interval: float = POLL_INTERVAL,
) -> None:
    """Poll until `ready` (a path) answers 200, or with None until the port accepts a
    connection; raise ExitedError if the process exits first, TimeoutError after `timeout`."""
    url = None if ready is None else exporter.url + ready

    def check() -> bool:
        return _listens(exporter.address) if url is None else _answers(url, context)

    deadline = time.monotonic() + timeout
    while True:
        if exporter.process.poll() is not None:
            raise ExitedError(exporter.process.returncode, exporter.output())
        if check():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{exporter.url}: not ready within {timeout} s:\n{exporter.output()[-4000:]}"
            )
        time.sleep(interval)


@contextlib.contextmanager
def serving(
    *args: str,
    log: Path | None = None,
    ready: str | None = "/readyz",
    tls: ssl.SSLContext | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = START_TIMEOUT,
    interval: float = POLL_INTERVAL,
    command: list[str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> Iterator[ServedExporter]:
    """`serve *args` on a free 127.0.0.1 port, ready (see wait_ready); stopped and reaped after.

    Its stdout and stderr go to `log` (a temporary file when None); `tls` is the client side
    of a TLS listener (the URL is https); `command` replaces the console entry point.
    """
    with contextlib.ExitStack() as cleanup:
        if log is None:
            log = Path(cleanup.enter_context(tempfile.TemporaryDirectory())) / "exporter.log"
        for attempt in range(1, PORT_ATTEMPTS + 1):
            address = f"127.0.0.1:{free_port()}"
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    [*(command or exporter_command()), "serve", *args, "--listen-address", address],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    preexec_fn=preexec_fn,  # noqa: PLW1509 - only setrlimit, nothing that could deadlock
                )
            cleanup.callback(stop, process)
            scheme = "https" if tls is not None else "http"
            exporter = ServedExporter(process, address, f"{scheme}://{address}", log)
            try:
                wait_ready(exporter, ready, context=tls, timeout=timeout, interval=interval)
            except ExitedError as error:
                if attempt == PORT_ATTEMPTS or PORT_TAKEN not in error.output:
                    raise
                continue
            yield exporter
            return
