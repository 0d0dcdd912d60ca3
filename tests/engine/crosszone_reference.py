"""A plain reference for behaviour §13's expected cross-zone shares, the engine is checked
against: written from the section's words, node by node, with its own endpoint sets; it
takes only the routing of each node from the engine (section 10, tested on its own)."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.engine import (
    DataPlane,
    Endpoint,
    EndpointSlice,
    EntryVerdict,
    Node,
    Routing,
    Service,
)
from exporter.report.document import cross_zone_field, routing_fields
from tests.engine.views import routing_of
from tests.results import result_of

EVERY_DATAPLANE = tuple(DataPlane)
_HINT_NODE = {DataPlane.KUBE_PROXY, DataPlane.CALICO_EBPF}
_LOCATED_ZONE = {DataPlane.ISTIO, DataPlane.ENVOY_GATEWAY}
# Section 10: under internalTrafficPolicy Local these fall back to the node's serving
# terminating endpoints where it has no usable one.
_LOCAL_FALLBACK = {
    DataPlane.KUBE_PROXY,
    DataPlane.KUBE_PROXY_1_29,
    DataPlane.KUBE_PROXY_1_33,
    DataPlane.CILIUM,
    DataPlane.CILIUM_1_18_0,
    DataPlane.CILIUM_NO_TOPOLOGY,
    DataPlane.CALICO_EBPF,
}
# With no ready endpoint at all, kube-proxy sends cluster traffic to the serving terminating
# ones (its CategorizeEndpoints; the real kube-proxy's rules, tests/realcluster).
_NO_READY_FALLBACK = {DataPlane.KUBE_PROXY, DataPlane.KUBE_PROXY_1_29, DataPlane.KUBE_PROXY_1_33}


# -- the reference -------------------------------------------------------------------------


def _unique(endpoints: list[Endpoint]) -> list[Endpoint]:
    seen: set[str] = set()
    kept = []
    for e in endpoints:
        if e.address is not None and e.address not in seen:
            seen.add(e.address)
            kept.append(e)
    return kept


def _usable(dataplane: DataPlane, slices: list[EndpointSlice]) -> list[Endpoint]:
    every = _unique([e for s in slices for e in s.endpoints])
    if dataplane is DataPlane.CALICO_EBPF:
        return [e for e in every if e.ready is not False or e.terminating is True]
    return [e for e in every if e.ready is not False]


def _nginx_union(svc: Service, slices: list[EndpointSlice], zone: str) -> list[Endpoint]:
    prefer_close = svc.traffic_distribution == "PreferClose"
    kept = []
    for s in slices:
        filtered = all(e.zone_hints for e in s.endpoints) and not (
            prefer_close and not any(zone in e.zone_hints for e in s.endpoints)
        )
        ready = [e for e in s.endpoints if e.address is not None and e.ready is not False]
        kept += [e for e in ready if not filtered or zone in e.zone_hints]
    return _unique(kept)


def _cluster(
    dataplane: DataPlane, svc: Service, r: list[Endpoint], zone: str | None
) -> list[Endpoint]:
    cilium_asks = svc.traffic_distribution == "PreferClose" or (
        _hints_annotation(svc) not in {None, "", "disabled", "Disabled"}
    )
    if dataplane is DataPlane.CILIUM_1_18_0 and cilium_asks and zone:
        # Its rule applies: Cilium 1.18.0 skips only what zone hints exclude (S).
        return [e for e in r if not e.zone_hints or zone in e.zone_hints]
    return r


def _local(
    dataplane: DataPlane, slices: list[EndpointSlice], r: list[Endpoint], name: str
) -> list[Endpoint]:
    own = [e for e in r if e.node_name == name]
    if own or dataplane not in _LOCAL_FALLBACK:
        return own
    every = _unique([e for s in slices for e in s.endpoints])
    return [
        e for e in every if e.node_name == name and e.terminating is True and e.serving is not False
    ]


def _given(  # noqa: PLR0911 - the section's list, one return per routing
    dataplane: DataPlane,
    svc: Service,
    slices: list[EndpointSlice],
    routing: Routing,
    client: Node,
) -> list[Endpoint]:
    r = _usable(dataplane, slices)
    zone, name = client.zone, client.name
    if routing is Routing.CLUSTER:
        if not r and dataplane in _NO_READY_FALLBACK:
            every = _unique([e for s in slices for e in s.endpoints])
            return [e for e in every if e.terminating is True and e.serving is not False]
        return _cluster(dataplane, svc, r, zone)
    if routing is Routing.SAME_ZONE:
        if dataplane in _LOCATED_ZONE:
            return [e for e in r if e.zone == zone]
        return [e for e in r if zone in e.zone_hints]
    if routing is Routing.SAME_NODE:
        if dataplane in _HINT_NODE:
            return [e for e in r if name in e.node_hints]
        return [e for e in r if e.node_name == name]
    if routing is Routing.LOCAL:
        return _local(dataplane, slices, r, name)
    if routing is Routing.MIXED:
        if dataplane is DataPlane.CILIUM_1_18_0:
            return [e for e in r if not e.zone_hints or zone in e.zone_hints]
        assert dataplane is DataPlane.INGRESS_NGINX
        return _nginx_union(svc, slices, zone or "")
    return []


def _hints_annotation(svc: Service) -> str | None:
    if svc.deprecated_hints_annotation is not None:
        return svc.deprecated_hints_annotation
    return svc.topology_mode_annotation


def reference(
    verdict: EntryVerdict, dataplane: DataPlane, nodes: list[Node], slices: list[EndpointSlice]
) -> dict[str, Any] | None:
    view = verdict.routing[dataplane]
    r = _usable(dataplane, slices)
    sums: dict[str, list[float]] = {}
    for client in nodes:
        if not (client.ready and client.zone and client.allocatable_cpu):
            continue
        routing = routing_of(view, client.name, client.zone)
        assert routing is not None
        given_ = _given(dataplane, verdict.service, slices, routing, client)
        if not given_:
            continue
        share = sum(e.zone != client.zone for e in given_) / len(given_)
        floor = 0.0 if any(e.zone == client.zone for e in [*r, *given_]) else 1.0
        w = float(client.allocatable_cpu)
        acc = sums.setdefault(client.zone, [0.0, 0.0, 0.0])
        acc[0] += w * share
        acc[1] += w * floor
        acc[2] += w
    if not sums:
        return None
    total = sum(acc[2] for acc in sums.values())
    return {
        "effective": sum(acc[0] for acc in sums.values()) / total,
        "floor": sum(acc[1] for acc in sums.values()) / total,
        "zones": {z: {"effective": a[0] / a[2], "floor": a[1] / a[2]} for z, a in sums.items()},
    }


def assert_close(ours: dict[str, Any] | None, theirs: dict[str, Any] | None, where: str) -> None:
    if theirs is None or ours is None:
        assert ours == theirs, where
        return
    assert ours["effective"] == pytest.approx(theirs["effective"], abs=1e-3), where
    assert ours["floor"] == pytest.approx(theirs["floor"], abs=1e-3), where
    assert set(ours["zones"]) == set(theirs["zones"]), where
    for zone, figures in theirs["zones"].items():
        assert ours["zones"][zone]["effective"] == pytest.approx(figures["effective"], abs=1e-3)
        assert ours["zones"][zone]["floor"] == pytest.approx(figures["floor"], abs=1e-3)


def check_against_reference(
    nodes: list[Node], services: list[Service], slices: list[EndpointSlice]
) -> int:
    """Every entry of every data plane agrees with the reference; the entries checked."""
    evaluation = result_of(nodes, services, slices, EVERY_DATAPLANE)
    for verdict in evaluation.verdicts():
        field = cross_zone_field(verdict)
        typed = [
            s
            for s in slices
            if (s.namespace, s.service_name) == verdict.service.key
            and s.address_type == verdict.address_type
        ]
        if routing_fields(verdict)["routing"] is None:
            assert field is None
            continue
        assert field is not None
        for dataplane in EVERY_DATAPLANE:
            where = f"{verdict.key} {dataplane}"
            assert_close(field[str(dataplane)], reference(verdict, dataplane, nodes, typed), where)
    return len(evaluation.verdicts())
