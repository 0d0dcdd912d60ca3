"""The processes a bench.py run drives besides the exporter: the test API server, and the
references measured in the same run (a plain LIST sync, the evaluator alone, a static
/metrics server, prometheus_client's own rendering), each in a child process of its own."""

from __future__ import annotations

import contextlib
import gc
import http.server
import multiprocessing
import socketserver
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson
from cluster import (
    ClusterSize,
    cluster_objects,
)
from procstat import cpu_seconds, get
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from exporter.pipeline.evaluator import Evaluator
from exporter.run.serve import READY_EVENT
from exporter.runtime import tune_garbage_collector
from exporter.sources.decode import decode_endpoint_slice, decode_node, decode_service
from exporter.state.store import ClusterStore
from tests.kubeapi import FakeKubeAPI
from tests.processes import ServedExporter, free_port, serving, wait_ready
from tests.scrape import wait_until

# What `serve` lists at startup, with its page size (exporter/sources/listing.py).
LIST_PATHS = (
    "/api/v1/nodes",
    "/api/v1/services",
    "/apis/discovery.k8s.io/v1/endpointslices",
    "/api/v1/events?fieldSelector=involvedObject.kind%3DService",
)
PAGE_SIZE = 500


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


@dataclass(frozen=True)
class StartedExporter:
    """A `serve` process, and what its start cost up to its "ready" log line."""

    exporter: ServedExporter
    # CPU seconds of the process, and wall seconds since it was started, when the bench
    # read its "ready" line.
    cpu: float
    wall: float


@contextlib.contextmanager
def serving_exporter(*arguments: str) -> Iterator[StartedExporter]:
    """`serve *arguments` on a free loopback port, timed to its "ready" log line (written
    just before /readyz answers 200, which is then checked once); stopped and reaped after.
    At serve's default log level (info), as users run it.

    Not by polling /readyz: each probe costs the exporter 0.5 ms of CPU (a connection,
    h11 and a thread hand-off), and polling every 5 ms during a 3 s start charged it 0.1-0.2
    s of the bench's own load. The log file is read by the bench, every millisecond.
    """
    started = time.perf_counter()
    with serving(
        *arguments, "--log-level", "info", "--log-format", "json", command=exporter_command(),
        timeout=900, ready=None, interval=0.005,
    ) as exporter:  # fmt: skip
        cpu, wall = _until_ready_line(exporter, started)
        wait_ready(exporter, "/readyz", timeout=60)
        yield StartedExporter(exporter, cpu, wall)


def _until_ready_line(exporter: ServedExporter, started: float) -> tuple[float, float]:
    """(CPU s of the process, wall s since `started`) when its log first holds the line
    `serve` writes once ready (a line being written does not parse yet: read again later)."""
    timed: list[tuple[float, float]] = []

    def logged_ready() -> bool:
        if any(_is_ready_line(line) for line in exporter.output().splitlines()):
            timed.append((cpu_seconds(exporter.process.pid), time.perf_counter() - started))
            return True
        if exporter.process.poll() is not None:
            raise RuntimeError(f"serve exited before it was ready:\n{_tail(exporter)}")
        return False

    wait_until(logged_ready, timeout=900, interval=0.001)
    return timed[0]


def _is_ready_line(line: str) -> bool:
    try:
        fields = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(fields, dict) and fields.get("event") == READY_EVENT


def _tail(exporter: ServedExporter) -> str:
    return exporter.output()[-4000:]


# `python -m exporter` as the image runs it: without `rich`, which the test environment has
# (twine needs it) and the image does not (requirements.lock), and which structlog imports
# whenever it is installed (its tracebacks module): `import structlog` takes 0.14 s of CPU
# with it and 0.07 s without, a cost no user of the image pays.
_AS_IN_THE_IMAGE = (
    "import runpy, sys; sys.modules['rich'] = None; "
    "runpy.run_module('exporter', run_name='__main__', alter_sys=True)"
)


def exporter_command(*arguments: str) -> list[str]:
    return [sys.executable, "-c", _AS_IN_THE_IMAGE, *arguments]


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
    """The evaluator on the cluster with no HTTP or API server, in a child process: the reference
    a node resize is timed against."""

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
    """A prometheus_client collector that yields fixed families: generate_latest's cost alone."""

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
