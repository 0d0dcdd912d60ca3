"""Every conformance vector in ../shared/conformance passes through the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conformance import mismatches, service_keys
from tests.conftest import CONFORMANCE_DIR, IN_CI, exporter_command


def _vectors() -> list[Path]:
    if not CONFORMANCE_DIR.is_dir():
        return []
    return sorted(CONFORMANCE_DIR.glob("*.snapshot.json"))


VECTORS = _vectors()


def test_conformance_folder_is_present() -> None:
    """CI always has the shared folder; elsewhere its absence is a skip, not a silent pass."""
    if not VECTORS:
        if IN_CI:
            pytest.fail(f"no conformance vectors in {CONFORMANCE_DIR}")
        pytest.skip(f"conformance vectors not found in {CONFORMANCE_DIR}")
    assert len(VECTORS) >= 1


@pytest.mark.parametrize("snapshot", VECTORS, ids=lambda path: path.name.split(".")[0])
def test_vector(snapshot: Path) -> None:
    """`evaluate` prints the expected document, under the README's comparison rules."""
    expected = json.loads(
        snapshot.with_name(snapshot.name.replace(".snapshot.", ".expected.")).read_text()
    )
    completed = subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", str(snapshot)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    actual = json.loads(completed.stdout)
    assert service_keys(actual) == service_keys(expected)
    assert mismatches(expected, actual) == []
