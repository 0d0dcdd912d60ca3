"""Benchmark: what a change costs from the API server to the bytes a scrape gets, at any size.

    python bench/bench.py                                   # 0.1x, 0.3x, 1x, 2x; 3 runs each
    python bench/bench.py --scales 0.1 --runs 3             # a quick run (about a minute)
    python bench/bench.py --scales 1 --runs 3 --json out.json

Scale 1 is 5,000 nodes, 10,000 Services and 150,000 endpoints (bench/cluster.py, objects as
full as a real cluster's). At each scale the test API server (tests/kubeapi) runs in a child
process with the cluster loaded, and each run starts a real `topology-hints-exporter serve`
process pointed at it by its own kubeconfig. Every figure is measured in each run beside
its reference, measured in the same run under the same settings; the tables give the
median over the runs with the min-max, and beside each measure the CPU seconds the
exporter and the API server spent on it (the API server must not be the bottleneck).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import http.server
import multiprocessing
import os
import re
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Self

import orjson
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import ksm  # noqa: E402
from cluster import (  # noqa: E402
    ZONE_NODE_CPU,
    ZONES,
    ClusterSize,
    ServicePlan,
    cluster_objects,
    endpoint_slices,
    node,
    plan,
    write_snapshot,
)
from procstat import cpu_seconds, get, memory_mib  # noqa: E402

from exporter.pipeline.evaluator import Evaluator  # noqa: E402
from exporter.runtime import tune_garbage_collector  # noqa: E402
from exporter.sources.decode import decode_endpoint_slice, decode_node, decode_service  # noqa: E402
from exporter.state.store import ClusterStore  # noqa: E402
from tests.kubeapi import FakeKubeAPI  # noqa: E402
from tests.processes import ServedExporter, free_port, serving  # noqa: E402

# What `serve` lists at startup, with its page size (exporter/sources/listing.py).
LIST_PATHS = (
    "/api/v1/nodes",
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/api/v1/events?fieldSelector=involvedObject.kind%3DService",
)
PAGE_SIZE = 500
READY_ENDPOINTS = b"topology_hints_service_ready_endpoints{"
# Families a node resize that moves CPU shares changes: the zones' ratios, and each `auto`
# Service's per-zone allocation.
SHARE_FAMILIES = (b"topology_hints_zone_cpu_ratio", b"topology_hints_zone_allocation_desired")
# The node the benchmark resizes, and the two CPU sizes it alternates between.
RESIZED_NODE = 0
RESIZED_CPU = (ZONE_NODE_CPU[ZONES[0]], ZONE_NODE_CPU[ZONES[2]])
MIB = 1024 * 1024
DEFAULT_TIMEOUT = 600.0
# A figure growing this much faster than the cluster is flagged as worse than linear (the
# machine is noisy; smaller deviations are not findings).
GROWTH_TOLERANCE = 1.25


# -- what is measured ----------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    unit: str
    definition: str
    reference: str = ""  # key of the reference figure
    # "over": ratio = figure / reference; "faster": ratio = reference / figure.
    ratio_kind: str = "over"
    ratio_limit: float | None = None  # the ratio's target (<= for "over", >= for "faster")
    absolute_limit: float | None = None  # the figure's own target (<=), checked at 1x only
    stops_short: bool = False  # ends before a scrape has the bytes

    @property
    def is_reference(self) -> bool:
        return self.title.startswith("  ref:")

    @property
    def target(self) -> str:
        parts = []
        if self.absolute_limit is not None:
            parts.append(f"<= {self.absolute_limit:g} {self.unit} at 1x")
        if self.ratio_limit is not None:
            relation = "<=" if self.ratio_kind == "over" else ">="
            parts.append(f"ratio {relation} {self.ratio_limit:g}")
        return ", ".join(parts)


FIGURES = (
    Figure("change_p50", "change -> /metrics, p50", "ms",
           "EndpointSlice update sent to the API server (one endpoint toggles ready) -> end of "
           "the first complete /metrics response whose ready-endpoints sample for that Service "
           "has the new value, while a scraper fetches /metrics back to back; median over the "
           "changes of a run", "swap_p50", ratio_limit=1.5),
    Figure("swap_p50", "  ref: swap-at-once static server, p50", "ms",
           "the same measure against a minimal static server (its own process) holding the "
           "first scrape's bytes and a copy with one sample changed, that swaps the whole "
           "body at once when told (what an exporter costing nothing would score): told to "
           "swap -> end of the first response with the new value, the same scraper fetching "
           "back to back; median over as many swaps as changes"),
    Figure("change_p99", "change -> /metrics, p99", "ms",
           "as above, 99th percentile over the changes of a run", "swap_p99", ratio_limit=2),
    Figure("swap_p99", "  ref: swap-at-once static server, p99", "ms",
           "as above, 99th percentile over the swaps"),
    Figure("static_fetch", "  ref: static fetch of the same bytes", "ms",
           "GET of the same bytes as the first scrape from a minimal static server "
           "(http.server, sending them from memory, in its own process), same client, median "
           "of 10"),
    Figure("node_change", "node resize -> every affected series", "ms",
           "a Node's allocatable CPU changed at the API server (moves the zones' CPU shares) -> "
           "end of the first complete /metrics response in which every zone_cpu_ratio and "
           "every Service's zone_allocation_desired sample that the resize changes has its "
           "new value, while a scraper polls; median over the resizes of a run",
           "node_change_evaluator", absolute_limit=1000, ratio_limit=2),
    Figure("node_change_evaluator", "  ref: evaluator alone", "ms",
           "in-process, a fresh store and evaluator over the same cluster built after the "
           "exporter stopped, same GC settings (tuned, initial state frozen): decode the "
           "resized Node, "
           "ClusterStore.upsert_node, Evaluator.step() returns the published state; median "
           "over the resizes of a run (stops at the published state, before any rendering)",
           stops_short=True),
    Figure("node_change_cpu", "node resize, exporter CPU per resize", "ms",
           "CPU time of the exporter process (all threads) over the timed resizes above, "
           "divided by their number: the evaluation, the rendering and the scrapes served "
           "until every affected series is visible", "node_change_evaluator_cpu",
           ratio_limit=2),
    Figure("node_change_evaluator_cpu", "  ref: evaluator alone, CPU", "ms",
           "CPU time (process_time) of the evaluator-alone resizes above, median",
           stops_short=True),
    Figure("first_scrape", "first scrape after start", "ms",
           "GET /metrics right after /readyz first answers 200 (nothing rendered for a "
           "scrape yet) -> end of the response", "generate_latest", ratio_kind="faster",
           ratio_limit=5),
    Figure("generate_latest", "  ref: generate_latest", "ms",
           "prometheus_client.generate_latest over a registry holding the same samples "
           "(parsed from the scraped text), in-process, median of 3 (no HTTP: stops short "
           "of a scrape)", stops_short=True),
    Figure("first_scrape_cpu", "first scrape after start, CPU", "ms",
           "CPU time of the exporter process (all threads: HTTP and rendering) from sending "
           "the GET above to the end of its response; on a shared machine CPU time does not "
           "grow with the neighbours' load as wall time does", "generate_latest_cpu",
           ratio_kind="faster", ratio_limit=5),
    Figure("generate_latest_cpu", "  ref: generate_latest CPU", "ms",
           "CPU time (process_time) of the generate_latest above, median of 3",
           stops_short=True),
    Figure("steady_scrape", "steady scrape", "ms",
           "GET /metrics with nothing changed since the previous scrape -> end of the "
           "response; median of 9 after the first", "static_fetch", ratio_limit=2),
    Figure("steady_gzip", "steady gzip scrape", "ms",
           "GET /metrics with Accept-Encoding: gzip, nothing changed since the previous "
           "scrape -> end of the (still compressed) response; median of 9 after a first",
           "static_gzip_fetch", ratio_limit=2),
    Figure("static_gzip_fetch", "  ref: static fetch of the same gzip bytes", "ms",
           "GET of the steady gzip scrape's bytes from the minimal static server "
           "(Content-Encoding: gzip, not decoded by the client), median of 10"),
    Figure("sync_cpu", "initial sync CPU", "s",
           "CPU seconds (user + system, /proc) of the exporter process from its start to "
           "the first 200 from /readyz (every Service evaluated)", "sync_reference",
           ratio_limit=2, stops_short=True),
    Figure("sync_reference", "  ref: fetch + orjson.loads", "s",
           "CPU seconds of a process (GC tuned as exporter/runtime.py tunes it) fetching the "
           "same LIST pages (page size 500) and orjson.loads-ing each", stops_short=True),
    Figure("sync_wall", "initial sync wall", "s",
           "wall time from starting the exporter process to the first 200 from /readyz",
           "sync_reference_wall", stops_short=True),
    Figure("sync_reference_wall", "  ref: fetch + orjson.loads wall", "s",
           "wall time of the reference above", stops_short=True),
    Figure("snapshot_ready_cpu", "serve --snapshot, start -> /readyz CPU", "s",
           "CPU seconds (/proc) of `serve --snapshot FILE` from its start to the first 200 "
           "from /readyz (the file decoded, every Service evaluated, the status rows built)",
           "orjson_file_cpu", ratio_limit=1.5, stops_short=True),
    Figure("orjson_file_cpu", "  ref: orjson.loads of the file, CPU", "s",
           "CPU seconds (wait4) of a Python process, GC tuned as exporter/runtime.py tunes "
           "it, that reads the same file and orjson.loads it, interpreter start included",
           stops_short=True),
    Figure("snapshot_ready_wall", "serve --snapshot, start -> /readyz", "s",
           "wall time of the same", "orjson_file_wall", ratio_limit=1.5, stops_short=True),
    Figure("orjson_file_wall", "  ref: orjson.loads of the file", "s",
           "wall time of the same reference process, start to exit", stops_short=True),
    Figure("rss_ready", "RSS at /readyz", "MiB",
           "resident memory of the exporter (VmRSS) when /readyz first answers 200",
           absolute_limit=150),
    Figure("rss_after", "RSS after scrapes and changes", "MiB",
           "VmRSS after the first, 9 steady and 10 gzip scrapes and the EndpointSlice changes "
           "(scraped back to back throughout), before the node resizes", "rss_ready",
           ratio_limit=1.3),
    Figure("live_peak", "  ref: live peak RSS at /readyz", "MiB",
           "peak resident memory (VmHWM) of the live exporter when /readyz first answers 200"),
    Figure("evaluate_peak", "evaluate --snapshot peak RSS", "MiB",
           "peak RSS (wait4 ru_maxrss, the command started by a small process) of "
           "`evaluate --snapshot FILE`, the same cluster as a `kubectl get -o json` List",
           "live_peak", ratio_limit=1.5),
    Figure("serve_snapshot_peak", "serve --snapshot peak RSS", "MiB",
           "peak RSS (VmHWM) of `serve --snapshot FILE` when /readyz first answers 200",
           "live_peak", ratio_limit=1.5),
)  # fmt: skip
FIGURE = {figure.key: figure for figure in FIGURES}


@dataclass
class Run:
    """One run's figures (ms, s or MiB as declared) and CPU seconds per measure."""

    values: dict[str, float] = field(default_factory=dict)
    # measure key -> (exporter CPU s, API server CPU s)
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    info: dict[str, float] = field(default_factory=dict)


# -- processes and their CPU ---------------------------------------------------------------


class CpuMeter:
    """CPU seconds two processes spend between `start` and `stop`."""

    def __init__(self, exporter: int, api_server: int) -> None:
        self._pids = (exporter, api_server)
        self._start = (0.0, 0.0)

    def start(self) -> None:
        self._start = (cpu_seconds(self._pids[0]), cpu_seconds(self._pids[1]))

    def stop(self) -> tuple[float, float]:
        return (
            cpu_seconds(self._pids[0]) - self._start[0],
            cpu_seconds(self._pids[1]) - self._start[1],
        )


def timed_get(url: str, *, gzip: bool = False) -> tuple[float, bytes]:
    started = time.perf_counter()
    body = get(url, gzip=gzip)
    return time.perf_counter() - started, body


@contextlib.contextmanager
def serving_exporter(*arguments: str) -> Iterator[ServedExporter]:
    """`serve *arguments` on a free loopback port, its /readyz polled every 5 ms (the sync's
    wall time is measured to it); stopped and reaped after."""
    with serving(
        *arguments, "--log-level", "warning", command=exporter_command(), timeout=900,
        interval=0.005,
    ) as exporter:  # fmt: skip
        yield exporter


def exporter_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "exporter", *arguments]


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


class ApiServer:
    """The test API server with the cluster loaded, in a child process (its own GIL)."""

    def __init__(self, size: ClusterSize) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_cluster, args=(size, child), daemon=True)
        self._process.start()
        self.port: int = self._conn.recv()
        self.pid: int = self._process.pid or 0

    def apply(self, obj: dict[str, Any]) -> None:
        """Returns once the server has stored the object and queued its watch events."""
        self._conn.send(("apply", obj))
        self._conn.recv()

    def close(self) -> None:
        self._conn.send(("stop", None))
        self._conn.recv()
        self._process.join(10)

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / f"kubeconfig-{self.port}"
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters: [{{name: bench, cluster: {{server: "http://127.0.0.1:{self.port}"}}}}]
users: [{{name: bench, user: {{token: bench}}}}]
contexts: [{{name: bench, context: {{cluster: bench, user: bench}}}}]
current-context: bench
"""
        )
        return path


# -- references in child processes ---------------------------------------------------------


def _reference_sync(port: int, conn: Connection) -> None:
    """Fetch every LIST page the exporter reads at startup and orjson.loads it; report CPU."""
    tune_garbage_collector()
    started, cpu = time.perf_counter(), time.process_time()
    size = pages = 0
    for path in LIST_PATHS:
        token = ""
        while True:
            separator = "&" if "?" in path else "?"
            url = f"http://127.0.0.1:{port}{path}{separator}limit={PAGE_SIZE}"
            if token:
                url += f"&continue={token}"
            body = get(url)
            size += len(body)
            pages += 1
            token = orjson.loads(body)["metadata"].get("continue") or ""
            if not token:
                break
    conn.send((time.process_time() - cpu, time.perf_counter() - started, size, pages))


def reference_sync(api: ApiServer) -> tuple[float, float, float, int, int]:
    """(CPU s, wall s, API server CPU s, bytes, pages) of the sync reference."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_reference_sync, args=(api.port, child), daemon=True)
    api_cpu = cpu_seconds(api.pid)
    process.start()
    cpu, wall, size, pages = parent.recv()
    api_cpu = cpu_seconds(api.pid) - api_cpu
    process.join(30)
    return cpu, wall, api_cpu, size, pages


def _evaluator_alone(size: ClusterSize, conn: Connection) -> None:
    """The exporter's store and evaluator over the cluster, timed per node resize."""
    tune_garbage_collector()
    store = ClusterStore()
    nodes, services, slices = [], [], []
    for obj in cluster_objects(size):
        kind = obj["kind"]
        if kind == "Node":
            nodes.append(decode_node(obj))
        elif kind == "Service":
            services.append(decode_service(obj))
        else:
            slices.append(decode_endpoint_slice(obj))
    store.replace_nodes(nodes)
    store.replace_services(services)
    store.replace_endpoint_slices(slices)
    del nodes, services, slices
    evaluator = Evaluator(store)
    evaluator.step()
    # As `serve` does once synced: later collections skip the initial snapshot.
    gc.freeze()
    conn.send(None)
    while True:
        command, payload = conn.recv()
        if command == "stop":
            return
        started, started_cpu = time.perf_counter(), time.process_time()
        store.upsert_node(decode_node(payload))
        evaluator.step()
        conn.send((time.perf_counter() - started, time.process_time() - started_cpu))


class EvaluatorAlone:
    def __init__(self, size: ClusterSize) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_evaluator_alone, args=(size, child), daemon=True)
        self._process.start()
        self._conn.recv()

    def resize(self, obj: dict[str, Any]) -> tuple[float, float]:
        """(wall s, CPU s) of one resize."""
        self._conn.send(("node", obj))
        seconds: tuple[float, float] = self._conn.recv()
        return seconds

    def close(self) -> None:
        self._conn.send(("stop", None))
        self._process.join(10)


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    body = b""
    gzip = False

    def do_GET(self) -> None:
        body = self.body  # the body when the request arrived, as a swap-at-once server does
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        if self.gzip:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def _static_server(paths: list[str], port: int, conn: Connection, *, gzip: bool) -> None:
    bodies = [Path(path).read_bytes() for path in paths]
    _QuietHandler.body, _QuietHandler.gzip = bodies[0], gzip

    def swapper() -> None:
        # Each message swaps the whole body at once to the next prepared one.
        current = 0
        while True:
            conn.recv()
            current = (current + 1) % len(bodies)
            _QuietHandler.body = bodies[current]
            conn.send(None)

    threading.Thread(target=swapper, daemon=True).start()
    with socketserver.ThreadingTCPServer(("127.0.0.1", port), _QuietHandler) as server:
        server.serve_forever()


class StaticServer:
    """A minimal static HTTP server in its own process, sending one of `bodies` from memory."""

    def __init__(self, url: str, conn: Connection) -> None:
        self.url = url
        self._conn = conn

    def swap(self) -> None:
        """Switch to the next body at once; returns once the server has switched."""
        self._conn.send(None)
        self._conn.recv()


@contextlib.contextmanager
def static_server(
    bodies: list[bytes], directory: Path, *, gzip: bool = False
) -> Iterator[StaticServer]:
    """A static server sending `bodies[0]` until told to swap to the next."""
    paths = []
    for number, body in enumerate(bodies):
        path = directory / f"static-{number}.bin"
        path.write_bytes(body)
        paths.append(str(path))
    port = free_port()
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_static_server, args=(paths, port, child), kwargs={"gzip": gzip}, daemon=True
    )
    process.start()
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(url)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        yield StaticServer(url, parent)
    finally:
        process.terminate()
        process.join(10)


class StaticCollector(Collector):
    def __init__(self, families: list[Any]) -> None:
        self._families = families

    def collect(self) -> Iterator[Any]:
        return iter(self._families)


def generate_latest_seconds(body: bytes, repeat: int = 3) -> tuple[float, float, int]:
    """Median wall and CPU time of generate_latest over the scraped samples, and how many
    samples there are."""
    families = list(text_string_to_metric_families(body.decode()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StaticCollector(families))
    times, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        generate_latest(registry)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    samples = sum(len(family.samples) for family in families)
    return statistics.median(times), statistics.median(cpu), samples


# -- watching /metrics ---------------------------------------------------------------------


class Scraper:
    """Fetches /metrics back to back and reports when a response first satisfies a check."""

    def __init__(self, url: str, timeout: float) -> None:
        self._url = url
        self._timeout = timeout
        self._lock = threading.Lock()
        self._check: Callable[[bytes], bool] | None = None
        self._since = 0.0
        self._latency = 0.0
        self._found = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self.scrapes = 0
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(600)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                body = get(self._url)
                ended = time.perf_counter()
                self.scrapes += 1
                with self._lock:
                    check, since = self._check, self._since
                if check is not None and check(body):
                    with self._lock:
                        self._check = None
                    self._latency = ended - since
                    self._found.set()
        except BaseException as error:  # noqa: BLE001 - reported to the waiting thread
            self._error = error
            self._found.set()

    def latency(self, check: Callable[[bytes], bool], change: Callable[[], None]) -> float:
        """Seconds from just before `change()` to the end of the first response passing `check`.

        The check is armed before the change is made: no response can pass it earlier,
        because the value it looks for differs from the current one.
        """
        self._found.clear()
        with self._lock:
            self._check, self._since = check, time.perf_counter()
        change()
        if not self._found.wait(self._timeout):
            raise TimeoutError(f"the change did not reach /metrics in {self._timeout:g} s")
        if self._error is not None:
            raise RuntimeError(f"the scraper failed: {self._error}") from self._error
        return self._latency


_LABEL = re.compile(rb'(namespace|service)="([^"]*)"')


def ready_series(body: bytes) -> dict[tuple[str, str], bytes]:
    """(namespace, Service) -> its ready-endpoints sample line up to the value, with the space."""
    series = {}
    for line in body.splitlines():
        if line.startswith(READY_ENDPOINTS):
            prefix = line[: line.rindex(b" ") + 1]
            labels = {key.decode(): value.decode() for key, value in _LABEL.findall(prefix)}
            series[labels["namespace"], labels["service"]] = prefix
    return series


def sample_value(body: bytes, prefix: bytes) -> float | None:
    start = body.find(prefix)
    if start < 0:
        return None
    start += len(prefix)
    end = body.find(b"\n", start)
    return float(body[start : end if end >= 0 else len(body)].split(b" ", 1)[0])


def share_samples(body: bytes) -> dict[bytes, bytes]:
    """Every sample of the families a CPU-share move changes: series -> value text."""
    samples = {}
    for family in SHARE_FAMILIES:
        start = body.find(b"\n" + family + b"{")
        if start < 0:
            continue
        end = body.find(b"\n#", start + 1)
        for line in body[start + 1 : end if end >= 0 else len(body)].splitlines():
            if line.startswith(family + b"{"):
                series, _, value = line.rpartition(b" ")
                samples[series] = value
    return samples


# -- one scale -----------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class ScaleSession:
    """Everything shared by the runs at one scale; the API server's objects persist."""

    size: ClusterSize
    api: ApiServer
    directory: Path
    snapshot: Path
    changes: int
    resizes: int
    plans: list[ServicePlan]
    report: Callable[[str], None]
    timeout: float = DEFAULT_TIMEOUT
    label: str = ""
    # Service index -> ready endpoints in its first slice, as last applied.
    first_slice_ready: dict[int, int] = field(default_factory=dict)
    resized_cpu: str = RESIZED_CPU[0]
    # Objects of each kind (Node, Service, EndpointSlice) the API server holds.
    objects: dict[str, int] = field(default_factory=dict)
    # The kube-state-metrics binary run beside the exporter (None: not run).
    ksm: Path | None = None

    def toggle_endpoint(self, index: int) -> tuple[dict[str, Any], int]:
        """The Service's first slice with one endpoint toggled, and its new ready total."""
        svc = self.plans[index]
        in_first = min(svc.endpoints, 100)
        ready = (
            in_first - 1 if self.first_slice_ready.get(index, in_first) == in_first else in_first
        )
        self.first_slice_ready[index] = ready
        obj = next(endpoint_slices(svc, index, self.size.nodes, ready_count=ready))
        return obj, svc.endpoints - (in_first - ready)

    def progress(self, message: str) -> None:
        self.report(f"{self.label} {message}")

    def resize_node(self) -> dict[str, Any]:
        self.resized_cpu = _other_size(self.resized_cpu)
        return node(RESIZED_NODE, cpu=self.resized_cpu)


def _other_size(cpu: str) -> str:
    return RESIZED_CPU[1] if cpu == RESIZED_CPU[0] else RESIZED_CPU[0]


def measure_changes(session: ScaleSession, scraper: Scraper, body: bytes, run: Run) -> None:
    series = ready_series(body)
    index_of = {(svc.namespace, svc.name): i for i, svc in enumerate(session.plans)}
    candidates = [index_of[key] for key in series if session.plans[index_of[key]].endpoints > 1]
    if not candidates:
        raise RuntimeError("no exported Service to change: the cluster is too small")
    latencies = []
    for number in range(session.changes):
        index = candidates[number % len(candidates)]
        svc = session.plans[index]
        prefix = series[svc.namespace, svc.name]
        obj, ready = session.toggle_endpoint(index)

        def has_value(body: bytes, prefix: bytes = prefix, ready: int = ready) -> bool:
            return sample_value(body, prefix) == ready

        latencies.append(scraper.latency(has_value, functools.partial(session.api.apply, obj)))
    run.values["change_p50"] = statistics.median(latencies) * 1000
    run.values["change_p99"] = percentile(latencies, 0.99) * 1000
    run.info["changes"] = len(latencies)


def measure_swaps(session: ScaleSession, body: bytes, run: Run) -> None:
    """The change -> /metrics floor: a static server that swaps its whole body at once."""
    prefix = next(iter(ready_series(body).values()))
    value = sample_value(body, prefix)
    assert value is not None  # noqa: S101 - the prefix was found in this body
    start = body.index(prefix) + len(prefix)
    end = body.index(b"\n", start)
    other = value + 1
    changed = body[:start] + f"{other:g}".encode() + body[end:]
    with (
        static_server([body, changed], session.directory) as static,
        Scraper(static.url, session.timeout) as scraper,
    ):
        latencies = []
        for number in range(session.changes):
            wanted = other if number % 2 == 0 else value

            def has_value(scraped: bytes, wanted: float = wanted) -> bool:
                return sample_value(scraped, prefix) == wanted

            latencies.append(scraper.latency(has_value, static.swap))
    run.values["swap_p50"] = statistics.median(latencies) * 1000
    run.values["swap_p99"] = percentile(latencies, 0.99) * 1000


def measure_resizes(
    session: ScaleSession, scraper: Scraper, url: str, run: Run, exporter: int
) -> None:
    before = share_samples(get(url))
    # One untimed resize learns what the other size looks like on /metrics.
    session.api.apply(session.resize_node())
    deadline = time.monotonic() + session.timeout
    previous: dict[bytes, bytes] | None = None
    while True:
        current = share_samples(get(url))
        if current != before and current == previous:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the node resize did not reach /metrics")
        previous = current
    states = (before, current)
    affected = {
        key for key in before.keys() | current.keys() if before.get(key) != current.get(key)
    }
    run.info["affected_services"] = len(
        {tuple(_LABEL.findall(key)) for key in affected if key.startswith(SHARE_FAMILIES[1])}
    )
    latencies = []
    cpu = cpu_seconds(exporter)
    for number in range(session.resizes):
        target = states[number % 2]
        wanted = {key: target.get(key) for key in affected}

        def all_visible(body: bytes, wanted: dict[bytes, bytes | None] = wanted) -> bool:
            samples = share_samples(body)
            return all(samples.get(key) == value for key, value in wanted.items())

        obj = session.resize_node()
        latencies.append(scraper.latency(all_visible, functools.partial(session.api.apply, obj)))
    run.values["node_change"] = statistics.median(latencies) * 1000
    run.values["node_change_cpu"] = (cpu_seconds(exporter) - cpu) / session.resizes * 1000


def measure_evaluator_alone(session: ScaleSession, run: Run) -> None:
    """The same resizes on a fresh store and evaluator, as fresh as the run's exporter."""
    evaluator = EvaluatorAlone(session.size)
    try:
        cpu, seconds = RESIZED_CPU[0], []
        for _ in range(session.resizes):
            cpu = _other_size(cpu)
            seconds.append(evaluator.resize(node(RESIZED_NODE, cpu=cpu)))
    finally:
        evaluator.close()
    run.values["node_change_evaluator"] = statistics.median(wall for wall, _ in seconds) * 1000
    run.values["node_change_evaluator_cpu"] = statistics.median(used for _, used in seconds) * 1000


def measure_scrapes(session: ScaleSession, url: str, meter: CpuMeter, run: Run) -> bytes:
    """The first and steady scrapes, plain and gzip, and their references; the first body."""
    meter.start()
    first, body = timed_get(url + "/metrics")
    run.cpu["first_scrape"] = run.cpu["first_scrape_cpu"] = meter.stop()
    run.values["first_scrape"] = first * 1000
    run.values["first_scrape_cpu"] = run.cpu["first_scrape"][0] * 1000
    # As kube-state-metrics is measured: from the start to the end of a complete scrape.
    run.values["first_complete_cpu"] = run.values["sync_cpu"] + run.cpu["first_scrape"][0]
    run.values["first_complete_wall"] = run.values["sync_wall"] + first
    meter.start()
    steady = [timed_get(url + "/metrics")[0] for _ in range(9)]
    exporter_cpu, api_cpu = meter.stop()
    run.cpu["steady_scrape"] = (exporter_cpu / 9, api_cpu / 9)
    run.values["steady_scrape"] = statistics.median(steady) * 1000
    run.info["scrape_bytes"] = len(body)
    zipped = get(url + "/metrics", gzip=True)
    meter.start()
    steady = [timed_get(url + "/metrics", gzip=True)[0] for _ in range(9)]
    exporter_cpu, api_cpu = meter.stop()
    run.cpu["steady_gzip"] = (exporter_cpu / 9, api_cpu / 9)
    run.values["steady_gzip"] = statistics.median(steady) * 1000
    run.info["gzip_bytes"] = len(zipped)

    with static_server([body], session.directory) as static:
        fetches = [timed_get(static.url)[0] for _ in range(10)]
    run.values["static_fetch"] = statistics.median(fetches) * 1000
    with static_server([zipped], session.directory, gzip=True) as static:
        fetches = [timed_get(static.url, gzip=True)[0] for _ in range(10)]
    run.values["static_gzip_fetch"] = statistics.median(fetches) * 1000
    session.progress(f"swap-at-once static server: {session.changes} swaps")
    measure_swaps(session, body, run)
    generate_latest, generate_latest_cpu, run.info["samples"] = generate_latest_seconds(body)
    run.values["generate_latest"] = generate_latest * 1000
    run.values["generate_latest_cpu"] = generate_latest_cpu * 1000
    return body


def measure_live(session: ScaleSession, run: Run) -> None:
    """Sync, scrapes, changes and memory of one `serve` process."""
    api = session.api
    config = session.api.kubeconfig(session.directory)
    api_cpu = cpu_seconds(api.pid)
    session.progress("serve: sync and scrapes")
    started = time.perf_counter()
    with serving_exporter("--kubeconfig", str(config)) as exporter:
        process, url = exporter.process, exporter.url
        run.values["sync_wall"] = time.perf_counter() - started
        run.values["sync_cpu"] = cpu_seconds(process.pid)
        run.cpu["sync_cpu"] = (run.values["sync_cpu"], cpu_seconds(api.pid) - api_cpu)
        run.cpu["sync_wall"] = run.cpu["sync_cpu"]
        run.values["rss_ready"], run.values["live_peak"] = memory_mib(process.pid)
        meter = CpuMeter(process.pid, api.pid)

        body = measure_scrapes(session, url, meter, run)
        run.values["rss_scrapes"] = memory_mib(process.pid)[0]

        with Scraper(url + "/metrics", session.timeout) as scraper:
            session.progress(f"{session.changes} EndpointSlice changes")
            meter.start()
            measure_changes(session, scraper, body, run)
            run.cpu["change_p50"] = run.cpu["change_p99"] = meter.stop()
            run.values["rss_after"] = memory_mib(process.pid)[0]
            session.progress(f"{session.resizes} node resizes (and 1 untimed)")
            meter.start()
            measure_resizes(session, scraper, url + "/metrics", run, process.pid)
            run.cpu["node_change"] = meter.stop()
        run.info["scrapes_while_changing"] = scraper.scrapes


# Runs a command and prints its wait4 rusage: (peak RSS KiB, CPU s). The measured command
# must be the child of a small process: Linux carries a process's peak RSS over exec
# (signal->maxrss), so a child forked straight from this benchmark, which holds the whole
# cluster, would report the benchmark's own size.
_RUSAGE_OF_CHILD = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_pid, status, usage = os.wait4(process.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""


def peak_rss_of_evaluate(snapshot: Path) -> tuple[float, float]:
    """(peak RSS MiB, CPU s) of `evaluate --snapshot`, from wait4's rusage."""
    completed = subprocess.run(
        [sys.executable, "-c", _RUSAGE_OF_CHILD,
         *exporter_command("evaluate", "--snapshot", str(snapshot))],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    returncode, max_rss_kib, cpu = completed.stdout.split()
    if int(returncode) != 0:
        raise RuntimeError(f"evaluate --snapshot exited with {returncode}")
    return int(max_rss_kib) / 1024, float(cpu)


def peak_rss_of_serve_snapshot(snapshot: Path) -> tuple[float, float, float]:
    """(peak RSS MiB, CPU s, wall s) of `serve --snapshot` when ready."""
    started = time.perf_counter()
    with serving_exporter("--snapshot", str(snapshot)) as exporter:
        wall = time.perf_counter() - started
        return memory_mib(exporter.process.pid)[1], cpu_seconds(exporter.process.pid), wall


_ORJSON_FILE = """
import sys
from exporter.runtime import tune_garbage_collector
tune_garbage_collector()
import orjson
with open(sys.argv[1], "rb") as file:
    orjson.loads(file.read())
"""


def orjson_of_file(snapshot: Path) -> tuple[float, float]:
    """(CPU s, wall s) of a fresh process that orjson.loads the snapshot file."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", _RUSAGE_OF_CHILD, sys.executable, "-c", _ORJSON_FILE,
         str(snapshot)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    returncode, _max_rss, cpu = completed.stdout.split()
    if int(returncode) != 0:
        raise RuntimeError(f"orjson.loads of {snapshot} exited with {returncode}")
    return float(cpu), wall


def one_run(session: ScaleSession) -> Run:
    run = Run()
    session.progress("sync reference")
    cpu, wall, api_cpu, size, pages = reference_sync(session.api)
    run.values["sync_reference"], run.values["sync_reference_wall"] = cpu, wall
    run.cpu["sync_reference"] = run.cpu["sync_reference_wall"] = (cpu, api_cpu)
    run.info["list_bytes"], run.info["list_pages"] = size, pages
    measure_live(session, run)
    session.progress(f"evaluator alone: {session.resizes} node resizes")
    measure_evaluator_alone(session, run)
    session.progress("evaluate --snapshot, serve --snapshot")
    run.values["evaluate_peak"], evaluate_cpu = peak_rss_of_evaluate(session.snapshot)
    run.cpu["evaluate_peak"] = (evaluate_cpu, 0.0)
    run.values["serve_snapshot_peak"], serve_cpu, serve_wall = peak_rss_of_serve_snapshot(
        session.snapshot
    )
    run.cpu["serve_snapshot_peak"] = (serve_cpu, 0.0)
    run.values["snapshot_ready_cpu"], run.values["snapshot_ready_wall"] = serve_cpu, serve_wall
    run.values["orjson_file_cpu"], run.values["orjson_file_wall"] = orjson_of_file(session.snapshot)
    for key in ("snapshot_ready_cpu", "snapshot_ready_wall"):
        run.cpu[key] = (serve_cpu, 0.0)
    if session.ksm is not None:
        session.progress("kube-state-metrics: sync and scrapes")
        api_cpu = cpu_seconds(session.api.pid)
        values, info = ksm.measure_ksm(
            session.ksm,
            session.api.kubeconfig(session.directory),
            session.directory,
            session.objects,
            session.timeout,
            (cpu_seconds, memory_mib),
            get,
        )
        run.values.update(values)
        run.info.update(info)
        run.info["ksm_api_server_cpu"] = cpu_seconds(session.api.pid) - api_cpu
    return run


def run_scale(
    scale: float,
    runs: int,
    changes: int,
    resizes: int,
    timeout: float,
    progress: Callable[[str], None],
    ksm_binary: Path | None = None,
) -> list[Run]:
    size = ClusterSize().scaled(scale)
    directory = Path(tempfile.mkdtemp(prefix="bench-"))
    try:
        progress(f"scale {scale:g}: loading the API server")
        snapshot = directory / "snapshot.json"
        objects = write_snapshot(size, snapshot)
        api = ApiServer(size)
        try:
            session = ScaleSession(
                size,
                api,
                directory,
                snapshot,
                changes,
                resizes,
                plan(size),
                progress,
                timeout,
                objects=objects,
                ksm=ksm_binary,
            )
            results = []
            for number in range(runs):
                session.label = f"scale {scale:g}, run {number + 1} of {runs}:"
                results.append(one_run(session))
                # Each run's figures as they come, so a long run stopped early still tells.
                session.progress(
                    "done: "
                    + ", ".join(f"{key} {value:.4g}" for key, value in results[-1].values.items())
                )
        finally:
            api.close()
        for run in results:
            run.info["snapshot_bytes"] = snapshot.stat().st_size
            run.info["objects"] = sum(objects.values())
        return results
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- reporting -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values))

    def text(self, unit: str) -> str:
        digits = 2 if unit == "s" or self.median < 10 else 1 if self.median < 100 else 0
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}] {unit}"


def ratio_of(figure: Figure, run: Run) -> float | None:
    if not figure.reference:
        return None
    value, reference = run.values[figure.key], run.values[figure.reference]
    if figure.ratio_kind == "faster":
        return reference / value if value else None
    return value / reference if reference else None


def met(figure: Figure, scale: float, value: Summary, ratio: Summary | None) -> str:
    checks = []
    if figure.absolute_limit is not None and scale == 1:
        checks.append(value.median <= figure.absolute_limit)
    if figure.ratio_limit is not None and ratio is not None:
        checks.append(
            ratio.median <= figure.ratio_limit
            if figure.ratio_kind == "over"
            else ratio.median >= figure.ratio_limit
        )
    if not checks:
        return ""
    return "yes" if all(checks) else "NO"


def scale_report(scale: float, runs: list[Run]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for figure in FIGURES:
        value = Summary.of([run.values[figure.key] for run in runs])
        ratios = [r for r in (ratio_of(figure, run) for run in runs) if r is not None]
        ratio = Summary.of(ratios) if ratios else None
        cpu = [run.cpu[figure.key] for run in runs if figure.key in run.cpu]
        figures[figure.key] = {
            "runs": [run.values[figure.key] for run in runs],
            "median": value.median,
            "min": value.low,
            "max": value.high,
            "unit": figure.unit,
            "ratio": asdict(ratio) if ratio else None,
            "met": met(figure, scale, value, ratio) or None,
            "cpu_exporter_s": statistics.median(c[0] for c in cpu) if cpu else None,
            "cpu_api_server_s": statistics.median(c[1] for c in cpu) if cpu else None,
        }
    info = {key: statistics.median(run.info[key] for run in runs) for key in runs[0].info}
    objects = int(runs[0].info.get("objects", 0))
    report = {"scale": scale, "size": asdict(ClusterSize().scaled(scale)), "info": info,
              "figures": figures, "objects": objects}  # fmt: skip
    if objects and all("ksm_steady_scrape" in run.values for run in runs):
        report["ksm"] = ksm.side_by_side(runs, objects)
    return report


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for number, row in enumerate(rows):
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if number == 0:
            print("  ".join("-" * width for width in widths))


def print_scale(report: dict[str, Any]) -> None:
    size, info = report["size"], report["info"]
    print(
        f"\n## scale {report['scale']:g}: {size['nodes']} nodes, {size['services']} Services, "
        f"{size['endpoints']} endpoints; LIST {info['list_bytes'] / 1e6:.1f} MB in "
        f"{info['list_pages']:.0f} pages; /metrics {info['scrape_bytes'] / 1e6:.2f} MB, "
        f"{info['samples']:.0f} samples; {info['changes']:.0f} changes, "
        f"{info['affected_services']:.0f} Services moved by a resize; snapshot "
        f"{info['snapshot_bytes'] / 1e6:.1f} MB\n"
    )
    rows = [["measure", "median [min-max]", "reference median [min-max]", "ratio", "target",
             "met?", "CPU s exporter / API server"]]  # fmt: skip
    figures = report["figures"]
    for figure in FIGURES:
        if figure.is_reference:
            continue  # printed beside the measures that use it
        data = figures[figure.key]
        value = Summary(data["median"], data["min"], data["max"]).text(figure.unit)
        reference = ratio = ""
        if figure.reference:
            ref = figures[figure.reference]
            reference_figure = FIGURE[figure.reference]
            reference = f"{reference_figure.title.strip().removeprefix('ref: ')}: " + Summary(
                ref["median"], ref["min"], ref["max"]
            ).text(reference_figure.unit)
            if data["ratio"]:
                r = data["ratio"]
                faster = " faster" if figure.ratio_kind == "faster" else ""
                ratio = f"{r['median']:.2f}x{faster} [{r['low']:.2f}-{r['high']:.2f}]"
        cpu = ""
        if data["cpu_exporter_s"] is not None:
            cpu = f"{data['cpu_exporter_s']:.2f} / {data['cpu_api_server_s']:.2f}"
        title = figure.title + (" *" if figure.stops_short else "")
        rows.append([title, value, reference, ratio, figure.target, data["met"] or "", cpu])
    print_table(rows)
    if "ksm" in report:
        print(
            f"\n### beside kube-state-metrics (--resources={ksm.RESOURCES}, same API server, "
            f"same run; {report['objects']:,} objects)\n"
        )
        print_table(ksm.table_rows(report["ksm"]))


def growth_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's growth from the smallest scale, against the cluster's growth."""
    base = reports[0]
    growth: dict[str, Any] = {}
    for figure in FIGURES:
        first = base["figures"][figure.key]["median"]
        entries = []
        for report in reports:
            cluster = report["scale"] / base["scale"]
            value = report["figures"][figure.key]["median"]
            # A figure of 0 at the smallest scale (CPU time below the clock's tick at a tiny
            # scale) has no growth factor: None, shown as "-".
            factor = value / first if first and value is not None else None
            worse = factor is not None and factor > cluster * GROWTH_TOLERANCE
            entries.append({"scale": report["scale"], "growth": factor, "cluster_growth": cluster,
                            "worse_than_linear": worse})  # fmt: skip
        growth[figure.key] = entries
    return growth


def print_growth(reports: list[dict[str, Any]], growth: dict[str, Any]) -> None:
    scales = [report["scale"] for report in reports]
    print(
        f"\n## growth from scale {scales[0]:g} (figure's median / its median at {scales[0]:g}; "
        f"cluster grows {', '.join(f'{s / scales[0]:g}x' for s in scales)}; ! = worse than "
        f"linear by more than {GROWTH_TOLERANCE:g}x)\n"
    )
    rows = [["figure", *(f"{scale:g}x" for scale in scales), "linear or better?"]]
    for figure in FIGURES:
        entries = growth[figure.key]
        cells = [
            "-"
            if entry["growth"] is None
            else f"{entry['growth']:.2f}" + ("!" if entry["worse_than_linear"] else "")
            for entry in entries
        ]
        worse = [f"{e['scale']:g}x" for e in entries if e["worse_than_linear"]]
        rows.append([figure.title.strip(), *cells, f"NO at {', '.join(worse)}" if worse else "yes"])
    print_table(rows)


def print_definitions() -> None:
    print("## what each figure measures (* = stops short of a scrape)\n")
    for figure in FIGURES:
        star = " *" if figure.stops_short else ""
        print(f"- {figure.title.strip()}{star}: {figure.definition}.")


def cpu_model() -> str:
    """The processor's model name (Linux), which decides the Python-bound figures."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown processor"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scales",
        default="0.1,0.3,1,2",
        help="comma-separated factors on 5,000 nodes / 10,000 Services / 150,000 endpoints",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per scale (default 3)")
    parser.add_argument(
        "--changes", type=int, default=200, help="EndpointSlice changes per run (default 200)"
    )
    parser.add_argument("--resizes", type=int, default=5, help="node resizes per run (default 5)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds a change may take to reach /metrics (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--ksm",
        default="build",
        metavar="build|skip|PATH",
        help="kube-state-metrics beside the exporter: the pinned build of tools/ksm (built "
        "when absent; the default), a binary's path, or skip",
    )
    args = parser.parse_args(argv)
    try:
        scales = sorted(float(text) for text in args.scales.split(","))
    except ValueError:
        parser.error(f"--scales: not a comma-separated list of numbers: {args.scales}")
    if any(scale <= 0 for scale in scales) or args.runs < 1 or args.changes < 1 or args.resizes < 1:
        parser.error("scales, --runs, --changes and --resizes must be positive")

    def progress(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    ksm_binary = ksm.ksm_binary(args.ksm)
    load_before = os.getloadavg()[0]
    print(
        f"{cpu_model()}, cores: {os.cpu_count()}, python {sys.version.split()[0]}, "
        f"{args.runs} runs a scale, load average {load_before:.1f}"
    )
    print_definitions()
    reports = []
    for scale in scales:
        runs = run_scale(
            scale, args.runs, args.changes, args.resizes, args.timeout, progress, ksm_binary
        )
        reports.append(scale_report(scale, runs))
        print_scale(reports[-1])
    growth = growth_report(reports)
    if len(reports) > 1:
        print_growth(reports, growth)
    if args.json:
        document = {
            "python": sys.version.split()[0],
            "cores": os.cpu_count(),
            "cpu": cpu_model(),
            # 1-minute load averages at the start and end: the machine may be shared.
            "load": [load_before, os.getloadavg()[0]],
            "runs": args.runs,
            "definitions": {figure.key: asdict(figure) for figure in FIGURES},
            "scales": reports,
            "growth": growth,
        }
        Path(args.json).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
