"""The live exporter's per-entry forecasts agree with the what-if scenarios they shortcut."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.engine.capacity import cluster_capacity
from exporter.engine.whatif.feasibility import Feasibility, endpoint_margin
from exporter.engine.whatif.outcome import Change
from exporter.engine.whatif.scenario import Cluster, LoseZone
from exporter.sources.snapshot import load_snapshot
from tests.conftest import CONFORMANCE_DIR, EXAMPLES_DIR
from tests.results import result_of, what_if_of

SNAPSHOTS = [
    *sorted(CONFORMANCE_DIR.glob("*.snapshot.json")),
    *sorted(EXAMPLES_DIR.glob("*.json")),
]


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda path: path.name.split(".")[0])
def test_forecasts_match_lose_zone_and_margins(path: Path) -> None:
    """Per entry: the zones whose loss the forecast names are exactly those whose
    `what-if --lose-zone` change is loses-hints, and the margin is endpoint_margin's."""
    snapshot = load_snapshot(str(path))
    cluster = Cluster(snapshot.nodes, snapshot.services, snapshot.endpoint_slices)
    capacity = cluster_capacity(cluster.nodes)
    # The live exporter's forecasts: those of the pipeline's step over the cluster.
    result = result_of(cluster.nodes, cluster.services, cluster.slices)
    views = result.zone_loss_views
    forecasts = {}
    for key, service_result in result.services.items():
        for verdict, forecast in service_result.entries():
            forecasts[verdict.key] = forecast
            assert forecast.margin == endpoint_margin(verdict, Feasibility(capacity)), key
    expected: dict[tuple[str, str, str], set[str]] = {key: set() for key in forecasts}
    for view in views:
        for change in what_if_of(cluster, [LoseZone(view.zone)]).changes:
            if change.change is Change.LOSES_HINTS:
                expected[change.key].add(view.zone)
    assert {key: set(f.zones_losing_hints) for key, f in forecasts.items()} == expected
