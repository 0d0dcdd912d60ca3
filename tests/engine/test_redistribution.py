"""behaviour §3: where the controller's redistribution leaves `auto` hints.

Every case here is a Service that the real EndpointSlice controller (kube-controller-manager
v1.37.2, tests/realcluster/test_controller_reference.py) left with a zone outside
[minimum, maximum] once it had settled; the exporter reported zone-out-of-range drift for
it, which the controller never repairs. The hinted counts below are what it wrote.
"""

from __future__ import annotations

import pytest

from exporter.engine import DriftKind, Endpoint
from exporter.engine.allocation import allocate
from exporter.engine.redistribution import settled_hints, strands_endpoints
from tests.engine.builders import (
    auto_service,
    capacity,
    endpoint,
    endpoint_slice,
    node,
    verdict,
    zone_nodes,
)

A, B, C, D, CP = "zone-a", "zone-b", "zone-c", "zone-d", "zone-cp"

# (cpu per zone, ready endpoints located per zone, the counts the controller wrote)
WRITTEN = [
    pytest.param(
        {A: "4", B: "7", C: "2500m", D: "1500m"},
        {A: 4, B: 8, C: 1, D: 1},
        {A: 4, B: 7, C: 2, D: 1},
        id="surplus-under-half-leaves-a-zone-below-its-minimum",
    ),
    pytest.param(
        {A: "12500m", B: "8"},
        {A: 3, B: 3, CP: 1},
        {A: 3, B: 3, CP: 1},
        id="control-plane-zone-nothing-to-give",
    ),
    pytest.param(
        {A: "12500m", B: "8"},
        {A: 10, B: 2, CP: 6},
        {A: 10, B: 2, CP: 6},
        id="control-plane-zone-keeps-six",
    ),
    pytest.param(
        {A: "5500m", B: "500m", C: "1500m", D: "7750m"},
        {A: 3, B: 3, C: 1, D: 6, CP: 1},
        {A: 4, B: 1, C: 1, D: 7, CP: 1},
        id="one-zone-gives-two",
    ),
    pytest.param(
        {A: "500m", B: "2500m"},
        {A: 28, B: 37, CP: 27},
        {A: 15, B: 50, CP: 27},
        id="a-third-stranded",
    ),
]


@pytest.mark.parametrize(("cpus", "located", "written"), WRITTEN)
def test_the_settled_counts_are_those_the_controller_wrote(
    cpus: dict[str, str], located: dict[str, int], written: dict[str, int]
) -> None:
    result = allocate(capacity(cpus), sum(located.values()), every_endpoint_has_zone=True)
    assert result.enabled
    settled = settled_hints(result.allocations, located)
    assert {zone: fewest for zone, (fewest, _) in settled.items()} == written
    assert {zone: most for zone, (_, most) in settled.items()} == written
    assert any(
        not allocation.minimum <= written[zone] <= allocation.maximum
        for zone, allocation in result.allocations.items()
    )


def test_equal_surpluses_give_a_range() -> None:
    """Go's map order decides which of two equal surpluses gives the one hint that moves."""
    result = allocate(capacity({A: "4", B: "4", C: "4"}), 7, every_endpoint_has_zone=True)
    settled = settled_hints(result.allocations, {A: 3, B: 3, C: 1})
    assert dict(settled) == {A: (2, 3), B: (2, 3), C: (2, 2)}


def test_a_zone_without_allocation_strands_its_endpoints() -> None:
    result = allocate(capacity({A: "4", B: "4"}), 4, every_endpoint_has_zone=True)
    assert strands_endpoints(result.allocations, {A: 2, CP: 2})
    assert not strands_endpoints(result.allocations, {A: 2, B: 2})


def _zone_endpoints(counts: dict[str, int], hints: dict[str, int]) -> list[Endpoint]:
    located = [zone for zone, count in counts.items() for _ in range(count)]
    hinted = [zone for zone, count in hints.items() for _ in range(count)]
    return [endpoint(zone, hints=(hint,)) for zone, hint in zip(located, hinted, strict=True)]


def test_no_drift_where_the_controller_settles_outside_the_range() -> None:
    """The first case, whole: a settled controller is not drift, a lagging one still is."""
    nodes = zone_nodes({A: ["4"], B: ["7"], C: ["2500m"], D: ["1500m"]})
    located = {A: 4, B: 8, C: 1, D: 1}
    settled = verdict(
        nodes, auto_service(), [endpoint_slice(*_zone_endpoints(located, {A: 4, B: 7, C: 2, D: 1}))]
    )
    assert settled.expected_state == "enabled"
    assert settled.zones[D].hinted < (settled.zones[D].minimum or 0)
    assert settled.drift == frozenset()
    lagging = verdict(
        nodes, auto_service(), [endpoint_slice(*_zone_endpoints(located, {A: 4, B: 8, C: 1, D: 1}))]
    )
    assert lagging.drift == {DriftKind.ZONE_OUT_OF_RANGE}


def test_no_drift_for_hints_on_a_control_plane_zone_the_controller_wrote() -> None:
    nodes = [*zone_nodes({A: ["8", "500m", "4"], B: ["8"]}), node("cp", CP, control_plane=True)]
    located = {A: 10, B: 2, CP: 6}
    written = verdict(nodes, auto_service(), [endpoint_slice(*_zone_endpoints(located, located))])
    assert written.zones[CP].hinted == 6
    assert written.zones[CP].minimum is None
    assert written.drift == frozenset()
    # Zone b's two endpoints hinted for zone a: neither in range nor where hints settle.
    moved = verdict(
        nodes, auto_service(), [endpoint_slice(*_zone_endpoints(located, {A: 12, CP: 6}))]
    )
    assert moved.drift == {DriftKind.ZONE_OUT_OF_RANGE}
