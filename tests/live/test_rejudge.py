"""A node change that moves only CPU shares: verdicts re-judged from their counts, shared.

`rejudged` (the live evaluator's incremental policy) must equal evaluating afresh under
the new capacity, whatever the entry; and Services of one shape must share one allocation
through the context's per-capacity memo.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.engine import DataPlane, EndpointSlice, Node, Service, cluster_capacity
from exporter.engine.context import context_of, node_context, ready_nodes
from exporter.engine.crosszone import Clients
from exporter.engine.evaluate import evaluate_service, service_inputs
from exporter.pipeline.incremental import rejudged
from tests.engine.builders import endpoint, endpoint_slice, service, zone_nodes

ZONES = ("zone-0", "zone-1", "zone-2")
EVERY_DATAPLANE = tuple(DataPlane)

cpu_quantity = st.sampled_from(["1", "2", "4", "7910m", "15890m", "3920m", "0.5"])


@st.composite
def cpu_by_zone(draw: st.DrawFn) -> dict[str, list[str]]:
    return {zone: draw(st.lists(cpu_quantity, min_size=1, max_size=2)) for zone in ZONES}


@st.composite
def endpoints_of_a_service(draw: st.DrawFn) -> list[EndpointSlice]:
    """Endpoints in random zones, some hinted (for their zone or another), some not ready,
    some without a zone; sometimes an IPv6 address type and an unmanaged slice."""
    endpoints = [
        endpoint(
            draw(st.sampled_from([*ZONES, None, ""])),
            ready=draw(st.sampled_from([True, True, True, False, None])),
            hints=draw(st.lists(st.sampled_from([*ZONES, "zone-9"]), max_size=2)),
        )
        for _ in range(draw(st.integers(0, 14)))
    ]
    slices = [endpoint_slice(*endpoints)]
    if draw(st.booleans()):
        slices.append(endpoint_slice(*endpoints[:3], address_type="IPv6"))
    if draw(st.booleans()):
        slices.append(endpoint_slice(*endpoints[3:6], managed=False))
    return slices


services = st.sampled_from(
    [
        service(mode="Auto"),
        service(mode="auto", internal_traffic_policy="Local"),
        service(traffic_distribution="PreferClose"),
        service(traffic_distribution="PreferSameNode"),
        service(),
        service(deprecated="Auto", cluster_ip="None"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    svc=services,
    slices=endpoints_of_a_service(),
    before=cpu_by_zone(),
    after=cpu_by_zone(),
)
def test_rejudged_equals_a_fresh_evaluation(
    svc: Service,
    slices: list[EndpointSlice],
    before: dict[str, list[str]],
    after: dict[str, list[str]],
) -> None:
    """Same slices and Ready nodes, other CPU: re-judging the old verdicts gives the verdicts
    a fresh evaluation gives, field for field."""
    old_nodes = zone_nodes(before)
    # The same node names, zones and readiness with other CPU: only shares move.
    new_nodes = [
        Node(node.name, node.zone, cpu.allocatable_cpu, node.ready, node.control_plane)
        for node, cpu in zip(old_nodes, _same_names(old_nodes, after), strict=True)
    ]
    nodes = ready_nodes(old_nodes)
    # Every data plane: none of their routings may depend on capacity. No clients: the
    # cross-zone shares stand (the next test re-weighs them).
    old = evaluate_service(
        svc, slices, context_of(cluster_capacity(old_nodes), nodes, dataplanes=EVERY_DATAPLANE)
    )
    context = context_of(cluster_capacity(new_nodes), nodes, dataplanes=EVERY_DATAPLANE)
    fresh = evaluate_service(svc, slices, context)
    assert tuple(rejudged(verdict, context) for verdict in old) == fresh


@settings(max_examples=200, deadline=None)
@given(
    svc=services,
    slices=endpoints_of_a_service(),
    before=cpu_by_zone(),
    after=cpu_by_zone(),
)
def test_reweighed_cross_zone_shares_equal_a_fresh_evaluation(
    svc: Service,
    slices: list[EndpointSlice],
    before: dict[str, list[str]],
    after: dict[str, list[str]],
) -> None:
    """Other CPU on the same clients: the recombined cross-zone shares are the fresh ones,
    bit for bit (behaviour §13)."""
    old_nodes = zone_nodes(before)
    new_nodes = [
        Node(node.name, node.zone, cpu.allocatable_cpu, node.ready, node.control_plane)
        for node, cpu in zip(old_nodes, _same_names(old_nodes, after), strict=True)
    ]
    old_clients = Clients.of(old_nodes)
    old = evaluate_service(svc, slices, node_context(old_nodes, EVERY_DATAPLANE))
    fresh = evaluate_service(svc, slices, node_context(new_nodes, EVERY_DATAPLANE))
    # Another context of the new nodes: its memos start empty, as the live evaluator's do.
    context = node_context(new_nodes, EVERY_DATAPLANE)
    assert context.nodes == ready_nodes(old_nodes)
    inputs = service_inputs(svc, slices)
    assert (
        tuple(
            rejudged(verdict, context, (entry, old_clients))
            for verdict, entry in zip(old, inputs, strict=True)
        )
        == fresh
    )


def _same_names(nodes: list[Node], cpu: dict[str, list[str]]) -> list[Node]:
    """Nodes with `cpu`'s quantities, cycled so that there is one per node of `nodes`."""
    quantities = {zone: zone_nodes({zone: cpus}) for zone, cpus in cpu.items()}
    counters = dict.fromkeys(cpu, 0)
    replaced = []
    for node in nodes:
        assert node.zone is not None
        options = quantities[node.zone]
        replaced.append(options[counters[node.zone] % len(options)])
        counters[node.zone] += 1
    return replaced


def test_services_of_one_shape_share_one_allocation() -> None:
    """100 auto Services of 9 endpoints, 3 per zone: one allocation, one judgement object."""
    nodes = zone_nodes({zone: ["4"] for zone in ZONES})
    context = node_context(nodes)
    verdicts = [
        verdict
        for index in range(100)
        for verdict in evaluate_service(
            service(f"web-{index}", mode="Auto"),
            [
                endpoint_slice(
                    *(endpoint(zone, hints=(zone,)) for zone in ZONES for _ in range(3)),
                    service=f"web-{index}",
                )
            ],
            context,
        )
    ]
    assert len(context.judgements) == 1
    assert len({id(verdict.zones) for verdict in verdicts}) == 1
    # Re-judged under another capacity: again one allocation for the 100.
    moved = context_of(
        cluster_capacity(zone_nodes({"zone-0": ["8"], "zone-1": ["4"], "zone-2": ["4"]})),
        context.nodes,
    )
    again = [rejudged(verdict, moved) for verdict in verdicts]
    assert len(moved.judgements) == 1
    assert {verdict.zones["zone-0"].ratio for verdict in again} == {0.5}
