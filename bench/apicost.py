"""What the real kube-apiserver pays for a start of the exporter, and for a start of KSM.

    python bench/apicost.py                       # scale 0.3, 3 starts of each, alternately
    python bench/apicost.py --scale 1 --runs 3 --json apicost.json

The real-cluster harness (tests/realcluster: etcd and kube-apiserver v1.37.2 built by
`make kube-binaries`) is started, its controller manager stopped (it would replace the
benchmark's EndpointSlices, which have no Pods behind them), and the benchmark's cluster
(bench/cluster.py, objects as full as a real cluster's) created through the API. Then,
alternately, `topology-hints-exporter serve` and kube-state-metrics
(`--resources=nodes,services,endpointslices`) are started against it, each until its first
complete `/metrics` response, and stopped. For each start the table gives, from the API
server's own `/metrics` before and after: requests (`apiserver_request_total`), bytes sent
(`apiserver_response_sizes` for LIST and GET, `apiserver_watch_events_sizes` for what
watches and streaming lists carry) and the API server's CPU (`process_cpu_seconds_total`),
with etcd's CPU from /proc; and, from the audit log, the requests the client itself made
(by its user agent), which the totals also hold beside the API server's own background.

The exporter reads JSON; KSM asks for protobuf, which kube-apiserver serves (the test API
server of bench.py serves JSON only), so the bytes differ by encoding as well as by what
each reads: the exporter also watches Services' Events.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import ksm  # noqa: E402
from cluster import ClusterSize, cluster_objects  # noqa: E402
from procstat import cpu_seconds, get, memory_mib  # noqa: E402

from tests.processes import serving  # noqa: E402
from tests.realcluster.binaries import kube_binaries  # noqa: E402
from tests.realcluster.controlplane import ControlPlane, ControlPlaneSettings, started  # noqa: E402

PATHS = {
    "Node": "/api/v1/nodes",
    "Service": "/api/v1/namespaces/{namespace}/services",
    "EndpointSlice": "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
}
LIST_PATHS = ("/api/v1/nodes", "/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices")
# Server-set fields an object from bench/cluster.py carries, which a create must not.
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")
WRITERS = 8


# -- loading the cluster through the API ----------------------------------------------------


class _Writer(threading.local):
    connection: http.client.HTTPSConnection | None = None


def load_cluster(plane: ControlPlane, size: ClusterSize) -> dict[str, int]:  # noqa: C901
    """Create the benchmark's cluster through the API; objects of each kind."""
    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    local = _Writer()
    headers = {"Authorization": f"Bearer {plane.admin_token}", "Content-Type": "application/json"}

    def post(path: str, body: bytes) -> None:
        for attempt in range(5):
            if local.connection is None:
                local.connection = http.client.HTTPSConnection(
                    host, int(port), context=context, timeout=120
                )
            try:
                local.connection.request("POST", path, body, headers)
                response = local.connection.getresponse()
                answer = response.read()
            except (OSError, http.client.HTTPException):
                local.connection.close()
                local.connection = None
                if attempt == 4:
                    raise
                continue
            if response.status in (201, 409):
                return
            if response.status == 429 and attempt < 4:
                time.sleep(0.5)
                continue
            raise RuntimeError(f"POST {path}: {response.status} {answer[:300]!r}")

    counts: Counter[str] = Counter()
    namespaces: set[str] = set()
    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        pending: list[concurrent.futures.Future[None]] = []
        for obj in cluster_objects(size):
            kind = obj["kind"]
            metadata = obj["metadata"]
            for key in _SERVER_FIELDS:
                metadata.pop(key, None)
            if kind == "Service":
                # The harness's service range is not the benchmark's: allocated afresh.
                obj["spec"].pop("clusterIP", None)
                obj["spec"].pop("clusterIPs", None)
            namespace = metadata.get("namespace", "")
            if namespace and namespace not in namespaces:
                for future in pending:
                    future.result()
                pending.clear()
                namespaces.add(namespace)
                post("/api/v1/namespaces", orjson.dumps({"metadata": {"name": namespace}}))
            pending.append(
                pool.submit(post, PATHS[kind].format(namespace=namespace), orjson.dumps(obj))
            )
            counts[kind] += 1
            if len(pending) > 64:
                for future in pending:
                    future.result()
                pending.clear()
        for future in pending:
            future.result()
    return dict(counts)


# -- the API server's own figures -------------------------------------------------------------


def server_figures(plane: ControlPlane) -> dict[str, float]:
    """Totals from kube-apiserver's /metrics: requests, bytes sent, CPU."""
    status, body = plane.get("/metrics", timeout=60)
    if status != 200:
        raise RuntimeError(f"kube-apiserver /metrics: {status}")
    figures: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "apiserver_request_total":
                # Our own GETs of /metrics are not the client's.
                if labels.get("resource"):
                    figures["requests"] = figures.get("requests", 0.0) + sample.value
            elif sample.name == "apiserver_response_sizes_sum":
                figures["list_get_bytes"] = figures.get("list_get_bytes", 0.0) + sample.value
            elif sample.name == "apiserver_watch_events_sizes_sum":
                figures["watch_bytes"] = figures.get("watch_bytes", 0.0) + sample.value
            elif sample.name == "apiserver_watch_events_total":
                figures["watch_events"] = figures.get("watch_events", 0.0) + sample.value
            elif sample.name == "process_cpu_seconds_total":
                figures["cpu"] = figures.get("cpu", 0.0) + sample.value
    return figures


def list_sizes(plane: ControlPlane) -> dict[str, int]:
    """Bytes of one LIST of each resource the clients read, as JSON and as protobuf: what
    the watch-event bytes above are made of."""
    sizes: dict[str, int] = {}
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    for accept in ("application/json", "application/vnd.kubernetes.protobuf"):
        total = 0
        for path in (
            "/api/v1/nodes",
            "/api/v1/services",
            "/apis/discovery.k8s.io/v1/endpointslices",
        ):
            request = urllib.request.Request(  # noqa: S310 - https to our own server
                plane.url + path,
                headers={"Authorization": f"Bearer {plane.admin_token}", "Accept": accept},
            )
            with urllib.request.urlopen(request, timeout=300, context=context) as response:  # noqa: S310
                total += len(response.read())
        sizes[accept.rsplit("/", 1)[1].rsplit(".", 1)[-1]] = total
    return sizes


def audit_requests(audit_log: Path, offset: int, agent: str) -> tuple[int, Counter[str], int]:
    """Requests in the audit log after `offset` whose user agent starts with `agent`:
    (count, count by verb and resource, the log's new end)."""
    by: Counter[str] = Counter()
    total = 0
    with audit_log.open("rb") as log:
        log.seek(offset)
        data = log.read()
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if not str(event.get("userAgent", "")).startswith(agent):
                continue
            if event.get("stage") not in {"ResponseComplete", "Panic"}:
                continue
            total += 1
            resource = (event.get("objectRef") or {}).get("resource", event.get("requestURI"))
            by[f"{event.get('verb')} {resource}"] += 1
    return total, by, offset + len(data)


# -- one start of each client ----------------------------------------------------------------


@contextlib.contextmanager
def _exporter(kubeconfig: Path) -> Iterator[int]:
    with serving(
        "--kubeconfig", str(kubeconfig), "--log-level", "warning",
        command=[sys.executable, "-m", "exporter"], timeout=900, interval=0.05,
    ) as exporter:  # fmt: skip
        get(exporter.url + "/metrics")  # the first complete scrape
        yield exporter.process.pid


def measure_start(
    plane: ControlPlane, client: str, kubeconfig: Path, binary: Path | None, counts: dict[str, int]
) -> dict[str, Any]:
    """One start of `client` ("exporter" or "ksm") until its first complete scrape."""
    etcd_pid = plane.etcd.process.pid if plane.etcd and plane.etcd.process else 0
    offset = plane.audit_log.stat().st_size
    before, etcd_before = server_figures(plane), cpu_seconds(etcd_pid)
    started_at = time.perf_counter()
    if client == "exporter":
        agent = "OpenAPI-Generator"
        with _exporter(kubeconfig) as pid:
            client_cpu, client_rss = cpu_seconds(pid), memory_mib(pid)[0]
    else:
        if binary is None:
            raise SystemExit("bench/apicost.py: no kube-state-metrics binary (--ksm)")
        agent = "kube-state-metrics"
        with tempfile.TemporaryDirectory() as directory:
            values, _info = ksm.measure_ksm(
                binary, kubeconfig, Path(directory), counts, 900, (cpu_seconds, memory_mib), get
            )
        client_cpu, client_rss = values["ksm_first_complete_cpu"], values["ksm_rss_ready"]
    wall = time.perf_counter() - started_at
    # Let the API server account for the closed watches before it is read again.
    time.sleep(1)
    after, etcd_after = server_figures(plane), cpu_seconds(etcd_pid)
    requests, by, _end = audit_requests(plane.audit_log, offset, agent)
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    return {
        "client": client,
        "wall_s": wall,
        "client_cpu_s": client_cpu,
        "client_rss_mib": client_rss,
        "client_requests": requests,
        "client_requests_by": dict(by),
        "apiserver_requests": delta.get("requests", 0.0),
        "bytes_sent": delta.get("list_get_bytes", 0.0) + delta.get("watch_bytes", 0.0),
        "watch_events": delta.get("watch_events", 0.0),
        "apiserver_cpu_s": delta.get("cpu", 0.0),
        "etcd_cpu_s": etcd_after - etcd_before,
    }


def summary(starts: list[dict[str, Any]], key: str) -> str:
    values = [start[key] for start in starts]
    median = statistics.median(values)
    if key == "bytes_sent":
        return f"{median / 1e6:.1f} MB [{min(values) / 1e6:.1f}-{max(values) / 1e6:.1f}]"
    if key.endswith("_s"):
        return f"{median:.2f} s [{min(values):.2f}-{max(values):.2f}]"
    return f"{median:,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


ROWS = (
    ("requests the client made (audit log)", "client_requests"),
    ("requests the API server counted", "apiserver_requests"),
    ("bytes the API server sent (LIST/GET responses + watch events)", "bytes_sent"),
    ("watch events sent", "watch_events"),
    ("API server CPU", "apiserver_cpu_s"),
    ("etcd CPU", "etcd_cpu_s"),
    ("client CPU to its first complete scrape", "client_cpu_s"),
    ("wall, start -> first complete scrape", "wall_s"),
)


def table(starts: list[dict[str, Any]]) -> str:
    exporter = [start for start in starts if start["client"] == "exporter"]
    ksm_starts = [start for start in starts if start["client"] == "ksm"]
    lines = [
        "| per start | exporter | kube-state-metrics | exporter / KSM |",
        "|---|---|---|---|",
    ]
    for title, key in ROWS:
        ratio = ""
        if exporter and ksm_starts:
            e = statistics.median(start[key] for start in exporter)
            k = statistics.median(start[key] for start in ksm_starts)
            ratio = f"{e / k:.2f}x" if k else ""
        lines.append(
            f"| {title} | {summary(exporter, key) if exporter else ''} | "
            f"{summary(ksm_starts, key) if ksm_starts else ''} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=0.3, help="of bench/cluster.py's 1x")
    parser.add_argument("--runs", type=int, default=3, help="starts of each client")
    parser.add_argument("--ksm", default="build", metavar="build|skip|PATH")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    if args.scale <= 0 or args.runs < 1:
        parser.error("--scale and --runs must be positive")
    binaries = kube_binaries()
    if binaries.missing():
        parser.error(f"missing upstream binaries (make kube-binaries): {binaries.missing()}")
    binary = ksm.ksm_binary(args.ksm)
    size = ClusterSize().scaled(args.scale)

    def progress(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    with (
        tempfile.TemporaryDirectory() as directory,
        started(binaries, ControlPlaneSettings()) as plane,
    ):
        # Its EndpointSlice controller would replace the benchmark's slices (no Pods).
        if plane.controller_manager is not None:
            plane.controller_manager.stop()
        progress(f"loading {size.nodes} nodes, {size.services} Services through the API")
        loaded = time.perf_counter()
        counts = load_cluster(plane, size)
        progress(f"loaded {counts} in {time.perf_counter() - loaded:.0f} s")
        kubeconfig = plane.write_kubeconfig(Path(directory) / "kubeconfig", plane.admin_token)
        apiserver_pid = (
            plane.apiserver.process.pid if plane.apiserver and plane.apiserver.process else 0
        )
        starts = []
        for number in range(args.runs):
            for client in ("exporter", "ksm") if binary else ("exporter",):
                progress(f"start {number + 1} of {args.runs}: {client}")
                starts.append(measure_start(plane, client, kubeconfig, binary, counts))
                progress(
                    ", ".join(f"{k} {v:.4g}" for k, v in starts[-1].items() if isinstance(v, float))
                )
        apiserver_rss = memory_mib(apiserver_pid)[0] if apiserver_pid else 0.0
        sizes = list_sizes(plane)
    header = (
        f"kube-apiserver {plane.binaries.kube_apiserver.parent.name}, scale {args.scale:g}: "
        f"{counts}; API server RSS {apiserver_rss:.0f} MiB; {args.runs} starts of each, "
        "alternately; median [min-max]; one LIST of nodes, services and endpointslices: "
        f"{sizes['json'] / 1e6:.1f} MB as JSON, {sizes['protobuf'] / 1e6:.1f} MB as protobuf"
    )
    print(header + "\n")
    print(table(starts))
    if args.json:
        document = {
            "scale": args.scale,
            "counts": counts,
            "list_bytes": sizes,
            "starts": starts,
            # As printed: bench/report.py shows them beside make bench's other tables.
            "header": header,
            "table": table(starts),
        }
        Path(args.json).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
