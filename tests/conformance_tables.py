"""Routing expectations: the public vectors' data planes, and the repository's own tables.

A public `NAME.routing.json` (tests/conformance/, a byte-for-byte copy of
../shared/conformance) lists the data planes it was written for. A data plane it does not
list, one added to the exporter since, is checked from the repository's table for it:
`tests/conformance/local/DATAPLANE.routing.json`, which holds that data plane's routing on
some of the public vectors' snapshots:

    {"dataplane": "DATAPLANE",
     "vectors": {"NAME": [{"namespace": ..., "name": ..., "address_type": ...,
                           "routing": {ZONE: {ROUTING: NODES}} or null,
                           "local_routing_ratio": RATIO or null}, ...]}}

one entry per entry of the public vector, in its order. `routing_expectations` merges the
two into one document of the public shape, so one `evaluate --dataplane` run checks both.
Adding a data plane touches its rule, its tests (this table among them) and its docs only:
never a public vector (docs/dataplanes.md, "Adding a data plane").
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from exporter.engine import DataPlane
from tests.conformance_rules import routing_mismatches, service_keys
from tests.conftest import CONFORMANCE_DIR, exporter_command

LOCAL_DIR = CONFORMANCE_DIR / "local"
LOCAL_SUFFIX = ".routing.json"
# The data planes of section 10, which routing vectors check; kube-proxy-1.33 is behaviour
# §12's (tests/cli/test_profile_cli.py checks it).
SECTION_10 = tuple(
    dataplane for dataplane in DataPlane if dataplane is not DataPlane.KUBE_PROXY_1_33
)

# data plane -> vector name -> its entries, in the public vector's order.
Tables = Mapping[str, Mapping[str, list[dict[str, Any]]]]


def vector_name(routing: Path) -> str:
    return routing.name.removesuffix(".routing.json")


def local_tables(folder: Path = LOCAL_DIR) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every table of the folder, by data plane; ValueError for a table that is not one."""
    tables = {}
    for path in sorted(folder.glob(f"*{LOCAL_SUFFIX}")):
        document = json.loads(path.read_text(encoding="utf-8"))
        dataplane = document.get("dataplane")
        if path.name != f"{dataplane}{LOCAL_SUFFIX}":
            raise ValueError(f"{path.name}: its dataplane is {dataplane!r}")
        if dataplane not in set(DataPlane):
            raise ValueError(f"{path.name}: {dataplane!r} is no data plane of the exporter")
        vectors = document.get("vectors")
        if not isinstance(vectors, dict) or not vectors:
            raise ValueError(f"{path.name}: no vectors")
        tables[dataplane] = vectors
    return tables


def public_vector_problems(routing: Path) -> list[str]:
    """What is wrong with a public routing file for the data planes it lists: each one an
    exporter data plane, listed once, and each entry's routing and ratio given for exactly
    those (or null for both)."""
    document = json.loads(routing.read_text(encoding="utf-8"))
    listed = document["dataplanes"]
    known = set(DataPlane)
    problems = [f"{plane}: no data plane of the exporter" for plane in listed if plane not in known]
    if len(set(listed)) != len(listed):
        problems.append(f"data planes listed twice: {listed}")
    for entry in document["services"]:
        path = f"{entry['namespace']}/{entry['name']} {entry['address_type']}"
        routed, ratio = entry["routing"], entry["local_routing_ratio"]
        if (routed is None) != (ratio is None):
            problems.append(f"{path}: routing and local_routing_ratio are not both null")
        elif routed is not None and not set(routed) == set(ratio) == set(listed):
            problems.append(f"{path}: routing for {list(routed)}, not the listed {listed}")
    return problems


def routing_expectations(routing: Path, tables: Tables) -> dict[str, Any]:
    """The public vector's document, with the data planes it does not list that a
    repository table covers for it; ValueError where a table contradicts the vector."""
    document = json.loads(routing.read_text(encoding="utf-8"))
    name = vector_name(routing)
    dataplanes = list(document["dataplanes"])
    services = [dict(entry) for entry in document["services"]]
    for dataplane, vectors in tables.items():
        entries = vectors.get(name)
        if entries is None:
            continue
        if dataplane in dataplanes:
            raise ValueError(
                f"{name}: the public vector has {dataplane}: remove it from its local table"
            )
        if service_keys({"services": entries}) != service_keys(document):
            raise ValueError(f"{name}: the {dataplane} table lists other entries than the vector")
        for service, entry in zip(services, entries, strict=True):
            if (service["routing"] is None) != (entry["routing"] is None):
                raise ValueError(
                    f"{name}: the {dataplane} table and the vector disagree on whether "
                    f"routing applies to {entry['namespace']}/{entry['name']}"
                )
            if service["routing"] is not None:
                service["routing"] = {**service["routing"], dataplane: entry["routing"]}
                service["local_routing_ratio"] = {
                    **service["local_routing_ratio"],
                    dataplane: entry["local_routing_ratio"],
                }
        dataplanes.append(dataplane)
    return {"dataplanes": dataplanes, "services": services}


def checked_vectors(routings: list[Path], tables: Tables) -> dict[str, set[str]]:
    """Per data plane of section 10, the vectors its routing is checked on."""
    checked: dict[str, set[str]] = {str(dataplane): set() for dataplane in SECTION_10}
    for routing in routings:
        for dataplane in json.loads(routing.read_text(encoding="utf-8"))["dataplanes"]:
            checked.setdefault(dataplane, set()).add(vector_name(routing))
    for dataplane, vectors in tables.items():
        checked.setdefault(dataplane, set()).update(vectors)
    return checked


def routing_problems(snapshot: Path, expected: dict[str, Any]) -> list[str]:
    """`evaluate --dataplane` with every data plane `expected` lists, against it."""
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
    if completed.returncode != 0:
        return [f"exit {completed.returncode}: {completed.stderr}"]
    actual = json.loads(completed.stdout)
    if service_keys(actual) != service_keys(expected):
        return [f"entries {service_keys(actual)} != {service_keys(expected)}"]
    return [
        problem
        for want, got in zip(expected["services"], actual["services"], strict=True)
        for problem in routing_mismatches(want, got)
    ]
