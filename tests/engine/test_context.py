"""One node view's context: its memos are made for it, so no evaluation mixes node views.

A successor context keeps a memo of its predecessor only where what the memo was made
for is the same object (and, for kube-proxy's routings, the same kube-proxy behaviour).
"""

from __future__ import annotations

from exporter.engine import DataPlane, cluster_capacity
from exporter.engine.context import node_context, ready_nodes
from exporter.engine.crosszone import Clients
from exporter.engine.evaluate import evaluate_service
from exporter.engine.profile import ASSUMED, Source, build_profile
from tests.engine.builders import endpoint, endpoint_slice, service, zone_nodes
from tests.results import result_of

ZONES = ("zone-0", "zone-1", "zone-2")


def test_a_successor_of_another_capacity_judges_afresh() -> None:
    """The context that follows one of another capacity has its own judgements: no stale
    allocation, whatever the earlier view judged."""
    nodes = zone_nodes({zone: ["4"] for zone in ZONES})
    other = node_context(zone_nodes({"zone-0": ["8"], "zone-1": ["4"]}))
    capacity = cluster_capacity(nodes)
    context = other.succeeded_by(capacity, ready_nodes(nodes), Clients.of(nodes), ASSUMED)
    svc = service(mode="Auto")
    slices = [endpoint_slice(*(endpoint(zone) for zone in ZONES for _ in range(3)))]
    (verdict,) = evaluate_service(svc, slices, context)
    assert context.judgements is not other.judgements
    assert len(other.judgements) == 0
    assert len(context.judgements) == 1
    assert verdict.zones["zone-0"].ratio == capacity.zone_ratios["zone-0"]


def test_a_successor_of_the_same_view_shares_every_memo() -> None:
    """Same capacity, Ready nodes and clients (a node heartbeat): the memos are shared; a
    kube-proxy that reads hints otherwise gets its own routings, the rest still shared."""
    context = node_context(zone_nodes({zone: ["4"] for zone in ZONES}), tuple(DataPlane))
    same = context.succeeded_by(context.capacity, context.nodes, context.clients, ASSUMED)
    assert same.judgements is context.judgements
    assert same.routes is context.routes
    assert same.cross_zones is context.cross_zones
    assert same.dataplanes == tuple(DataPlane)
    older = build_profile(29, Source.FLAG)
    assert older.kube_proxy_behaviour != ASSUMED.kube_proxy_behaviour
    other = context.succeeded_by(context.capacity, context.nodes, context.clients, older)
    assert other.routes is not context.routes
    assert other.routes.behaviour == older.kube_proxy_behaviour
    assert other.judgements is context.judgements


def test_evaluate_shares_one_context_between_services() -> None:
    """The one-shot evaluation builds one context: Services of one shape share one
    allocation and one routing."""
    nodes = zone_nodes({zone: ["4"] for zone in ZONES})
    services = [service(f"web-{index}", mode="Auto") for index in range(20)]
    slices = [
        endpoint_slice(*(endpoint(zone, hints=(zone,)) for zone in ZONES), service=svc.name)
        for svc in services
    ]
    evaluation = result_of(nodes, services, slices)
    assert len({id(verdict.zones) for verdict in evaluation.verdicts()}) == 1
    assert (
        len({id(verdict.routing[DataPlane.KUBE_PROXY]) for verdict in evaluation.verdicts()}) == 1
    )
    assert evaluation.clients == Clients.of(nodes)
