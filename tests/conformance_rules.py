"""The comparison rules of tests/conformance/README.md, as a function that lists mismatches."""

from __future__ import annotations

import math
from typing import Any

TOLERANCE = 1e-3
DATA_KEYED_MAPS = frozenset({"zones", "zone_cpu_ratio", "proxy_mode_by_zone"})
SET_VALUED = frozenset({"insufficient_nodes", "proxy_same_node", "config_issues"})


def _scalar(expected: Any, actual: Any, path: str) -> list[str]:
    if isinstance(expected, bool) or expected is None:
        same = actual is expected
    elif isinstance(expected, int | float):
        same = (
            isinstance(actual, int | float)
            and not isinstance(actual, bool)
            and math.isclose(expected, actual, rel_tol=0, abs_tol=TOLERANCE)
        )
    else:
        same = expected == actual
    return [] if same else [f"{path}: expected {expected!r}, got {actual!r}"]


def _mapping(expected: dict[str, Any], actual: Any, path: str) -> list[str]:
    if not isinstance(actual, dict):
        return [f"{path}: expected an object, got {actual!r}"]
    problems = []
    if path.rsplit(".", 1)[-1] in DATA_KEYED_MAPS and set(expected) != set(actual):
        problems.append(f"{path}: keys {sorted(expected)} != {sorted(actual)}")
    for name, value in expected.items():
        if name not in actual:
            problems.append(f"{path}.{name}: missing")
        elif name in SET_VALUED and isinstance(value, list):
            if not isinstance(actual[name], list) or set(value) != set(actual[name]):
                problems.append(f"{path}.{name}: expected set {value}, got {actual[name]}")
        else:
            problems.extend(mismatches(value, actual[name], f"{path}.{name}"))
    return problems


def _sequence(expected: list[Any], actual: Any, path: str) -> list[str]:
    if not isinstance(actual, list) or len(expected) != len(actual):
        return [f"{path}: expected {len(expected)} items, got {actual!r:.200}"]
    problems = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        problems.extend(mismatches(want, got, f"{path}[{index}]"))
    return problems


def mismatches(expected: Any, actual: Any, path: str = "$") -> list[str]:
    """Every place where `actual` fails to match `expected`; empty when the vector passes."""
    if isinstance(expected, dict):
        return _mapping(expected, actual, path)
    if isinstance(expected, list):
        return _sequence(expected, actual, path)
    return _scalar(expected, actual, path)


def service_keys(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (service["namespace"], service["name"], service["address_type"])
        for service in document["services"]
    ]


def routing_mismatches(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """README's routing rules: `routing` compared as objects, ratios within 1e-3, null as null."""
    path = f"{expected['namespace']}/{expected['name']} {expected['address_type']}"
    if expected["routing"] is None or expected["local_routing_ratio"] is None:
        return [
            f"{path}.{name}: expected null, got {actual.get(name)!r}"
            for name in ("routing", "local_routing_ratio")
            if actual.get(name) is not None
        ]
    problems = []
    if actual.get("routing") != expected["routing"]:
        problems.append(
            f"{path}.routing: expected {expected['routing']}, got {actual.get('routing')}"
        )
    problems.extend(
        mismatches(
            expected["local_routing_ratio"], actual.get("local_routing_ratio"), f"{path}.ratio"
        )
    )
    return problems
