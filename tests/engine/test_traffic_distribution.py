"""behaviour §4: `traffic-distribution` Services are always enabled, with no overload guard."""

from __future__ import annotations

import pytest

from exporter.engine import DriftKind, Endpoint, ExpectedState, Mechanism, ProxyMode
from tests.engine.builders import (
    endpoint,
    endpoint_slice,
    equal_zones,
    hinted,
    node,
    service,
    verdict,
    zone_nodes,
)
from tests.engine.views import mode_of_node

NODES = equal_zones(3)


@pytest.mark.parametrize("value", ["PreferClose", "PreferSameZone", "PreferSameNode"])
def test_always_enabled_even_where_auto_would_refuse(value: str) -> None:
    """One endpoint in a 3-zone cluster is enabled under trafficDistribution: no refusal."""
    result = verdict(NODES, service(traffic_distribution=value), [endpoint_slice(hinted("zone-0"))])
    assert result.mechanism is Mechanism.TRAFFIC_DISTRIBUTION
    assert result.expected_state is ExpectedState.ENABLED
    assert result.reason is None
    assert result.nearest_feasible is None


def test_enabled_even_with_insufficient_node_info() -> None:
    """Node info does not matter to trafficDistribution (no capacity check)."""
    nodes = [node("only", None, None)]
    result = verdict(
        nodes, service(traffic_distribution="PreferClose"), [endpoint_slice(hinted("zone-0"))]
    )
    assert result.expected_state is ExpectedState.ENABLED
    assert result.reason is None


def test_no_allocation_figures_but_load_factor_reported() -> None:
    """No minimum/desired/maximum, but the load factor shows a thin zone taking its whole share."""
    slices = [endpoint_slice(hinted("zone-0"), *[hinted("zone-1") for _ in range(5)])]
    result = verdict(NODES, service(traffic_distribution="PreferClose"), slices)
    thin = result.zones["zone-0"]
    assert (thin.minimum, thin.desired, thin.maximum) == (None, None, None)
    assert thin.ratio is not None
    assert thin.load_factor is not None
    assert thin.load_factor == pytest.approx(thin.ratio * 6 / 1)
    assert thin.load_factor > 1.2
    assert result.zones["zone-2"].load_factor is None


def test_prefer_same_node_hints_route_to_the_node() -> None:
    """Endpoints with node hints for their own nodes put those nodes in PreferSameNode."""
    nodes = zone_nodes({"a": ["4", "4"], "b": ["4"]})
    endpoints = [
        endpoint("a", node_name="a-0", hints=("a",), node_hints=("a-0",)),
        endpoint("b", node_name="b-0", hints=("b",), node_hints=("b-0",)),
    ]
    result = verdict(
        nodes, service(traffic_distribution="PreferSameNode"), [endpoint_slice(*endpoints)]
    )
    assert result.proxy.same_node == ("a-0", "b-0")
    assert mode_of_node(result.proxy, "a-1", "a") is ProxyMode.PREFER_SAME_ZONE
    assert result.drift == frozenset()


@pytest.mark.parametrize(
    ("endpoints", "drift"),
    [
        pytest.param([hinted("zone-0"), hinted("zone-1")], set(), id="own-zone-hints"),
        pytest.param([endpoint("zone-0")], {DriftKind.HINTS_MISSING}, id="no-hint"),
        pytest.param(
            [endpoint("zone-0", hints=("zone-1",))], {DriftKind.HINTS_MISSING}, id="other-zone"
        ),
        pytest.param([endpoint(None)], set(), id="no-zone-field-no-hint-expected"),
        pytest.param([endpoint("", hints=("",))], set(), id="empty-zone-hinted-empty"),
        pytest.param([endpoint("")], {DriftKind.HINTS_MISSING}, id="empty-zone-field-set"),
        pytest.param(
            [hinted("zone-0"), endpoint("zone-1", ready=False, hints=("zone-2",))],
            set(),
            id="not-ready-left-as-is",
        ),
        pytest.param(
            [hinted("zone-0"), endpoint("zone-1", ready=None)], set(), id="unknown-ready-ignored"
        ),
    ],
)
def test_drift_under_traffic_distribution(endpoints: list[Endpoint], drift: set[DriftKind]) -> None:
    """Every ready endpoint with a `zone` field is expected to carry a hint for that zone."""
    result = verdict(
        NODES, service(traffic_distribution="PreferClose"), [endpoint_slice(*endpoints)]
    )
    assert result.drift == drift
