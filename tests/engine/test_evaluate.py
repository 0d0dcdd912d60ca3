"""The engine's entry point: entries, N, reasons and zones of each (Service, address type)."""

from __future__ import annotations

import pytest

from exporter.engine import (
    DisableReason,
    Endpoint,
    ExpectedState,
    Mechanism,
    Service,
)
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
from tests.results import result_of

NODES = equal_zones(3)
Z0, Z1, Z2 = "zone-0", "zone-1", "zone-2"


def three(zone_of: str | None = None) -> list[Endpoint]:
    """Three ready endpoints, one per zone (or all in `zone_of`)."""
    return [endpoint(zone_of if zone_of is not None else zone) for zone in (Z0, Z1, Z2)]


def test_services_sorted_by_namespace_name_address_type() -> None:
    """Entries are sorted by namespace, name, address type, one per address type with slices."""
    services = [auto_service("b", "ns1"), auto_service("a", "ns2"), auto_service("a", "ns1")]
    slices = [
        endpoint_slice(*three(), service="a", namespace="ns2"),
        endpoint_slice(*three(), service="b", namespace="ns1", address_type="IPv6"),
        endpoint_slice(*three(), service="b", namespace="ns1"),
        endpoint_slice(*three(), service="a", namespace="ns1", address_type="IPv6"),
    ]
    result = result_of(NODES, services, slices)
    assert [v.key for v in result.verdicts()] == [
        ("ns1", "a", "IPv6"),
        ("ns1", "b", "IPv4"),
        ("ns1", "b", "IPv6"),
        ("ns2", "a", "IPv4"),
    ]


def test_only_services_with_slices_get_entries() -> None:
    """A Service without slices has no entry; slices of absent or unnamed Services are ignored."""
    slices = [
        endpoint_slice(*three(), service="web"),
        endpoint_slice(*three(), service="ghost"),
        endpoint_slice(*three(), service=None),
        endpoint_slice(*three(), service="web", namespace="other"),
    ]
    result = result_of(NODES, [auto_service("web"), auto_service("idle")], slices)
    assert [v.key for v in result.verdicts()] == [("default", "web", "IPv4")]
    assert result.verdicts()[0].ready_endpoints == 3


def test_address_types_counted_separately() -> None:
    """N is counted per address type: IPv4 and IPv6 slices give separate verdicts."""
    slices = [
        endpoint_slice(*three()),
        endpoint_slice(*three(), *three(), address_type="IPv6"),
    ]
    v4, v6 = result_of(NODES, [auto_service()], slices).verdicts()
    assert (v4.address_type, v4.ready_endpoints) == ("IPv4", 3)
    assert (v6.address_type, v6.ready_endpoints) == ("IPv6", 6)


@pytest.mark.parametrize(
    ("extra", "managed", "expected_n"),
    [
        pytest.param(endpoint(Z0), True, 4, id="ready-true-counted"),
        pytest.param(endpoint(Z0, ready=False), True, 3, id="ready-false-not-counted"),
        pytest.param(endpoint(Z0, ready=None), True, 3, id="ready-absent-not-counted"),
        pytest.param(endpoint(Z0), False, 3, id="unmanaged-not-counted"),
    ],
)
def test_ready_endpoint_count(*, extra: Endpoint, managed: bool, expected_n: int) -> None:
    """N counts ready == true endpoints of controller-managed slices only."""
    slices = [endpoint_slice(*three()), endpoint_slice(extra, managed=managed)]
    assert verdict(NODES, auto_service(), slices).ready_endpoints == expected_n


def test_duplicates_across_slices_counted_per_slice() -> None:
    """The controller's N counts per slice, without deduplicating addresses."""
    same = [endpoint(Z0, address="10.9.9.9"), endpoint(Z1, address="10.9.9.8")]
    slices = [endpoint_slice(*same), endpoint_slice(*same), endpoint_slice(endpoint(Z2))]
    assert verdict(NODES, auto_service(), slices).ready_endpoints == 5


@pytest.mark.parametrize(
    ("svc", "endpoints", "state", "reason"),
    [
        pytest.param(auto_service(), three(), ExpectedState.ENABLED, None, id="auto-enabled"),
        pytest.param(
            auto_service(),
            [*three(), endpoint(Z0)],
            ExpectedState.DISABLED,
            DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD,
            id="auto-overload",
        ),
        pytest.param(
            auto_service(),
            [endpoint(Z0), endpoint(Z1), endpoint(None)],
            ExpectedState.DISABLED,
            DisableReason.NO_ZONE_SPECIFIED,
            id="auto-no-zone",
        ),
        pytest.param(
            auto_service(),
            [endpoint(Z0), endpoint(Z1), endpoint("")],
            ExpectedState.DISABLED,
            DisableReason.NO_ZONE_SPECIFIED,
            id="auto-empty-zone",
        ),
        pytest.param(
            auto_service(),
            [endpoint(Z0), endpoint(None)],
            ExpectedState.DISABLED,
            DisableReason.INSUFFICIENT_NUMBER_OF_ENDPOINTS,
            id="auto-too-few-beats-no-zone",
        ),
        pytest.param(
            auto_service(),
            [*three(), endpoint(Z0), endpoint(None)],
            ExpectedState.DISABLED,
            DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD,
            id="auto-overload-beats-no-zone",
        ),
        pytest.param(
            auto_service(),
            [*three(), endpoint(None, ready=False), endpoint(None, ready=None)],
            ExpectedState.ENABLED,
            None,
            id="auto-unready-without-zone-ignored",
        ),
        pytest.param(
            service(traffic_distribution="PreferClose"),
            [endpoint(None)],
            ExpectedState.ENABLED,
            None,
            id="td",
        ),
        pytest.param(service(), three(), ExpectedState.NOT_APPLICABLE, None, id="none"),
    ],
)
def test_expected_state_and_reason(
    svc: Service, endpoints: list[Endpoint], state: ExpectedState, reason: DisableReason | None
) -> None:
    """The expected state and reason follow the mechanism and section 3's checks."""
    result = verdict(NODES, svc, [endpoint_slice(*endpoints)])
    assert (result.expected_state, result.reason) == (state, reason)


def test_no_zone_specified_ignores_unmanaged_slices() -> None:
    """An endpoint without zone in an unmanaged slice is not one of N, so it does not refuse."""
    slices = [endpoint_slice(*three()), endpoint_slice(endpoint(None), managed=False)]
    assert verdict(NODES, auto_service(), slices).reason is None


def test_insufficient_node_info_for_auto() -> None:
    """With insufficient node info, auto is refused and nothing is feasible."""
    result = verdict([node("stray", None)], auto_service(), [endpoint_slice(*three())])
    assert result.reason is DisableReason.INSUFFICIENT_NODE_INFO
    assert result.nearest_feasible is not None
    assert (result.nearest_feasible.below, result.nearest_feasible.above) == (None, None)
    assert dict(result.zones) == {}


@pytest.mark.parametrize(
    ("svc", "present"),
    [
        pytest.param(auto_service(), True, id="auto"),
        pytest.param(service(traffic_distribution="PreferClose"), False, id="td"),
        pytest.param(service(), False, id="none"),
    ],
)
def test_nearest_feasible_only_for_auto(*, svc: Service, present: bool) -> None:
    """nearest_feasible is given for auto Services only."""
    result = verdict(NODES, svc, [endpoint_slice(*three(), endpoint(Z0))])
    assert (result.nearest_feasible is not None) is present
    if present:
        assert result.nearest_feasible is not None
        assert (result.nearest_feasible.below, result.nearest_feasible.above) == (3, 6)


def test_zone_keys_are_ratio_zones_plus_hinted_zones_of_counted_endpoints() -> None:
    """zones: ratio zones plus non-empty hint zones of counted endpoints (stale zones show up)."""
    slices = [
        endpoint_slice(
            hinted(Z0),
            endpoint(Z1, hints=("zone-stale",)),
            endpoint(Z2, hints=("",)),
            endpoint(Z2, ready=False, hints=("zone-unready",)),
            endpoint(Z2, ready=None, hints=("zone-unknown",)),
        ),
        endpoint_slice(hinted("zone-unmanaged"), managed=False),
    ]
    result = verdict(NODES, service(), slices)
    assert set(result.zones) == {Z0, Z1, Z2, "zone-stale"}
    assert result.zones["zone-stale"].hinted == 1


def test_allocation_figures_only_when_auto_enabled_and_zone_has_ratio() -> None:
    """minimum/desired/maximum are set for auto + enabled zones with a ratio, else None."""
    endpoints = [hinted(Z0), hinted(Z1), endpoint(Z2, hints=("zone-stale",))]
    enabled = verdict(NODES, auto_service(), [endpoint_slice(*endpoints)])
    assert enabled.expected_state is ExpectedState.ENABLED
    assert (enabled.zones[Z0].minimum, enabled.zones[Z0].maximum) == (1, 1)
    assert enabled.zones[Z0].desired == pytest.approx(1.0)
    stale = enabled.zones["zone-stale"]
    assert (stale.minimum, stale.desired, stale.maximum) == (None, None, None)
    for svc in (service(), service(traffic_distribution="PreferClose")):
        other = verdict(NODES, svc, [endpoint_slice(*endpoints)])
        assert all(
            (zone.minimum, zone.desired, zone.maximum) == (None, None, None)
            for zone in other.zones.values()
        )


def test_zone_endpoints_and_carries_hints() -> None:
    """zone_endpoints counts N's endpoints per own zone; carries_hints sees any hint."""
    slices = [
        endpoint_slice(endpoint(Z0), endpoint(Z0), endpoint(None), endpoint(Z1, ready=False)),
        endpoint_slice(endpoint(Z2, ready=False, node_hints=("zone-2-0",)), managed=False),
    ]
    result = verdict(NODES, service(), slices)
    assert dict(result.zone_endpoints) == {Z0: 2}
    assert result.carries_hints
    bare = verdict(NODES, service(), [endpoint_slice(endpoint(Z0))])
    assert not bare.carries_hints


def test_ready_nodes_by_zone() -> None:
    """Ready nodes, control plane included, are grouped by zone; no label or empty label is ''."""
    nodes = [
        node("a-1", "a"),
        node("bare", None),
        node("empty", ""),
        node("down", "d", ready=False),
        node("cp", "a", control_plane=True),
    ]
    result = result_of(nodes, [], [])
    assert dict(result.nodes.by_zone) == {"": ("bare", "empty"), "a": ("a-1", "cp")}
    assert result.verdicts() == ()


def test_mechanism_reported_per_entry() -> None:
    """Every address type of one Service carries the Service's mechanism."""
    slices = [endpoint_slice(*three()), endpoint_slice(*three(), address_type="IPv6")]
    result = result_of(NODES, [service(traffic_distribution="PreferSameZone")], slices)
    assert {v.mechanism for v in result.verdicts()} == {Mechanism.TRAFFIC_DISTRIBUTION}
