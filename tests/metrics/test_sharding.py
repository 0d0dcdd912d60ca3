"""Sharding by Service: N shards together export exactly what one exporter does."""

from __future__ import annotations

from collections import Counter

import pytest

from exporter.metrics.families import (
    CONTROLLER_EVENTS_TOTAL,
    HINT_FAMILIES,
    NODE_PROXY_SERVICES,
    SAME_ON_EVERY_SHARD,
    SUFFICIENT_NODE_INFO,
    ZONE_CPU_RATIO,
    ZONE_LOSS_SERVICES_LOSING_HINTS,
)
from exporter.metrics.family import Scope
from exporter.run.serve import resolve_shard, shard_of
from tests.conftest import EXAMPLES_DIR
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import Scrape, SeriesKey, base_url, scrape

SHARDS = 3
# Figures that describe the exporter process rather than the cluster.
PROCESS_LOCAL = ("process_", "python_", "topology_hints_last_evaluation", "topology_hints_objects",
                 "topology_hints_shard_ordinal", "topology_hints_total_shards",
                 "topology_hints_evaluation_duration")  # fmt: skip


def _cluster_series(result: Scrape) -> dict[SeriesKey, float]:
    return {
        key: value for key, value in result.samples.items() if not key[0].startswith(PROCESS_LOCAL)
    }


def _per_service(series: dict[SeriesKey, float]) -> dict[SeriesKey, float]:
    return {key: value for key, value in series.items() if any(k == "service" for k, _ in key[1])}


def _families(series: dict[SeriesKey, float], names: frozenset[str]) -> dict[SeriesKey, float]:
    return {key: value for key, value in series.items() if key[0] in names}


# Counts over Services: each shard counts its own, and the shards' counts add up.
SUMMED = frozenset(
    {
        NODE_PROXY_SERVICES.name,
        ZONE_LOSS_SERVICES_LOSING_HINTS.name,
        CONTROLLER_EVENTS_TOTAL.name,
    }
)


def test_union_of_shards_equals_one_exporter(serve_snapshot: ServeSnapshot) -> None:
    """Per-Service series split over the shards without overlap; the Node-only families come
    from shard 0 alone; counts over Services add up."""
    import json  # noqa: PLC0415

    snapshot = json.loads((EXAMPLES_DIR / "demo-cluster.json").read_text())
    with serve_snapshot(snapshot, all_services=True) as exporter:
        whole = _cluster_series(scrape(base_url(exporter)))
    shards = []
    for shard in range(SHARDS):
        with serve_snapshot(
            snapshot, all_services=True, shard=shard, total_shards=SHARDS
        ) as exporter:
            result = scrape(base_url(exporter))
            assert result.value("topology_hints_shard_ordinal") == shard
            assert result.value("topology_hints_total_shards") == SHARDS
            shards.append(_cluster_series(result))
    union: dict[SeriesKey, float] = {}
    for series in shards:
        union.update(_per_service(series))
    assert union == _per_service(whole)
    counts = Counter(key for series in shards for key in _per_service(series))
    assert set(counts.values()) == {1}, "a per-Service series came from two shards"
    assert sum(1 for series in shards if _per_service(series)) >= 2, "sharding split nothing"

    node_only = _families(whole, SAME_ON_EVERY_SHARD)
    assert {SUFFICIENT_NODE_INFO.name, ZONE_CPU_RATIO.name} <= {key[0] for key in node_only}
    assert _families(shards[0], SAME_ON_EVERY_SHARD) == node_only
    for series in shards[1:]:
        assert _families(series, SAME_ON_EVERY_SHARD) == {}

    summed: Counter[SeriesKey] = Counter()
    for series in shards:
        summed.update(_families(series, SUMMED))
    assert dict(summed) == _families(whole, SUMMED)


def test_every_cluster_or_node_family_says_how_shards_share_it() -> None:
    """A new family over Nodes or over every Service is either shard 0's or summed."""
    cluster_level = {
        family.name for family in HINT_FAMILIES if family.scope in {Scope.CLUSTER, Scope.NODE}
    }
    assert cluster_level == SAME_ON_EVERY_SHARD | SUMMED


def test_node_proxy_counts_add_up_across_shards(serve_snapshot: ServeSnapshot) -> None:
    """Per node and mode, the shards' Service counts sum to the unsharded count."""
    import json  # noqa: PLC0415

    snapshot = json.loads((EXAMPLES_DIR / "demo-cluster.json").read_text())
    name = "topology_hints_node_proxy_services"
    with serve_snapshot(snapshot) as exporter:
        whole = scrape(base_url(exporter)).series(name)
    total: Counter[frozenset[tuple[str, str]]] = Counter()
    for shard in range(SHARDS):
        with serve_snapshot(snapshot, shard=shard, total_shards=SHARDS) as exporter:
            for labels, value in scrape(base_url(exporter)).series(name).items():
                total[labels] += int(value)
    assert dict(total) == {labels: int(value) for labels, value in whole.items()}


def test_shard_assignment_is_stable_and_spread() -> None:
    """The same Service always lands on the same shard, and shards share the load."""
    keys = [(f"ns-{i % 7}", f"svc-{i}") for i in range(3000)]
    first = [shard_of(ns, name, SHARDS) for ns, name in keys]
    assert first == [shard_of(ns, name, SHARDS) for ns, name in keys]
    assert shard_of("shop", "cart", 3) == shard_of("shop", "cart", 3)
    spread = Counter(first)
    assert set(spread) == {0, 1, 2}
    assert min(spread.values()) > 900


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({"POD_NAME": "topology-hints-exporter-2"}, 2), ({"HOSTNAME": "exporter-10"}, 10)],
)
def test_auto_shard_comes_from_the_pod_name(environ: dict[str, str], expected: int) -> None:
    """--shard auto reads the StatefulSet ordinal at the end of POD_NAME (or HOSTNAME)."""
    assert resolve_shard("auto", environ) == expected
    with pytest.raises(ValueError, match="cannot derive"):
        resolve_shard("auto", {"POD_NAME": "exporter"})
