"""`make check`'s line between quick tests and server tests holds (tests/quick.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT
from tests.quick import _serves

pytest_plugins = ["pytester"]

SERVING_TEST = """
import socket

import pytest

{mark}
def test_listens():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
"""


@pytest.mark.parametrize(("mark", "outcome"), [("", "failed"), ("@pytest.mark.server", "passed")])
def test_an_unmarked_test_that_listens_fails_under_make_check(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mark: str, outcome: str
) -> None:
    # A child pytest: free of this run's own guard, which would refuse its socket first.
    monkeypatch.setenv("TOPOLOGY_HINTS_QUICK", "1")
    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    pytester.makeconftest('pytest_plugins = ["tests.quick"]')
    pytester.makeini("[pytest]\nmarkers =\n    server: serves\n")
    pytester.makepyfile(SERVING_TEST.format(mark=mark))
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*starts a listening socket: mark it `server`*"])


def test_the_same_test_passes_outside_make_check(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOPOLOGY_HINTS_QUICK", "")
    monkeypatch.setenv("PYTHONPATH", str(PROJECT_ROOT))
    pytester.makeconftest('pytest_plugins = ["tests.quick"]')
    pytester.makepyfile(SERVING_TEST.format(mark=""))
    pytester.runpytest_subprocess("-p", "no:xdist").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (["/usr/bin/prometheus", "--config.file=x"], "prometheus"),
        ("chromedriver", "chromedriver"),
        (["/x/build/kube/v1.37.2/kube-apiserver", "--etcd-servers=..."], "kube-apiserver"),
        (["promtool", "test", "rules", "x.yaml"], None),
        (["python", "-m", "exporter", "serve", "--bogus"], None),
    ],
)
def test_serving_programs_are_told_from_tools(argv: list[str] | str, program: str | None) -> None:
    assert _serves(argv) == program


def test_the_test_api_server_and_the_live_folder_are_server_tests() -> None:
    """What `make check` collects leaves out the live exporter's tests and the test API
    server's users (the marks come from the folder and the fixture, not by hand)."""

    def collected(*marks: str) -> list[str]:
        """The test ids `pytest --collect-only` prints for the two folders, with `marks`."""
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *marks,
             "tests/live", "tests/sources/test_kubeapi.py"],
            capture_output=True, text=True, check=False, cwd=PROJECT_ROOT, timeout=120,
        )  # fmt: skip
        return [line for line in run.stdout.splitlines() if "::" in line]

    everything, kept = collected(), collected("-m", "not server")
    assert any(line.startswith("tests/live/") for line in everything)
    # test_kubeapi.py's tests all ask for the test API server (`api_client`, `core`).
    assert any("test_kubeapi.py" in line for line in everything)
    assert kept == []
