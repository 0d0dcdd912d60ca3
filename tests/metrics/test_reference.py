"""docs/metrics.md, the family declarations and a real scrape agree."""

from __future__ import annotations

import subprocess

from exporter.metrics.families import FAMILIES
from exporter.metrics.reference import markdown
from tests.conftest import PROJECT_ROOT, require_binary
from tests.k8s_objects import as_list, endpoint_slice, service, three_zone_nodes, zone_endpoints
from tests.metrics.conftest import ServeSnapshot
from tests.scrape import base_url, http_get, scrape


def test_docs_page_is_generated_from_the_declarations() -> None:
    """docs/metrics.md is exactly what the generator writes from families/."""
    assert (PROJECT_ROOT / "docs" / "metrics.md").read_text() == markdown()


def test_scrape_exposes_exactly_the_documented_families(serve_snapshot: ServeSnapshot) -> None:
    """A real scrape's topology_hints_* families are the documented ones, no more, no less."""
    cluster = as_list(
        three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(9)),
    )
    # With --external-url and a price, so that status_page_info and the price are there too.
    with serve_snapshot(
        cluster, external_url="https://ops.example.com/topology", cross_zone_price_per_gib=0.01
    ) as exporter:
        result = scrape(base_url(exporter))
    exposed = {name for name in result.families if name.startswith("topology_hints_")}
    documented = {
        # The text parser reports counters without their _total suffix.
        family.name.removesuffix("_total")
        for family in FAMILIES
    }
    assert exposed == documented


def test_promtool_check_metrics_is_clean(serve_snapshot: ServeSnapshot) -> None:
    """`promtool check metrics` on a real scrape reports no problem and no warning."""
    promtool = require_binary("promtool")
    cluster = as_list(
        three_zone_nodes(),
        service("shop", "web", topology_mode="Auto"),
        endpoint_slice("shop", "web-1", "web", zone_endpoints(8, hinted=False)),
        service("shop", "close", traffic_distribution="PreferClose"),
        endpoint_slice("shop", "close-1", "close", zone_endpoints(4, prefix="10.0.5")),
    )
    with serve_snapshot(cluster) as exporter:
        status, body = http_get(base_url(exporter) + "/metrics")
    assert status == 200
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "", checked.stdout
    assert checked.stderr.strip() == "", checked.stderr
