"""The expected cross-zone families of SPEC section 13, scraped from a served snapshot."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from exporter.engine import DataPlane
from exporter.metrics.families import (
    CROSS_ZONE_PRICE_PER_GIB,
    SERVICE_CROSS_ZONE_RATIO,
    SERVICE_ZONE_CROSS_ZONE_RATIO,
)
from tests.conftest import EXAMPLES_DIR, exporter_command
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, scrape

DEMO = EXAMPLES_DIR / "demo-cluster.json"
CHECKOUT = {"namespace": "payments", "service": "checkout", "address_type": "IPv4"}


def _evaluated(dataplanes: str) -> dict[tuple[str, str], Any]:
    completed = subprocess.run(
        [*exporter_command(), "evaluate", "--snapshot", str(DEMO), "--dataplane", dataplanes],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return {
        (entry["namespace"], entry["name"]): entry["cross_zone"]
        for entry in json.loads(completed.stdout)["services"]
    }


def test_series_carry_what_evaluate_prints(serve_snapshot: ServeSnapshot) -> None:
    """effective and floor per data plane, effective per client zone: evaluate's numbers."""
    planes = (DataPlane.KUBE_PROXY, DataPlane.ISTIO, DataPlane.CILIUM_NO_TOPOLOGY)
    with serve_snapshot(json.loads(DEMO.read_text()), dataplanes=planes) as exporter:
        metrics = scrape(base_url(exporter))
    document = _evaluated(",".join(planes))
    exported = {
        (labels["namespace"], labels["service"])
        for labels in metrics.labelled(SERVICE_CROSS_ZONE_RATIO.name)
    }
    # serve exports Services with a hint mechanism, hints or config issues: most of them.
    assert len(exported) >= 4
    for (namespace, name), cross_zone in document.items():
        if (namespace, name) not in exported:
            continue
        identity = {"namespace": namespace, "service": name, "address_type": "IPv4"}
        assert isinstance(cross_zone, dict)
        for dataplane, figures in cross_zone.items():
            for scenario in ("effective", "floor"):
                assert metrics.value(
                    SERVICE_CROSS_ZONE_RATIO.name, **identity, dataplane=dataplane,
                    scenario=scenario,
                ) == figures[scenario]  # fmt: skip
            zones = {
                labels["zone"]: metrics.value(SERVICE_ZONE_CROSS_ZONE_RATIO.name, **labels)
                for labels in metrics.labelled(
                    SERVICE_ZONE_CROSS_ZONE_RATIO.name, **identity, dataplane=dataplane
                )
            }
            assert zones == {zone: share["effective"] for zone, share in figures["zones"].items()}
    # checkout under istio: PreferClose and endpoints in every zone keep it in its zone.
    assert (
        metrics.value(
            SERVICE_CROSS_ZONE_RATIO.name, **CHECKOUT, dataplane="istio", scenario="effective"
        )
        == 0.0
    )


def test_price_only_when_given(serve_snapshot: ServeSnapshot) -> None:
    with serve_snapshot(json.loads(DEMO.read_text())) as exporter:
        assert scrape(base_url(exporter)).value(CROSS_ZONE_PRICE_PER_GIB.name) is None
    with serve_snapshot(json.loads(DEMO.read_text()), cross_zone_price_per_gib=0.02) as exporter:
        assert scrape(base_url(exporter)).value(CROSS_ZONE_PRICE_PER_GIB.name) == 0.02


def test_series_growth_stays_within_a_quarter_at_the_benchmark_shape() -> None:
    """The benchmark's cluster shape, scaled down: the two families add at most 25% to the
    exposition (issue 19's budget; 204,080 -> 236,490 at full size, +15.9%)."""
    import msgspec  # noqa: PLC0415

    from bench.cluster import ClusterSize, cluster_objects  # noqa: PLC0415
    from exporter.metrics.exposition import ExpositionRenderer, Format  # noqa: PLC0415
    from exporter.pipeline.evaluator import Evaluator  # noqa: PLC0415
    from exporter.sources.snapshot import parse_snapshot  # noqa: PLC0415
    from exporter.state.store import ClusterStore  # noqa: PLC0415

    objects = list(cluster_objects(ClusterSize(nodes=60, services=300, endpoints=4500)))
    snapshot = parse_snapshot("bench", msgspec.json.encode({"kind": "List", "items": objects}))
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store)
    evaluator.step()
    body = b"".join(
        ExpositionRenderer(lambda: evaluator.state, ready=lambda: True).render(Format.TEXT)
    )
    samples = [line for line in body.split(b"\n") if line and not line.startswith(b"#")]
    names = (SERVICE_CROSS_ZONE_RATIO.name.encode(), SERVICE_ZONE_CROSS_ZONE_RATIO.name.encode())
    added = sum(1 for line in samples if line.split(b"{", 1)[0] in names)
    assert added > 0
    assert added <= 0.25 * (len(samples) - added)
