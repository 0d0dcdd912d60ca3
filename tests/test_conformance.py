"""Every conformance vector in tests/conformance passes through the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from exporter.engine import DataPlane
from tests.conformance_rules import mismatches, routing_mismatches, service_keys
from tests.conftest import CONFORMANCE_DIR, IN_CI, SHARED_CONFORMANCE_DIR, exporter_command

VECTORS = sorted(CONFORMANCE_DIR.glob("*.snapshot.json"))


def _file_names(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir() if path.is_file()}


def test_repository_holds_the_vectors() -> None:
    """The vectors live in the repository, so a clone without ../shared runs every one."""
    assert len(VECTORS) >= 60
    for snapshot in VECTORS:
        assert snapshot.with_name(snapshot.name.replace(".snapshot.", ".expected.")).is_file()


def test_repository_copy_matches_the_shared_vectors() -> None:
    """A vector added to or changed in ../shared/conformance is noticed and copied in."""
    if not SHARED_CONFORMANCE_DIR.is_dir():
        if IN_CI:
            pytest.fail(f"CI lays the shared folder beside the clone: {SHARED_CONFORMANCE_DIR}")
        pytest.skip("no ../shared/conformance beside this checkout to compare with")
    shared = _file_names(SHARED_CONFORMANCE_DIR)
    ours = _file_names(CONFORMANCE_DIR)
    assert sorted(shared - ours) == [], "copy the new vectors into tests/conformance/"
    assert sorted(ours - shared) == [], "vectors removed upstream: remove them here too"
    changed = sorted(
        name
        for name in shared
        if (SHARED_CONFORMANCE_DIR / name).read_bytes() != (CONFORMANCE_DIR / name).read_bytes()
    )
    assert changed == [], "vectors changed upstream: copy them into tests/conformance/"


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


ROUTING_VECTORS = sorted(CONFORMANCE_DIR.glob("*.routing.json"))


def test_every_vector_has_its_routing() -> None:
    """Each snapshot has the routing of every data plane of section 10: `--dataplane` runs on
    them all. (kube-proxy-1.33, of section 12, is checked by tests/cli/test_profile_cli.py.)"""
    assert len(ROUTING_VECTORS) == len(VECTORS)
    section_10 = [
        dataplane for dataplane in DataPlane if dataplane is not DataPlane.KUBE_PROXY_1_33
    ]
    for routing in ROUTING_VECTORS:
        assert routing.with_name(routing.name.replace(".routing.", ".snapshot.")).is_file()
        assert json.loads(routing.read_text())["dataplanes"] == section_10


@pytest.mark.parametrize("routing", ROUTING_VECTORS, ids=lambda path: path.name.split(".")[0])
def test_routing_vector(routing: Path) -> None:
    """`evaluate --dataplane` with all ten ids reports each entry's routing and local ratio."""
    expected = json.loads(routing.read_text())
    snapshot = routing.with_name(routing.name.replace(".routing.", ".snapshot."))
    completed = subprocess.run(
        [
            *exporter_command(),
            "evaluate",
            "--snapshot",
            str(snapshot),
            "--dataplane",
            ",".join(expected["dataplanes"]),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    actual = json.loads(completed.stdout)
    assert service_keys(actual) == service_keys(expected)
    problems = [
        problem
        for want, got in zip(expected["services"], actual["services"], strict=True)
        for problem in routing_mismatches(want, got)
    ]
    assert problems == []
