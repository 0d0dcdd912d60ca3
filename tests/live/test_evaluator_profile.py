"""The live evaluator under a changing Kubernetes profile (behaviour §12): an upgrade seen at a
relist re-evaluates every Service, and gives what a fresh evaluator under it gives."""

from __future__ import annotations

from exporter.engine import EndpointSlice, Mechanism, Service
from exporter.engine.profile import Notice, Source, build_profile
from exporter.pipeline.evaluator import Evaluator
from tests.engine.builders import endpoint, endpoint_slice, service
from tests.live.test_evaluator_node_change import CLUSTER, NODES, _judged, _store

V1_33 = build_profile(33, Source.API)
V1_34 = build_profile(34, Source.API)


def _with_prefer_same_zone() -> tuple[list[Service], list[EndpointSlice]]:
    """The node-change tests' cluster plus a PreferSameZone Service hinted on every node."""
    services, slices = CLUSTER
    zonal = service("zonal", traffic_distribution="PreferSameZone")
    hinted = [endpoint(node.zone, node_name=node.name, hints=(node.zone or "",)) for node in NODES]
    return [*services, zonal], [*slices, endpoint_slice(*hinted, service="zonal")]


def test_a_profile_change_re_evaluates_every_service_without_a_store_change() -> None:
    services, slices = _with_prefer_same_zone()
    store = _store(NODES, services, slices)
    evaluator = Evaluator(store, clock=lambda: 1.8e9, profile=V1_33)
    before = evaluator.step()
    assert before.profile == V1_33
    zonal = before.services[("default", "zonal")].verdicts[0]
    assert zonal.mechanism is Mechanism.NONE
    close = before.services[("default", "close")].verdicts[0]
    assert close.notices == frozenset()

    evaluator.set_profile(V1_34)
    after = evaluator.step()
    assert after.generation == before.generation + 1
    assert after.profile == V1_34
    assert after.services[("default", "zonal")].verdicts[0].mechanism is (
        Mechanism.TRAFFIC_DISTRIBUTION
    )
    assert after.services[("default", "close")].verdicts[0].notices == {
        Notice.PREFER_CLOSE_DEPRECATED
    }
    assert {view.profile for view in after.zone_loss_views} == {V1_34}
    fresh = Evaluator(_store(NODES, services, slices), clock=lambda: 1.8e9, profile=V1_34).step()
    assert _judged(after) == _judged(fresh)


def test_an_unchanged_profile_is_no_change() -> None:
    services, slices = _with_prefer_same_zone()
    evaluator = Evaluator(_store(NODES, services, slices), clock=lambda: 1.8e9, profile=V1_33)
    first = evaluator.step()
    evaluator.set_profile(build_profile(33, Source.API))
    assert evaluator.step() is first
