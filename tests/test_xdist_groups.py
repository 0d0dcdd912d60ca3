"""The suite's xdist groups are honoured: `make test` relies on them.

Under `--dist loadgroup` every test of one `xdist_group` runs on one worker: a real-cluster
module shares its worker's control planes, the image is built once, the packaging tests use
the source tree's build/ one at a time. pytest 9.2 with pytest-xdist 3.8 silently ignored
every group (the tests spread over both workers), which only showed as a slower suite and
collisions; this runs a small suite the way `make test` does and says where each test ran.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("together")


def test_one(): pass
def test_two(): pass
def test_three(): pass
def test_four(): pass
"""
_RAN = re.compile(r"^\[(?P<worker>gw\d+)\] .*PASSED .*::(?P<test>test_\w+)", re.MULTILINE)


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_grouped.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = {match["test"]: match["worker"] for match in _RAN.finditer(result.stdout)}
    assert sorted(workers) == ["test_four", "test_one", "test_three", "test_two"], result.stdout
    assert len(set(workers.values())) == 1, f"one group ran on several workers: {workers}"
