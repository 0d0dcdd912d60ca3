"""What-if (section 11): scenarios, margins, rollout ranges and the converged routing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from exporter.engine import EntryVerdict, ExpectedState, ProxyMode
from exporter.engine.reasons import DisableReason
from exporter.engine.whatif.feasibility import (
    Feasibility,
    Margin,
    endpoint_margin,
    rollout_refused_counts,
)
from exporter.engine.whatif.outcome import Change
from exporter.engine.whatif.scenario import (
    Cluster,
    LoseNodes,
    LoseZone,
    Scale,
    ScenarioError,
    apply_scenario,
)
from exporter.engine.whatif.zoneloss import zone_loss, zone_loss_views
from exporter.sources.snapshot import load_snapshot
from exporter.state.result import ClusterResult
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.engine.builders import (
    auto_service,
    capacity,
    endpoint,
    endpoint_slice,
    equal_zones,
    hinted,
    node,
    service,
    verdict,
)
from tests.results import result_of, what_if_of

THREE_ZONES = {"zone-0": "4", "zone-1": "4", "zone-2": "4"}


def _auto_verdict_with(count: int, cpu_by_zone: dict[str, str]) -> tuple[Feasibility, EntryVerdict]:
    nodes = [node(zone, zone, cpu) for zone, cpu in cpu_by_zone.items()]
    zones = list(cpu_by_zone)
    endpoints = [hinted(zones[index % len(zones)]) for index in range(count)]
    return Feasibility(capacity(cpu_by_zone)), verdict(
        nodes, auto_service(), [endpoint_slice(*endpoints)]
    )


# N -> (down, up) for 3 equal zones; None where hints are refused (no margin exists).
THREE_EQUAL_ZONES_MARGINS: dict[int, tuple[int, float] | None] = {
    3: (0, 0),
    4: None,
    5: None,
    6: (0, 1),
    7: (1, 0),
    8: None,
    9: (0, 1),
    10: (1, 0),
    11: None,
    12: (0, math.inf),
    13: (1, math.inf),
    14: (2, math.inf),
    15: (3, math.inf),
}


@pytest.mark.parametrize(("count", "margin"), THREE_EQUAL_ZONES_MARGINS.items())
def test_margins_of_three_equal_zones(count: int, margin: tuple[int, float] | None) -> None:
    """7 survives losing one endpoint but not one surge pod; 12 and above never refuse upwards."""
    feasibility, entry = _auto_verdict_with(count, THREE_ZONES)
    expected = Margin(*margin) if margin is not None else None
    assert endpoint_margin(entry, feasibility) == expected


@pytest.mark.parametrize(("count", "margin"), [(2, Margin(0, 0)), (4, Margin(0, math.inf))])
def test_margins_at_the_float64_boundary(count: int, margin: Margin) -> None:
    """Ratios 0.4/0.6: float64 refuses N = 3, so N = 2 and N = 4 both sit on the edge."""
    feasibility, entry = _auto_verdict_with(count, {"zone-a": "4", "zone-b": "6"})
    assert endpoint_margin(entry, feasibility) == margin


def test_up_margin_is_infinite_only_above_six_per_zone() -> None:
    """Every count from 6 x zones up is feasible, so the search stops there."""
    feasibility = Feasibility(capacity(THREE_ZONES))
    assert feasibility.always_feasible_from() == 18
    assert all(feasibility.feasible(n) for n in range(18, 200))


def test_no_margin_for_traffic_distribution_or_disabled() -> None:
    nodes = equal_zones(3)
    slices = [endpoint_slice(*(hinted(f"zone-{i % 3}") for i in range(8)))]
    feasibility = Feasibility(capacity(THREE_ZONES))
    refused = verdict(nodes, auto_service(), slices)
    assert refused.expected_state is ExpectedState.DISABLED
    assert endpoint_margin(refused, feasibility) is None
    distribution = verdict(nodes, service(traffic_distribution="PreferClose"), slices)
    assert endpoint_margin(distribution, feasibility) is None


@pytest.mark.parametrize(
    ("count", "surge", "unavailable", "refused"),
    [
        (9, 1, 0, ()),
        (9, 2, 0, (11,)),
        (7, 1, 0, (8,)),
        (7, 0, 2, (5,)),
        (12, 3, 1, (11,)),
        (6, 0, 6, (0, 1, 2, 4, 5)),
    ],
)
def test_rollout_ranges(count: int, surge: int, unavailable: int, refused: tuple[int, ...]) -> None:
    """The ready count passes through N-U..N+S; each refused count in that range is reported."""
    feasibility, entry = _auto_verdict_with(count, THREE_ZONES)
    assert rollout_refused_counts(entry, feasibility, surge, unavailable) == refused


def test_rollout_of_traffic_distribution_never_refuses() -> None:
    nodes = equal_zones(3)
    entry = verdict(
        nodes,
        service(traffic_distribution="PreferClose"),
        [endpoint_slice(*(hinted(f"zone-{i % 3}") for i in range(8)))],
    )
    assert rollout_refused_counts(entry, Feasibility(capacity(THREE_ZONES)), 5, 5) == ()


def _three_zone_cluster(count: int, **service_fields: str) -> Cluster:
    nodes = [node(f"node-{i}", f"zone-{i}") for i in range(3)]
    endpoints = [hinted(f"zone-{i % 3}", node_name=f"node-{i % 3}") for i in range(count)]
    svc = service(**service_fields) if service_fields else auto_service()
    return Cluster(tuple(nodes), (svc,), (endpoint_slice(*endpoints),))


def test_scale_down_from_seven_to_eight_loses_nothing_but_nine_to_eight_loses_hints() -> None:
    """Scaling is judged on the expected state: 9 -> 8 is refused, 8 -> 9 is enabled."""
    [change] = what_if_of(_three_zone_cluster(9), [Scale("default", "web", 8)]).changes
    assert change.change is Change.LOSES_HINTS
    assert change.after.verdict.reason is DisableReason.MIN_ALLOCATION_EXCEEDS_OVERLOAD_THRESHOLD
    assert change.after.verdict.ready_endpoints == 8
    [change] = what_if_of(_three_zone_cluster(8), [Scale("default", "web", 9)]).changes
    assert change.change is Change.GAINS_HINTS
    assert dict(change.after.converged.by_zone) == dict.fromkeys(
        ("zone-0", "zone-1", "zone-2"), ProxyMode.PREFER_SAME_ZONE
    )


def test_scale_removes_from_the_fullest_zone_and_adds_to_the_emptiest() -> None:
    nodes = (node("a-1", "zone-a"), node("b-1", "zone-b"))
    endpoints = [
        endpoint("zone-a", node_name="a-1"),
        endpoint("zone-a", node_name="a-1"),
        endpoint("zone-b", node_name="b-1"),
    ]
    cluster = Cluster(nodes, (auto_service(),), (endpoint_slice(*endpoints),))
    down = apply_scenario(cluster, [Scale("default", "web", 2)])
    assert sorted(e.zone or "" for s in down.slices for e in s.endpoints) == ["zone-a", "zone-b"]
    up = apply_scenario(cluster, [Scale("default", "web", 5)])
    zones = sorted(e.zone or "" for s in up.slices for e in s.endpoints)
    # 2/1 -> zone-b gets the first (fewest), then the 2/2 tie goes to zone-a (sorts first).
    assert zones == ["zone-a", "zone-a", "zone-a", "zone-b", "zone-b"]
    added = [e for s in up.slices for e in s.endpoints if (e.address or "").startswith("what-if")]
    assert [(e.zone, e.node_name) for e in added] == [("zone-b", "b-1"), ("zone-a", "a-1")]
    assert all(e.ready is True for e in added)


def test_losing_a_zone_matches_a_cluster_changed_by_hand() -> None:
    """lose-zone removes the zone's Nodes and every endpoint in the zone or on them."""
    cluster = _three_zone_cluster(9)
    after = apply_scenario(cluster, [LoseZone("zone-2")])
    by_hand = _evaluation(
        result_of(
            [n for n in cluster.nodes if n.zone != "zone-2"],
            cluster.services,
            [
                endpoint_slice(
                    *(e for e in cluster.slices[0].endpoints if e.zone != "zone-2"),
                    name=cluster.slices[0].name,
                )
            ],
        )
    )
    assert _evaluation(result_of(after.nodes, after.services, after.slices)) == by_hand


def _evaluation(result: ClusterResult) -> tuple[object, ...]:
    """What a result says of the cluster, without its step's memos and clock."""
    return (result.capacity, result.nodes, result.verdicts(), result.profile, result.clients)


def test_losing_a_zone_of_three_keeps_hints_when_the_rest_is_feasible() -> None:
    """9 in 3 zones -> 6 in 2 zones: still enabled, the converged routing stays local."""
    [change] = what_if_of(_three_zone_cluster(9), [LoseZone("zone-2")]).changes
    assert change.change is Change.UNCHANGED
    assert change.after.verdict.ready_endpoints == 6
    assert change.after.verdict.expected_state is ExpectedState.ENABLED


def test_losing_a_node_can_turn_hints_off() -> None:
    """10 in 3 zones minus one node's endpoints: the rest may be a refused count."""
    cluster = _three_zone_cluster(10)
    [change] = what_if_of(cluster, [LoseNodes(("node-0",))]).changes
    # node-0 held 4 of the 10; 6 remain in two zones of three... and zone-0 has no node.
    assert change.after.verdict.ready_endpoints == 6
    assert change.change in {Change.UNCHANGED, Change.LOSES_HINTS}
    reason = change.after.verdict.reason
    assert (change.change is Change.LOSES_HINTS) == (reason is not None)


def test_traffic_distribution_loses_locality_when_its_endpoints_go() -> None:
    """No refusal, but with no endpoint left every node routes cluster-wide."""
    cluster = _three_zone_cluster(3, traffic_distribution="PreferClose")
    [change] = what_if_of(cluster, [Scale("default", "web", 0)]).changes
    assert change.before.local
    assert not change.after.local
    assert change.change is Change.LOSES_HINTS


def test_an_endpoint_without_ready_condition_keeps_the_converged_routing_cluster_wide() -> None:
    """kube-proxy counts it, the controller never hints it: no zone ever routes locally."""
    nodes = tuple(equal_zones(3))
    endpoints = [hinted(f"zone-{i % 3}") for i in range(9)]
    endpoints.append(endpoint("zone-0", ready=None))
    cluster = Cluster(nodes, (auto_service(),), (endpoint_slice(*endpoints),))
    [change] = what_if_of(cluster, []).changes
    assert change.before.verdict.expected_state is ExpectedState.ENABLED
    assert not change.before.local
    assert change.change is Change.UNCHANGED


def test_unknown_targets_are_scenario_errors() -> None:
    cluster = _three_zone_cluster(3)
    with pytest.raises(ScenarioError, match="no node has zone 'zone-9'"):
        apply_scenario(cluster, [LoseZone("zone-9")])
    with pytest.raises(ScenarioError, match="no such node: ghost"):
        apply_scenario(cluster, [LoseNodes(("ghost",))])
    with pytest.raises(ScenarioError, match="no such Service: shop/cart"):
        apply_scenario(cluster, [Scale("shop", "cart", 3)])


def test_a_scale_reuses_the_other_services_outcomes() -> None:
    """Scaling one Service re-evaluates only that Service (the cluster view is unchanged)."""
    nodes = tuple(equal_zones(3))
    other = auto_service("other")
    slices = (
        endpoint_slice(*(hinted(f"zone-{i % 3}") for i in range(9))),
        endpoint_slice(*(hinted(f"zone-{i % 3}") for i in range(9)), service="other"),
    )
    result = what_if_of(
        Cluster(nodes, (auto_service(), other), slices), [Scale("default", "web", 7)]
    )
    before = result.before.services[("default", "other")]
    assert result.after.services[("default", "other")] is before


def test_a_what_if_is_two_steps_of_one_evaluator() -> None:
    """The scenario is written into the store the first step read: the second step of the
    same evaluator changes the Services the writes touched, and only those."""
    nodes = tuple(node(f"node-{i}", f"zone-{i % 3}") for i in range(6))
    slices = (
        endpoint_slice(*(hinted(f"zone-{i % 3}", node_name=f"node-{i % 3}") for i in range(9))),
        endpoint_slice(
            *(hinted(f"zone-{i % 3}", node_name=f"node-{3 + i % 3}") for i in range(9)),
            service="other",
        ),
    )
    cluster = Cluster(nodes, (auto_service(), auto_service("other")), slices)
    scaled = what_if_of(cluster, [Scale("default", "web", 7)])
    assert scaled.after.generation == scaled.before.generation + 1
    assert scaled.after.changed == frozenset({("default", "web")})
    # node-5 holds only "other"'s endpoints, but the Ready nodes move: both are evaluated.
    drained = what_if_of(cluster, [LoseNodes(("node-5",))])
    assert drained.after.changed == frozenset({("default", "web"), ("default", "other")})
    assert drained.after.nodes != drained.before.nodes


def _clusters() -> list[Path]:
    return sorted([*EXAMPLES_DIR.glob("*.json"), *CONFORMANCE_DIR.glob("*.snapshot.json")])


@pytest.mark.parametrize("path", _clusters(), ids=lambda path: path.name.split(".")[0])
def test_zone_loss_agrees_with_each_lose_zone_scenario(path: Path) -> None:
    """The shared fast path counts exactly the entries a full lose-zone scenario loses."""
    snapshot = load_snapshot(str(path))
    cluster = Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices)
    views = zone_loss_views(cluster.nodes)
    before = [change.before for change in what_if_of(cluster, []).changes]
    counts = zone_loss(before, views)
    for view in views:
        result = what_if_of(cluster, [LoseZone(view.zone)])
        losing = sum(1 for change in result.changes if change.change is Change.LOSES_HINTS)
        assert counts[view.zone] == losing, view.zone
