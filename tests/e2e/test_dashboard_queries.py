"""End to end: every dashboard query returns data from real Prometheus scraping the exporter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dashboards.crosszone import ROW as CROSS_ZONE_ROW
from exporter.run.serve import ServeOptions
from tests.conftest import PROJECT_ROOT
from tests.e2e.dashboard_queries import dashboard_queries, row_panel_titles
from tests.e2e.prometheus import prometheus_stack
from tests.k8s_objects import (
    as_list,
    endpoint,
    endpoint_slice,
    event,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.kubeapi import FakeKubeAPI
from tests.scrape import running_exporter, wait_until

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"

# Panels this cluster cannot feed, each with the reason. Anything else empty fails.
EXPECTED_EMPTY = {
    # Every node of this cluster has a zone and CPU: nothing is missing.
    "Nodes missing topology info": "the cluster's node info is sufficient",
    # No mesh here: tests/e2e/test_cross_zone.py feeds the Cross-zone traffic rows.
    **dict.fromkeys(row_panel_titles(CROSS_ZONE_ROW), "no mesh traffic in this cluster"),
}

# (namespace, service) choices for the Service drill-down; a panel has data if any choice does.
SERVICE_CHOICES = (("shop", "web"), ("shop", "cart"), ("shop", "search"), ("shop", "partial"),
                   ("payments", "ledger"), ("payments", "local"))  # fmt: skip


def mixed_cluster() -> dict[str, list[dict[str, object]]]:
    """One cluster with every situation the dashboards show."""
    thin = [
        endpoint(f"10.0.3.{i}", zone, f"node-{zone[-1]}-0", hint_zones=(zone,))
        for i, zone in enumerate(["zone-a", "zone-a", "zone-b", "zone-b", "zone-c"], start=1)
    ]
    partial = zone_endpoints(6, prefix="10.0.4")
    partial[0] = endpoint("10.0.4.1", "zone-a", "node-a-0")
    same_node = [
        endpoint(f"10.0.6.{i}", zone, f"node-{zone[-1]}-0", hint_zones=(zone,),
                 hint_nodes=(f"node-{zone[-1]}-0",))
        for i, zone in enumerate(["zone-a", "zone-b", "zone-c"], start=1)
    ]  # fmt: skip
    return as_list(
        three_zone_nodes(per_zone=2),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
        service("shop", "cart", topology_mode="Auto"),
        endpoint_slice("shop", "cart-1", "cart", zone_endpoints(8, hinted=False, prefix="10.0.2")),
        service("shop", "search", traffic_distribution="PreferSameZone"),
        endpoint_slice("shop", "search-1", "search", thin),
        service("shop", "partial", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "partial-1", "partial", partial),
        service("payments", "ledger", topology_mode="Auto", traffic_distribution="PreferClose"),
        endpoint_slice("payments", "ledger-1", "ledger", zone_endpoints(9, prefix="10.0.5")),
        service("payments", "local", traffic_distribution="PreferSameNode"),
        endpoint_slice("payments", "local-1", "local", same_node),
    )


@pytest.fixture
def exporter(kube_api: FakeKubeAPI, kubeconfig: Path) -> Iterator[str]:
    """The exporter watching the test API server, with events and one malformed object."""
    malformed = endpoint_slice("shop", "broken", "web", [])
    malformed["endpoints"] = "not a list"
    kube_api.load(
        [
            *mixed_cluster()["items"],
            event("shop", "cart.1", "cart", "TopologyAwareHintsDisabled", count=2),
            event("shop", "web.1", "web", "TopologyAwareHintsEnabled"),
            malformed,
        ]
    )
    options = ServeOptions(listen_address="127.0.0.1:0", kubeconfig=str(kubeconfig), context="fake")
    with running_exporter(options) as live:
        wait_until(lambda: live.readiness()[0], timeout=30)
        yield f"127.0.0.1:{live.server.port}"


@pytest.mark.e2e
def test_every_panel_query_returns_data(exporter: str, tmp_path: Path) -> None:
    """Each panel query of each dashboard returns series, except the listed expected-empty ones."""
    with prometheus_stack(exporter, RULE_FILE, tmp_path / "stack") as stack:
        # Enough scrapes for increase()/rate() over the state-change counter to have two points.
        stack.wait_for(
            lambda: stack.query("count_over_time(topology_hints_build_info[1m]) >= 4"),
            60,
            what="four scrapes of the exporter",
        )
        has_data: dict[tuple[str, str], bool] = {}
        for namespace, name in SERVICE_CHOICES:
            for uid, title, expr in dashboard_queries(namespace, name):
                key = (uid, title)
                has_data[key] = has_data.get(key, False) or bool(stack.query(expr))
    empty = {title for (_, title), found in has_data.items() if not found}
    assert empty <= EXPECTED_EMPTY.keys(), (
        f"panels without data: {sorted(empty - EXPECTED_EMPTY.keys())}"
    )
    stale = EXPECTED_EMPTY.keys() - {title for _, title in has_data}
    assert not stale, f"EXPECTED_EMPTY names panels that no longer exist: {sorted(stale)}"
