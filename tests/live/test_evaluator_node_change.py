"""A Node change re-judges every Service cheaply: the same verdicts as a fresh evaluator,
one allocation per shape of Service, unchanged results kept, and nothing copied."""

from __future__ import annotations

import importlib
import sys
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import replace
from fractions import Fraction
from typing import Any

import immutables
import pytest
from structlog.testing import capture_logs

from exporter.engine import Endpoint, EndpointSlice, Node, Service
from exporter.engine.allocation import AllocationResult
from exporter.engine.capacity import ClusterCapacity
from exporter.pipeline.evaluator import Evaluator
from exporter.state.result import ClusterResult
from exporter.state.store import ClusterStore
from tests.engine.builders import endpoint, endpoint_slice, service

# Where judgements call allocate (one call per allocation computed).
JUDGEMENT = importlib.import_module("exporter.engine.judgement")
ZONES = ("zone-a", "zone-b", "zone-c")
NODES = tuple(
    Node(f"{zone}-{index}", zone, Fraction(4), ready=True, control_plane=False)
    for zone in ZONES
    for index in range(2)
)
# Not Ready: counts for zone membership (zone loss) but not for capacity or routing.
SPARE = Node("spare-0", "zone-a", Fraction(4), ready=False, control_plane=False)


def _endpoints(count: int, *, unhinted: int = 0, unzoned: int = 0) -> list[Endpoint]:
    """`count` ready endpoints round-robin over the zones, on the zone's first node, hinted
    for their zone except the first `unhinted`; the last `unzoned` have no zone."""
    made = []
    for index in range(count):
        zone = ZONES[index % 3]
        made.append(
            endpoint(
                None if index >= count - unzoned else zone,
                node_name=f"{zone}-0",
                hints=() if index < unhinted else (zone,),
            )
        )
    return made


def _cluster() -> tuple[list[Service], list[EndpointSlice]]:
    """auto Services of 1 to 15 endpoints (some with unhinted or unzoned endpoints, some
    dual-stack), traffic-distribution, no mechanism, and internalTrafficPolicy Local."""
    services: list[Service] = []
    slices: list[EndpointSlice] = []

    def add(svc: Service, *typed: tuple[str, list[Endpoint]]) -> None:
        services.append(svc)
        for address_type, endpoints in typed:
            slices.append(endpoint_slice(*endpoints, service=svc.name, address_type=address_type))

    for count in range(1, 16):
        add(
            service(f"auto-{count}", mode="Auto"),
            ("IPv4", _endpoints(count, unhinted=count % 4 == 0, unzoned=count == 7)),
        )
        add(
            service(f"dual-{count}", mode="Auto"),
            ("IPv4", _endpoints(count)),
            ("IPv6", _endpoints(count + 1)),
        )
    add(service("close", traffic_distribution="PreferClose"), ("IPv4", _endpoints(6)))
    add(service("plain"), ("IPv4", _endpoints(6)))
    add(service("local", mode="Auto", internal_traffic_policy="Local"), ("IPv4", _endpoints(5)))
    return services, slices


# Built once: the builders number addresses and slice names, and a fresh evaluator must
# see the very same objects.
CLUSTER = _cluster()


def _store(
    nodes: Iterable[Node], services: list[Service], slices: list[EndpointSlice]
) -> ClusterStore:
    store = ClusterStore()
    store.replace_nodes(nodes)
    store.replace_services(services)
    store.replace_endpoint_slices(slices)
    return store


def _started(nodes: Iterable[Node] = (*NODES, SPARE)) -> tuple[ClusterStore, Evaluator]:
    store = _store(nodes, *CLUSTER)
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    return store, evaluator


def _fresh(nodes: Iterable[Node]) -> ClusterResult:
    """What an evaluator started on these nodes publishes."""
    return Evaluator(_store(nodes, *CLUSTER), clock=lambda: 1.8e9).step()


def _judged(state: ClusterResult) -> dict[tuple[str, str], tuple[Any, Any]]:
    """Per Service, its verdicts and forecasts (flips differ: a fresh evaluator saw none)."""
    return {key: (result.verdicts, result.forecasts) for key, result in state.services.items()}


def _replaced(state: ClusterResult, before: ClusterResult) -> frozenset[tuple[str, str]]:
    keys = set(state.services) | set(before.services)
    return frozenset(key for key in keys if state.services.get(key) is not before.services.get(key))


def _with(nodes: tuple[Node, ...], name: str, **changes: Any) -> tuple[Node, ...]:
    return tuple(replace(node, **changes) if node.name == name else node for node in nodes)


CHANGES: dict[str, tuple[Node, ...]] = {
    # More CPU in zone-a: shares move, the Ready nodes stay (the re-judging path).
    "cpu": _with((*NODES, SPARE), "zone-a-0", allocatable_cpu=Fraction(16)),
    # A node stops being Ready: shares and Ready nodes move (the full path).
    "not-ready": _with((*NODES, SPARE), "zone-b-1", ready=False),
    # A node joins zone-c Ready: shares move, every routing has one more client.
    "new-node": (
        *NODES,
        SPARE,
        Node("zone-c-9", "zone-c", Fraction(2), ready=True, control_plane=False),
    ),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_node_change_judges_every_service_as_a_fresh_evaluator(change: str) -> None:
    """The re-judged state equals, Service by Service, what an evaluator started on the
    changed nodes publishes; some Services flip, so the change matters."""
    store, evaluator = _started()
    before = evaluator.state
    store.replace_nodes(CHANGES[change])
    after = evaluator.step()
    assert _judged(after) == _judged(_fresh(CHANGES[change]))
    assert after.capacity == _fresh(CHANGES[change]).capacity
    states = {
        key: [verdict.expected_state for verdict in result.verdicts]
        for key, result in after.services.items()
    }
    assert any(
        states[key] != [verdict.expected_state for verdict in result.verdicts]
        for key, result in before.services.items()
    )
    assert after.changed == _replaced(after, before)


def test_services_of_one_shape_share_one_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 auto Services of 9 endpoints, 3 per zone: one allocation when they are first
    evaluated and one when CPU shares move, not 100."""
    calls: list[int] = []
    allocate: Callable[..., AllocationResult] = JUDGEMENT.allocate

    def counted(capacity: ClusterCapacity, endpoints: int, **kwargs: bool) -> AllocationResult:
        calls.append(endpoints)
        return allocate(capacity, endpoints, **kwargs)

    monkeypatch.setattr(JUDGEMENT, "allocate", counted)
    services = [service(f"web-{index}", mode="Auto") for index in range(100)]
    slices = [endpoint_slice(*_endpoints(9), service=svc.name) for svc in services]
    store = _store(NODES, services, slices)
    evaluator = Evaluator(store)
    first = evaluator.step()
    assert calls == [9]
    store.upsert_node(replace(NODES[0], allocatable_cpu=Fraction(16)))
    after = evaluator.step()
    assert calls == [9, 9]
    assert len(after.changed or ()) == 100
    assert {result.verdicts[0].zones["zone-a"].ratio for result in after.services.values()} != {
        result.verdicts[0].zones["zone-a"].ratio for result in first.services.values()
    }


@pytest.mark.parametrize(
    "change",
    [
        # Every node's CPU doubles: the capacity changes, every ratio stays.
        lambda nodes: tuple(replace(n, allocatable_cpu=n.allocatable_cpu * 2) for n in nodes),
        # The not-Ready node moves to zone-b: zone membership changes, nothing else.
        lambda nodes: _with(nodes, "spare-0", zone="zone-b"),
    ],
    ids=["same-ratios", "not-ready-node-moves"],
)
def test_a_service_whose_result_did_not_change_keeps_its_object(
    change: Callable[[tuple[Node, ...]], tuple[Node, ...]],
) -> None:
    """Every Service is judged again, none changes: every result is the same object, and
    the state names no Service as changed (renderers re-render nothing)."""
    store, evaluator = _started()
    before = evaluator.state
    nodes = change((*NODES, SPARE))
    store.replace_nodes(nodes)
    after = evaluator.step()
    assert after.generation == before.generation + 1
    assert after.capacity != before.capacity or after.zone_loss_views != before.zone_loss_views
    assert after.changed == frozenset()
    assert all(after.services[key] is result for key, result in before.services.items())
    assert _judged(after) == _judged(_fresh(nodes))


def test_a_slice_change_equal_in_effect_keeps_the_result() -> None:
    """A slice change that no verdict reads (an endpoint's terminating condition, which
    only Calico eBPF reads, is not configured): re-evaluated, found equal, kept."""
    store, evaluator = _started()
    before = evaluator.state
    (old,) = [s for s in CLUSTER[1] if s.service_name == "auto-9"]
    first = replace(old.endpoints[0], terminating=False)
    store.upsert_endpoint_slice(replace(old, endpoints=(first, *old.endpoints[1:])))
    after = evaluator.step()
    assert after.generation == before.generation + 1
    assert after.changed == frozenset()
    assert after.services["default", "auto-9"] is before.services["default", "auto-9"]


def _one_service_change(services: int) -> tuple[ClusterResult, ClusterResult, int]:
    """(before, after, bytes allocated at peak) for a one-slice change among `services`."""
    svcs = [service(f"web-{index}", mode="Auto") for index in range(services)]
    slices = [endpoint_slice(*_endpoints(6), service=svc.name) for svc in svcs]
    store = _store(NODES, svcs, slices)
    evaluator = Evaluator(store)
    before = evaluator.step()
    store.upsert_endpoint_slice(replace(slices[0], endpoints=slices[0].endpoints[:5]))
    tracemalloc.start()
    try:
        after = evaluator.step()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return before, after, peak


def test_publishing_shares_the_unchanged_entries() -> None:
    """A one-Service change publishes a persistent map that shares every other entry with
    the previous state, leaves the previous state as it was, and allocates less than one
    copy of the map would: the cost does not grow with the number of Services."""
    before, after, peak = _one_service_change(3000)
    changed = ("default", "web-0")
    assert isinstance(after.services, immutables.Map)
    assert after.changed == frozenset({changed})
    assert after.services[changed] is not before.services[changed]
    assert before.services[changed].verdicts[0].ready_endpoints == 6
    assert all(
        after.services[key] is result for key, result in before.services.items() if key != changed
    )
    assert peak < sys.getsizeof(dict(after.services))
    _, _, small_peak = _one_service_change(300)
    assert peak < 2 * small_peak


def test_a_re_judged_flip_is_logged_and_counted() -> None:
    """auto-3 (one endpoint per zone) is refused once zone-a holds most of the CPU: the
    re-judging path logs the change of expected state, not of routing, and counts a flip."""
    store, evaluator = _started()
    key = ("default", "auto-3")
    assert evaluator.state.services[key].verdicts[0].expected_state == "enabled"
    with capture_logs() as logs:
        store.replace_nodes(CHANGES["cpu"])
        after = evaluator.step()
    (verdict,) = after.services[key].verdicts
    assert verdict.expected_state == "disabled"
    assert after.services[key].state_changes == (1,)
    lines = [line for line in logs if line.get("service") == "auto-3"]
    assert [(line["event"], line["from"], line["to"]) for line in lines] == [
        ("expected state changed", "enabled", "disabled")
    ]


def test_a_control_plane_cpu_change_reweighs_the_cross_zone_shares() -> None:
    """Capacity ignores control-plane nodes but section 13's clients do not: their CPU
    moving re-weighs every cross-zone share, as a fresh evaluator would."""
    plane = Node("plane-0", "zone-c", Fraction(4), ready=True, control_plane=True)
    store, evaluator = _started((*NODES, plane))
    before = evaluator.state
    bigger = (*NODES, replace(plane, allocatable_cpu=Fraction(64)))
    store.replace_nodes(bigger)
    after = evaluator.step()
    assert after.capacity is before.capacity
    assert _judged(after) == _judged(_fresh(bigger))
    assert any(
        verdict.cross_zone != old.cross_zone
        for key, result in after.services.items()
        for verdict, old in zip(result.verdicts, before.services[key].verdicts, strict=True)
    )
