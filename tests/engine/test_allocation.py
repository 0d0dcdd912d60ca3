"""behaviour §3: the controller's checks, allocation and the nearest feasible endpoint counts."""

from __future__ import annotations

import math
from fractions import Fraction
from types import MappingProxyType

import pytest

from exporter.engine import ClusterCapacity, DisableReason, allocate, cluster_capacity
from exporter.engine.allocation import nearest_feasible, refusal_reason, zone_minimum
from tests.engine.builders import capacity, equal_zones, node

INSUFFICIENT_NODE_INFO = DisableReason.INSUFFICIENT_NODE_INFO
ONE_ZONE = DisableReason.NODES_READY_IN_ONE_ZONE_ONLY
TOO_FEW = DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS
OVERLOAD = DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD
NO_ZONE = DisableReason.NO_ZONE_SPECIFIED

THREE_EQUAL = cluster_capacity(equal_zones(3))
# Hand-built capacity with one zone: section 2 never produces it, but check 2 stays in order.
ONE_ZONE_CAPACITY = ClusterCapacity(sufficient=True, zone_ratios=MappingProxyType({"a": 1.0}))
INSUFFICIENT = cluster_capacity([node("a-1", "a"), node("stray", None)])


@pytest.mark.parametrize(
    ("cap", "endpoints", "every_endpoint_has_zone", "reason"),
    [
        pytest.param(INSUFFICIENT, 0, False, INSUFFICIENT_NODE_INFO, id="1-beats-all"),
        pytest.param(INSUFFICIENT, 30, True, INSUFFICIENT_NODE_INFO, id="1-alone"),
        pytest.param(ONE_ZONE_CAPACITY, 0, False, ONE_ZONE, id="2-beats-3-and-5"),
        pytest.param(ONE_ZONE_CAPACITY, 5, True, ONE_ZONE, id="2-alone"),
        pytest.param(THREE_EQUAL, 0, False, TOO_FEW, id="3-with-no-endpoints"),
        pytest.param(THREE_EQUAL, 2, False, TOO_FEW, id="3-beats-4-and-5"),
        pytest.param(THREE_EQUAL, 4, False, OVERLOAD, id="4-beats-5"),
        pytest.param(THREE_EQUAL, 4, True, OVERLOAD, id="4-alone"),
        pytest.param(THREE_EQUAL, 3, False, NO_ZONE, id="5-after-1-to-4-pass"),
        pytest.param(THREE_EQUAL, 3, True, None, id="enabled"),
    ],
)
def test_checks_run_in_order(
    *, cap: ClusterCapacity, endpoints: int, every_endpoint_has_zone: bool, reason: DisableReason
) -> None:
    """The first failing check of section 3 names the reason; NoZoneSpecified comes last."""
    result = allocate(cap, endpoints, every_endpoint_has_zone=every_endpoint_has_zone)
    assert result.reason is reason
    assert result.enabled is (reason is None)
    if reason is not None:
        assert dict(result.allocations) == {}


# behaviour §3: 3 equal zones, minimum = ceil(N/3 / 1.2) per zone; refused when 3*minimum > N.
# N=1,2: fewer endpoints than zones. N=4,5: min 2 (sum 6). N=8: min 3 (sum 9). N=11: min 4 (12).
THREE_ZONE_TABLE = {
    1: TOO_FEW,
    2: TOO_FEW,
    3: None,
    4: OVERLOAD,
    5: OVERLOAD,
    6: None,
    7: None,
    8: OVERLOAD,
    9: None,
    10: None,
    11: OVERLOAD,
    12: None,
    13: None,
    14: None,
}


@pytest.mark.parametrize(
    ("endpoints", "reason"), [pytest.param(n, r, id=f"N={n}") for n, r in THREE_ZONE_TABLE.items()]
)
def test_three_equal_zones_table(endpoints: int, reason: DisableReason | None) -> None:
    """Feasibility with 3 equal zones is not monotonic in N (behaviour §3's table)."""
    assert allocate(THREE_EQUAL, endpoints, every_endpoint_has_zone=True).reason is reason


def _exact_minimum(cpu_ratio: Fraction, endpoints: int) -> int:
    return math.ceil(cpu_ratio * endpoints / Fraction(6, 5))


@pytest.mark.parametrize(
    ("cpu_by_zone", "endpoints"),
    [
        pytest.param({"a": "400m", "b": "600m"}, 3, id="0.4-0.6-N3"),
        pytest.param({"a": "200m", "b": "400m", "c": "400m"}, 6, id="0.2-0.4-0.4-N6"),
    ],
)
def test_float64_boundary_refuses_where_exact_would_enable(
    cpu_by_zone: dict[str, str], endpoints: int
) -> None:
    """float64 ceilings in the controller's order refuse where exact arithmetic would enable."""
    cap = capacity(cpu_by_zone)
    total = sum(cap.zone_millicores.values())
    exact = [
        _exact_minimum(Fraction(cap.zone_millicores[zone], total), endpoints)
        for zone in cpu_by_zone
    ]
    assert sum(exact) <= endpoints
    assert refusal_reason(cap, endpoints) is OVERLOAD


def test_float64_boundary_minimums_for_0_4_and_0_6() -> None:
    """Ratios 0.4 / 0.6 with N = 3 give minimums 2 and 2 (behaviour §3's example)."""
    cap = capacity({"a": "400m", "b": "600m"})
    assert dict(cap.zone_ratios) == {"a": 0.4, "b": 0.6}
    assert zone_minimum(cap.zone_ratios["a"], 3) == 2
    assert zone_minimum(cap.zone_ratios["b"], 3) == 2
    assert _exact_minimum(Fraction(2, 5), 3) == 1


def test_allocation_values_three_equal_zones() -> None:
    """3 equal zones, N = 7: minimum 2, desired 7/3, maximum 3 in every zone."""
    result = allocate(THREE_EQUAL, 7, every_endpoint_has_zone=True)
    assert set(result.allocations) == {"zone-0", "zone-1", "zone-2"}
    for allocation in result.allocations.values():
        assert allocation.minimum == 2
        assert allocation.desired == pytest.approx(7 / 3)
        assert allocation.maximum == 3


def test_desired_is_raised_to_the_minimum() -> None:
    """desired = max(ratio * N, minimum): a small zone's desired is its minimum."""
    cap = capacity({"small": "100m", "big-1": "450m", "big-2": "450m"})
    result = allocate(cap, 5, every_endpoint_has_zone=True)
    assert result.enabled
    small, big = result.allocations["small"], result.allocations["big-1"]
    assert (small.minimum, small.desired, small.maximum) == (1, 1.0, 1)
    assert (big.minimum, big.maximum) == (2, 2)
    assert big.desired == pytest.approx(2.25)


def test_maximum_is_minimum_plus_spare() -> None:
    """maximum = minimum + N - sum(minimums) for every zone."""
    cap = capacity({"a": "1", "b": "2", "c": "3"})
    endpoints = 40
    result = allocate(cap, endpoints, every_endpoint_has_zone=True)
    minimums = {zone: a.minimum for zone, a in result.allocations.items()}
    spare = endpoints - sum(minimums.values())
    assert spare > 0
    assert {zone: a.maximum for zone, a in result.allocations.items()} == {
        zone: minimum + spare for zone, minimum in minimums.items()
    }
    assert minimums == {zone: zone_minimum(cap.zone_ratios[zone], endpoints) for zone in minimums}


@pytest.mark.parametrize(
    ("endpoints", "below", "above"),
    [
        pytest.param(0, None, 3, id="N=0"),
        pytest.param(1, None, 3, id="N=1"),
        pytest.param(3, None, 6, id="N=3-nothing-below"),
        pytest.param(4, 3, 6, id="N=4"),
        pytest.param(5, 3, 6, id="N=5"),
        pytest.param(8, 7, 9, id="N=8"),
        pytest.param(11, 10, 12, id="N=11"),
        pytest.param(9, 7, 10, id="N=9-feasible-itself"),
    ],
)
def test_nearest_feasible_three_equal_zones(endpoints: int, below: int | None, above: int) -> None:
    """Nearest feasible counts around N follow the 3-equal-zones table, excluding N itself."""
    result = nearest_feasible(THREE_EQUAL, endpoints)
    assert (result.below, result.above) == (below, above)


def test_nearest_feasible_none_when_node_info_insufficient() -> None:
    """No endpoint count helps while node info is insufficient."""
    result = nearest_feasible(INSUFFICIENT, 5)
    assert (result.below, result.above) == (None, None)


@pytest.mark.parametrize(
    ("zones", "endpoints", "above"),
    [
        pytest.param(11, 0, None, id="11-zones-N=0-bound-10"),
        pytest.param(10, 0, 10, id="10-zones-N=0-at-bound"),
        pytest.param(21, 1, None, id="21-zones-N=1-bound-20"),
        pytest.param(20, 1, 20, id="20-zones-N=1-at-bound"),
    ],
)
def test_nearest_feasible_above_is_bounded_at_10n_plus_10(
    zones: int, endpoints: int, above: int | None
) -> None:
    """`above` is searched up to 10N + 10 inclusive, and is None past it."""
    cap = cluster_capacity(equal_zones(zones))
    assert refusal_reason(cap, zones) is None
    assert nearest_feasible(cap, endpoints).above == above
