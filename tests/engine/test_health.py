"""behaviour §6: hint completeness, zone load factor and drift."""

from __future__ import annotations

import pytest

from exporter.engine import DriftKind, Endpoint, EndpointSlice, Node, Service
from exporter.engine.health import hint_completeness, load_factor
from tests.engine.builders import (
    auto_service,
    endpoint,
    endpoint_slice,
    equal_zones,
    hinted,
    node,
    service,
    verdict,
)

NODES = equal_zones(3)
Z0, Z1, Z2 = "zone-0", "zone-1", "zone-2"
MISSING = DriftKind.HINTS_MISSING
UNEXPECTED = DriftKind.UNEXPECTED_HINTS
OUT_OF_RANGE = DriftKind.ZONE_OUT_OF_RANGE


@pytest.mark.parametrize(
    ("ready", "hinted_count", "expected"),
    [
        pytest.param(0, 0, None, id="no-endpoints"),
        pytest.param(4, 0, 0.0, id="none-hinted"),
        pytest.param(4, 2, 0.5, id="partial"),
        pytest.param(4, 4, 1.0, id="complete"),
    ],
)
def test_hint_completeness_values(ready: int, hinted_count: int, expected: float | None) -> None:
    """Completeness is hinted / ready, None when nothing is ready."""
    assert hint_completeness(ready, hinted_count) == expected


@pytest.mark.parametrize(
    ("endpoints", "completeness"),
    [
        pytest.param([], None, id="N=0"),
        pytest.param([hinted(Z0), endpoint(Z1)], 0.5, id="half"),
        pytest.param([endpoint(Z0, hints=()), endpoint(Z1)], 0.0, id="empty-forZones-is-no-hint"),
        pytest.param([endpoint(Z0, hints=(Z0, Z1))], 1.0, id="two-zone-hint-counts-once"),
        pytest.param([hinted(Z0), endpoint(Z1, ready=False)], 1.0, id="not-ready-not-counted"),
    ],
)
def test_completeness_through_evaluate(
    endpoints: list[Endpoint], completeness: float | None
) -> None:
    """Completeness counts the controller's N endpoints with at least one zone hint."""
    result = verdict(NODES, auto_service(), [endpoint_slice(*endpoints)])
    assert result.hint_completeness == completeness


@pytest.mark.parametrize(
    ("ratio", "ready", "hinted_for_zone", "expected"),
    [
        pytest.param(0.5, 4, 2, 1.0, id="fair"),
        pytest.param(0.5, 4, 1, 2.0, id="overloaded"),
        pytest.param(0.5, 4, 0, None, id="no-hint"),
        pytest.param(None, 4, 2, None, id="no-ratio"),
    ],
)
def test_load_factor_values(
    ratio: float | None, ready: int, hinted_for_zone: int, expected: float | None
) -> None:
    """load factor = ratio * ready / hinted, None without a hint or a ratio."""
    assert load_factor(ratio, ready, hinted_for_zone) == expected


def test_load_factor_through_evaluate() -> None:
    """Per-zone load factors: double-hinted endpoints count in both zones, stale zones have none."""
    endpoints = [
        endpoint(Z0, hints=(Z0, Z1)),
        hinted(Z1),
        hinted(Z1),
        endpoint(Z2, hints=("zone-gone",)),
    ]
    result = verdict(
        NODES, service(traffic_distribution="PreferClose"), [endpoint_slice(*endpoints)]
    )
    ratio = result.zones[Z0].ratio
    assert ratio is not None
    assert result.zones[Z0].hinted == 1
    assert result.zones[Z0].load_factor == pytest.approx(ratio * 4 / 1)
    assert result.zones[Z1].hinted == 3
    assert result.zones[Z1].load_factor == pytest.approx(ratio * 4 / 3)
    assert result.zones[Z2].hinted == 0
    assert result.zones[Z2].load_factor is None
    assert result.zones["zone-gone"].hinted == 1
    assert result.zones["zone-gone"].ratio is None
    assert result.zones["zone-gone"].load_factor is None


def each_own_zone(per_zone: int) -> list[Endpoint]:
    return [hinted(zone) for zone in (Z0, Z1, Z2) for _ in range(per_zone)]


INSUFFICIENT_NODES = [node("stray", None)]

DRIFT_TABLE = [
    # id, nodes, service, slices, drift
    ("auto-enabled-healthy", NODES, auto_service(), [endpoint_slice(*each_own_zone(2))], set()),
    (
        "auto-enabled-one-missing",
        NODES,
        auto_service(),
        [endpoint_slice(*each_own_zone(2), endpoint(Z0))],
        {MISSING},
    ),
    (
        "auto-enabled-none-hinted",
        NODES,
        auto_service(),
        [endpoint_slice(*[endpoint(zone) for zone in (Z0, Z1, Z2)])],
        {MISSING, OUT_OF_RANGE},
    ),
    (
        "auto-enabled-all-in-one-zone",
        NODES,
        auto_service(),
        [endpoint_slice(*[endpoint(zone, hints=(Z0,)) for zone in (Z0, Z1, Z2)])],
        {OUT_OF_RANGE},
    ),
    (
        "auto-enabled-above-maximum",
        NODES,
        auto_service(),
        # N = 7: minimum 2, maximum 3 per zone; 4 hinted for zone-0 is too many.
        [endpoint_slice(*[hinted(Z0) for _ in range(4)], hinted(Z1), hinted(Z1), hinted(Z2))],
        {OUT_OF_RANGE},
    ),
    (
        "auto-disabled-with-hints",
        NODES,
        auto_service(),
        [endpoint_slice(hinted(Z0), hinted(Z1), hinted(Z2), hinted(Z0))],
        {UNEXPECTED},
    ),
    (
        "auto-disabled-insufficient-with-hints",
        INSUFFICIENT_NODES,
        auto_service(),
        [endpoint_slice(hinted(Z0))],
        {UNEXPECTED},
    ),
    (
        "auto-disabled-without-hints",
        NODES,
        auto_service(),
        [endpoint_slice(endpoint(Z0))],
        set(),
    ),
    ("none-with-hints", NODES, service(), [endpoint_slice(hinted(Z0))], {UNEXPECTED}),
    ("none-without-hints", NODES, service(), [endpoint_slice(endpoint(Z0))], set()),
    (
        "none-hints-only-on-not-ready",
        NODES,
        service(),
        [
            endpoint_slice(
                endpoint(Z0, ready=False, hints=(Z0,)), endpoint(Z1, ready=None, hints=(Z1,))
            )
        ],
        set(),
    ),
    (
        "none-hints-only-in-unmanaged-slice",
        NODES,
        service(),
        [endpoint_slice(hinted(Z0), managed=False)],
        set(),
    ),
    (
        "none-node-hint-only",
        NODES,
        service(),
        [endpoint_slice(endpoint(Z0, node_hints=("zone-0-0",)))],
        set(),
    ),
    (
        "td-extra-hints-not-unexpected",
        NODES,
        service(traffic_distribution="PreferClose"),
        [endpoint_slice(endpoint(Z0, hints=(Z0, Z1)))],
        set(),
    ),
]


@pytest.mark.parametrize(
    ("nodes", "svc", "slices", "drift"),
    [pytest.param(*row[1:], id=row[0]) for row in DRIFT_TABLE],
)
def test_drift_kinds(
    nodes: list[Node], svc: Service, slices: list[EndpointSlice], drift: set[DriftKind]
) -> None:
    """Each drift kind holds exactly when behaviour §9's definition says."""
    assert verdict(nodes, svc, slices).drift == drift


def test_drift_kind_values_are_the_contract_values() -> None:
    """The drift kinds are the three label values of behaviour §9."""
    assert {kind.value for kind in DriftKind} == {
        "hints-missing",
        "unexpected-hints",
        "zone-out-of-range",
    }
