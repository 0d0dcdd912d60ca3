"""Each published state names the Services whose result it replaced, so renderers update
only those."""

from __future__ import annotations

from exporter.pipeline.evaluator import Evaluator
from exporter.sources.decode import decode_endpoint_slice, decode_node, decode_service
from exporter.state.store import ClusterStore
from tests.k8s_objects import endpoint_slice, service, three_zone_nodes, zone_endpoints


def _cluster() -> tuple[ClusterStore, Evaluator]:
    store = ClusterStore()
    store.replace_nodes([decode_node(node) for node in three_zone_nodes()])
    store.replace_services(
        [decode_service(service("default", name, topology_mode="Auto")) for name in "abc"]
    )
    store.replace_endpoint_slices(
        [
            decode_endpoint_slice(endpoint_slice("default", f"{name}-1", name, zone_endpoints(6)))
            for name in "abc"
        ]
    )
    evaluator = Evaluator(store, clock=lambda: 1.8e9)
    evaluator.step()
    return store, evaluator


def test_the_first_state_names_every_service() -> None:
    _, evaluator = _cluster()
    assert evaluator.state.changed == frozenset(
        {("default", "a"), ("default", "b"), ("default", "c")}
    )


def test_a_slice_change_names_only_its_service() -> None:
    store, evaluator = _cluster()
    before = evaluator.state
    store.upsert_endpoint_slice(
        decode_endpoint_slice(endpoint_slice("default", "b-1", "b", zone_endpoints(9)))
    )
    after = evaluator.step()
    assert after.changed == frozenset({("default", "b")})
    assert after.services[("default", "a")] is before.services[("default", "a")]
    assert after.services[("default", "b")] is not before.services[("default", "b")]


def test_a_deleted_service_is_named_once_it_is_gone() -> None:
    store, evaluator = _cluster()
    store.delete_service("default", "c")
    after = evaluator.step()
    assert after.changed == frozenset({("default", "c")})
    assert ("default", "c") not in after.services
