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

What each figure is and the tables are in bench/figures.py, the child processes a run drives
in bench/children.py, the /metrics watcher in bench/scraper.py; this script runs the scales.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import ksm  # noqa: E402
from children import (  # noqa: E402
    ApiServer,
    CpuMeter,
    EvaluatorAlone,
    exporter_command,
    generate_latest_seconds,
    reference_sync,
    serving_exporter,
    static_server,
    timed_get,
)
from cluster import (  # noqa: E402
    ZONE_NODE_CPU,
    ZONES,
    ClusterSize,
    ServicePlan,
    endpoint_slices,
    node,
    plan,
    write_snapshot,
)
from figures import (  # noqa: E402
    FIGURES,
    Run,
    growth_report,
    print_definitions,
    print_growth,
    print_scale,
    scale_report,
)
from procstat import cpu_seconds, get, memory_mib  # noqa: E402
from scraper import (  # noqa: E402
    SERVICE_LABELS,
    SHARE_FAMILIES,
    Scraper,
    ready_series,
    sample_value,
    share_samples,
)

# What `serve` lists at startup, with its page size (exporter/sources/listing.py).
# The node the benchmark resizes, and the two CPU sizes it alternates between.
RESIZED_NODE = 0
RESIZED_CPU = (ZONE_NODE_CPU[ZONES[0]], ZONE_NODE_CPU[ZONES[2]])
MIB = 1024 * 1024
DEFAULT_TIMEOUT = 600.0
# A figure growing this much faster than the cluster is flagged as worse than linear (the
# machine is noisy; smaller deviations are not findings).

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
        {
            tuple(SERVICE_LABELS.findall(key))
            for key in affected
            if key.startswith(SHARE_FAMILIES[1])
        }
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
    with serving_exporter("--kubeconfig", str(config)) as started:
        process, url = started.exporter.process, started.exporter.url
        run.values["sync_wall"] = started.wall
        run.values["sync_cpu"] = started.cpu
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
    with serving_exporter("--snapshot", str(snapshot)) as started:
        return memory_mib(started.exporter.process.pid)[1], started.cpu, started.wall


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


def cpu_model() -> str:
    """The processor's model name (Linux), which decides the Python-bound figures."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown processor"


def real_api_cost(scale: str, runs: int, ksm_binary: Path | None) -> dict[str, Any] | None:
    """bench/apicost.py in a process of its own (it runs the real-cluster harness), its
    tables printed here; its JSON, or None when the upstream binaries are not built."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "api-cost.json"
        command = [sys.executable, str(Path(__file__).with_name("apicost.py")), "--scale", scale]
        command += ["--runs", str(runs), "--ksm", str(ksm_binary or "skip"), "--json", str(result)]
        print(f"\n### what the real kube-apiserver pays (bench/apicost.py --scale {scale})\n")
        sys.stdout.flush()
        if subprocess.run(command, check=False).returncode != 0 or not result.exists():
            print("skipped: bench/apicost.py failed (make kube-binaries builds what it needs)")
            return None
        document: dict[str, Any] = orjson.loads(result.read_bytes())
        return document


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
    parser.add_argument(
        "--api-cost",
        default="0.3",
        metavar="SCALE|skip",
        help="what the real kube-apiserver pays for a start of the exporter and of KSM "
        "(bench/apicost.py) at this scale; 0.3 (the default) loads through the API in minutes "
        "on 2 cores, 1 in about 16; skip, or skipped when make kube-binaries has not run",
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
    api_cost = (
        None if args.api_cost == "skip" else real_api_cost(args.api_cost, args.runs, ksm_binary)
    )
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
            "api_cost": api_cost,
        }
        Path(args.json).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
