"""kube-state-metrics beside the exporter: the same objects, the same API server, the same run.

kube-state-metrics (KSM) lists and watches Nodes, Services and EndpointSlices too and
serves `kube_endpointslice_*` series: what an operator already runs for these objects. Each
run of `bench.py` starts the pinned KSM (tools/ksm) with
`--resources=nodes,services,endpointslices` against the test API server the exporter just
used, and measures it as the exporter is measured: memory when its first complete scrape
ends and after the same 9 + 10 steady scrapes, CPU and wall time from its start to the end
of its first complete scrape, and the steady scrapes' time and bytes, plain and gzip
(`--enable-gzip-encoding`: KSM sends plain text to a client asking for gzip without it).

KSM has no signal that its informers have synced (its `/readyz` counts its own
self-metrics, not objects), so it is scraped once it has used no CPU for half a second
(read from /proc, which costs it nothing), until a response holds one `kube_node_info`,
`kube_service_info` and `kube_endpointslice_info` series per object. An incomplete scrape
costs KSM a scrape of what it holds, which its CPU figure counts (as the exporter's
`/readyz` polls are in its); how many scrapes it took is in the JSON (`ksm_polls`); the
half second of idleness waited for before the complete scrape is not counted in its wall
time.

The test API server serves JSON only; KSM asks for protobuf first
(`application/vnd.kubernetes.protobuf,application/json`), and client-go decodes the JSON it
gets (its streaming lists work against it as against kube-apiserver).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# What KSM's /metrics must hold, one series per object, before a scrape counts as complete.
INFO_SERIES = {
    "Node": b"\nkube_node_info{",
    "Service": b"\nkube_service_info{",
    "EndpointSlice": b"\nkube_endpointslice_info{",
}
RESOURCES = "nodes,services,endpointslices"
STEADY = (9, 10)  # plain and gzip steady scrapes, as the exporter gets
# No CPU used for this long: KSM has applied what its watches delivered so far.
IDLE_SECONDS = 0.5
MIB = 1024 * 1024


def ksm_binary(choice: str) -> Path | None:
    """`--ksm`: "build" (the pinned binary, built first when absent), "skip", or a path."""
    if choice == "skip":
        return None
    if choice == "build":
        sys.path.insert(0, str(ROOT))
        from tools.ksm.build import binary  # noqa: PLC0415 - only when KSM is run

        return binary()
    path = Path(choice)
    if not os.access(path, os.X_OK):
        raise SystemExit(f"bench: --ksm {choice}: not an executable file")
    return path


def built_binary() -> Path | None:
    """The pinned binary if it is already built (for quick runs that must not build it)."""
    sys.path.insert(0, str(ROOT))
    from tools.ksm.build import BINARY, MODULE, output_dir, pinned  # noqa: PLC0415

    path = output_dir(pinned(MODULE)) / BINARY
    return path if path.is_file() else None


@dataclass(frozen=True)
class Pair:
    """One row of the side-by-side table: the exporter's figure and KSM's for the same thing."""

    title: str
    exporter: str  # key in Run.values, or "info:KEY" for Run.info
    ksm: str
    unit: str
    definition: str
    # The target for exporter / KSM (<=), None: stated as a ratio only.
    limit: float | None = None

    def value(self, run_values: dict[str, float], info: dict[str, float], key: str) -> float:
        return info[key[5:]] if key.startswith("info:") else run_values[key]


PAIRS = (
    Pair("RSS when ready", "rss_ready", "ksm_rss_ready", "MiB",
         "VmRSS: the exporter's when /readyz first answers 200, KSM's when its first complete "
         "scrape ends", limit=1),
    Pair("RSS after the first, 9 steady and 10 gzip scrapes", "rss_scrapes", "ksm_rss_scrapes",
         "MiB", "VmRSS after the same scrapes, before any change", limit=1),
    Pair("CPU, start -> first complete scrape", "first_complete_cpu", "ksm_first_complete_cpu",
         "s", "CPU seconds (all threads) from the process' start to the end of its first "
         "complete /metrics response (the exporter: sync, then the first scrape)"),
    Pair("wall, start -> first complete scrape", "first_complete_wall",
         "ksm_first_complete_wall", "s", "wall time of the same"),
    Pair("steady scrape", "steady_scrape", "ksm_steady_scrape", "ms",
         "GET /metrics, nothing changed; median of 9", limit=1),
    Pair("steady gzip scrape", "steady_gzip", "ksm_steady_gzip", "ms",
         "the same with Accept-Encoding: gzip, the body read as sent; median of 9"),
    Pair("scrape bytes", "info:scrape_bytes", "info:ksm_scrape_bytes", "MB",
         "bytes of one plain /metrics response"),
    Pair("gzip scrape bytes", "info:gzip_bytes", "info:ksm_gzip_bytes", "MB",
         "bytes of one gzip /metrics response as sent"),
)  # fmt: skip
KSM_KEYS = tuple(pair.ksm for pair in PAIRS if not pair.ksm.startswith("info:"))


def _wait_idle(pid: int, cpu_seconds: Callable[[int], float], deadline: float) -> float:
    """Until the process has used no CPU for IDLE_SECONDS (its informers have applied what
    they received), so that a scrape is tried only then: each incomplete one costs KSM a
    scrape of what it holds, which the CPU figure would count. Returns how long ago (s)
    its CPU last moved."""
    last, since = cpu_seconds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_seconds(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= IDLE_SECONDS:
            break
    return time.monotonic() - since


def _complete(body: bytes, counts: dict[str, int]) -> bool:
    return all(body.count(series) >= counts[kind] for kind, series in INFO_SERIES.items())


@contextlib.contextmanager
def running_ksm(binary: Path, kubeconfig: Path, directory: Path) -> Iterator[tuple[int, str]]:
    """KSM on free loopback ports: (pid, metrics URL); stopped and reaped after."""
    sys.path.insert(0, str(ROOT))
    from tests.processes import free_port  # noqa: PLC0415

    port, telemetry = free_port(), free_port()
    log = (directory / "kube-state-metrics.log").open("wb")
    process = subprocess.Popen(
        [str(binary), f"--kubeconfig={kubeconfig}", f"--resources={RESOURCES}",
         "--host=127.0.0.1", f"--port={port}", "--telemetry-host=127.0.0.1",
         f"--telemetry-port={telemetry}", "--enable-gzip-encoding"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield process.pid, f"http://127.0.0.1:{port}/metrics"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        log.close()


def measure_ksm(
    binary: Path,
    kubeconfig: Path,
    directory: Path,
    counts: dict[str, int],
    timeout: float,
    probes: tuple[Callable[[int], float], Callable[[int], tuple[float, float]]],
    get: Callable[..., bytes],
) -> tuple[dict[str, float], dict[str, float]]:
    """KSM's figures (values, info) for one run. `probes`: (CPU seconds of a pid, its
    (RSS, peak RSS) MiB); `get(url, gzip=...)` is the exporter's scrape client."""
    cpu_seconds, memory_mib = probes
    values: dict[str, float] = {}
    info: dict[str, float] = {}
    started = time.perf_counter()
    with running_ksm(binary, kubeconfig, directory) as (pid, url):
        deadline = time.monotonic() + timeout
        polls = 0
        while True:
            idle = _wait_idle(pid, cpu_seconds, deadline)
            try:
                body = get(url)
            except (urllib.error.URLError, ConnectionError):
                body = b""
            polls += 1
            if body and _complete(body, counts):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"kube-state-metrics had not every object in {timeout:g} s")
        # The idle wait before the complete scrape is the benchmark's, not KSM's.
        values["ksm_first_complete_wall"] = time.perf_counter() - started - idle
        values["ksm_first_complete_cpu"] = cpu_seconds(pid)
        values["ksm_rss_ready"] = memory_mib(pid)[0]
        info["ksm_polls"] = polls
        info["ksm_scrape_bytes"] = len(body)
        plain = []
        for _ in range(STEADY[0]):
            begun = time.perf_counter()
            get(url)
            plain.append(time.perf_counter() - begun)
        zipped = get(url, gzip=True)
        info["ksm_gzip_bytes"] = len(zipped)
        compressed = []
        for _ in range(STEADY[1] - 1):
            begun = time.perf_counter()
            get(url, gzip=True)
            compressed.append(time.perf_counter() - begun)
        values["ksm_steady_scrape"] = statistics.median(plain) * 1000
        values["ksm_steady_gzip"] = statistics.median(compressed) * 1000
        values["ksm_rss_scrapes"] = memory_mib(pid)[0]
    return values, info


def side_by_side(runs: list[Any], objects: int) -> list[dict[str, Any]]:
    """Each pair's medians and ranges over the runs, per 1,000 objects too, and the ratio."""
    rows = []
    for pair in PAIRS:
        if not all(pair.ksm in run.values or pair.ksm[5:] in run.info for run in runs):
            continue
        scale = 1e6 if pair.unit == "MB" else 1.0
        exporter = [pair.value(run.values, run.info, pair.exporter) / scale for run in runs]
        ksm = [pair.value(run.values, run.info, pair.ksm) / scale for run in runs]
        ratios = [e / k for e, k in zip(exporter, ksm, strict=True) if k]
        ratio = statistics.median(ratios) if ratios else None
        rows.append(
            {
                "title": pair.title,
                "unit": pair.unit,
                "definition": pair.definition,
                "exporter": _summary(exporter),
                "ksm": _summary(ksm),
                "per_1000_objects": {
                    "exporter": statistics.median(exporter) / objects * 1000,
                    "ksm": statistics.median(ksm) / objects * 1000,
                },
                "ratio": _summary(ratios) if ratios else None,
                "limit": pair.limit,
                "met": None if pair.limit is None or ratio is None else ratio <= pair.limit,
            }
        )
    return rows


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def spread(summary: dict[str, float], unit: str) -> str:
    return (
        f"{_number(summary['median'])} {unit} "
        f"[{_number(summary['low'])}-{_number(summary['high'])}]"
    )


def table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    """The side-by-side table as cells (header first), for the terminal and the page."""
    cells = [["measure", "exporter", "kube-state-metrics", "exporter / KSM", "target", "met",
              "per 1,000 objects: exporter / KSM"]]  # fmt: skip
    for row in rows:
        ratio = row["ratio"]
        per = row["per_1000_objects"]
        cells.append(
            [
                row["title"],
                spread(row["exporter"], row["unit"]),
                spread(row["ksm"], row["unit"]),
                f"{ratio['median']:.2f}x [{ratio['low']:.2f}-{ratio['high']:.2f}]" if ratio else "",
                f"ratio <= {row['limit']:g}" if row["limit"] is not None else "",
                {None: "", True: "yes", False: "NO"}[row["met"]],
                f"{_number(per['exporter'])} / {_number(per['ksm'])} {row['unit']}",
            ]
        )
    return cells
