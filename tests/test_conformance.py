"""Every conformance vector in tests/conformance passes through the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conformance_rules import mismatches, service_keys
from tests.conformance_tables import (
    checked_vectors,
    local_tables,
    public_vector_problems,
    routing_expectations,
    routing_problems,
    vector_name,
)
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
    """Each snapshot has a routing vector, right for the data planes it lists; every data
    plane of section 10 is checked on some vector, by the public files or by the
    repository's table for it (tests/conformance_tables.py). (kube-proxy-1.33, of section
    12, is checked by tests/cli/test_profile_cli.py.)"""
    assert len(ROUTING_VECTORS) == len(VECTORS)
    for routing in ROUTING_VECTORS:
        assert routing.with_name(routing.name.replace(".routing.", ".snapshot.")).is_file()
        assert public_vector_problems(routing) == [], routing.name
    tables = local_tables()
    unchecked = sorted(
        dataplane
        for dataplane, vectors in checked_vectors(ROUTING_VECTORS, tables).items()
        if not vectors
    )
    assert unchecked == [], f"add tests/conformance/local/DATAPLANE.routing.json for {unchecked}"
    names = {vector_name(routing) for routing in ROUTING_VECTORS}
    for dataplane, vectors in tables.items():
        assert set(vectors) <= names, f"{dataplane}: no such public vector"


@pytest.mark.parametrize("routing", ROUTING_VECTORS, ids=lambda path: path.name.split(".")[0])
def test_routing_vector(routing: Path) -> None:
    """`evaluate --dataplane` with every data plane the vector lists, and those the
    repository's tables add for it, reports each entry's routing and local ratio."""
    expected = routing_expectations(routing, local_tables())
    snapshot = routing.with_name(routing.name.replace(".routing.", ".snapshot."))
    assert routing_problems(snapshot, expected) == []
