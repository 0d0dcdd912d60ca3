"""Kubeconfig files that would hang the client or exhaust its memory: one line, exit 2.

The real command reads each kubeconfig through the real `kubernetes` client (issue 22, 15).
"""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import exporter_command
from tests.kubeapi import FakeKubeAPI

# Without the fix, `tokenFile: /dev/zero` reads until MemoryError: cap the child's memory so
# that a regression fails fast instead of eating the machine's.
_MEMORY_CAP = 1 << 30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_CAP, _MEMORY_CAP))


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if k not in {"KUBECONFIG", "KUBERNETES_SERVICE_HOST"}
    }
    return subprocess.run(
        [*exporter_command(), *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=30,  # a hang (the bug) fails the test rather than the suite
        preexec_fn=_capped,
        check=False,
    )


def _assert_one_line(completed: subprocess.CompletedProcess[str], *words: str) -> None:
    assert completed.returncode == 2, completed.stderr
    assert completed.stdout == ""
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert "Traceback" not in completed.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_as_the_kubeconfig_is_refused(fifo: Path) -> None:
    _assert_one_line(_run("explain", "--kubeconfig", str(fifo)), str(fifo), "not a regular file")


def test_a_fifo_in_kubeconfig_env_is_refused(fifo: Path, tmp_path: Path) -> None:
    env = {"KUBECONFIG": f"{tmp_path / 'absent'}{os.pathsep}{fifo}", "HOME": str(tmp_path)}
    _assert_one_line(_run("evaluate", env=env), "not a regular file")


def _with_user(kube_api: FakeKubeAPI, path: Path, user: dict[str, str]) -> Path:
    kube_api.write_kubeconfig(path, context="fake")
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"] = user
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("which", ["/dev/zero", "fifo"])
def test_a_token_file_that_is_not_a_regular_file_is_refused(
    kube_api: FakeKubeAPI, tmp_path: Path, fifo: Path, which: str
) -> None:
    named = str(fifo) if which == "fifo" else which
    kubeconfig = _with_user(kube_api, tmp_path / "kubeconfig", {"tokenFile": named})
    completed = _run("explain", "--kubeconfig", str(kubeconfig))
    _assert_one_line(completed, "tokenFile", named, "not a regular file")
    assert kube_api.requests == []


def test_an_oversized_kubeconfig_is_refused(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(b"# padding\n" * (500 * 1024))
    _assert_one_line(_run("explain", "--kubeconfig", str(kubeconfig)), "larger than 4096 KiB")
