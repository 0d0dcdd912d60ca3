"""The real `topology-hints-exporter serve` in its own process, for end-to-end tests."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import exporter_command
from tests.e2e.prometheus import free_port, wait_for


@contextmanager
def serving_snapshot(snapshot: Path, log: Path, *extra_args: str) -> Iterator[str]:
    """`serve --snapshot` on a free loopback port; yields host:port once /readyz is 200."""
    address = f"127.0.0.1:{free_port()}"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                *exporter_command(),
                "serve",
                "--snapshot",
                str(snapshot),
                "--listen-address",
                address,
                *extra_args,
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        def ready() -> bool:
            if process.poll() is not None:
                pytest.fail(f"the exporter exited with {process.returncode}:\n{log.read_text()}")
            with urllib.request.urlopen(f"http://{address}/readyz", timeout=2) as response:
                return bool(response.status == 200)

        wait_for(ready, 30, what="exporter ready")
        yield address
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
