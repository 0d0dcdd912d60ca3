"""End to end: the dashboards' "Cross-zone traffic" queries, evaluated by real Prometheus over
the real exporter, a ztunnel-shaped target whose byte counters grow, and the shipped rules.

The expected shares are the exporter's own (section 13's families, `--dataplane kube-proxy`,
a price by flag); the test takes them from `evaluate` on the same snapshot, so the dashboard,
the metrics and `evaluate` are held to one story.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dashboards.crosszone import ROW
from tests.conftest import EXAMPLES_DIR, PROJECT_ROOT, exporter_command, require_binary
from tests.e2e.dashboard_queries import dashboard_queries, row_panel_titles
from tests.e2e.prometheus import PrometheusStack, prometheus_stack
from tests.processes import serving as serving_exporter

RULE_FILE = PROJECT_ROOT / "alerts" / "topology-hints.rules.yaml"
SNAPSHOT = EXAMPLES_DIR / "demo-cluster.json"
# A Service the exporter exports (it asks for hints) whose traffic can stay closer.
NAMESPACE, SERVICE = "shop", "inventory"
GIB = 2**30
PRICE = 0.02

# ztunnel's counters, bytes per second, as (reporter, source zone, destination zone, metric).
ZTUNNEL = "istio_tcp_{}_bytes_total"
FLOWS: dict[tuple[str, str, str, str], float] = {
    ("destination", "eu-west-1a", "eu-west-1a", "sent"): 20_000,
    ("destination", "eu-west-1a", "eu-west-1a", "received"): 20_000,
    ("destination", "eu-west-1a", "eu-west-1b", "sent"): 80_000,
    ("destination", "eu-west-1b", "eu-west-1b", "sent"): 40_000,
    ("destination", "unknown", "eu-west-1b", "sent"): 10_000,  # a client outside the mesh
    (
        "source",
        "eu-west-1a",
        "eu-west-1b",
        "sent",
    ): 80_000,  # the client's ztunnel: the same bytes again
}
# The counters have grown since this long before the test (backfilled, then scraped live).
HISTORY = 600.0
STARTED = time.time() - HISTORY
BACKFILL_STEP = 5.0
SAME_ZONE, CROSS_ZONE, UNKNOWN = 80_000.0, 80_000.0, 10_000.0
MEASURED = CROSS_ZONE / (SAME_ZONE + CROSS_ZONE)
MEASURED_ZONES = {"eu-west-1a": 80_000 / 120_000, "eu-west-1b": 0.0}
DATAPLANE = "kube-proxy"


def evaluated_shares() -> tuple[dict[str, float], dict[str, float]]:
    """What `evaluate --dataplane kube-proxy` expects for shop/frontend: the overall effective
    and floor shares, and the effective share per client zone."""
    document = json.loads(
        subprocess.run(
            [
                *exporter_command(),
                "evaluate",
                "--snapshot",
                str(SNAPSHOT),
                "--dataplane",
                DATAPLANE,
            ],
            check=True,
            capture_output=True,
            timeout=60,
        ).stdout
    )
    (entry,) = (
        entry
        for entry in document["services"]
        if (entry["namespace"], entry["name"], entry["address_type"])
        == (NAMESPACE, SERVICE, "IPv4")
    )
    share = entry["cross_zone"][DATAPLANE]
    zones = {zone: figures["effective"] for zone, figures in share["zones"].items()}
    return {"effective": share["effective"], "floor": share["floor"]}, zones


def ztunnel_series() -> list[tuple[str, str, float]]:
    """(metric, labels, bytes per second) of each ztunnel counter."""
    series = []
    for (reporter, source, destination, name), rate in FLOWS.items():
        labels = (
            f'reporter="{reporter}",source_zone="{source}",destination_zone="{destination}",'
            f'destination_service_namespace="{NAMESPACE}",destination_service_name="{SERVICE}",'
            f'destination_service="{SERVICE}.{NAMESPACE}.svc.cluster.local"'
        )
        series.append((ZTUNNEL.format(name), labels, rate))
    return series


def ztunnel_exposition(now: float) -> str:
    """ztunnel's byte counters at wall-clock time `now`: they started HISTORY seconds before
    the test."""
    elapsed = now - STARTED
    return "".join(
        f"{metric}{{{labels}}} {rate * elapsed:.3f}\n" for metric, labels, rate in ztunnel_series()
    )


def backfill(data: Path, address: str, until: float) -> None:
    """Write the counters' samples from STARTED to `until` into Prometheus's data directory, as
    the ztunnel job's target would have been scraped: rate(...[5m]) then sees five full minutes
    at once instead of after five minutes of the test."""
    promtool = require_binary("promtool")
    lines = []
    for metric in sorted({metric for metric, _, _ in ztunnel_series()}):
        lines.append(f"# TYPE {metric.removesuffix('_total')} counter")
        for name, labels, rate in ztunnel_series():
            if name != metric:
                continue
            target = f'{labels},instance="{address}",job="ztunnel"'
            at = STARTED
            while at < until:
                lines.append(f"{metric}{{{target}}} {rate * (at - STARTED):.3f} {at:.3f}")
                at += BACKFILL_STEP
    data.mkdir(parents=True, exist_ok=True)
    source = data.parent / "backfill.om"
    source.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
        check=True,
        capture_output=True,
        timeout=60,
    )


@contextmanager
def serving(exposition: Callable[[float], str]) -> Iterator[str]:
    """A /metrics endpoint on a free loopback port serving `exposition(wall-clock time)`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = exposition(time.time()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def values(
    stack: PrometheusStack, expr: str, label: str, *, service: str | None = None
) -> dict[str, float]:
    """The instant query's values by one label (of one Service's series, if named)."""
    return {
        series["metric"].get(label, ""): float(series["value"][1])
        for series in stack.query(expr)
        if service is None or series["metric"].get("service") == service
    }


def cross_zone_queries() -> dict[str, list[str]]:
    """Each panel title of the Cross-zone rows (both dashboards) -> its queries."""
    titles = row_panel_titles(ROW)
    found: dict[str, list[str]] = {}
    for _, title, expr in dashboard_queries(NAMESPACE, SERVICE):
        if title in titles:
            found.setdefault(title, []).append(expr)
    return found


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[PrometheusStack]:
    with (
        serving_exporter(
            "--snapshot",
            str(SNAPSHOT),
            "--dataplane",
            DATAPLANE,
            "--cross-zone-price-per-gib",
            str(PRICE),
            log=tmp_path / "exporter.log",
        ) as exporter,
        serving(ztunnel_exposition) as ztunnel,
    ):
        backfill(tmp_path / "stack" / "prometheus-data", ztunnel, time.time() - 2)
        with prometheus_stack(
            exporter.address,
            RULE_FILE,
            tmp_path / "stack",
            other_jobs={"ztunnel": [ztunnel]},
        ) as running:
            yield running


@pytest.mark.e2e
def test_cross_zone_panels_show_the_expected_numbers(stack: PrometheusStack) -> None:
    """Each Cross-zone panel's query returns the shares, bytes and costs the synthetic traffic
    and the expected shares imply."""
    queries = cross_zone_queries()
    assert len(queries) >= 10, sorted(queries)
    stack.wait_for(
        lambda: (
            stack.query("count_over_time(istio_tcp_sent_bytes_total[1m]) >= 5")
            and stack.query("topology_hints:service_avoidable_cross_zone_cost:per_day")
        ),
        60,
        what="five scrapes of ztunnel and the cost rules",
    )
    expected_shares, expected_zone_shares = evaluated_shares()
    assert expected_shares["effective"] > expected_shares["floor"], "nothing avoidable to show"
    exact = pytest.approx
    # Counters read at scrape time grow a little between scrapes: rates are within a few %.
    close: Callable[[Any], Any] = lambda expected: pytest.approx(expected, rel=0.05)  # noqa: E731
    bytes_ = SAME_ZONE + CROSS_ZONE
    avoidable = {
        "expected": bytes_ * (expected_shares["effective"] - expected_shares["floor"]),
        "measured": bytes_ * (MEASURED - expected_shares["floor"]),
    }

    (expected, measured) = queries["Cross-zone share: expected vs measured"]
    assert values(stack, expected, "scenario") == exact(expected_shares)
    assert values(stack, measured, "") == exact({"": MEASURED})

    (expected, measured) = queries["Cross-zone share per client zone"]
    assert values(stack, expected, "zone") == exact(expected_zone_shares)
    assert values(stack, measured, "zone") == exact(MEASURED_ZONES)

    (by_locality,) = queries["Bytes by locality"]
    assert values(stack, by_locality, "locality") == close(
        {"same-zone": SAME_ZONE, "cross-zone": CROSS_ZONE, "unknown": UNKNOWN}
    )
    (rate,) = queries["Avoidable cross-zone bytes"]
    assert values(stack, rate, "basis") == close(avoidable)
    for title, seconds, price in (
        ("Avoidable bytes per hour", 3600, 0),
        ("Avoidable bytes per day", 86400, 0),
        ("Avoidable cost per hour", 3600, PRICE),
        ("Avoidable cost per day", 86400, PRICE),
    ):
        (query,) = queries[title]
        scale = seconds * (price / GIB if price else 1)
        assert values(stack, query, "basis") == close(
            {basis: value * scale for basis, value in avoidable.items()}
        ), title

    # The overview: totals and the top Services, both bases.
    per_day = {basis: value * 86400 * PRICE / GIB for basis, value in avoidable.items()}
    (total,) = queries["Avoidable cross-zone cost per day"]
    assert values(stack, total, "basis") == close(per_day)
    (total,) = queries["Avoidable cross-zone bytes per day"]
    assert values(stack, total, "basis") == close(
        {basis: value * 86400 for basis, value in avoidable.items()}
    )
    (top,) = queries["Top Services by avoidable cost"]
    rows = stack.query(top)
    assert {(row["metric"]["service"], row["metric"]["basis"]) for row in rows} == {
        (SERVICE, "expected"),
        (SERVICE, "measured"),
    }
    (shares,) = queries["Cross-zone share: expected and measured"]
    # The overview lists every Service the exporter exports: this one's rows.
    assert values(stack, shares, "scenario", service=SERVICE) == exact(
        {**expected_shares, "measured": MEASURED}
    )
