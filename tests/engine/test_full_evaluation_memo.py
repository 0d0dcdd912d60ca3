"""The full evaluation's shared values: slice-derived inputs, and kube-proxy routings
memoised per hint shape (`KubeProxyRoutes`), must give what computing afresh gives.

A routing served from the memo must equal `route(KUBE_PROXY, ...)` for the entry itself,
whatever its hints, nodes and duplicates; Services of one shape must share one routing;
and zone-loss forecasts re-decided from what an earlier forecast counted must equal a
fresh forecast under the new Ready nodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.engine import DataPlane, EndpointSlice, Node, Service, kubeproxy, route
from exporter.engine.context import node_context, ready_nodes
from exporter.engine.evaluate import entry_inputs, evaluate_service
from exporter.engine.kubeproxy import KubeProxyRoutes, proxy_view_of
from exporter.engine.routing import service_endpoints
from exporter.engine.whatif.feasibility import Feasibility
from exporter.engine.whatif.forecast import EntryForecast, service_forecasts
from exporter.engine.whatif.zoneloss import zone_loss_views
from tests.engine.builders import endpoint, endpoint_slice, node, service
from tests.results import result_of

ZONES = ("zone-0", "zone-1", "zone-2")
NODE_NAMES = tuple(f"{zone}-{index}" for zone in ZONES for index in range(2))
# Shared addresses make duplicates across slices: the first copy must win.
ADDRESSES = tuple(f"10.0.0.{index}" for index in range(6))
SETTINGS = settings(max_examples=200, deadline=None)


@st.composite
def slices_of_a_service(draw: st.DrawFn) -> list[EndpointSlice]:
    """Endpoints with zones, nodes, zone and node hints, readiness and duplicate
    addresses drawn at random, in one to three slices, some unmanaged or IPv6."""
    slices = []
    for _ in range(draw(st.integers(1, 3))):
        endpoints = [
            endpoint(
                draw(st.sampled_from([*ZONES, None, ""])),
                ready=draw(st.sampled_from([True, True, False, None])),
                address=draw(st.sampled_from([*ADDRESSES, None, None])),
                node_name=draw(st.sampled_from([*NODE_NAMES, None, "gone-node"])),
                hints=draw(st.lists(st.sampled_from([*ZONES, "zone-9"]), max_size=2)),
                node_hints=draw(st.lists(st.sampled_from([*NODE_NAMES, "gone-node"]), max_size=1)),
            )
            for _ in range(draw(st.integers(0, 6)))
        ]
        slices.append(
            endpoint_slice(
                *endpoints,
                address_type=draw(st.sampled_from(["IPv4", "IPv4", "IPv6", "FQDN"])),
                managed=draw(st.booleans()) or draw(st.booleans()),
            )
        )
    return slices


@st.composite
def cluster_nodes(draw: st.DrawFn) -> list[Node]:
    """The six nodes, each Ready or not, plus sometimes a Ready node without a zone."""
    nodes = [
        node(name, name.rsplit("-", 1)[0], ready=draw(st.booleans()) or draw(st.booleans()))
        for name in NODE_NAMES
    ]
    if draw(st.booleans()):
        nodes.append(node("unzoned", None))
    return nodes


services = st.sampled_from(
    [
        service(mode="Auto"),
        service(mode="auto", internal_traffic_policy="Local"),
        service(traffic_distribution="PreferClose"),
        service(traffic_distribution="PreferSameNode"),
        service(deprecated="Auto"),
        service(),
        service(mode="Auto", cluster_ip="None"),
        service(type_="ExternalName", cluster_ip=None),
    ]
)


@SETTINGS
@given(svc=services, slices=slices_of_a_service())
def test_entry_inputs_see_the_endpoints_the_data_planes_see(
    svc: Service, slices: list[EndpointSlice]
) -> None:
    """The fused pass gives `service_endpoints`' deduplicated, ready view."""
    for address_type in {s.address_type for s in slices}:
        typed = [s for s in slices if s.address_type == address_type]
        assert entry_inputs(svc, address_type, typed).endpoints == service_endpoints(
            svc, address_type, typed
        )


@SETTINGS
@given(svc=services, slices=slices_of_a_service(), nodes=cluster_nodes(), data=st.data())
def test_a_memoised_routing_is_the_entry_s_own(
    svc: Service, slices: list[EndpointSlice], nodes: list[Node], data: st.DataObject
) -> None:
    """Whatever entry filled the memo first, each entry gets its own routing's value."""
    ready = ready_nodes(nodes)
    routes = KubeProxyRoutes(ready)
    # Another Service's entries first, so that this one may be served from the memo.
    other = data.draw(slices_of_a_service())
    for entry in [*other, *slices]:
        endpoints = service_endpoints(svc, entry.address_type, [entry])
        expected = route(DataPlane.KUBE_PROXY, endpoints, ready)
        view, proxy = routes.route(endpoints)
        assert view == expected
        assert proxy == proxy_view_of(expected, svc)


def test_services_of_one_shape_share_one_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 Services hinted alike: one routing is computed, and every verdict holds it."""
    nodes = [node(name, name.rsplit("-", 1)[0]) for name in NODE_NAMES]
    context = node_context(nodes)
    computed: list[object] = []

    def counted(*args: Any) -> Any:
        computed.append(args)
        return route(*args)

    monkeypatch.setattr(kubeproxy, "route", counted)
    verdicts = [
        evaluate_service(
            service(f"web-{index}", mode="Auto"),
            [endpoint_slice(*(endpoint(zone, hints=(zone,)) for zone in ZONES))],
            context,
        )[0]
        for index in range(100)
    ]
    assert len(computed) == 1
    monkeypatch.undo()
    assert len({id(verdict.routing[DataPlane.KUBE_PROXY]) for verdict in verdicts}) == 1
    fresh = result_of(
        nodes,
        [verdict.service for verdict in verdicts],
        [s for index in range(100) for s in _one_slice_of(f"web-{index}")],
    )
    assert [v.routing for v in fresh.verdicts()] == [v.routing for v in verdicts]


def _one_slice_of(name: str) -> list[EndpointSlice]:
    return [endpoint_slice(*(endpoint(zone, hints=(zone,)) for zone in ZONES), service=name)]


@SETTINGS
@given(
    svc=services,
    slices=slices_of_a_service(),
    before=cluster_nodes(),
    after=cluster_nodes(),
)
def test_forecasts_re_decided_after_a_ready_node_change_equal_fresh_ones(
    svc: Service, slices: list[EndpointSlice], before: list[Node], after: list[Node]
) -> None:
    """Same slices, same zone membership, other Ready nodes: forecasts re-decided from the
    earlier ones' counts equal forecasts made afresh, and so do the counts."""
    earlier = _forecasts(svc, slices, before)
    context = node_context(after)
    ready, capacity = context.nodes, context.capacity
    verdicts = evaluate_service(svc, slices, context)
    views = zone_loss_views(after)
    feasibility = Feasibility(capacity)
    re_decided = service_forecasts(verdicts, slices, ready, feasibility, views, same_slices=earlier)
    fresh = service_forecasts(verdicts, slices, ready, feasibility, views)
    assert re_decided == fresh
    assert [f.survivors for f in re_decided] == [f.survivors for f in fresh]
    # Today's converged hints are the same; the earlier forecast may also hold each view's
    # (counted when it routed locally), which a fresh one skips when it does not.
    assert [f.converged_ready[:1] for f in re_decided] == [f.converged_ready[:1] for f in fresh]


def _forecasts(
    svc: Service, slices: list[EndpointSlice], nodes: list[Node]
) -> tuple[EntryForecast, ...]:
    context = node_context(nodes)
    verdicts = evaluate_service(svc, slices, context)
    return service_forecasts(
        verdicts, slices, context.nodes, Feasibility(context.capacity), zone_loss_views(nodes)
    )
