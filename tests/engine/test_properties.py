"""Properties of the allocation over random clusters (hypothesis)."""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from exporter.engine import (
    ClusterCapacity,
    DisableReason,
    Node,
    allocate,
    cluster_capacity,
)
from exporter.engine.allocation import nearest_feasible, refusal_reason
from tests.engine.builders import auto_service, endpoint, endpoint_slice, zone_nodes
from tests.results import result_of

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)

cpu_quantity = st.one_of(
    st.integers(1, 64).map(str),
    st.integers(1, 64_000).map(lambda milli: f"{milli}m"),
    st.decimals(min_value="0.0001", max_value="96", places=4).map(str),
)


@st.composite
def cluster_nodes(draw: st.DrawFn) -> list[Node]:
    """2 to 5 zones of 1 to 3 Ready worker nodes with random CPU quantities."""
    zones = draw(st.integers(2, 5))
    cpu_by_zone = {
        f"zone-{index}": draw(st.lists(cpu_quantity, min_size=1, max_size=3))
        for index in range(zones)
    }
    return zone_nodes(cpu_by_zone)


def clusters() -> st.SearchStrategy[ClusterCapacity]:
    return cluster_nodes().map(cluster_capacity)


endpoint_counts = st.integers(0, 60)


@PROPERTY_SETTINGS
@given(cap=clusters(), endpoints=endpoint_counts)
def test_enabled_allocation_is_consistent(cap: ClusterCapacity, endpoints: int) -> None:
    """When enabled: minimum <= desired, sum of minimums <= N, maximum >= minimum."""
    result = allocate(cap, endpoints, every_endpoint_has_zone=True)
    event(f"reason: {result.reason}")
    if not result.enabled:
        return
    assert set(result.allocations) == set(cap.zone_ratios)
    assert sum(a.minimum for a in result.allocations.values()) <= endpoints
    for allocation in result.allocations.values():
        assert allocation.minimum <= allocation.desired
        assert allocation.maximum >= allocation.minimum


@PROPERTY_SETTINGS
@given(cap=clusters(), endpoints=endpoint_counts, has_zone=st.booleans())
def test_refusal_reason_and_allocate_agree(
    *, cap: ClusterCapacity, endpoints: int, has_zone: bool
) -> None:
    """allocate's reason is refusal_reason's, or NoZoneSpecified when only check 5 fails."""
    reason = refusal_reason(cap, endpoints)
    result = allocate(cap, endpoints, every_endpoint_has_zone=has_zone)
    if reason is None and not has_zone:
        assert result.reason is DisableReason.NO_ZONE_SPECIFIED
    else:
        assert result.reason is reason


@PROPERTY_SETTINGS
@given(nodes=cluster_nodes(), endpoints=st.integers(2, 60), data=st.data())
def test_hints_within_range_keep_load_factor_under_guard(
    nodes: list[Node], endpoints: int, data: st.DataObject
) -> None:
    """Any hint assignment within [minimum, maximum] per zone keeps every load factor <= 1.2."""
    cap = cluster_capacity(nodes)
    result = allocate(cap, endpoints, every_endpoint_has_zone=True)
    event(f"reason: {result.reason}")
    if not result.enabled:
        return
    counts = {zone: a.minimum for zone, a in result.allocations.items()}
    zones = sorted(counts)
    for _ in range(endpoints - sum(counts.values())):
        counts[data.draw(st.sampled_from(zones))] += 1
    assert all(a.minimum <= counts[zone] <= a.maximum for zone, a in result.allocations.items())
    endpoints_list = [
        endpoint(zone, hints=(zone,)) for zone, count in counts.items() for _ in range(count)
    ]
    verdict = result_of(nodes, [auto_service()], [endpoint_slice(*endpoints_list)]).verdicts()[0]
    assert verdict.reason is None
    assert verdict.drift == frozenset()
    assert {zone: verdict.zones[zone].minimum for zone in zones} == {
        zone: result.allocations[zone].minimum for zone in zones
    }
    for zone in zones:
        factor = verdict.zones[zone].load_factor
        assert factor is not None
        assert factor <= 1.2 + 1e-9


@PROPERTY_SETTINGS
@given(cap=clusters(), endpoints=endpoint_counts)
def test_nearest_feasible_is_nearest(cap: ClusterCapacity, endpoints: int) -> None:
    """below and above are feasible, and no count strictly between them and N is."""
    result = nearest_feasible(cap, endpoints)
    low = result.below if result.below is not None else 0
    high = result.above if result.above is not None else 10 * endpoints + 11
    assert 0 <= low <= endpoints < high <= 10 * endpoints + 11
    for feasible in (result.below, result.above):
        if feasible is not None:
            assert feasible != endpoints
            assert refusal_reason(cap, feasible) is None
    for between in [*range(low + 1, endpoints), *range(endpoints + 1, high)]:
        assert refusal_reason(cap, between) is not None, between
