"""Live: deleting a Node moves the margins and the zone loss as `what-if --lose-node` predicts."""

from __future__ import annotations

import json
import math
from pathlib import Path

from exporter.engine.whatif.feasibility import Feasibility, endpoint_margin
from exporter.engine.whatif.scenario import Cluster, LoseNodes
from exporter.engine.whatif.zoneloss import zone_loss, zone_loss_views
from exporter.metrics import families as f
from exporter.sources.snapshot import load_snapshot
from tests.k8s_objects import (
    Obj,
    as_list,
    endpoint_slice,
    service,
    three_zone_nodes,
    zone_endpoints,
)
from tests.kubeapi import FakeKubeAPI
from tests.live.conftest import StartExporter, eventually
from tests.results import what_if_of
from tests.scrape import Scrape

MARGIN = f.SERVICE_ENDPOINT_MARGIN.name
ZONE_LOSS = f.ZONE_LOSS_SERVICES_LOSING_HINTS.name
# Every endpoint runs on node-<zone>-0, so the drained node takes no endpoint with it: only
# the zone shares move (4/4/4 nodes of 4 cores -> zone-a holds 20% instead of 33%).
DRAINED = "node-a-1"
COUNTS = (5, 7, 9)

Prediction = tuple[dict[str, dict[str, float]], dict[str, float]]


def _objects() -> list[Obj]:
    objects: list[Obj] = [*three_zone_nodes(per_zone=2)]
    for count in COUNTS:
        name = f"web-{count}"
        objects.append(service("shop", name, topology_mode="Auto"))
        objects.append(
            endpoint_slice("shop", f"{name}-1", name, zone_endpoints(count, prefix=f"10.0.{count}"))
        )
    return objects


def _predicted(objects: list[Obj], tmp_path: Path) -> Prediction:
    """Margins per Service and zone loss after `--lose-node DRAINED`, from the what-if pipeline."""
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(as_list(objects)))
    snapshot = load_snapshot(str(path))
    cluster = Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices)
    answer = what_if_of(cluster, [LoseNodes((DRAINED,))])
    feasibility = Feasibility(answer.after.capacity)
    # Every entry is on both sides of a lost node: the changes hold each one's outcome.
    after = [change.after for change in answer.changes]
    margins: dict[str, dict[str, float]] = {}
    for outcome in after:
        margin = endpoint_margin(outcome.verdict, feasibility)
        if margin is not None:
            margins[outcome.verdict.service.name] = {"down": margin.down, "up": margin.up}
    remaining = [node for node in snapshot.nodes if node.name != DRAINED]
    return margins, {
        zone: float(count) for zone, count in zone_loss(after, zone_loss_views(remaining)).items()
    }


def _observed(result: Scrape) -> Prediction:
    margins: dict[str, dict[str, float]] = {}
    for labels, value in result.series(MARGIN).items():
        label = dict(labels)
        margins.setdefault(label["service"], {})[label["direction"]] = value
    losses = {dict(labels)["zone"]: value for labels, value in result.series(ZONE_LOSS).items()}
    return margins, losses


def test_deleting_a_node_moves_margins_and_zone_loss_as_predicted(
    kube_api: FakeKubeAPI, start_exporter: StartExporter, tmp_path: Path
) -> None:
    objects = _objects()
    kube_api.load(objects)
    predicted_margins, predicted_loss = _predicted(objects, tmp_path)
    # The table of section 3 for these shares: 5 becomes feasible, 7 is refused, 9 gains
    # room on both sides; losing zone-a would now cost web-5 its hints.
    assert predicted_margins == {
        "web-5": {"down": 0, "up": 0},
        "web-9": {"down": 1, "up": 2},
    }
    assert predicted_loss == {"zone-a": 1.0, "zone-b": 0.0, "zone-c": 1.0}
    with start_exporter() as exporter:
        expected_before = (
            {"web-7": {"down": 1, "up": 0}, "web-9": {"down": 0, "up": 1}},
            {"zone-a": 0.0, "zone-b": 1.0, "zone-c": 1.0},
        )
        eventually(exporter, lambda r: _observed(r) == expected_before)
        kube_api.delete("Node", None, DRAINED)
        # Fails, with the last scrape, unless both move to exactly the prediction.
        eventually(exporter, lambda r: _observed(r) == (predicted_margins, predicted_loss))


def test_margin_up_is_infinite_above_six_endpoints_per_zone(
    kube_api: FakeKubeAPI, start_exporter: StartExporter
) -> None:
    kube_api.load(
        [
            *three_zone_nodes(),
            service("shop", "web", topology_mode="Auto"),
            endpoint_slice("shop", "web-1", "web", zone_endpoints(19)),
        ]
    )
    with start_exporter() as exporter:
        result = eventually(exporter, lambda r: bool(r.series(MARGIN)))
        assert _observed(result)[0] == {"web": {"down": 7, "up": math.inf}}
