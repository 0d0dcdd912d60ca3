"""The helper every test starts the exporter with: a free loopback port, and always reaped."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import processes
from tests.conftest import EXAMPLES_DIR
from tests.processes import ExitedError, serving
from tests.scrape import http_get

DEMO = str(EXAMPLES_DIR / "demo-cluster.json")


def _gone(pid: int) -> bool:
    """No such process any more: it exited and was reaped (a zombie would still answer)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.server
def test_serving_binds_loopback_and_reaps_even_when_the_block_fails(tmp_path: Path) -> None:
    log = tmp_path / "exporter.log"
    started: list[subprocess.Popen[bytes]] = []

    def failing_test() -> None:
        with serving("--snapshot", DEMO, log=log) as exporter:
            started.append(exporter.process)
            assert exporter.address.startswith("127.0.0.1:")
            assert http_get(exporter.url + "/readyz")[0] == 200
            raise RuntimeError("the test failed")

    with pytest.raises(RuntimeError, match="the test failed"):
        failing_test()
    (process,) = started
    assert process.returncode is not None
    assert _gone(process.pid)
    assert "serving" in log.read_text()


@pytest.mark.server
def test_an_exporter_that_exits_is_reported_with_its_output() -> None:
    with pytest.raises(ExitedError) as raised, contextlib.ExitStack() as stack:
        stack.enter_context(serving("--snapshot", "/nonexistent.json"))
    assert raised.value.returncode == 2
    assert "/nonexistent.json: cannot read" in raised.value.output


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def test_a_port_taken_before_the_exporter_binds_it_is_retried(
    monkeypatch: pytest.MonkeyPatch, taken_port: int
) -> None:
    """The race a free port has (it is free when found, not when bound) costs a retry."""
    ports = iter([taken_port])
    free_port = processes.free_port
    monkeypatch.setattr(processes, "free_port", lambda: next(ports, None) or free_port())
    with serving("--snapshot", DEMO) as exporter:
        assert exporter.port != taken_port
        assert http_get(exporter.url + "/readyz")[0] == 200
