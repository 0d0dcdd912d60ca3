"""A change of the Ready nodes evaluates every Service again without reading its slices
again: the slice-derived inputs are kept per (Service, slices) object, and the result
equals what an evaluator started on the changed nodes publishes."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace

import pytest

from exporter.engine import EndpointSlice, Service
from exporter.engine.evaluate import EntryInputs
from exporter.engine.profile import ASSUMED, Profile
from tests.engine.builders import endpoint, endpoint_slice, service
from tests.live.test_evaluator_node_change import CLUSTER, NODES, SPARE, _fresh, _judged, _started

# Where the evaluator's kept inputs are made (one call per Service read).
INCREMENTAL = importlib.import_module("exporter.pipeline.incremental")


@pytest.fixture
def inputs_computed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The Services whose inputs the evaluator computes, in order."""
    calls: list[tuple[str, str]] = []
    computed: Callable[..., tuple[EntryInputs, ...]] = INCREMENTAL.service_inputs

    def counted(
        svc: Service,
        slices: tuple[EndpointSlice, ...],
        zone_sets: dict[frozenset[str], frozenset[str]] | None = None,
        profile: Profile = ASSUMED,
    ) -> tuple[EntryInputs, ...]:
        calls.append(svc.key)
        return computed(svc, slices, zone_sets, profile)

    monkeypatch.setattr(INCREMENTAL, "service_inputs", counted)
    return calls


def test_a_ready_node_change_reuses_every_service_s_inputs(
    inputs_computed: list[tuple[str, str]],
) -> None:
    store, evaluator = _started()
    services = len(evaluator.state.services)
    assert len(inputs_computed) == services
    nodes = tuple(replace(n, ready=False) if n.name == "zone-b-1" else n for n in NODES)
    store.replace_nodes((*nodes, SPARE))
    after = evaluator.step()
    # Every Service was evaluated again (routing has one client fewer), none re-read.
    assert after.changed
    assert len(inputs_computed) == services
    assert _judged(after) == _judged(_fresh((*nodes, SPARE)))


def test_a_changed_slice_is_read_again(inputs_computed: list[tuple[str, str]]) -> None:
    store, evaluator = _started()
    inputs_computed.clear()
    svc = next(s for s in CLUSTER[0] if s.name == "close")
    store.upsert_endpoint_slice(
        endpoint_slice(endpoint("zone-a", hints=("zone-a",)), service=svc.name, name="close-2")
    )
    evaluator.step()
    assert inputs_computed == [svc.key]
    # A Ready-node change now: the new slices' inputs are kept too.
    store.replace_nodes((*NODES, replace(SPARE, ready=True)))
    evaluator.step()
    assert inputs_computed == [svc.key]


def test_a_deleted_service_s_inputs_are_dropped() -> None:
    store, evaluator = _started()
    store.delete_service("default", "plain")
    evaluator.step()
    store.upsert_service(service("plain"))
    after = evaluator.step()
    assert after.services["default", "plain"].verdicts[0].service == service("plain")
