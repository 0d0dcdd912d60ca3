"""A data plane missing from a public routing vector is checked from the repository's table
(issue 28, item 7): adding a data plane never needs a public vector changed.

The public vectors are a byte-for-byte copy of ../shared/conformance; a data plane added to
the exporter since they were written is absent from them. Here one public vector is copied
without calico-ebpf, and calico-ebpf's routing on it put in a repository table instead: the
vector is right for the data planes it lists, the table's data plane is checked by the real
CLI, and a wrong expectation in the table fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporter.engine import DataPlane
from tests.conformance_tables import (
    checked_vectors,
    local_tables,
    public_vector_problems,
    routing_expectations,
    routing_problems,
)
from tests.conftest import CONFORMANCE_DIR

VECTOR = "upstream-addhints-2-ready-1-unready-1-unknown-after"
MISSING = str(DataPlane.CALICO_EBPF)
PUBLIC = CONFORMANCE_DIR / f"{VECTOR}.routing.json"
SNAPSHOT = CONFORMANCE_DIR / f"{VECTOR}.snapshot.json"


def _without(document: dict[str, Any], dataplane: str) -> dict[str, Any]:
    """The public document as it was before `dataplane` existed."""
    services = []
    for entry in document["services"]:
        entry = dict(entry)  # noqa: PLW2901 - a copy of the loop's entry
        if entry["routing"] is not None:
            entry["routing"] = {k: v for k, v in entry["routing"].items() if k != dataplane}
            entry["local_routing_ratio"] = {
                k: v for k, v in entry["local_routing_ratio"].items() if k != dataplane
            }
        services.append(entry)
    return {
        "dataplanes": [plane for plane in document["dataplanes"] if plane != dataplane],
        "services": services,
    }


def _table(document: dict[str, Any], dataplane: str) -> dict[str, Any]:
    """The repository table that states `dataplane`'s routing on the vector."""
    entries = [
        {
            "namespace": entry["namespace"],
            "name": entry["name"],
            "address_type": entry["address_type"],
            "routing": None if entry["routing"] is None else entry["routing"][dataplane],
            "local_routing_ratio": None
            if entry["local_routing_ratio"] is None
            else entry["local_routing_ratio"][dataplane],
        }
        for entry in document["services"]
    ]
    return {"dataplane": dataplane, "vectors": {VECTOR: entries}}


@pytest.fixture
def older_vector(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """(public routing file without MISSING, a local folder with MISSING's table, the
    original public document)."""
    original = json.loads(PUBLIC.read_text())
    assert MISSING in original["dataplanes"]
    assert any(entry["routing"] for entry in original["services"]), "a vector with routing"
    public = tmp_path / PUBLIC.name
    public.write_text(json.dumps(_without(original, MISSING)))
    local = tmp_path / "local"
    local.mkdir()
    (local / f"{MISSING}.routing.json").write_text(json.dumps(_table(original, MISSING)))
    return public, local, original


def test_a_data_plane_missing_from_a_public_vector_is_checked_from_the_repository_table(
    older_vector: tuple[Path, Path, dict[str, Any]],
) -> None:
    public, local, original = older_vector
    # The vector is right for what it lists: its lack of calico-ebpf fails nothing.
    assert public_vector_problems(public) == []
    tables = local_tables(local)
    assert checked_vectors([public], tables)[MISSING] == {VECTOR}
    expected = routing_expectations(public, tables)
    assert sorted(expected["dataplanes"]) == sorted(original["dataplanes"])
    assert expected["services"] == original["services"]
    # The real CLI is asked for calico-ebpf too, and agrees with the table.
    assert routing_problems(SNAPSHOT, expected) == []


def test_without_its_table_a_new_data_plane_is_reported_unchecked(
    older_vector: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    public, _, _ = older_vector
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checked_vectors([public], local_tables(empty))[MISSING] == set()


def test_a_wrong_expectation_in_the_table_fails(
    older_vector: tuple[Path, Path, dict[str, Any]],
) -> None:
    public, local, _ = older_vector
    table_path = local / f"{MISSING}.routing.json"
    table = json.loads(table_path.read_text())
    entry = next(entry for entry in table["vectors"][VECTOR] if entry["routing"])
    zone = next(iter(entry["routing"]))
    entry["routing"][zone] = {"no-endpoints": 99}
    table_path.write_text(json.dumps(table))
    problems = routing_problems(SNAPSHOT, routing_expectations(public, local_tables(local)))
    assert len(problems) == 1
    assert "no-endpoints" in problems[0]


def test_a_table_may_not_repeat_a_public_data_plane(tmp_path: Path) -> None:
    """One fact, one place: a data plane the public vector lists is checked from it only."""
    local = tmp_path / "local"
    local.mkdir()
    original = json.loads(PUBLIC.read_text())
    (local / f"{MISSING}.routing.json").write_text(json.dumps(_table(original, MISSING)))
    with pytest.raises(ValueError, match="remove it from its local table"):
        routing_expectations(PUBLIC, local_tables(local))


def test_a_table_names_its_data_plane(tmp_path: Path) -> None:
    (tmp_path / "cilium.routing.json").write_text(
        json.dumps({"dataplane": "calico-ebpf", "vectors": {VECTOR: []}})
    )
    with pytest.raises(ValueError, match="its dataplane is 'calico-ebpf'"):
        local_tables(tmp_path)
    (tmp_path / "cilium.routing.json").unlink()
    (tmp_path / "bogus.routing.json").write_text(
        json.dumps({"dataplane": "bogus", "vectors": {VECTOR: []}})
    )
    with pytest.raises(ValueError, match="no data plane of the exporter"):
        local_tables(tmp_path)
