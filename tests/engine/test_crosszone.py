"""behaviour §13: expected cross-zone shares, by hand and against a plain reference.

The reference (tests/engine/crosszone_reference.py) is written from the section's words,
node by node, with its own endpoint sets; it takes only the routing of each node from the
engine (section 10, tested on its own). The engine computes per zone plus node exceptions.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.engine import (
    DataPlane,
    Endpoint,
    EndpointSlice,
    Node,
    Service,
)
from exporter.report.document import cross_zone_field
from exporter.sources.snapshot import load_snapshot
from tests.conftest import CONFORMANCE_DIR
from tests.engine.builders import endpoint, endpoint_slice, node, service
from tests.engine.crosszone_reference import (
    EVERY_DATAPLANE,
    assert_close,
    check_against_reference,
    reference,
)
from tests.results import result_of

# -- by hand --------------------------------------------------------------------------------

# Zone a and b have 4 cores each, zone c 8: weights 1/4, 1/4, 1/2.
NODES = [node("a-1", "a", "4"), node("b-1", "b", "4"), node("c-1", "c", "8")]


def _figures(
    svc: Service, slices: list[EndpointSlice], dataplane: DataPlane, nodes: list[Node] = NODES
) -> dict[str, Any] | None:
    verdict = result_of(nodes, [svc], slices, (dataplane,)).verdicts()[0]
    field = cross_zone_field(verdict)
    assert field is not None
    figures: dict[str, Any] | None = field[str(dataplane)]
    assert_close(figures, reference(verdict, dataplane, nodes, slices), "reference")
    return figures


def _hinted_ab() -> list[EndpointSlice]:
    """Two endpoints in a and one in b, each hinted for its zone; none in c."""
    return [
        endpoint_slice(
            endpoint("a", hints=("a",), node_name="a-1"),
            endpoint("a", hints=("a",), node_name="a-1"),
            endpoint("b", hints=("b",), node_name="b-1"),
        )
    ]


def test_kube_proxy_same_zone_where_hinted_cluster_elsewhere() -> None:
    figures = _figures(service(mode="Auto"), _hinted_ab(), DataPlane.KUBE_PROXY)
    # a, b: same-zone, 0; c: cluster over 3 endpoints none in c, 1 (and no endpoint: floor 1).
    assert figures == {
        "effective": 0.5,
        "floor": 0.5,
        "zones": {
            "a": {"effective": 0.0, "floor": 0.0},
            "b": {"effective": 0.0, "floor": 0.0},
            "c": {"effective": 1.0, "floor": 1.0},
        },
    }


def test_cilium_no_topology_spreads_everywhere() -> None:
    figures = _figures(service(mode="Auto"), _hinted_ab(), DataPlane.CILIUM_NO_TOPOLOGY)
    assert figures is not None
    # a: 1/3 cross, b: 2/3, c: 1 -> (1/3 + 2/3) / 4 + 1 / 2 = 0.75; avoidable 0.25.
    assert figures["effective"] == pytest.approx(0.75)
    assert figures["zones"]["b"]["effective"] == pytest.approx(2 / 3)
    assert figures["floor"] == 0.5


def test_istio_reads_located_zones_not_hints() -> None:
    # Hinted for the wrong zones: istio does not care, it goes by where endpoints run.
    slices = [
        endpoint_slice(
            endpoint("a", hints=("b",)), endpoint("b", hints=("a",)), endpoint("c", hints=("a",))
        )
    ]
    figures = _figures(service(traffic_distribution="PreferClose"), slices, DataPlane.ISTIO)
    assert figures is not None
    assert figures["effective"] == 0.0
    kube_proxy = _figures(service(traffic_distribution="PreferClose"), slices, DataPlane.KUBE_PROXY)
    assert kube_proxy is not None
    # kube-proxy follows the hints: a and b clients go to the other zone, c is cluster (2/3).
    assert kube_proxy["zones"]["a"]["effective"] == 1.0
    assert kube_proxy["zones"]["c"]["effective"] == pytest.approx(2 / 3)


def test_same_node_by_node_hint_and_by_node_name() -> None:
    slices = [
        endpoint_slice(
            endpoint("a", node_name="a-1", hints=("a",), node_hints=("a-1",)),
            endpoint("b", node_name="b-1", hints=("b",), node_hints=("b-1",)),
            endpoint("c", node_name="c-1", hints=("c",), node_hints=("c-1",)),
        )
    ]
    svc = service(traffic_distribution="PreferSameNode")
    for dataplane in (DataPlane.KUBE_PROXY, DataPlane.CILIUM, DataPlane.ISTIO):
        figures = _figures(svc, slices, dataplane)
        assert figures is not None
        assert figures["effective"] == 0.0, dataplane


def test_local_policy_endpoint_without_zone_counts_as_crossing() -> None:
    slices = [
        endpoint_slice(
            endpoint("a", node_name="a-1"), endpoint(None, node_name="b-1"), endpoint("a")
        )
    ]
    figures = _figures(service(internal_traffic_policy="Local"), slices, DataPlane.KUBE_PROXY)
    # a-1: local, its endpoint in a: 0. b-1: local, zoneless endpoint: 1. c-1: dropped.
    assert figures == {
        "effective": 0.5,
        "floor": 0.5,
        "zones": {
            "a": {"effective": 0.0, "floor": 0.0},
            "b": {"effective": 1.0, "floor": 1.0},
        },
    }


def test_cilium_1_18_0_mixed_uses_s_and_no_endpoints_has_no_share() -> None:
    slices = [endpoint_slice(endpoint("a", hints=("a",)), endpoint("b"))]
    figures = _figures(service(traffic_distribution="PreferClose"), slices, DataPlane.CILIUM_1_18_0)
    # a: mixed over S = both: 1/2. b, c: cluster over their S, the unhinted b endpoint alone.
    assert figures is not None
    assert figures["zones"]["a"] == {"effective": 0.5, "floor": 0.0}
    assert figures["zones"]["b"] == {"effective": 0.0, "floor": 0.0}
    assert figures["zones"]["c"] == {"effective": 1.0, "floor": 1.0}
    refused = [endpoint_slice(endpoint("a", hints=("a",)), endpoint("b", hints=("b",)))]
    figures = _figures(
        service(traffic_distribution="PreferClose"), refused, DataPlane.CILIUM_1_18_0
    )
    # c is refused (no-endpoints): no share, so no zone c and it weighs nothing.
    assert figures == {
        "effective": 0.0,
        "floor": 0.0,
        "zones": {"a": {"effective": 0.0, "floor": 0.0}, "b": {"effective": 0.0, "floor": 0.0}},
    }


def test_cilium_1_18_0_cluster_client_spreads_over_s_not_r() -> None:
    """Section 13 as settled: a client that Cilium 1.18.0 routes `cluster` skips the backends
    whose zone hints exclude its zone, and keeps an unhinted backend of another zone."""
    slices = [
        endpoint_slice(endpoint("a", hints=("a",), node_name="a-1"), endpoint("b", node_name="b-1"))
    ]
    figures = _figures(service(traffic_distribution="PreferClose"), slices, DataPlane.CILIUM_1_18_0)
    # a (1/4): mixed over S = {a, b}: 1/2. b (1/4): no hint names b, so cluster, over
    # S = {b} (the a endpoint is hinted away): 0, where all of R would give 1/2.
    # c (1/2): cluster over S = {b}: 1, floor 1 (no endpoint runs in c).
    assert figures == {
        "effective": 0.625,
        "floor": 0.5,
        "zones": {
            "a": {"effective": 0.5, "floor": 0.0},
            "b": {"effective": 0.0, "floor": 0.0},
            "c": {"effective": 1.0, "floor": 1.0},
        },
    }
    # Where its rule does not apply (no annotation, no PreferClose) cluster is all of R.
    plain = _figures(service(), slices, DataPlane.CILIUM_1_18_0)
    assert plain is not None
    assert plain["zones"]["b"] == {"effective": 0.5, "floor": 0.0}


def test_local_policy_node_with_only_a_terminating_endpoint_uses_it() -> None:
    """internalTrafficPolicy Local: b-1 has no ready endpoint but a serving terminating one,
    so kube-proxy sends b-1's traffic there (section 10's fallback), and its floor counts
    that endpoint as available even though R (the ready ones) has none in zone b."""
    terminating = Endpoint(
        "10.9.0.2", ready=False, zone="b", node_name="b-1", terminating=True, serving=True
    )
    slices = [endpoint_slice(endpoint("a", node_name="a-1"), terminating)]
    svc = service(internal_traffic_policy="Local")
    figures = _figures(svc, slices, DataPlane.KUBE_PROXY)
    # a-1: its ready endpoint, 0. b-1: the terminating one in b, 0 and floor 0. c-1: dropped.
    assert figures == {
        "effective": 0.0,
        "floor": 0.0,
        "zones": {
            "a": {"effective": 0.0, "floor": 0.0},
            "b": {"effective": 0.0, "floor": 0.0},
        },
    }
    # Linkerd has no such fallback: b-1 is dropped, no share.
    linkerd = _figures(svc, slices, DataPlane.LINKERD)
    assert linkerd is not None
    assert set(linkerd["zones"]) == {"a"}
    # A terminating endpoint that no longer serves is no fallback either.
    gone = replace(terminating, serving=False)
    figures = _figures(
        svc, [endpoint_slice(endpoint("a", node_name="a-1"), gone)], DataPlane.KUBE_PROXY
    )
    assert figures is not None
    assert set(figures["zones"]) == {"a"}


def test_ingress_nginx_mixed_is_the_union_of_the_slices() -> None:
    slices = [
        endpoint_slice(endpoint("a", hints=("a",)), endpoint("b", hints=("b",))),
        endpoint_slice(endpoint("c")),
    ]
    figures = _figures(service(mode="auto"), slices, DataPlane.INGRESS_NGINX)
    assert figures is not None
    # a: {a-endpoint, c-endpoint}: 1/2; c: {c-endpoint} (the first slice has none for c): 0.
    assert figures["zones"]["a"]["effective"] == 0.5
    assert figures["zones"]["c"]["effective"] == 0.0


def test_cluster_without_ready_endpoints_uses_terminating_ones() -> None:
    """Calico counts terminating endpoints in R; kube-proxy, finding no ready one anywhere,
    sends cluster traffic to the serving terminating ones (what its rules DNAT to); Linkerd
    to none."""
    terminating = Endpoint("10.9.0.1", ready=False, zone="a", node_name="a-1", terminating=True)
    slices = [endpoint_slice(terminating)]
    for dataplane in (DataPlane.CALICO_EBPF, DataPlane.KUBE_PROXY):
        figures = _figures(service(), slices, dataplane)
        assert figures is not None, dataplane
        assert figures["zones"]["a"] == {"effective": 0.0, "floor": 0.0}
        assert figures["zones"]["b"] == {"effective": 1.0, "floor": 1.0}
    assert _figures(service(), slices, DataPlane.LINKERD) is None
    # A terminating endpoint that no longer serves is no fallback.
    gone = [endpoint_slice(replace(terminating, serving=False))]
    assert _figures(service(), gone, DataPlane.KUBE_PROXY) is None


def test_clients_need_a_zone_and_cpu_and_are_weighted_by_cpu() -> None:
    nodes = [
        *NODES,
        node("nozone", None, "64"),
        node("nocpu", "b", None),
        node("down", "b", "64", ready=False),
        node("cp", "a", "4", control_plane=True),
    ]
    figures = _figures(service(), _hinted_ab(), DataPlane.CILIUM_NO_TOPOLOGY, nodes)
    assert figures is not None
    # The control-plane node is a client (a proxy runs there): a weighs 8 of 20.
    assert figures["effective"] == pytest.approx((8 / 3 + 4 * 2 / 3 + 8) / 20)


def test_no_routing_makes_the_whole_field_null() -> None:
    verdict = result_of(
        NODES, [service(cluster_ip="None")], _hinted_ab(), EVERY_DATAPLANE
    ).verdicts()[0]
    assert cross_zone_field(verdict) is None


# -- random clusters and the public vectors -------------------------------------------------

ZONES = ("a", "b", "c")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Service], list[EndpointSlice]]:
    names = [f"n{i}" for i in range(draw(st.integers(1, 7)))]
    nodes = [
        node(
            name,
            draw(st.sampled_from([*ZONES, None])),
            draw(st.sampled_from(["1", "2", "3500m", None])),
            ready=draw(st.sampled_from([True, True, False])),
            control_plane=draw(st.booleans()),
        )
        for name in names
    ]
    endpoints = [
        Endpoint(
            address=f"10.0.0.{draw(st.integers(1, 12))}",
            ready=draw(st.sampled_from([True, True, False, None])),
            zone=draw(st.sampled_from([*ZONES, None])),
            node_name=draw(st.sampled_from([*names, None])),
            zone_hints=tuple(draw(st.lists(st.sampled_from([*ZONES, "z"]), max_size=2))),
            node_hints=tuple(draw(st.lists(st.sampled_from(names), max_size=1))),
            terminating=draw(st.sampled_from([None, True, False])),
            serving=draw(st.sampled_from([None, True, False])),
        )
        for _ in range(draw(st.integers(0, 9)))
    ]
    cut = draw(st.integers(0, len(endpoints)))
    slices = [endpoint_slice(*endpoints[:cut]), endpoint_slice(*endpoints[cut:])]
    svc = Service(
        namespace="default",
        name="web",
        deprecated_hints_annotation=draw(st.sampled_from([None, "Auto"])),
        topology_mode_annotation=draw(st.sampled_from([None, "Auto", "auto", "disabled"])),
        traffic_distribution=draw(
            st.sampled_from([None, "PreferClose", "PreferSameNode", "PreferSameZone"])
        ),
        internal_traffic_policy=draw(st.sampled_from([None, "Cluster", "Local"])),
        type="ClusterIP",
        cluster_ip="10.96.0.1",
        istio_traffic_distribution=draw(st.sampled_from([None, "PreferSameNode"])),
    )
    return nodes, [svc], slices


@settings(max_examples=300, deadline=None)
@given(cluster=clusters())
def test_random_clusters_agree_with_the_reference(
    cluster: tuple[list[Node], list[Service], list[EndpointSlice]],
) -> None:
    check_against_reference(*cluster)


def _floor_never_above_effective(
    nodes: list[Node], services: list[Service], slices: list[EndpointSlice]
) -> None:
    """Section 13: floor <= effective for every data plane, overall and per zone, exactly."""
    for verdict in result_of(nodes, services, slices, EVERY_DATAPLANE).verdicts():
        for dataplane, figures in verdict.cross_zone.items():
            if figures is None:
                continue
            assert figures.floor <= figures.effective, (verdict.key, dataplane)
            for zone, share in figures.zones.items():
                assert share.floor <= share.effective, (verdict.key, dataplane, zone)


@settings(max_examples=500, deadline=None)
@given(cluster=clusters())
def test_floor_is_never_above_effective(
    cluster: tuple[list[Node], list[Service], list[EndpointSlice]],
) -> None:
    _floor_never_above_effective(*cluster)


def test_floor_is_never_above_effective_on_seeded_random_clusters() -> None:
    """The same over 300 seeded clusters with duplicate addresses across slices (the copies
    may disagree on zone, so a client's own set can hold a zone R's first copy does not)."""
    rng = random.Random(27)  # noqa: S311 - test data, not secrets
    for _ in range(300):
        names = [f"n{i}" for i in range(rng.randint(1, 8))]
        nodes = [
            node(name, rng.choice(["a", "b", "c", None]), rng.choice(["1", "2", "4", None]))
            for name in names
        ]
        endpoints = [
            Endpoint(
                address=f"10.0.0.{rng.randint(1, 6)}",
                ready=rng.choice([True, True, False, None]),
                zone=rng.choice(["a", "b", "c", None]),
                node_name=rng.choice([*names, None]),
                zone_hints=tuple(rng.sample(["a", "b", "c"], rng.randint(0, 2))),
                node_hints=tuple(rng.sample(names, rng.randint(0, 1))),
                terminating=rng.choice([None, True, False]),
                serving=rng.choice([None, True, False]),
            )
            for _ in range(rng.randint(0, 10))
        ]
        cut = rng.randint(0, len(endpoints))
        svc = service(
            mode=rng.choice([None, "Auto", "auto"]),
            traffic_distribution=rng.choice(
                [None, "PreferClose", "PreferSameZone", "PreferSameNode"]
            ),
            internal_traffic_policy=rng.choice([None, "Local"]),
        )
        slices = [endpoint_slice(*endpoints[:cut]), endpoint_slice(*endpoints[cut:])]
        _floor_never_above_effective(nodes, [svc], slices)


VECTORS = sorted(CONFORMANCE_DIR.glob("*.snapshot.json"))


@pytest.mark.parametrize("snapshot", VECTORS, ids=lambda path: path.name.split(".")[0])
def test_public_vectors_agree_with_the_reference(snapshot: Path) -> None:
    loaded = load_snapshot(str(snapshot))
    cluster = (list(loaded.nodes), list(loaded.services), list(loaded.endpoint_slices))
    check_against_reference(*cluster)
    _floor_never_above_effective(*cluster)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every cross-zone share computed from now on (not served from a memo), one item each."""
    from exporter.engine import crosszone  # noqa: PLC0415

    computed: list[object] = []
    compute = crosszone.cross_zone

    def counted(*args: Any) -> Any:
        computed.append(args)
        return compute(*args)

    monkeypatch.setattr(crosszone, "cross_zone", counted)
    return computed


def test_services_of_one_shape_share_one_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """50 Services with endpoints in the same zones, hinted alike: one computed share per
    data plane whose routing is zone-wide, and every one equal to the reference."""
    from exporter.engine.context import node_context  # noqa: PLC0415
    from exporter.engine.evaluate import evaluate_service  # noqa: PLC0415 - beside evaluate

    names = [f"web-{index}" for index in range(50)]
    services = [service(name, mode="Auto") for name in names]
    slices = [
        endpoint_slice(
            endpoint("a", hints=("a",)),
            endpoint("b", hints=("b",)),
            endpoint("b", hints=("a",)),
            service=name,
        )
        for name in names
    ]
    context = node_context(NODES, EVERY_DATAPLANE)
    computed = _counted(monkeypatch)
    for svc, own in zip(services, slices, strict=True):
        evaluate_service(svc, [own], context)
    # Every routing here is zone-wide (no node exception, no `mixed`): one shape per plane.
    assert len(computed) <= len(EVERY_DATAPLANE)
    monkeypatch.undo()
    assert check_against_reference(NODES, services, slices) == 50


@settings(max_examples=100, deadline=None)
@given(first=clusters(), second=clusters())
def test_one_evaluation_of_several_services_agrees_with_the_reference(
    first: tuple[list[Node], list[Service], list[EndpointSlice]],
    second: tuple[list[Node], list[Service], list[EndpointSlice]],
) -> None:
    """Entries of one evaluation share the memo: each still gets its own answer."""
    nodes, (svc,), slices = first
    _, (other,), other_slices = second
    other = replace(other, name="other")
    moved = [
        replace(s, service_name="other", name=f"other-{i}") for i, s in enumerate(other_slices)
    ]
    check_against_reference(
        nodes,
        [svc, other, replace(svc, name="same")],
        [
            *slices,
            *moved,
            *(replace(s, service_name="same", name=f"same-{i}") for i, s in enumerate(slices)),
        ],
    )
