from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import freezegun
import pytest

# Tests import it from here; tests/processes.py (free of pytest, bench/ uses it) defines it.
from tests.processes import exporter_command as exporter_command  # noqa: PLC0414

# freezegun patches datetime references in every loaded module; the kubernetes client's
# pydantic models build their schemas lazily and fail on its FakeDatetime.
freezegun.configure(extend_ignore_list=["kubernetes", "pydantic", "pydantic_core"])

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The repository keeps its own copy of the conformance vectors, so a clone runs them all.
CONFORMANCE_DIR = PROJECT_ROOT / "tests" / "conformance"
# Where CI lays the project's shared folder: new upstream vectors are noticed there.
SHARED_CONFORMANCE_DIR = PROJECT_ROOT.parent / "shared" / "conformance"
EXAMPLES_DIR = PROJECT_ROOT / "examples"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it from the project's folder: its exit, stdout and stderr."""
    return subprocess.run(
        [*exporter_command(), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=PROJECT_ROOT,
    )


def require_binary(name: str) -> str:
    """A real binary a test needs: missing fails in CI (it must be installed), skips elsewhere."""
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is not installed; .ci/run must install it")
        pytest.skip(f"{name} is not installed (apt-get install the Debian package to run this)")
    return path


# The Kubernetes-compatible test API server's fixtures (kube_api, kubeconfig), and the
# `server` mark with the guard that keeps `make check` free of servers.
pytest_plugins = ["tests.kubeapi.fixtures", "tests.quick"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that start a server are marked `server` (`make check` leaves them out)."""
    from tests.quick import mark_servers  # noqa: PLC0415  (a plugin: imported by pytest first)

    mark_servers(items)
