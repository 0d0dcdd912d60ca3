"""Zone-loss forecasts with a zone label per Node (issue 22, item 2): bounded work, said so.

Each zone's view is the cluster without it, so building them costs zones x nodes. Beyond
MAX_ZONE_LOSS_ZONES zone labels none is built, and explain, the status page and the
metric's help say so. The work is bounded by counting what the zone-loss code reads, never
by timing it.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from bench.zones import zone_objects, zone_snapshot
from exporter.engine import allocation
from exporter.engine.model import Node
from exporter.engine.whatif import forecast, zoneloss
from exporter.engine.whatif.zoneloss import MAX_ZONE_LOSS_ZONES
from exporter.metrics.families import ZONE_LOSS_SERVICES_LOSING_HINTS
from exporter.pipeline.evaluator import Evaluator
from exporter.run import serve
from exporter.run.serve import Exporter, ServeOptions
from exporter.sources.snapshot import parse_snapshot
from exporter.state.result import ClusterResult
from exporter.state.store import ClusterStore
from exporter.web.table import status_view
from tests.conftest import PROJECT_ROOT, exporter_command
from tests.scrape import base_url, http_get, running_exporter, scrape, wait_until


class Reads:
    """Nodes and endpoints the zone-loss code hands to the engine's whole-cluster functions,
    and the zone minimums the allocation checks compute (margins ask for many counts)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.items = 0
        self.minimums = 0
        for module, name in (
            (zoneloss, "cluster_capacity"),
            (zoneloss, "ready_nodes"),
            (forecast, "ready_hint_sets"),
        ):
            monkeypatch.setattr(module, name, self._counting(getattr(module, name)))
        zone_minimum = allocation.zone_minimum

        def counted_minimum(ratio: float, endpoints: int) -> int:
            self.minimums += 1
            return zone_minimum(ratio, endpoints)

        monkeypatch.setattr(allocation, "zone_minimum", counted_minimum)

    def _counting(self, function: Callable[[Any], Any]) -> Callable[[Iterable[Any]], Any]:
        def counted(items: Iterable[Any]) -> Any:
            listed = list(items)
            self.items += len(listed)
            return function(listed)

        return counted


def _evaluated(zones: int) -> tuple[ClusterStore, tuple[Node, ...], Evaluator, ClusterResult]:
    snapshot = parse_snapshot("zones.json", zone_snapshot(zones))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store)
    return store, snapshot.nodes, evaluator, evaluator.step()


def _resized(node: Node) -> Node:
    cpu = node.allocatable_cpu or Fraction(0)
    return dataclasses.replace(node, allocatable_cpu=cpu + 1)


@pytest.mark.parametrize("zones", [2 * MAX_ZONE_LOSS_ZONES, 4 * MAX_ZONE_LOSS_ZONES])
def test_work_grows_with_the_cluster_not_its_square(
    zones: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    store, nodes, evaluator, state = _evaluated(zones)
    # One node's CPU changes, then one node leaves: what once took 24 GB at 10,000 zones.
    store.upsert_node(_resized(nodes[0]))
    evaluator.step()
    store.delete_node(nodes[1].name)
    after = evaluator.step()
    # Zones x nodes would be 40,000 and 160,000; a few passes over the nodes stay linear.
    assert reads.items <= 4 * zones
    # The enabled auto Service's margin asks ~zones/5 counts: per zone, that was quadratic.
    assert reads.minimums <= 10 * zones
    assert state.zone_loss_views == after.zone_loss_views == ()
    assert state.zone_loss_skipped == zones
    assert after.zone_loss_skipped == zones - 1


def test_at_the_cap_every_zone_is_forecast() -> None:
    *_, state = _evaluated(MAX_ZONE_LOSS_ZONES)
    assert state.zone_loss_skipped == 0
    assert len(state.zone_loss_views) == MAX_ZONE_LOSS_ZONES
    # The enabled auto Service with one endpoint per zone: losing any zone leaves N-1
    # endpoints for N-1 zones of equal shares, still feasible, so no zone is counted.
    losing = status_view(state).zone_loss
    assert len(losing) == MAX_ZONE_LOSS_ZONES
    assert status_view(state).zone_loss_note == ""


def test_beyond_the_cap_the_status_page_and_the_metric_say_so() -> None:
    zones = MAX_ZONE_LOSS_ZONES + 1
    *_, state = _evaluated(zones)
    view = status_view(state)
    assert view.zone_loss == {}
    assert f"not forecast: {zones} zone labels" in view.zone_loss_note
    assert f"more than {MAX_ZONE_LOSS_ZONES} zone labels" in ZONE_LOSS_SERVICES_LOSING_HINTS.help


def test_beyond_the_cap_explain_says_so(tmp_path: Path) -> None:
    zones = MAX_ZONE_LOSS_ZONES + 1
    snapshot = tmp_path / "zones.json"
    snapshot.write_bytes(zone_snapshot(zones))
    completed = subprocess.run(
        [*exporter_command(), "explain", "--snapshot", str(snapshot), "--color", "never"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=PROJECT_ROOT,
    )
    assert completed.returncode in {0, 1}, completed.stderr
    zone_loss = [line for line in completed.stdout.splitlines() if "Zone loss:" in line]
    assert len(zone_loss) == 1
    assert f"not forecast: {zones} zone labels" in " ".join(zone_loss[0].split())


def test_the_generator_gives_one_node_per_zone() -> None:
    objects: Iterator[dict[str, Any]] = zone_objects(5)
    nodes = [obj for obj in objects if obj["kind"] == "Node"]
    zones = {node["metadata"]["labels"]["topology.kubernetes.io/zone"] for node in nodes}
    assert len(nodes) == len(zones) == 5
    assert orjson.loads(zone_snapshot(5))["kind"] == "List"


@pytest.mark.server
def test_the_live_exporter_reports_the_cap(tmp_path: Path) -> None:
    """serve --snapshot: the status page says so, the metric has no series, a log line."""
    zones = MAX_ZONE_LOSS_ZONES + 1
    snapshot = tmp_path / "zones.json"
    snapshot.write_bytes(zone_snapshot(zones))
    options = ServeOptions(listen_address="127.0.0.1:0", snapshot=str(snapshot))
    with capture_logs() as logs, running_exporter(options) as exporter:
        url = base_url(exporter)
        wait_until(lambda: http_get(f"{url}/readyz")[0] == 200)
        status, page = http_get(f"{url}/")
        metrics = scrape(url)
    assert status == 200
    assert f"If a zone is lost: not forecast: {zones} zone labels" in " ".join(page.split())
    assert not metrics.series("topology_hints_zone_loss_services_losing_hints")
    assert metrics.value("topology_hints_sufficient_node_info") == 1
    assert {
        "event": "zone-loss forecast not made: too many zone labels",
        "zones": zones,
        "cap": MAX_ZONE_LOSS_ZONES,
        "log_level": "warning",
    } in logs


@pytest.mark.server
def test_the_start_lines_are_logged_before_readyz_says_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever waits for /readyz finds the start's lines ("ready", the cap's warning) written:
    a test capturing the log after readiness once reconfigured structlog under a line being
    written, and the exporter's evaluator thread died of it."""
    snapshot = tmp_path / "zones.json"
    snapshot.write_bytes(zone_snapshot(MAX_ZONE_LOSS_ZONES + 1))
    exporter = Exporter(ServeOptions(listen_address="127.0.0.1:0", snapshot=str(snapshot)))
    ready_when_logged: dict[str, bool] = {}

    def record(event: str, **_fields: object) -> None:
        ready_when_logged[event] = exporter.readiness()[0]

    class Recorder:
        """Every level records (an `exception` line too, which would name a failure)."""

        def __getattr__(self, _level: str) -> Callable[..., None]:
            return record

    monkeypatch.setattr(serve, "logger", Recorder())
    exporter.start()
    try:
        wait_until(lambda: exporter.readiness()[0])
    finally:
        exporter.stop()
    assert ready_when_logged["ready"] is False
    assert ready_when_logged["zone-loss forecast not made: too many zone labels"] is False


def test_zones_without_an_entrys_endpoints_share_one_hint_set() -> None:
    """What a node change re-decides zone loss from: a copy per zone only where the entry
    loses endpoints, so it grows with the entry's zones, not the cluster's."""
    *_, state = _evaluated(MAX_ZONE_LOSS_ZONES)
    (forecast,) = state.services[("shop", "close-few")].forecasts
    # Today's hints, then one per zone: 3 zones hold an endpoint of close-few.
    assert len(forecast.converged_ready) == 1 + MAX_ZONE_LOSS_ZONES
    assert len({id(hints) for hints in forecast.converged_ready[1:]}) == 3 + 1
