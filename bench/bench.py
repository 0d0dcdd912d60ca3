"""Benchmark: sync, incremental update, scrape and memory on a synthetic cluster.

    python bench/bench.py                      # 5,000 nodes, 10,000 Services, 150,000 endpoints
    python bench/bench.py --nodes 300 --services 600 --endpoints 9000   # a quick run

The test API server runs in a child process with the whole cluster loaded, so it does not
compete with the exporter for the GIL. Every figure is measured in the same run as its
reference, and printed as one table.
"""

from __future__ import annotations

import argparse
import gzip
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from cluster import ClusterSize, ServicePlan, cluster_objects, endpoint_slices, plan  # noqa: E402

from exporter.evaluator import ExporterState  # noqa: E402
from exporter.logs import configure_logging  # noqa: E402
from exporter.runtime import tune_garbage_collector  # noqa: E402
from exporter.serve import Exporter, ServeOptions  # noqa: E402
from tests.kubeapi import FakeKubeAPI  # noqa: E402

RESOURCE_PATHS = {
    "nodes": "/api/v1/nodes",
    "services": "/api/v1/services",
    "endpointslices": "/apis/discovery.k8s.io/v1/endpointslices",
    "events": "/api/v1/events?fieldSelector=involvedObject.kind%3DService",
}


# -- the API server, in a child process ----------------------------------------------------


def _serve_cluster(size: ClusterSize, conn: Connection) -> None:
    api = FakeKubeAPI(history=100_000, bookmark_interval=30.0)
    api.load(cluster_objects(size))
    api.start()
    conn.send(api.port)
    while True:
        command, payload = conn.recv()
        if command == "apply":
            api.apply(payload)
            conn.send(None)
        elif command == "stop":
            api.stop()
            conn.send(None)
            return


@contextmanager
def api_server(size: ClusterSize) -> Iterator[tuple[int, Callable[[dict[str, Any]], None]]]:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve_cluster, args=(size, child), daemon=True)
    process.start()
    port = parent.recv()

    def apply(obj: dict[str, Any]) -> None:
        parent.send(("apply", obj))
        parent.recv()

    try:
        yield port, apply
    finally:
        parent.send(("stop", None))
        parent.recv()
        process.join(10)


def kubeconfig(port: int, directory: Path) -> Path:
    path = directory / f"kubeconfig-{port}"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: bench, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: bench, user: {{token: bench}}}}]
contexts: [{{name: bench, context: {{cluster: bench, user: bench}}}}]
current-context: bench
"""
    )
    return path


# -- measurements --------------------------------------------------------------------------


def get(url: str, headers: dict[str, str] | None = None) -> bytes:
    request = urllib.request.Request(url, headers=headers or {})  # noqa: S310 - loopback only
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310
        return bytes(response.read())


def list_payloads(port: int, page_size: int) -> list[bytes]:
    """Every LIST page the exporter reads at startup, as the API server sends them."""
    pages = []
    for path in RESOURCE_PATHS.values():
        token = ""
        while True:
            separator = "&" if "?" in path else "?"
            url = f"http://127.0.0.1:{port}{path}{separator}limit={page_size}"
            if token:
                url += f"&continue={token}"
            body = get(url)
            pages.append(body)
            token = orjson.loads(body)["metadata"].get("continue") or ""
            if not token:
                break
    return pages


def best_of(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def rss_mib(pid: int) -> tuple[float, float]:
    """(resident, peak resident) in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the exporter exited with {process.returncode}")
        try:
            if get(url + "/readyz"):
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.005)
    raise TimeoutError("exporter not ready")


class StaticCollector(Collector):
    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> Iterator[Any]:
        return iter(self._families)


def measure_subprocess(
    port: int, directory: Path, free_port: int, scrapes: int
) -> dict[str, float]:
    """Initial sync, memory and scrape, on the real command in its own process."""
    config = kubeconfig(port, directory)
    address = f"127.0.0.1:{free_port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--kubeconfig", str(config),
         "--listen-address", address, "--log-level", "warning"],
        cwd=ROOT,
    )  # fmt: skip
    try:
        url = f"http://{address}"
        ready_at = wait_ready(url, process)
        rss, peak = rss_mib(process.pid)
        body = get(url + "/metrics")
        scrape_time = statistics.median(
            best_of(1, lambda: get(url + "/metrics")) for _ in range(scrapes)
        )
        gzip_body = get(url + "/metrics", {"Accept-Encoding": "gzip"})
        gzip_time = statistics.median(
            best_of(1, lambda: get(url + "/metrics", {"Accept-Encoding": "gzip"}))
            for _ in range(scrapes)
        )
    finally:
        process.terminate()
        process.wait(30)
    if not gzip.decompress(gzip_body).startswith(b"#"):
        raise RuntimeError("the gzip response is not a gzipped exposition")
    families = list(text_string_to_metric_families(body.decode()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StaticCollector(families))
    samples = sum(len(family.samples) for family in families)
    reference = statistics.median(
        best_of(1, lambda: generate_latest(registry)) for _ in range(scrapes)
    )
    return {
        "sync": ready_at - started,
        "rss": rss,
        "peak": peak,
        "scrape": scrape_time,
        "scrape_bytes": len(body),
        "scrape_gzip": gzip_time,
        "scrape_gzip_bytes": len(gzip_body),
        "generate_latest": reference,
        "samples": samples,
    }


def toggled_slice(svc: ServicePlan, index: int, nodes: int, ready: int) -> dict[str, Any]:
    return next(endpoint_slices(svc, index, nodes, ready_count=ready))


def measure_incremental(size: ClusterSize, directory: Path, samples: int) -> list[float]:
    """From one EndpointSlice MODIFIED to the state the next scrape renders, in-process."""
    plans = plan(size)
    candidates = [
        (i, svc) for i, svc in enumerate(plans) if svc.kind == "auto" and svc.endpoints > 2
    ]
    with api_server(size) as (port, apply):
        options = ServeOptions(
            listen_address="127.0.0.1:0",
            kubeconfig=str(kubeconfig(port, directory)),
            log_level="warning",
        )
        exporter = Exporter(options)
        published = threading.Event()
        target: dict[str, Any] = {}

        def on_publish(state: ExporterState) -> None:
            key = target.get("key")
            if key is None:
                return
            result = state.services.get(key)
            if result is not None and result.verdicts[0].ready_endpoints == target["ready"]:
                target["at"] = time.perf_counter()
                published.set()

        exporter.evaluator.add_listener(on_publish)
        exporter.start()
        try:
            while not exporter.readiness()[0]:
                time.sleep(0.01)
            latencies = []
            for sample in range(samples):
                index, svc = candidates[sample % len(candidates)]
                # Toggle one endpoint of the first slice between ready and not ready.
                in_first = min(svc.endpoints, 100)
                ready = in_first - 1 if sample // len(candidates) % 2 == 0 else in_first
                total_ready = svc.endpoints - (in_first - ready)
                published.clear()
                target.update(key=(svc.namespace, svc.name), ready=total_ready)
                body = toggled_slice(svc, index, size.nodes, ready)
                started = time.perf_counter()
                apply(body)
                if not published.wait(30):
                    raise TimeoutError(f"no evaluation for {svc.name}")
                latencies.append(target["at"] - started)
                target.pop("key")
            # The last change is on /metrics too.
            text = get(f"http://127.0.0.1:{exporter.server.port}/metrics").decode()
            needle = (
                "topology_hints_service_ready_endpoints"
                f'{{address_type="IPv4",namespace="{svc.namespace}",service="{svc.name}"}} '
                f"{float(total_ready)}"
            )
            if needle not in text:
                raise RuntimeError(f"the last update is not on /metrics: {needle}")
        finally:
            exporter.stop()
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--services", type=int, default=10000)
    parser.add_argument("--endpoints", type=int, default=150000)
    parser.add_argument("--small-services", type=int, default=100)
    parser.add_argument("--samples", type=int, default=200, help="incremental updates measured")
    parser.add_argument("--scrapes", type=int, default=5)
    parser.add_argument("--page-size", type=int, default=500)
    args = parser.parse_args(argv)
    configure_logging("warning", "console")
    size = ClusterSize(nodes=args.nodes, services=args.services, endpoints=args.endpoints)
    ratio = args.small_services / args.services
    small = replace(
        size,
        nodes=max(30, round(args.nodes * ratio)),
        services=args.small_services,
        endpoints=max(args.small_services, round(args.endpoints * ratio)),
    )
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        with api_server(size) as (port, _apply):
            pages = list_payloads(port, args.page_size)
            payload = sum(len(page) for page in pages)
            # The reference as a default Python process runs it, then with the garbage
            # collector tuned as `serve` tunes it (both printed; the ratio uses the first).
            reference_sync = best_of(3, lambda: [orjson.loads(page) for page in pages])
            tune_garbage_collector()
            reference_tuned = best_of(3, lambda: [orjson.loads(page) for page in pages])
            with socket_port() as free:
                full = measure_subprocess(port, directory, free, args.scrapes)
        full_incremental = measure_incremental(size, directory, args.samples)
        small_incremental = measure_incremental(small, directory, args.samples)

    full_median = statistics.median(full_incremental)
    small_median = statistics.median(small_incremental)
    full_p99 = percentile(full_incremental, 0.99)
    small_p99 = percentile(small_incremental, 0.99)
    scale = f"{size.nodes} nodes, {size.services} Services, {size.endpoints} endpoints"
    scrape = f"{full['scrape'] * 1000:.1f} ms, {full['scrape_bytes'] / 1e6:.1f} MB"
    small_name = f"{args.small_services} Services"
    rows = [
        ("cluster", scale, "", ""),
        ("LIST payload", f"{payload / 1e6:.1f} MB in {len(pages)} pages", "", ""),
        (
            "initial sync (process start to /readyz)",
            f"{full['sync']:.2f} s",
            f"orjson.loads: {reference_sync:.2f} s ({reference_tuned:.2f} s with tuned gc)",
            f"{full['sync'] / reference_sync:.2f}x (target <= 1.5x)",
        ),
        (
            "incremental, median",
            f"{full_median * 1000:.2f} ms",
            f"{small_name}: {small_median * 1000:.2f} ms",
            f"{full_median / small_median:.2f}x (target <= 2x; median <= 2 ms)",
        ),
        (
            "incremental, p99",
            f"{full_p99 * 1000:.2f} ms",
            f"{small_name}: {small_p99 * 1000:.2f} ms",
            "",
        ),
        (
            "scrape /metrics",
            f"{scrape}, {full['samples']} samples",
            f"generate_latest: {full['generate_latest'] * 1000:.1f} ms",
            f"{full['generate_latest'] / full['scrape']:.1f}x faster (target >= 5x)",
        ),
        (
            "scrape /metrics, gzip",
            f"{full['scrape_gzip'] * 1000:.1f} ms, {full['scrape_gzip_bytes'] / 1e6:.2f} MB",
            "",
            "",
        ),
        (
            "resident memory after sync",
            f"{full['rss']:.0f} MiB (peak {full['peak']:.0f} MiB)",
            "",
            "target <= 400 MB",
        ),
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}")
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


@contextmanager
def socket_port() -> Iterator[int]:
    import socket  # noqa: PLC0415

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield port


if __name__ == "__main__":
    sys.exit(main())
