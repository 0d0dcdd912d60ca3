"""Benchmark: the status page on the 10,000-Service cluster, on the server and in Chromium.

    python bench/status_page.py                 # server-side render times
    python bench/status_page.py --browser       # plus time until usable in headless Chromium

The state is what `serve` publishes for bench/cluster.py's cluster; the server figures time
the WSGI handler (no network), the first request of a state including building its rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize, cluster_objects  # noqa: E402

from exporter.http.server import MetricsServer  # noqa: E402
from exporter.pipeline.evaluator import Evaluator  # noqa: E402
from exporter.runtime import tune_garbage_collector  # noqa: E402
from exporter.sources.snapshot import parse_snapshot  # noqa: E402
from exporter.state.result import ClusterResult  # noqa: E402
from exporter.state.store import ClusterStore  # noqa: E402
from exporter.web.app import StatusPages  # noqa: E402


def build_state(size: ClusterSize) -> tuple[ClusterResult, ClusterResult]:
    """The published state, and the next one after one Service changed."""
    data = msgspec.json.encode({"kind": "List", "items": list(cluster_objects(size))})
    snapshot = parse_snapshot("bench", data)
    store = ClusterStore()
    store.replace_nodes(snapshot.nodes)
    store.replace_services(snapshot.services)
    store.replace_endpoint_slices(snapshot.endpoint_slices)
    evaluator = Evaluator(store)
    first = evaluator.step()
    changed = snapshot.services[0]
    store.upsert_service(replace(changed, topology_mode_annotation="Auto"))
    return first, evaluator.step()


def server_times(
    state: ClusterResult, after_change: ClusterResult
) -> list[tuple[str, float, float, int]]:
    """(what, wall seconds, CPU seconds, bytes) for each route; `cold`: a state's first request.

    CPU time is printed beside wall time: on a shared machine wall time grows with the load.
    """
    first_service = next(iter(state.services))
    routes = [
        ("/ (cold: builds the rows)", "/", ""),
        ("/", "/", ""),
        ("/ (after one Service changed)", "/", "changed"),
        ("/?page=50", "/", "page=50"),
        ("/?q=svc-99&problem=any", "/", "q=svc-99&problem=any"),
        ("/?per_page=1000", "/", "per_page=1000"),
        ("/services/NS/NAME", f"/services/{first_service[0]}/{first_service[1]}", ""),
        ("/api/v1/evaluation (cold)", "/api/v1/evaluation", ""),
        ("/api/v1/evaluation", "/api/v1/evaluation", ""),
    ]
    current = [state]
    pages = StatusPages(lambda: current[0], readiness=lambda: (True, "ready"))
    results = []
    for label, path, query in routes:
        if query == "changed":
            current[0] = after_change
        started, cpu = time.perf_counter(), time.process_time()
        body = pages.handle(path, "" if query == "changed" else query)[2]
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        results.append((label, wall, cpu, len(body)))
    return results


def browser_times(state: ClusterResult) -> list[tuple[str, float]]:
    """Navigation until the load event, and until the table's last row exists."""
    from tests.browser.chromium import chromium  # noqa: PLC0415 - only with --browser

    pages = StatusPages(lambda: state, readiness=lambda: (True, "ready"))
    server = MetricsServer(pages, "127.0.0.1:0")
    server.start()
    results = []
    try:
        with tempfile.TemporaryDirectory() as profile, chromium(Path(profile) / "p") as driver:
            # The browser's own first navigation (renderer start-up) is not the page's cost.
            driver.get(server.url + "static/status.css")
            for label, path in (
                ("/ (cold: builds the rows)", "/"),
                ("/", "/"),
                ("/?per_page=1000", "/?per_page=1000"),
                ("/?page=50", "/?page=50"),
            ):
                started = time.perf_counter()
                driver.get(server.url.rstrip("/") + path)  # returns after the load event
                driver.execute_script(
                    "return document.querySelector('table.services tbody tr:last-child') !== null"
                )
                wall = time.perf_counter() - started
                timing = driver.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "return [n.domInteractive, n.loadEventEnd];"
                )
                results.append((f"{label}: until usable (wall)", wall))
                results.append((f"{label}: domInteractive (navigation timing)", timing[0] / 1000))
    finally:
        server.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--services", type=int, default=10000)
    parser.add_argument("--endpoints", type=int, default=150000)
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium")
    args = parser.parse_args(argv)
    tune_garbage_collector()
    size = ClusterSize(nodes=args.nodes, services=args.services, endpoints=args.endpoints)
    started = time.perf_counter()
    state, after_change = build_state(size)
    built = time.perf_counter() - started
    print(f"state of {len(state.services):,} Services built in {built:.1f} s")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'server, WSGI handler':<52} {'wall s':>8} {'CPU s':>8} {'bytes':>10}")
    for label, wall, cpu, size_bytes in server_times(state, after_change):
        print(f"{label:<52} {wall:>8.3f} {cpu:>8.3f} {size_bytes:>10,}")
    if args.browser:
        print(f"{'headless Chromium':<52} {'seconds':>8}")
        for label, seconds in browser_times(state):
            print(f"{label:<52} {seconds:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
