"""What `make check` leaves out, and a guard that keeps the line honest.

`make check` runs the tests that start no server: no listening socket in the test's
process, no exporter waited on until it serves, and no child that serves (Prometheus,
Alertmanager, a browser, an API server, an image build). Such a test is marked `server`,
by the fixtures it uses or by its module's `pytestmark`. Under `make check`
(TOPOLOGY_HINTS_QUICK=1) an unmarked test that starts one fails with the mark it lacks,
so the quick run can never quietly grow into the slow one.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

QUICK = os.environ.get("TOPOLOGY_HINTS_QUICK", "") == "1"

# Fixtures that start a server for the test that asks for them.
SERVER_FIXTURES = frozenset(
    {
        "kube_api",
        "kubeconfig",
        "start_exporter",
        "serve_snapshot",
        "served",
        "exporter",
        "stack",
        "busy_port",
        "default_port_taken",
        "taken_port",
        "api_client",
        "core",
        "unreachable_kubeconfig",
        "browser",
        "control_plane",
        "real_cluster",
    }
)
# Folders whose every test starts a server of some kind.
SERVER_FOLDERS = frozenset({"e2e", "browser", "image", "realcluster", "live"})
# Programs that serve (or build images) when a test runs them as a child.
SERVING_PROGRAMS = frozenset(
    {
        "prometheus",
        "alertmanager",
        "prometheus-alertmanager",
        "chromium",
        "chromedriver",
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-proxy",
        "buildah",
        "podman",
    }
)
TESTS = Path(__file__).resolve().parent


def mark_servers(items: Sequence[pytest.Item]) -> None:
    """Mark `server` every test that asks for a serving fixture or lives in a serving folder."""
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0] if item.path.is_relative_to(TESTS) else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if folder in SERVER_FOLDERS or fixtures & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)


def _serves(args: Any) -> str | None:
    """The serving program a child's argv starts, if any (an exporter's `serve` that is
    refused at its flags serves nothing: one that serves is waited on, by `wait_ready`)."""
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
    for word in (os.fsdecode(a) for a in argv):
        if Path(word).name in SERVING_PROGRAMS:
            return Path(word).name
    return None


@pytest.fixture(autouse=True)
def _no_server_unless_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under `make check`, a test without the `server` mark may not listen or serve."""
    if not QUICK or request.node.get_closest_marker("server") is not None:
        yield
        return
    import tests.processes  # noqa: PLC0415  (patched where `serving` looks it up)

    listen, popen_init = socket.socket.listen, subprocess.Popen.__init__
    wait_ready = tests.processes.wait_ready
    test = request.node.nodeid

    def refuse(what: str) -> None:
        pytest.fail(f"{test} starts {what}: mark it `server` (tests/quick.py)", pytrace=False)

    def guarded_listen(self: socket.socket, *args: Any) -> None:
        refuse("a listening socket")
        listen(self, *args)

    def guarded_wait_ready(*args: Any, **kwargs: Any) -> Any:
        refuse("a serving exporter")
        return wait_ready(*args, **kwargs)

    def guarded_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = _serves(args)
        if program is not None:
            refuse(program)
        popen_init(self, args, *rest, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(socket.socket, "listen", guarded_listen)
    mp.setattr(subprocess.Popen, "__init__", guarded_popen)
    mp.setattr(tests.processes, "wait_ready", guarded_wait_ready)
    try:
        yield
    finally:
        mp.undo()
