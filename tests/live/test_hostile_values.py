"""Hostile values from the API server cost one invalid object each, never the informer."""

from __future__ import annotations

from tests.k8s_objects import endpoint_slice, node, service, three_zone_nodes, zone_endpoints
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.scrape import Scrape

WEB = {"namespace": "shop", "service": "web", "address_type": "IPv4"}


def _invalid_nodes(result: Scrape) -> float | None:
    return result.value("topology_hints_invalid_objects_total", resource="nodes")


def test_hostile_cpu_quantities_are_skipped(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    """Nodes with CPU 1e-999999999, -4 or Arabic-Indic digits are counted invalid at once."""
    hostile = [
        node("tiny", "zone-a", cpu="1e-999999999"),
        node("negative", "zone-b", cpu="-4"),
        node("arabic", "zone-c", cpu="\u0661\u0662"),
    ]
    kube_api.load(
        [
            *three_zone_nodes(),
            *hostile,
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
        ]
    )
    with start_exporter() as exporter:
        result = eventually(
            exporter,
            lambda r: r.value("topology_hints_service_expected_enabled", **WEB) == 1,
        )
        assert _invalid_nodes(result) == 3
        # The watch path too, and the informer keeps going: a later valid change arrives.
        kube_api.apply(node("huge", "zone-a", cpu="1e999999999"))
        eventually(exporter, lambda r: _invalid_nodes(r) == 4)
        kube_api.apply(endpoint_slice("shop", "web-1", "web", zone_endpoints(8)))
        eventually(
            exporter,
            lambda r: r.value("topology_hints_service_expected_enabled", **WEB) == 0,
        )
