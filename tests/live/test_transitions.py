"""The live exporter logs one line when a Service's expected state changes, rate-limited."""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import replace
from fractions import Fraction
from typing import Any

from freezegun import freeze_time
from structlog.testing import capture_logs

from exporter.engine import Endpoint, EndpointSlice, Node, Service
from exporter.pipeline.evaluator import Evaluator
from exporter.pipeline.transitions import DEFAULT_STEP_LINES, DEFAULT_WINDOW
from exporter.state.store import ClusterStore

ZONES = ("zone-a", "zone-b", "zone-c")
EVENT = "expected state changed"
CART = Service(
    namespace="shop",
    name="cart",
    deprecated_hints_annotation=None,
    topology_mode_annotation="Auto",
    traffic_distribution=None,
    internal_traffic_policy=None,
    type="ClusterIP",
    cluster_ip="10.96.0.10",
)


def cart_slice(replicas: int) -> EndpointSlice:
    endpoints = tuple(
        Endpoint(f"10.1.0.{i + 1}", ready=True, zone=ZONES[i % 3], node_name=f"node-{i % 3}")
        for i in range(replicas)
    )
    return EndpointSlice("shop", "cart-x1", "cart", "IPv4", managed=True, endpoints=endpoints)


def started(replicas: int) -> tuple[ClusterStore, Evaluator]:
    store = ClusterStore()
    store.replace_nodes(
        Node(f"node-{i}", zone, Fraction(4), ready=True, control_plane=False)
        for i, zone in enumerate(ZONES)
    )
    store.replace_services([CART])
    store.replace_endpoint_slices([cart_slice(replicas)])
    evaluator = Evaluator(store)
    evaluator.step()
    return store, evaluator


def scale(store: ClusterStore, evaluator: Evaluator, replicas: int) -> None:
    store.upsert_endpoint_slice(cart_slice(replicas))
    evaluator.step()


def lines(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["event"] == EVENT]


def test_a_change_is_one_line_with_from_to_and_reason() -> None:
    """Start: no line. 9 -> 8 replicas: enabled -> disabled, with the controller's reason."""
    with freeze_time("2026-12-01 03:00:00"), capture_logs() as logs:
        store, evaluator = started(9)
        assert lines(logs) == []
        scale(store, evaluator, 8)
    (line,) = lines(logs)
    assert line == {
        "event": EVENT,
        "log_level": "info",
        "namespace": "shop",
        "service": "cart",
        "address_type": "IPv4",
        "from": "enabled",
        "to": "disabled",
        "reason": "MinAllocationExceedsOverloadThreshold",
        "ready_endpoints": 8,
    }


def test_a_flapping_service_logs_once_per_window_then_where_it_ended() -> None:
    """Flaps within the window are counted, not logged; after it, one line tells the end state."""
    with freeze_time("2026-12-01 03:00:00") as clock, capture_logs() as logs:
        store, evaluator = started(9)
        for replicas in (8, 9, 8, 9, 8, 9, 8):
            clock.tick(1)
            scale(store, evaluator, replicas)
        assert len(lines(logs)) == 1
        clock.tick(DEFAULT_WINDOW / 2)
        evaluator.step()
        assert len(lines(logs)) == 1
        clock.tick(DEFAULT_WINDOW)
        evaluator.step()  # no change in the store: the held-back line is due with time
        evaluator.step()
    first, second = lines(logs)
    assert (first["from"], first["to"]) == ("enabled", "disabled")
    assert (second["from"], second["to"]) == ("disabled", "disabled")
    assert second["changes_not_logged"] == 6


def test_a_change_after_the_window_is_logged_at_once() -> None:
    """Two changes a window apart are two lines, each from where the last one ended."""
    with freeze_time("2026-12-01 03:00:00") as clock, capture_logs() as logs:
        store, evaluator = started(9)
        scale(store, evaluator, 8)
        clock.tick(DEFAULT_WINDOW + 1)
        scale(store, evaluator, 9)
    assert [(line["from"], line["to"], line["reason"]) for line in lines(logs)] == [
        ("enabled", "disabled", "MinAllocationExceedsOverloadThreshold"),
        ("disabled", "enabled", None),
    ]


def test_a_deleted_service_starts_afresh() -> None:
    """After its Service is deleted, a recreated Service's first verdict is not a change."""
    with freeze_time("2026-12-01 03:00:00"), capture_logs() as logs:
        store, evaluator = started(9)
        store.delete_service("shop", "cart")
        evaluator.step()
        store.upsert_service(CART)
        store.upsert_endpoint_slice(cart_slice(8))
        evaluator.step()
    assert lines(logs) == []


def test_a_cluster_wide_flip_is_a_bounded_number_of_lines() -> None:
    """A node change that flips many Services at once: some lines, then one counting the rest."""
    store = ClusterStore()
    nodes = [
        Node(f"node-{i}", zone, Fraction(4), ready=True, control_plane=False)
        for i, zone in enumerate(ZONES)
    ]
    store.replace_nodes(nodes)
    services = [replace(CART, name=f"cart-{i}") for i in range(50)]
    store.replace_services(services)
    store.replace_endpoint_slices(
        replace(cart_slice(9), name=f"cart-{i}-x1", service_name=f"cart-{i}") for i in range(50)
    )
    with freeze_time("2026-12-01 03:00:00"), capture_logs() as logs:
        evaluator = Evaluator(store)
        evaluator.step()
        # One node loses its zone label: node info is insufficient for every Service.
        store.upsert_node(replace(nodes[0], zone=None))
        evaluator.step()
    single = [line for line in lines(logs) if "more" not in line]
    (rest,) = [line for line in lines(logs) if "more" in line]
    assert len(single) == DEFAULT_STEP_LINES
    assert rest["services"] == 50 - DEFAULT_STEP_LINES
    assert (rest["from"], rest["to"]) == ("enabled", "disabled")


def test_effective_routing_changes_are_a_line_too() -> None:
    """The controller writes hints: kube-proxy goes from cluster-wide to local everywhere;
    one endpoint losing its hint sends every node cluster-wide again, and the line says why."""

    def hinted(replicas: int, *, unhinted: int = 0) -> EndpointSlice:
        plain = cart_slice(replicas)
        endpoints = tuple(
            replace(e, zone_hints=(e.zone,) if i >= unhinted and e.zone else ())
            for i, e in enumerate(plain.endpoints)
        )
        return replace(plain, endpoints=endpoints)

    event = "effective routing changed"
    with freeze_time("2026-12-01 03:00:00") as clock, capture_logs() as logs:
        store, evaluator = started(9)
        store.upsert_endpoint_slice(hinted(9))
        evaluator.step()
        clock.tick(DEFAULT_WINDOW + 1)
        store.upsert_endpoint_slice(hinted(9, unhinted=1))
        evaluator.step()
    first, second = [line for line in logs if line["event"] == event]
    assert (first["from"], first["to"]) == (
        "kube-proxy: 0% of nodes local",
        "kube-proxy: 100% of nodes local",
    )
    assert second["to"] == "kube-proxy: 0% of nodes local"
    assert second["reason"] == "unhinted-endpoint"


def test_no_flip_is_counted_against_a_state_never_served_as_ready() -> None:
    """Evaluated before /readyz with no Node (a list that was not whole: refused, as
    InsufficientNodeInfo), then with its Nodes: no flip (issue 30, 6). From the state served
    as ready on, a change is one."""
    store = ClusterStore()
    store.replace_services([CART])
    store.replace_endpoint_slices([cart_slice(9)])
    evaluator = Evaluator(store)
    evaluator.count_flips_once_ready()
    (before,) = evaluator.step().services[("shop", "cart")].verdicts
    assert (before.expected_state, before.reason) == ("disabled", "InsufficientNodeInfo")
    store.replace_nodes(
        Node(f"node-{i}", zone, Fraction(4), ready=True, control_plane=False)
        for i, zone in enumerate(ZONES)
    )
    result = evaluator.step().services[("shop", "cart")]
    assert result.verdicts[0].expected_state == "enabled"
    assert result.state_changes == (0,)
    evaluator.published_as_ready()
    scale(store, evaluator, 8)
    assert evaluator.state.services[("shop", "cart")].state_changes == (1,)
